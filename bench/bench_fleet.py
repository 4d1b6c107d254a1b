"""``cpcreds.Fleet`` at fleet scale against ``cpcreds serve`` on the same hub (issue 20).

    .venv/bin/python bench/bench_fleet.py [--size 10000]

Puts ``--size`` ClusterProfiles (healthy, one ``mint`` access provider each) on the local hub
fake, then, in the same run and on the same inventory:

- starts the real ``cpcreds serve`` (a subprocess, as a user runs it) and times start -> ``/readyz``
  = 200 (every profile listed and its credential fetched);
- starts a program (a subprocess too, so both pay for an interpreter and their imports) that
  runs a ``Fleet`` on that hub, and times start -> every cluster engaged (credential fetched);
  then adds one profile and deletes another on the hub and times, in the program, the
  ``Engaged`` and ``Disengaged`` events;
- runs that program again, now building every engaged cluster's ``kubernetes`` ``ApiClient`` in
  ``on_engage`` (clients are otherwise built on first use), and times the same.

The provider is the fast in-process ``mint`` of tests/fakes/mint.py, installed as a
distribution, so what is measured is cpcreds (the hub watch, the engine, the fleet), not a
plugin. Targets: engaged <= 1.2x serve's ready; added engaged and deleted disengaged within 1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_serve import CPCREDS, profile, start_serve  # noqa: E402

from tests.fakes import mint  # noqa: E402

HEALTHY = [{"type": "ControlPlaneHealthy", "status": "True", "reason": "Bench", "message": "bench"}]


def healthy_profile(index: int) -> dict:
    item = profile(index)
    item["status"]["conditions"] = HEALTHY
    return item


def serve_ready(config: Path, kubeconfig: Path, env: dict[str, str]) -> float:
    args = [str(CPCREDS), "serve", "--config", str(config), "--listen", "127.0.0.1:0", "--log-level", "warning", "--concurrency", "64", "--hub-kubeconfig", str(kubeconfig)]
    process, _, ready = start_serve(args, env)
    try:
        return ready
    finally:
        process.terminate()
        process.wait(30)


def child(options: argparse.Namespace) -> None:
    """The program under test: a Fleet on the hub, reporting on stdout as JSON lines."""
    t0 = options.t0
    import threading

    import cpcreds

    size = options.size
    built = [0]
    lock = threading.Lock()
    first_keys: set[str] = set()

    def report(**fields: object) -> None:
        with lock:  # callbacks and the main thread report: one whole line at a time
            sys.stdout.write(json.dumps(fields) + "\n")
            sys.stdout.flush()

    def on_engage(cluster: cpcreds.FleetCluster) -> None:
        if first_keys and cluster.key not in first_keys:
            report(event="engage", key=cluster.key, at=time.time())
            return
        if options.no_clients:
            return
        cluster.api_client()
        built[0] += 1  # only the callback thread counts
        done = built[0] == size
        if done:
            report(clients_s=time.time() - t0)

    def on_disengage(cluster: cpcreds.FleetCluster) -> None:
        report(event="disengage", key=cluster.key, at=time.time())

    fleet = cpcreds.Fleet(options.config, hub=options.kubeconfig, on_engage=on_engage, on_disengage=on_disengage, concurrency=64)
    with fleet:
        while len(fleet.engaged) < size:  # engaged: what the fleet says, not the callbacks' pace
            time.sleep(0.01)
        first_keys.update(fleet.engaged)
        report(engaged_s=time.time() - t0)
        sys.stdin.readline()  # the parent says when to stop


def fleet_run(size: int, clients: bool, config: Path, kubeconfig: Path, env: dict[str, str], hub: object) -> dict[str, float]:
    """Start the program; time engaged (and clients built), then one added and one deleted profile."""
    from tests.fakes.hub import CLUSTER_PROFILES

    t0 = time.time()
    args = [sys.executable, __file__, "--child", "--size", str(size), "--config", str(config), "--kubeconfig", str(kubeconfig), "--t0", str(t0)]
    program = subprocess.Popen([*args, *([] if clients else ["--no-clients"])], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert program.stdout is not None and program.stdin is not None
    figures: dict[str, float] = {}
    try:
        while not ({"clients_s", "engaged_s"} if clients else {"engaged_s"}) <= set(figures):
            line = program.stdout.readline()
            if not line:
                raise SystemExit(f"the fleet program exited: {program.wait()}")
            figures.update(json.loads(line))
        added, name = healthy_profile(size), f"c{size - 1:05d}"
        added_at = time.time()
        hub.put(added)  # type: ignore[attr-defined]
        engage = json.loads(program.stdout.readline())
        assert engage["event"] == "engage", engage
        deleted_at = time.time()
        hub.delete(CLUSTER_PROFILES, "fleet", name)  # type: ignore[attr-defined]
        disengage = json.loads(program.stdout.readline())
        assert disengage["event"] == "disengage" and disengage["key"] == f"fleet/{name}", disengage
        hub.delete(CLUSTER_PROFILES, "fleet", added["metadata"]["name"])  # type: ignore[attr-defined]
        hub.put(healthy_profile(size - 1))  # type: ignore[attr-defined]  # as it was, for the next run
        figures["added_s"], figures["deleted_s"] = engage["at"] - added_at, disengage["at"] - deleted_at
    finally:
        program.stdin.write("\n")
        program.stdin.flush()
        program.wait(30)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--no-clients", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    parser.add_argument("--t0", type=float, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        child(options)
        return

    from tests.fakes.hub import CLUSTER_PROFILES, HubServer
    from tests.fakes.pki import PKI

    workdir = Path(tempfile.mkdtemp(prefix="cpcreds-bench-fleet-"))
    site = mint.install(workdir / "site")
    config = workdir / "providers.yaml"
    config.write_text(yaml.safe_dump({"providers": [{"name": "mint", "type": "mint", "options": {"lifetime": 3600}}]}))
    env = {**os.environ, "PYTHONPATH": str(site), "CPCREDS_PLUGINS": "mint"}
    hub = HubServer(PKI(), tokens=["bench"]).start()
    try:
        for index in range(options.size):
            hub.put(healthy_profile(index))
        kubeconfig = hub.write_kubeconfig(workdir / "hub.kubeconfig", "bench")
        ready = serve_ready(config, kubeconfig, env)

        runs = [fleet_run(options.size, False, config, kubeconfig, env, hub), fleet_run(options.size, True, config, kubeconfig, env, hub)]
    finally:
        hub.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"profiles={options.size} (hub fake, mint provider); serve ready: {ready:.2f} s")
    print(f"{'fleet run':<34} {'engaged (s)':>12} {'vs serve':>9} {'clients (s)':>12} {'added (s)':>10} {'deleted (s)':>12}")
    for label, figures in zip(("engaged", "engaged + an ApiClient per cluster"), runs):
        clients = f"{figures['clients_s']:>12.2f}" if "clients_s" in figures else f"{'-':>12}"
        print(f"{label:<34} {figures['engaged_s']:>12.2f} {figures['engaged_s'] / ready:>8.2f}x {clients} {figures['added_s']:>10.3f} {figures['deleted_s']:>12.3f}")


if __name__ == "__main__":
    main()
