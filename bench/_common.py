"""Shared pieces of the benchmarks: a tiny plugin, plans, and statistics."""

from __future__ import annotations

import os
import re
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


def timed(call: Callable[[], object]) -> float:
    """Seconds ``call()`` took."""
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def pair(number: int, ours: Callable[[], object], theirs: Callable[[], object]) -> tuple[float, float]:
    """Time ``ours()`` and ``theirs()`` once each, the odd rounds ``theirs`` first (this host's
    timing drifts; whichever call follows the other must not always pay for it).
    Returns (ours, theirs) in seconds."""
    if number % 2:
        took_theirs = timed(theirs)
        return timed(ours), took_theirs
    took_ours = timed(ours)
    return took_ours, timed(theirs)


def alternate(rounds: int, ours: Callable[[int], object], bare: Callable[[], object]) -> tuple[list[float], list[float], list[float]]:
    """Time ``ours(round)`` against ``bare()`` for ``rounds`` rounds with :func:`pair`.
    Returns (ours, bare, per-round ratios) in seconds."""
    mine, theirs, ratios = [], [], []
    for number in range(rounds):
        took_ours, took_bare = pair(number, lambda: ours(number), bare)
        mine.append(took_ours)
        theirs.append(took_bare)
        ratios.append(took_ours / took_bare)
    return mine, theirs, ratios


def imports_line(trace: Callable[[], str], rounds: int, *, depth: int = 3, min_ms: int = 5, top: int | None = None) -> str:
    """The line a bench prints for what a run imports: ``trace()`` runs it once under ``-X importtime``
    and returns its stderr; over ``min(rounds, 5)`` runs, the median total of the modules' own time
    and the median cumulative time (with all it pulls in) of each module imported at most ``depth``
    columns deep (1: the run's own imports) that took ``min_ms`` or more, the ``top`` slowest."""
    imported: dict[str, list[float]] = {}
    for _ in range(min(rounds, 5)):
        rows = re.findall(r"import time:\s+(\d+) \|\s+(\d+) \|( +)(\S+)", trace())
        imported.setdefault("all", []).append(sum(int(own) for own, _, _, _ in rows) / 1e3)
        for _, cumulative, indent, module in rows:
            if len(indent) <= depth and int(cumulative) >= min_ms * 1000:
                imported.setdefault(module, []).append(int(cumulative) / 1e3)
    median = {module: statistics.median(values) for module, values in imported.items()}
    slowest = sorted((item for item in median.items() if item[0] != "all"), key=lambda item: -item[1])[:top]
    parts = ", ".join(f"{module} {took:.0f}" for module, took in slowest)
    return f"    its imports (-X importtime, medians): {median['all']:.0f} ms in all; {parts} (ms, with what each pulls in)"


def count_runs(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


__all__ = ["PROFILE", "write_plugin", "config_for", "plan_for", "tmpdir", "summary", "count_runs", "timed", "pair", "alternate", "imports_line", "os"]
