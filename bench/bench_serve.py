"""``cpcreds serve`` at fleet scale: time to ready, memory, and idle CPU (issue 9).

    .venv/bin/python bench/bench_serve.py [--sizes 1000,10000,50000] [--source directory|hub] [--src SRC]

For each size, writes that many ClusterProfiles (a folder of files, or objects on the local hub
fake), starts the real ``cpcreds serve`` (a subprocess, exactly as a user runs it) with the fast
in-process ``mint`` provider from tests/fakes/mint.py installed as a distribution, and reports:
seconds from start to ``/readyz`` = 200, RSS at ready, CPU used over 5 s of steady state, and how
long a profile added afterwards takes to show ``ready``. In the same run, the *floor* (issue 21):
a new process that reads each profile file with ``json.loads`` and calls
``CredentialEngine.from_file(cfg).get_credential(p)`` for each, same provider: its seconds from
start to the last credential and its RSS then. That engine keeps its default caches (1,024
credentials, 4,096 plans), so at 100,000 profiles it holds about 1% of the credentials serve
keeps: the *holding* floor, also run, is the same program with ``max_entries`` set to the number
of profiles, so its engine keeps every plan and credential (its RSS, and serve's against it, are
the "holding" columns). Targets (issue 21): ready <= 1.15x the floor at
10,000 and 100,000; RSS <= 1.5x the floor's at 100,000; steady-state CPU near idle; an added
profile ready within 1 s; ``/v1/clusters?limit=100`` in <= 50 ms and the status page in <= 200 ms
(the "api ms" and "page ms" columns: the first request, which files the first sync's changes,
then the median of seven). The load average is printed with each row.

``--src SRC`` runs serve and both floors on another source tree's ``cpcreds`` (put first on
``PYTHONPATH``), e.g. ``git archive <commit> src | tar -x -C /tmp/base`` then ``--src
/tmp/base/src``: "before" and "after" alternated in one session on the same machine.
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
import urllib.error
import urllib.request
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakes import mint  # noqa: E402

CPCREDS = Path(sys.executable).with_name("cpcreds")
TICKS = os.sysconf("SC_CLK_TCK")


def profile(index: int) -> dict:
    """A ClusterProfile shaped as cluster managers publish them (issue 29): labels including the
    inventory member id, a uid and creationTimestamp, the ``id.k8s.io`` property, the version and
    conditions, and one access provider (the mint provider's)."""
    name = f"c{index:05d}"
    member = f"{index:08x}-5e1f-4c1a-9d2b-{index:012x}"
    at = "2026-11-20T08:00:00Z"
    return {
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {
            "name": name,
            "namespace": "fleet",
            "uid": f"{index:08x}-0c4e-4b7a-8f00-{index:012x}",
            "resourceVersion": str(1000 + index),
            "generation": 1,
            "creationTimestamp": at,
            "labels": {
                "x-k8s.io/cluster-manager": "fleet-manager",
                "fleet.example.com/inventory-member-id": member,
                "topology.kubernetes.io/region": ("europe-west1", "us-east1", "asia-south1")[index % 3],
                "environment": ("prod", "staging")[index % 2],
            },
        },
        "spec": {"displayName": name, "clusterManager": {"name": "fleet-manager"}},
        "status": {
            "version": {"kubernetes": "v1.31.4"},
            "properties": [{"name": "id.k8s.io", "value": member, "lastObservedTime": at}],
            "conditions": [
                {"type": "ControlPlaneHealthy", "status": "True", "reason": "Healthy", "message": "", "lastTransitionTime": at, "observedGeneration": 1},
                {"type": "Joined", "status": "True", "reason": "Joined", "message": "", "lastTransitionTime": at, "observedGeneration": 1},
            ],
            "accessProviders": [{"name": "mint", "cluster": {"server": f"https://{name}.test:6443", "extensions": [{"name": "client.authentication.k8s.io/exec", "extension": {"clusterName": name}}]}}],
        },
    }


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""
    except OSError:
        return 0, b""


def timed_get(url: str, rounds: int = 7) -> tuple[float, float]:
    """Milliseconds of the first GET of ``url`` and the median of the next ``rounds``."""
    times = []
    for _ in range(rounds + 1):
        started = time.perf_counter()
        status, _ = get(url)
        assert status == 200, (url, status)
        times.append((time.perf_counter() - started) * 1000)
    return times[0], sorted(times[1:])[rounds // 2]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


#: The floor's program: the least a process can do to hold every profile's credential.
FLOOR = """
import json, os, sys
from pathlib import Path
from cpcreds import CredentialEngine
# "hold": an engine whose caches keep every profile's plan and credential (max_entries = the
# number of profiles); the issue's floor keeps the defaults (1,024 credentials, 4,096 plans).
holding = len(sys.argv) > 3 and sys.argv[3] == "hold"
engine = CredentialEngine.from_file(sys.argv[1], **({"max_entries": len(os.listdir(sys.argv[2]))} if holding else {}))
for path in sorted(Path(sys.argv[2]).iterdir()):
    engine.get_credential(json.loads(path.read_bytes()))
for line in Path("/proc/self/status").read_text().splitlines():
    if line.startswith("VmRSS:"):
        print(int(line.split()[1]) / 1024)
"""


#: Another source tree's ``src`` to run instead of this one's (``--src``), or None.
SRC: Path | None = None


def child_env(site: Path) -> dict[str, str]:
    """The environment of serve and the floors: the mint provider installed, and byte code used
    and written as an installed wheel has it (pip compiles what it installs). Without
    ``PYTHONDONTWRITEBYTECODE``, set on some machines, which would make every start compile
    cpcreds' modules again (serve imports more of them than the floor); :func:`compile_once`
    writes it before the timed runs."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env.update(PYTHONPATH=os.pathsep.join([*([str(SRC)] if SRC is not None else []), str(site)]), CPCREDS_PLUGINS="mint")
    return env


def compile_once(site: Path) -> None:
    """Import what serve (with either source) and the floors import, once, untimed: the byte
    code of cpcreds and of the mint provider is written then."""
    imports = "import cpcreds.cli, cpcreds.serve.service, cpcreds.fleet.core, cpcreds.fleet.hub, cpcreds_mint"
    subprocess.run([sys.executable, "-c", imports], env=child_env(site), check=True)


def write_config(workdir: Path) -> Path:
    config = workdir / "providers.yaml"
    config.write_text(yaml.safe_dump({"providers": [{"name": "mint", "type": "mint", "options": {"lifetime": 3600}}]}))
    return config


def write_profiles(profiles: Path, size: int) -> None:
    profiles.mkdir()
    for index in range(size):
        (profiles / f"c{index:05d}.json").write_text(json.dumps(profile(index)))


def floor(size: int, workdir: Path, site: Path, *, hold: bool = False) -> dict[str, float]:
    """The floor (see the module docstring): seconds from start to the last credential, RSS then.
    ``hold``: the floor's engine keeps every profile's plan and credential cached (serve does)."""
    profiles = workdir / f"floor-{size}"
    write_profiles(profiles, size)
    env = child_env(site)
    try:
        started = time.monotonic()
        out = subprocess.run([sys.executable, "-c", FLOOR, str(write_config(workdir)), str(profiles), "hold" if hold else "default"], env=env, check=True, capture_output=True, text=True)
        return {"ready_s": time.monotonic() - started, "rss_mb": float(out.stdout.split()[-1])}
    finally:
        shutil.rmtree(profiles, ignore_errors=True)


def start_serve(args: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[str], str, float]:
    """Start ``cpcreds serve`` (``args``), read its status page URL from its log and wait for
    ``/readyz`` = 200: (the process, that URL, seconds from start to ready). The caller stops the
    process; it is stopped here if it never gets ready."""
    started = time.monotonic()
    process = subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url = ""
        assert process.stderr is not None
        while not url:
            line = process.stderr.readline()
            if not line:
                raise SystemExit(f"serve exited: {process.wait()}: {process.stderr.read()[-2000:]}")
            if "status page " in line:
                url = line.split("status page ", 1)[1].split()[0].rstrip("/")
        while get(url + "/readyz")[0] != 200:
            time.sleep(0.02)
    except BaseException:
        process.terminate()
        process.wait(30)
        raise
    return process, url, time.monotonic() - started


def run(size: int, workdir: Path, site: Path, source: str, hub: object | None) -> dict[str, float]:
    config = write_config(workdir)
    profiles = workdir / f"profiles-{size}"
    args = [str(CPCREDS), "serve", "--config", str(config), "--listen", "127.0.0.1:0", "--log-level", "warning", "--concurrency", "64"]
    if source == "directory":
        write_profiles(profiles, size)
        args += ["--profiles-dir", str(profiles)]
    else:
        for index in range(size):
            hub.put(profile(index))  # type: ignore[attr-defined]
        args += ["--hub-kubeconfig", str(hub.write_kubeconfig(workdir / "hub.kubeconfig", "bench"))]  # type: ignore[attr-defined]
    env = child_env(site)
    process, url, ready = start_serve(args, env)
    try:
        rss = rss_mb(process.pid)
        _, body = get(url + "/v1/clusters")  # once: every cluster must be ready
        counts = json.loads(body)["counts"]
        assert counts["ready"] == size, counts
        before = cpu_seconds(process.pid)
        time.sleep(5)
        idle_cpu = (cpu_seconds(process.pid) - before) / 5
        # The API's first page and the status page, as an operator's browser asks for them (the
        # first request of each is counted too: it files the first sync's changes).
        api_ms = timed_get(url + "/v1/clusters?limit=100")
        page_ms = timed_get(url + "/")
        added = profile(size)
        added_at = time.monotonic()
        if source == "directory":
            (profiles / "added.json").write_text(json.dumps(added))
        else:
            hub.put(added)  # type: ignore[attr-defined]
        key = "fleet/" + added["metadata"]["name"]
        while True:
            status, body = get(url + "/v1/clusters/" + key)
            if status == 200 and json.loads(body)["state"] == "ready":
                break
            time.sleep(0.02)
        added_seconds = time.monotonic() - added_at
    finally:
        process.terminate()
        process.wait(30)
        shutil.rmtree(profiles, ignore_errors=True)
    return {"ready_s": ready, "rss_mb": rss, "idle_cpu": idle_cpu, "added_s": added_seconds, "api_ms": api_ms, "page_ms": page_ms}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--source", choices=["directory", "hub"], default="directory")
    parser.add_argument("--src", type=Path, help="run serve and the floors on this source tree's cpcreds")
    options = parser.parse_args()
    global SRC
    SRC = options.src.resolve() if options.src is not None else None
    workdir = Path(tempfile.mkdtemp(prefix="cpcreds-bench-serve-"))
    site = mint.install(workdir / "site")
    compile_once(site)
    print(f"source={options.source}")
    print(f"{'profiles':>9} {'ready (s)':>10} {'floor (s)':>10} {'ratio':>6} {'RSS (MB)':>9} {'floor MB':>9} {'ratio':>6} {'holding MB':>11} {'ratio':>6} {'idle CPU':>9} {'added (s)':>10} {'api ms':>11} {'page ms':>11}  load")
    for size in (int(s) for s in options.sizes.split(",")):
        hub = None
        if options.source == "hub":
            from tests.fakes.hub import HubServer
            from tests.fakes.pki import PKI

            hub = HubServer(PKI(), tokens=["bench"]).start()
        try:
            result = run(size, workdir, site, options.source, hub)
        finally:
            if hub is not None:
                hub.stop()  # type: ignore[attr-defined]
        base = floor(size, workdir, site)
        holding = floor(size, workdir, site, hold=True)
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(
            f"{size:>9} {result['ready_s']:>10.2f} {base['ready_s']:>10.2f} {result['ready_s'] / base['ready_s']:>5.2f}x"
            f" {result['rss_mb']:>9.1f} {base['rss_mb']:>9.1f} {result['rss_mb'] / base['rss_mb']:>5.2f}x"
            f" {holding['rss_mb']:>11.1f} {result['rss_mb'] / holding['rss_mb']:>5.2f}x"
            f" {result['idle_cpu']:>8.1%} {result['added_s']:>10.3f}"
            f" {result['api_ms'][0]:>5.0f}/{result['api_ms'][1]:<5.1f} {result['page_ms'][0]:>5.0f}/{result['page_ms'][1]:<5.1f}  {load}",
            flush=True,
        )
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
