"""Shared pieces of the benchmarks: a tiny plugin, plans, and statistics."""

from __future__ import annotations

import os
import statistics
import stat
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from cpcreds import AccessPlan, ProviderConfig, resolve

PROFILE = {
    "metadata": {"name": "bench", "namespace": "fleet", "uid": "u-bench", "resourceVersion": "1"},
    "status": {"accessProviders": [{"name": "bench", "cluster": {"server": "https://bench.test:6443"}}]},
}


def write_plugin(
    directory: Path, *, lifetime_seconds: int = 3600, count_file: Path | None = None, now_file: Path | None = None
) -> Path:
    """A /bin/sh plugin: the cheapest real exec, so fixed overheads show up in the ratio."""
    expiry = ',"expirationTimestamp":"2099-01-01T00:00:00Z"'
    if now_file is not None:
        # Simulated time: the bench writes "now" (epoch seconds) here; the token lives lifetime_seconds.
        expiry = f',"expirationTimestamp":"\'"$(date -u -d "@$(($(cat {now_file}) + {lifetime_seconds}))" +%Y-%m-%dT%H:%M:%SZ)"\'"'
    count = f'echo run >> "{count_file}"\n' if count_file else ""
    script = directory / "plugin.sh"
    script.write_text(
        "#!/bin/sh\n"
        + count
        + "printf '%s' '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
        + "\"status\":{\"token\":\"bench-token\"" + expiry + "}}'\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def config_for(plugin: Path, **entry: object) -> ProviderConfig:
    return ProviderConfig.from_dict(
        {"providers": [{"name": "bench", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin)}, **entry}]}
    )


def plan_for(plugin: Path) -> AccessPlan:
    return resolve(config_for(plugin), PROFILE)


def tmpdir() -> Path:
    return Path(tempfile.mkdtemp(prefix="cpcreds-bench-"))


def summary(samples: list[float]) -> str:
    samples = sorted(samples)
    p90 = samples[int(len(samples) * 0.9)]
    return f"median {statistics.median(samples) * 1e3:.3f} ms, p90 {p90 * 1e3:.3f} ms (n={len(samples)})"


def alternate(rounds: int, ours: Callable[[int], object], bare: Callable[[], object]) -> tuple[list[float], list[float], list[float]]:
    """Time ``ours(round)`` against ``bare()`` for ``rounds`` rounds, alternating which goes first
    (this host's timing drifts; whichever call follows the other must not always pay for it).
    Returns (ours, bare, per-round ratios) in seconds."""
    mine, theirs, ratios = [], [], []
    for number in range(rounds):
        sides = [("ours", lambda: ours(number)), ("bare", bare)]
        if number % 2:
            sides.reverse()
        took = {}
        for name, call in sides:
            started = time.perf_counter()
            call()
            took[name] = time.perf_counter() - started
        mine.append(took["ours"])
        theirs.append(took["bare"])
        ratios.append(took["ours"] / took["bare"])
    return mine, theirs, ratios


def count_runs(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


__all__ = ["PROFILE", "write_plugin", "config_for", "plan_for", "tmpdir", "summary", "count_runs", "alternate", "os"]
