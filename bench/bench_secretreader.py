"""The secretreader provider (plugins-contrib/secretreader) against the hub fake (issue 8).

    .venv/bin/python bench/bench_secretreader.py [--rounds 20] [--clusters 1000] [--baseline SRC [--only-baseline]]

(a) Cold, one cluster: ``CredentialEngine.get_credential(profile)`` for a cluster the engine has
    never seen (a new plan: resolve, single-flight, one Secret GET over the shared hub client,
    token checks, cache) against running the ``cpcreds-secretreader`` console script for the
    same Secret (KUBERNETES_EXEC_INFO set as client-go sets it), alternating which goes first.
    Target: in-process at least 20x faster. Also the console script's start-up: a full run
    against ``.venv/bin/python -c pass``, and ``-X importtime``'s total for its module.
(c) With ``--baseline SRC`` (the ``src`` folder of another ``cpcreds_secretreader``, e.g. the tree
    before a change: ``git archive <commit> plugins-contrib/secretreader/src | tar -x -C /tmp/x``),
    the console script of this tree against the same script with SRC first on PYTHONPATH,
    alternating which goes first, each against ``python -c pass`` in the same run; then both
    ``-X importtime`` profiles. Issue 29 chose the hub transport with it.
(b) 1,000 clusters' first credentials in-process, one after the other, against 1,000 bare
    ``CoreV1Api.read_namespaced_secret`` calls for the same Secrets with the official client in
    the same process, alternating per cluster which side goes first. Targets: one hub
    connection for all of them, total within 3x of the bare GETs.

The hub fake runs in this process (threads), on loopback with real TLS: its own time is in both
sides' figures. Needs the test dependencies and the package:
``pip install -e '.[test]' -e plugins-contrib/secretreader``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from _common import imports_line, pair, summary, timed, tmpdir
from prometheus_client import CollectorRegistry

from cpcreds import CredentialEngine, ProviderConfig, ProviderRegistry

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.fakes
from tests.fakes.hub import HubServer, secret  # noqa: E402

BIN = Path(sys.executable).parent
SCRIPT = BIN / "cpcreds-secretreader"
NAMESPACE = "fleet-system"
HUB_TOKEN = "bench-hub-token"


def profile(name: str) -> dict:
    """A ClusterProfile as the kubernetes client returns it (uid and resourceVersion set)."""
    return {
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"uid-{name}", "resourceVersion": "1"},
        "status": {
            "accessProviders": [
                {
                    "name": "secretreader",
                    "cluster": {
                        "server": f"https://{name}.example:6443",
                        "extensions": [{"name": "client.authentication.k8s.io/exec", "extension": {"clusterName": name}}],
                    },
                }
            ]
        },
    }


def engine_for(kubeconfig: Path, clusters: int) -> CredentialEngine:
    from cpcreds_secretreader import plugin

    config = ProviderConfig.from_dict({"providers": [{"name": "secretreader", "type": "secretreader", "options": {"kubeconfig": str(kubeconfig)}}]})
    return CredentialEngine(
        config,
        registry=ProviderRegistry(entry_points=False, plugins=(plugin,)),
        prometheus_registry=CollectorRegistry(),
        max_entries=clusters + 100,
    )


def run_script(kubeconfig: Path, name: str, *python_flags: str, pythonpath: str | None = None) -> str:
    """Run the console script for ``name`` as client-go would (``pythonpath`` first on
    PYTHONPATH: another cpcreds_secretreader); its standard error."""
    info = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "spec": {"interactive": False, "cluster": {"server": f"https://{name}.example:6443", "config": {"clusterName": name}}},
    }
    command = [str(SCRIPT), "--kubeconfig", str(kubeconfig)]
    if python_flags:
        command = [sys.executable, *python_flags, *command]
    env = {**os.environ, "KUBERNETES_EXEC_INFO": json.dumps(info)}
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath, os.environ.get("PYTHONPATH")) if p)
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0 or f"token-{name}" not in result.stdout:
        sys.exit(f"cpcreds-secretreader failed: {result.stderr.strip()[-500:]}")
    return result.stderr


def cold(hub: HubServer, kubeconfig: Path, rounds: int) -> None:
    for index in range(rounds + 1):
        hub.create(secret(NAMESPACE, f"cold-{index}", {"token": f"token-cold-{index}"}))
    engine = engine_for(kubeconfig, rounds)
    run_script(kubeconfig, "cold-0")  # warm the OS caches for the script
    engine.get_credential(profile("cold-0"))  # the hub client is built here, once per process
    ours, script, ratios = [], [], []
    for number in range(1, rounds + 1):
        name = f"cold-{number}"
        took_ours, took_script = pair(number, lambda: engine.get_credential(profile(name)), lambda: run_script(kubeconfig, name))
        ours.append(took_ours)
        script.append(took_script)
        ratios.append(took_script / took_ours)
    engine.close()
    print(f"(a) cold in-process CredentialEngine.get_credential: {summary(ours)}")
    print(f"    cpcreds-secretreader console script:            {summary(script)}")
    print(
        f"    in-process is {statistics.median(script) / statistics.median(ours):.0f}x faster (ratio of medians); "
        f"median of per-round ratios {statistics.median(ratios):.0f}x (target >= 20x)"
    )


def startup(kubeconfig: Path, rounds: int) -> None:
    python = Path(sys.executable)
    bare = [timed(lambda: subprocess.run([str(python), "-c", "pass"], check=True)) for _ in range(rounds)]
    full = [timed(lambda: run_script(kubeconfig, "cold-0")) for _ in range(rounds)]
    print(f"    console script, whole run (import, hub client, GET, answer): {summary(full)}")
    print(f"    bare .venv/bin/python -c pass:                               {summary(bare)}")
    print(imports_line(lambda: run_script(kubeconfig, "cold-0", "-X", "importtime"), rounds, depth=1))


def cpu(call: Callable[[], object]) -> float:
    """CPU seconds (user + system) of the child processes ``call()`` ran: less moved by other
    work on a busy machine than wall-clock time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    call()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def against_baseline(kubeconfig: Path, baseline: Path, rounds: int) -> None:
    python = Path(sys.executable)
    ours, theirs, bare, ratios = [], [], [], []
    cpu_ours, cpu_theirs, cpu_bare = [], [], []
    run_script(kubeconfig, "cold-0")  # byte code written and OS caches warm, for both sides
    run_script(kubeconfig, "cold-0", pythonpath=str(baseline))
    for number in range(rounds):
        took_ours, took_theirs = pair(
            number, lambda: run_script(kubeconfig, "cold-0"), lambda: run_script(kubeconfig, "cold-0", pythonpath=str(baseline))
        )
        ours.append(took_ours)
        theirs.append(took_theirs)
        ratios.append(took_ours / took_theirs)
        bare.append(timed(lambda: subprocess.run([str(python), "-c", "pass"], check=True)))
        cpu_ours.append(cpu(lambda: run_script(kubeconfig, "cold-0")))
        cpu_theirs.append(cpu(lambda: run_script(kubeconfig, "cold-0", pythonpath=str(baseline))))
        cpu_bare.append(cpu(lambda: subprocess.run([str(python), "-c", "pass"], check=True)))
    print(f"(c) console script, this tree:          {summary(ours)}")
    print(f"    console script, --baseline {baseline}: {summary(theirs)}")
    print(f"    bare .venv/bin/python -c pass:        {summary(bare)}")
    print(
        f"    this tree / baseline {statistics.median(ours) / statistics.median(theirs):.2f} (ratio of medians; "
        f"per-round median {statistics.median(ratios):.2f}); against bare: this tree "
        f"{statistics.median(ours) / statistics.median(bare):.1f}x, baseline {statistics.median(theirs) / statistics.median(bare):.1f}x"
    )
    median = statistics.median
    print(
        f"    CPU time of a run (user + system, medians): this tree {median(cpu_ours) * 1e3:.0f} ms, baseline "
        f"{median(cpu_theirs) * 1e3:.0f} ms, bare {median(cpu_bare) * 1e3:.0f} ms; this tree / baseline {median(cpu_ours) / median(cpu_theirs):.2f}"
    )
    print("    this tree:" + imports_line(lambda: run_script(kubeconfig, "cold-0", "-X", "importtime"), rounds, depth=1).lstrip(" "))
    print("    baseline: " + imports_line(lambda: run_script(kubeconfig, "cold-0", "-X", "importtime", pythonpath=str(baseline)), rounds, depth=1).lstrip(" "))


def many(hub: HubServer, kubeconfig: Path, clusters: int) -> None:
    from kubernetes import client, config

    names = [f"spoke-{index}" for index in range(clusters)]
    for name in names:
        hub.create(secret(NAMESPACE, name, {"token": f"token-{name}"}))
    hub.create(secret(NAMESPACE, "warm", {"token": "token-warm"}))
    engine = engine_for(kubeconfig, clusters)
    bare_api = config.new_client_from_config(config_file=str(kubeconfig), persist_config=False)
    core = client.CoreV1Api(bare_api)
    before = hub.connections
    engine.get_credential(profile("warm"))  # each side opens its connection once, outside the timing
    assert hub.connections - before == 1, "the in-process side opened more than one connection"
    core.read_namespaced_secret("warm", NAMESPACE)
    ours = bare = 0.0
    for number, name in enumerate(names):
        sides = [("ours", lambda: engine.get_credential(profile(name))), ("bare", lambda: core.read_namespaced_secret(name, NAMESPACE))]
        if number % 2:
            sides.reverse()
        for side, call in sides:
            took = timed(call)
            if side == "ours":
                ours += took
            else:
                bare += took
    opened = hub.connections - before
    engine.close()
    bare_api.close()
    print(f"(b) {clusters} clusters' first credentials in-process: {ours:.3f} s ({ours / clusters * 1e3:.3f} ms each)")
    print(f"    {clusters} bare CoreV1Api.read_namespaced_secret:     {bare:.3f} s ({bare / clusters * 1e3:.3f} ms each)")
    print(f"    ratio {ours / bare:.2f} (target <= 3); hub connections opened: {opened} (in-process 1, bare client 1)")
    assert opened == 2, f"expected one connection per client, the hub saw {opened}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20, help="rounds of (a)")
    parser.add_argument("--clusters", type=int, default=1000, help="clusters of (b)")
    parser.add_argument("--baseline", type=Path, help="(c): another cpcreds_secretreader's src folder to run the console script from")
    parser.add_argument("--only-baseline", action="store_true", help="run (c) only")
    options = parser.parse_args()
    folder = tmpdir()
    with HubServer(tokens=[HUB_TOKEN], history=10) as hub:
        kubeconfig = hub.write_kubeconfig(folder / "hub.kubeconfig", HUB_TOKEN, namespace=NAMESPACE)
        if not options.only_baseline:
            cold(hub, kubeconfig, options.rounds)
            startup(kubeconfig, options.rounds)
        else:
            hub.create(secret(NAMESPACE, "cold-0", {"token": "token-cold-0"}))
        if options.baseline is not None:
            against_baseline(kubeconfig, options.baseline.resolve(), options.rounds)
        if not options.only_baseline:
            many(hub, kubeconfig, options.clusters)


if __name__ == "__main__":
    main()
