"""CredentialEngine benchmarks (issue 3).

    .venv/bin/python bench/bench_engine.py

1. Cache hit: ``engine.get_credential(profile)`` for a profile dict with uid/resourceVersion,
   metrics included (an engine on prometheus_client's default REGISTRY, as a program gets
   without a registry argument; target: <= 1 us median, issues 6 and 29), and for the same dict
   without them (target: <= 2 us median, issue 29).
2. 1,000 concurrent callers over 100 plans, as threads and as asyncio tasks, running a real exec
   plugin. Target: exactly 100 plugin runs each.
3. Steady requests for 10 simulated minutes with 120 s tokens (engine clock and plugin share a
   simulated "now"; requests are paced in real time so background refreshes run as they would).
   Target: <= 6 plugin runs and zero requests that waited on an exec.
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time

from _common import PROFILE, config_for, count_runs, summary, tmpdir, write_plugin
from prometheus_client import CollectorRegistry

from cpcreds import CredentialEngine


def bench_cache_hit() -> None:
    plugin = write_plugin(tmpdir())
    engine = CredentialEngine(config_for(plugin))  # metrics in prometheus_client's REGISTRY
    # The same profile without uid/resourceVersion (a hand-written dict): its identity is a
    # fingerprint of its access data rather than (uid, resourceVersion).
    plain = {**PROFILE, "metadata": {k: v for k, v in PROFILE["metadata"].items() if k not in ("uid", "resourceVersion")}}
    for label, profile, target in (("with uid/resourceVersion", PROFILE, 1.0), ("without uid/resourceVersion", plain, 2.0)):
        engine.get_credential(profile)
        per_call = []
        batch = 20000
        for _ in range(30):
            started = time.perf_counter()
            for _ in range(batch):
                engine.get_credential(profile)
            per_call.append((time.perf_counter() - started) / batch)
        print(f"cache hit get_credential {label}: median {statistics.median(per_call) * 1e6:.2f} us/call, "
              f"best {min(per_call) * 1e6:.2f} us (30 batches x {batch}; target <= {target} us)")
    engine.close()


def profiles(count: int) -> list[dict]:
    return [
        {
            "metadata": {"name": f"c{i}", "namespace": "fleet", "uid": f"u{i}", "resourceVersion": "1"},
            "status": {"accessProviders": [{"name": "bench", "cluster": {"server": f"https://c{i}.test:6443"}}]},
        }
        for i in range(count)
    ]


def bench_concurrency() -> None:
    fleet = profiles(100)
    for mode in ("threads", "asyncio"):
        directory = tmpdir()
        runs = directory / "runs"
        plugin = write_plugin(directory, count_file=runs)
        engine = CredentialEngine(
            config_for(plugin, execConfig={"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin), "provideClusterInfo": True}),
            prometheus_registry=CollectorRegistry(),
        )
        started = time.perf_counter()
        if mode == "threads":
            barrier = threading.Barrier(1000)

            def call(i: int) -> None:
                barrier.wait()
                engine.get_credential(fleet[i % 100])

            threads = [threading.Thread(target=call, args=(i,)) for i in range(1000)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        else:
            async def main() -> None:
                await asyncio.gather(*(engine.aget_credential(fleet[i % 100]) for i in range(1000)))

            asyncio.run(main())
        elapsed = time.perf_counter() - started
        engine.close()
        print(f"1000 concurrent {mode} over 100 plans: {count_runs(runs)} plugin runs in {elapsed:.2f} s (target: exactly 100)")


def bench_steady_state() -> None:
    directory = tmpdir()
    runs, now_file = directory / "runs", directory / "now"
    plugin = write_plugin(directory, lifetime_seconds=120, count_file=runs, now_file=now_file)
    base = time.time()
    simulated = [0.0]
    def publish_now() -> None:  # atomically: the plugin may read it at any moment
        tmp = now_file.with_suffix(".tmp")
        tmp.write_text(str(int(base + simulated[0])))
        tmp.replace(now_file)

    publish_now()
    metrics = CollectorRegistry()
    engine = CredentialEngine(config_for(plugin), prometheus_registry=metrics, clock=lambda: base + simulated[0])
    engine.get_credential(PROFILE)  # warm-up: the first credential is always waited for
    waits_before = metrics.get_sample_value("cpcreds_credential_cache_lookups_total", {"provider": "bench", "result": "miss"})
    runs_before = count_runs(runs)
    step, duration = 0.1, 600.0
    latencies = []
    while simulated[0] < duration:
        simulated[0] += step
        publish_now()
        started = time.perf_counter()
        engine.get_credential(PROFILE)
        latencies.append(time.perf_counter() - started)
        time.sleep(0.0005)  # pacing: 10 requests per simulated second, 2 ms of real time each
    waits = metrics.get_sample_value("cpcreds_credential_cache_lookups_total", {"provider": "bench", "result": "miss"}) - waits_before
    engine.close()
    print(
        f"10 simulated minutes, 120 s tokens, {len(latencies)} requests: {count_runs(runs) - runs_before} plugin runs "
        f"after warm-up ({count_runs(runs)} with it), {int(waits)} requests waited on an exec; "
        f"request latency {summary(latencies)} (target: <= 6 runs, 0 waits)"
    )


if __name__ == "__main__":
    bench_cache_hit()
    bench_concurrency()
    bench_steady_state()
