"""Real ``cpcreds serve --shard`` processes on the hub fake, and what their endpoints say: shared
by tests/test_serve_shard.py and bench/bench_shard.py (one harness, so the benchmark measures
what the tests check).

:class:`ShardedServe` puts ``mint`` profiles on a hub and starts replicas (each with its own
``PYTHONHASHSEED``); :class:`Replica` reads one's ``/v1/clusters``, ``/readyz`` and ``/metrics``;
:func:`steady` and :func:`split` wait until every profile is ready on exactly one replica.
"""

from __future__ import annotations

import functools
import http.client
import json
import signal
import urllib.parse
from pathlib import Path
from typing import Any

import yaml

from cpcreds.shard import assign
from tests.fakes import mint
from tests.fakes.fixtures import HUB_TOKEN
from tests.fakes.hub import HubServer
from tests.fleet_harness import profile, until
from tests.test_serve_process import Serve

__all__ = ["NAMESPACE", "FAST", "Replica", "ShardedServe", "steady", "split", "expected"]

NAMESPACE = "cpcreds-system"
FAST = ("2s", "1.2s", "0.4s")  # lease duration, renew deadline, retry interval


class Replica:
    """One ``cpcreds serve --shard`` process and what its endpoints say."""

    def __init__(self, identity: str, process: Serve) -> None:
        self.identity, self.process = identity, process

    @functools.cached_property
    def url(self) -> str:
        """Its status page URL, read from its log on first use (so replicas start together)."""
        return self.process.url

    def get(self, path: str) -> tuple[int, dict[str, str], Any]:
        """(status, headers, JSON body or text) without following redirects."""
        parsed = urllib.parse.urlsplit(self.url)
        connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=10)
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            text = response.read().decode()
            body = json.loads(text) if response.getheader("Content-Type", "").startswith("application/json") else text
            return response.status, dict(response.getheaders()), body
        finally:
            connection.close()

    def listing(self) -> dict[str, Any]:
        status, _, body = self.get("/v1/clusters")
        assert status == 200
        return body

    def ready_keys(self) -> set[str]:
        """The profiles this replica holds ready; empty when the process is gone or stopped."""
        try:
            return {c["key"] for c in self.listing()["clusters"] if c["state"] == "ready"}
        except OSError:
            return set()

    def ready_count(self) -> int:
        """How many profiles this replica holds ready (a one-row page: cheap to poll)."""
        try:
            status, _, body = self.get("/v1/clusters?limit=1")
        except OSError:
            return 0
        return body["counts"].get("ready", 0) if status == 200 else 0

    def readyz(self) -> int:
        return self.get("/readyz")[0]

    def sample(self, name: str) -> float | None:
        """One unlabelled sample of ``/metrics`` (None when absent)."""
        from prometheus_client.parser import text_string_to_metric_families

        for family in text_string_to_metric_families(self.get("/metrics")[2]):
            for sample in family.samples:
                if sample.name == name and not sample.labels:
                    return sample.value
        return None

    def overlap(self) -> tuple[dict[str, float], float]:
        """From ``/metrics``: overlap fetches by reason, and the overlap bound (seconds)."""
        from prometheus_client.parser import text_string_to_metric_families

        fetches: dict[str, float] = {}
        bound = -1.0
        for family in text_string_to_metric_families(self.get("/metrics")[2]):
            for sample in family.samples:
                if sample.name == "cpcreds_shard_overlap_fetches_total":
                    fetches[sample.labels["reason"]] = sample.value
                elif sample.name == "cpcreds_shard_overlap_bound_seconds":
                    bound = sample.value
        return fetches, bound


class ShardedServe:
    """``cpcreds serve`` processes on ``hub`` with the ``mint`` provider (installed under
    ``workdir``): ``put(count, first=0)`` adds profiles ``fleet/cluster-<i>`` and returns their
    keys; calling it, ``(identity, seed, timings=FAST, *extra)``, starts a ``--shard`` replica;
    :meth:`plain` starts one without ``--shard``; :meth:`close` kills every process started."""

    def __init__(self, hub: HubServer, workdir: Path) -> None:
        self.hub = hub
        self.site = workdir / "site"
        mint.install(self.site)
        self.config = workdir / "providers.yaml"
        self.config.write_text(yaml.safe_dump({"providers": [{"name": "mint", "type": "mint", "options": {"lifetime": 3600}}]}))
        self.kubeconfig = hub.write_kubeconfig(workdir / "hub.kubeconfig", HUB_TOKEN)
        self.started: list[Serve] = []

    def put(self, count: int, first: int = 0) -> list[str]:
        for index in range(first, first + count):
            self.hub.put(profile(f"cluster-{index}", namespace="fleet"))
        return [f"fleet/cluster-{index}" for index in range(first, first + count)]

    def __call__(self, identity: str, seed: int, timings: tuple[str, str, str] = FAST, *extra: str) -> Replica:
        lease, renew, retry = timings
        args = ["--shard", "--shard-namespace", NAMESPACE, "--shard-identity", identity]
        args += ["--shard-lease-duration", lease, "--shard-renew-deadline", renew, "--shard-retry-interval", retry, *extra]
        return Replica(identity, self._serve(args, seed))

    def plain(self, seed: int, *extra: str) -> Replica:
        """One ``cpcreds serve`` on the same inventory, without ``--shard`` (a baseline)."""
        return Replica("plain", self._serve(list(extra), seed))

    def _serve(self, args: list[str], seed: int) -> Serve:
        args = ["--config", str(self.config), "--hub-kubeconfig", str(self.kubeconfig), "--per-profile-metrics", "true", *args]
        env = {"PYTHONPATH": str(self.site), "PYTHONHASHSEED": str(seed), "CPCREDS_DISABLE_PLUGINS": "", "CPCREDS_PLUGINS": "mint"}
        process = Serve(args, env=env)
        self.started.append(process)
        return process

    def close(self) -> None:
        for process in self.started:
            if process.process.poll() is None:
                process.process.send_signal(signal.SIGCONT)
            process.kill()


def steady(replicas: list[Replica], keys: list[str], timeout: float = 20) -> dict[str, set[str]]:
    """:func:`split`, once every replica is ready and sees all of them as members."""
    names = sorted(r.identity for r in replicas)

    def members_seen(replica: Replica) -> bool:
        listing = replica.get("/v1/clusters?limit=1")[2]
        return listing["ready"] and [m["identity"] for m in listing["shard"]["members"]] == names

    for replica in replicas:
        until(lambda: members_seen(replica), timeout=timeout, what=f"{replica.identity} ready among {names}")
    return split(replicas, keys, timeout)


def split(replicas: list[Replica], keys: list[str], timeout: float = 20) -> dict[str, set[str]]:
    """Each replica's ready keys (by identity), once every key is ready on exactly one of them."""
    seen: list[set[str]] = []

    def check() -> bool:
        # Polled on counts first: listing thousands of profiles many times a second would
        # slow down the replicas under test.
        if sum(r.ready_count() for r in replicas) != len(keys):
            return False
        seen[:] = [r.ready_keys() for r in replicas]
        held = [key for keys_ in seen for key in keys_]
        return len(held) == len(keys) and set(held) == set(keys)

    until(check, timeout=timeout, what="every profile ready on exactly one replica")
    # Replicas given one identity (a test of that mistake) are one entry: what they hold together.
    shares: dict[str, set[str]] = {}
    for replica, keys_ in zip(replicas, seen, strict=True):
        shares.setdefault(replica.identity, set()).update(keys_)
    return shares


def expected(keys: list[str], members: list[str]) -> dict[str, set[str]]:
    """Who owns what among ``members``, as the rendezvous hash says."""
    owners = assign(keys, members).owners
    return {member: {key for key in keys if owners[key] == member} for member in members}
