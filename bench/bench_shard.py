"""``cpcreds serve --shard`` (issue 22): three replicas against one process, and how each failure
is taken over.

    .venv/bin/python bench/bench_shard.py [--sizes 3000,10000] [--ready-runs 2] [--runs 20] [--profiles 300]

Real ``cpcreds serve`` subprocesses against the hub fake (tests/fakes/hub.py: HTTPS on loopback,
the Lease API as kube-apiserver serves it) with the in-process ``mint`` provider, started and read
through tests/shard_harness.py, the harness tests/test_serve_shard.py runs. Each replica has its
own ``PYTHONHASHSEED``. Three parts:

1. **Ready and RSS**, for each size, ``--ready-runs`` times (the order alternating): one
   ``cpcreds serve`` without ``--shard``, and three ``--shard`` replicas started together with the
   default timings (15 s / 10 s / 2 s), on the same inventory of a fresh hub. Seconds from start to
   ``/readyz`` = 200 (each replica's; the process's), seconds until every profile is ready on
   exactly one replica, and RSS then; the Lease requests per second the hub served over 10 s of
   steady state (first run of each size).
2. **Takeover**, three replicas, ``--profiles`` profiles, short leases (2 s / 1.2 s / 0.4 s),
   ``--runs`` runs of each failure case: ``SIGTERM``; ``kill -9``; ``SIGSTOP`` for two lease
   durations, then ``SIGCONT``; the replica's Lease writes stalled, then released. After
   ``SIGTERM`` and ``kill -9`` a new replica joins. Per case: seconds from the event until every
   profile is ready on exactly one remaining replica (p50 / p95 / max); overlap fetches
   (``cpcreds_shard_overlap_fetches_total`` summed over the replicas: an upper bound on double
   mints) across the takeover and across the rejoin; the fraction of profiles that changed owner
   on the leave and on the join (the ideal is 1/3 each) and how many moved between replicas that
   stayed (the ideal: none). For stalled writes, how long before the takeover the stalled replica
   stopped serving (``/readyz`` 503, no profile ready).
3. **Hub load** with the short leases: Lease requests per second over 5 s of steady state.

The load average is printed with each part. The machine's other work makes these noisy: run it
several times and compare medians.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakes.fixtures import HUB_TOKEN  # noqa: E402
from tests.fakes.hub import HubServer  # noqa: E402
from tests.fakes.pki import PKI  # noqa: E402
from tests.fleet_harness import until  # noqa: E402
from tests.shard_harness import FAST, NAMESPACE, Replica, ShardedServe, split, steady  # noqa: E402

DEFAULTS = ("15s", "10s", "2s")  # client-go's, and serve's
QUIET = ("--log-level", "error")  # nobody reads the replicas' logs here: a full pipe would block them
LEASE_SECONDS = 2.0  # FAST's lease duration


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def rss_mb(replica: Replica) -> float:
    for line in Path(f"/proc/{replica.process.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def percentiles(samples: list[float]) -> str:
    """p50 / p95 / max (nearest rank), in seconds."""
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))]
    return f"{statistics.median(ordered):.2f} / {p95:.2f} / {ordered[-1]:.2f} s"


def span(samples: list[float], digits: int = 2) -> str:
    """median (min–max)."""
    return f"{statistics.median(samples):.{digits}f} ({min(samples):.{digits}f}–{max(samples):.{digits}f})"


def new_hub() -> HubServer:
    return HubServer(PKI(), tokens=[HUB_TOKEN]).start()


def lease_rate(hub: HubServer, seconds: float) -> dict[str, float]:
    """Lease requests per second the hub receives over ``seconds`` (the window is the scenario)."""
    hub.clear_requests()
    time.sleep(seconds)
    counts: Counter[str] = Counter()
    for seen in hub.requests:
        if "/leases" in seen.path:
            kind = "watch" if seen.watch else {"PUT": "update", "POST": "create", "DELETE": "delete"}.get(seen.method, "get/list")
            counts[kind] += 1
    return {kind: count / seconds for kind, count in counts.items()}


def stop_all(replicas: list[Replica]) -> None:
    for replica in replicas:
        if replica.process.process.poll() is None:
            replica.process.stop(signal.SIGTERM, timeout=30)


# -- 1. ready and RSS ---------------------------------------------------------------------------


def plain_run(fleet: ShardedServe, keys: list[str]) -> dict[str, float]:
    started = time.monotonic()
    plain = fleet.plain(1, *QUIET)
    until(lambda: plain.readyz() == 200, timeout=600, what="the unsharded serve ready")
    ready = time.monotonic() - started
    assert plain.ready_count() == len(keys)
    rss = rss_mb(plain)
    stop_all([plain])
    return {"ready": ready, "rss": rss}


def sharded_run(fleet: ShardedServe, keys: list[str], measure_load: bool) -> dict[str, Any]:
    started = time.monotonic()
    replicas = [fleet(f"r{i}", i + 11, DEFAULTS, *QUIET) for i in range(3)]  # started together
    first: dict[str, float] = {}

    def all_ready() -> bool:
        for replica in replicas:
            if replica.identity not in first and replica.readyz() == 200:
                first[replica.identity] = time.monotonic() - started
        return len(first) == len(replicas)

    until(all_ready, timeout=600, what="every replica ready")
    shares = steady(replicas, keys, timeout=600)
    whole = time.monotonic() - started
    result = {"ready": list(first.values()), "whole": whole, "rss": [rss_mb(r) for r in replicas], "shares": sorted(len(v) for v in shares.values())}
    if measure_load:
        result["load"] = lease_rate(fleet.hub, 10.0)
    stop_all(replicas)
    return result


def ready_part(sizes: list[int], runs: int, workdir: Path) -> None:
    print(f"1. ready and RSS: one process against three --shard replicas started together (timings {'/'.join(DEFAULTS)}); {runs} run(s) per size; load {load()}")
    for size in sizes:
        plains, shardeds = [], []
        for run in range(runs):
            hub = new_hub()
            try:
                fleet = ShardedServe(hub, workdir / f"ready-{size}-{run}")
                keys = fleet.put(size)
                try:
                    # Alternate the order: whichever runs second must not always find a warmer machine.
                    if run % 2:
                        shardeds.append(sharded_run(fleet, keys, run == 0))
                        plains.append(plain_run(fleet, keys))
                    else:
                        plains.append(plain_run(fleet, keys))
                        shardeds.append(sharded_run(fleet, keys, run == 0))
                finally:
                    fleet.close()
            finally:
                hub.stop()
        replica_ready = [t for s in shardeds for t in s["ready"]]
        replica_rss = [m for s in shardeds for m in s["rss"]]
        print(f"  {size:,} profiles:")
        print(f"    one process:      ready {span([p['ready'] for p in plains])} s, RSS {span([p['rss'] for p in plains], 0)} MB")
        print(f"    3 replicas, each: ready {span(replica_ready)} s, RSS {span(replica_rss, 0)} MB; shares {shardeds[0]['shares']}")
        print(f"    3 replicas, all:  every profile ready on exactly one after {span([s['whole'] for s in shardeds])} s; RSS summed {span([sum(s['rss']) for s in shardeds], 0)} MB")
        rates = shardeds[0]["load"]
        print(f"    hub, Lease requests/s in steady state (3 replicas, 10 s): {', '.join(f'{k} {v:.2f}' for k, v in sorted(rates.items()))}; load {load()}")


# -- 2. takeover --------------------------------------------------------------------------------


def fetched(replicas: list[Replica]) -> float:
    """Overlap fetches counted so far by ``replicas`` (every reason)."""
    return sum(sum(replica.overlap()[0].values()) for replica in replicas)


def moved(before: dict[str, set[str]], after: dict[str, set[str]], keys: list[str]) -> tuple[float, int]:
    """(fraction of ``keys`` whose owner changed, how many moved between owners in both views)."""
    was = {key: member for member, owned in before.items() for key in owned}
    now = {key: member for member, owned in after.items() for key in owned}
    changed = [key for key in keys if was[key] != now[key]]
    between = [key for key in changed if was[key] in after and now[key] in before]
    return len(changed) / len(keys), len(between)


class Takeovers:
    """Three replicas on a hub, the third the one every case hits; the figures of each case."""

    def __init__(self, hub: HubServer, workdir: Path, profiles: int) -> None:
        self.hub, self.fleet = hub, ShardedServe(hub, workdir)
        self.keys = self.fleet.put(profiles)
        self.r0, self.r1 = self.fleet("r0", 1, FAST, *QUIET), self.fleet("r1", 2, FAST, *QUIET)
        self.newcomers = 0
        self.victim = self._newcomer()
        self.shares = steady(self.replicas, self.keys)
        self.results: dict[str, dict[str, list[float]]] = {}

    @property
    def replicas(self) -> list[Replica]:
        return [self.r0, self.r1, self.victim]

    def _newcomer(self) -> Replica:
        self.newcomers += 1
        return self.fleet(f"v{self.newcomers:03d}", 100 + self.newcomers, FAST, *QUIET)

    def record(self, case: str, **figures: float) -> None:
        table = self.results.setdefault(case, {})
        for name, value in figures.items():
            table.setdefault(name, []).append(value)

    def run(self, case: str) -> None:
        stayers = [self.r0, self.r1]
        counted = fetched(stayers)
        before = self.shares
        event: Callable[[], None] = {
            "SIGTERM": lambda: self.victim.process.process.send_signal(signal.SIGTERM),
            "kill -9": self.victim.process.process.kill,
            "SIGSTOP, SIGCONT": lambda: self.victim.process.process.send_signal(signal.SIGSTOP),
        }.get(case, lambda: None)
        extra: dict[str, float] = {}
        release = None
        if case == "Lease writes stalled":
            release = self.hub.stall_lease_writes(NAMESPACE, f"cpcreds-{self.victim.identity}")
        at = time.monotonic()
        event()
        if release is not None:
            extra["fenced_before_taken"] = self._fenced_margin(at)
        after = split(stayers, self.keys)
        took = time.monotonic() - at
        leave_moved, leave_between = moved(before, after, self.keys)
        leave_overlap = fetched(stayers) - counted
        # The rejoin: a new replica after SIGTERM and kill -9; the same one otherwise.
        if case in ("SIGTERM", "kill -9"):
            self.victim.process.kill()
            self.victim = self._newcomer()
            joiner_counted = 0.0
        else:
            if case == "SIGSTOP, SIGCONT":
                # The scenario, not a synchronisation: paused past two lease durations.
                time.sleep(max(0.0, at + 2 * LEASE_SECONDS - time.monotonic()))
                self.victim.process.process.send_signal(signal.SIGCONT)
            else:
                assert release is not None
                release.set()
            joiner_counted = None  # read once it answers again
        counted = fetched(stayers)
        if joiner_counted is None:
            until(lambda: self.victim.readyz() in (200, 503), timeout=10, what="the replica answering again")
            joiner_counted = fetched([self.victim])
        rejoined_at = time.monotonic()
        joined = steady(self.replicas, self.keys)
        rejoin = time.monotonic() - rejoined_at
        join_moved, join_between = moved(after, joined, self.keys)
        join_overlap = fetched(stayers) - counted + fetched([self.victim]) - joiner_counted
        self.shares = joined
        self.record(
            case,
            takeover=took,
            rejoin=rejoin,
            leave_moved=leave_moved,
            leave_between=leave_between,
            join_moved=join_moved,
            join_between=join_between,
            leave_overlap=leave_overlap,
            join_overlap=join_overlap,
            **extra,
        )

    def _fenced_margin(self, at: float) -> float:
        """Seconds between the stalled replica serving nothing and a peer taking over (> 0: it
        stopped first)."""
        moments: dict[str, float] = {}
        victim, stayers = self.victim, [self.r0, self.r1]

        def watch() -> bool:
            now = time.monotonic()
            if "fenced" not in moments and victim.readyz() == 503 and victim.ready_count() == 0:
                moments["fenced"] = now
            if "taken" not in moments and sum(r.ready_count() for r in stayers) == len(self.keys):
                moments["taken"] = now
            return len(moments) == 2

        until(watch, timeout=30, what="the stalled replica fenced and its profiles taken over")
        return moments["taken"] - moments["fenced"]

    def close(self) -> None:
        self.fleet.close()


def takeover_part(runs: int, profiles: int, workdir: Path) -> None:
    cases = ["SIGTERM", "kill -9", "SIGSTOP, SIGCONT", "Lease writes stalled"]
    print(f"2. takeover: 3 replicas, {profiles} profiles, timings {'/'.join(FAST)}, {runs} runs per case (cases interleaved); load {load()}")
    hub = new_hub()
    bench = Takeovers(hub, workdir / "takeover", profiles)
    try:
        started = time.monotonic()
        for _ in range(runs):
            for case in cases:
                bench.run(case)
        rates = lease_rate(hub, 5.0)
        elapsed = time.monotonic() - started
    finally:
        bench.close()
        hub.stop()
    for case in cases:
        figures = bench.results[case]
        line = f"  {case:<21} taken over p50/p95/max {percentiles(figures['takeover'])}"
        if "fenced_before_taken" in figures:
            line += f"; stalled replica stopped serving {span(figures['fenced_before_taken'])} s before the takeover (min {min(figures['fenced_before_taken']):.2f})"
        print(line)
        print(
            f"  {'':<21} overlap fetches per event: takeover {span(figures['leave_overlap'], 0)}, rejoin {span(figures['join_overlap'], 0)};"
            f" rejoined (all ready on one of three) after {span(figures['rejoin'])} s"
        )
        print(
            f"  {'':<21} moved on leave {span(figures['leave_moved'], 3)}, on join {span(figures['join_moved'], 3)} (ideal 0.333);"
            f" moved between staying replicas: {int(sum(figures['leave_between']) + sum(figures['join_between']))}"
        )
    print(f"  ({len(cases) * runs} events in {elapsed:.0f} s; load {load()})")
    print(f"3. hub load, 3 replicas at {'/'.join(FAST)}, Lease requests/s over 5 s: {', '.join(f'{k} {v:.2f}' for k, v in sorted(rates.items()))}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="3000,10000", help="inventories of part 1 (comma-separated; empty: skip it)")
    parser.add_argument("--ready-runs", type=int, default=2)
    parser.add_argument("--runs", type=int, default=20, help="runs of each failure case in part 2 (0: skip it)")
    parser.add_argument("--profiles", type=int, default=300, help="the inventory of part 2")
    options = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="cpcreds-bench-shard-"))
    started = time.monotonic()
    sizes = [int(s) for s in options.sizes.split(",") if s]
    if sizes:
        ready_part(sizes, options.ready_runs, workdir)
    if options.runs:
        takeover_part(options.runs, options.profiles, workdir)
    print(f"done in {time.monotonic() - started:.0f} s; load {load()}")


if __name__ == "__main__":
    main()
