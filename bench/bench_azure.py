"""The azure provider (plugins-contrib/azure) against the Entra ID fake (issue 23).

    .venv/bin/python bench/bench_azure.py [--rounds 15]

(a) Cold: a new ``CredentialEngine`` (so a new provider: msal reads the tenant's OpenID
    configuration, then the client-credentials grant) getting one cluster's token in-process,
    against running ``cpcreds-azure get-token`` for the same token (KUBERNETES_EXEC_INFO set as
    client-go sets it), alternating which goes first; and the engine's cached hit.
(b) The console script's whole run against ``.venv/bin/python -c pass``, and ``-X importtime``'s
    profile of the run (what azure-identity, msal and cryptography cost).

Login mode ``spn`` with a client secret (the fake checks it); the fake runs in this process
(threads) on loopback with real TLS, trusted through REQUESTS_CA_BUNDLE: its own time is in both
sides' figures. Needs the test dependencies and the package:
``pip install -e '.[test]' -e plugins-contrib/azure``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from _common import imports_line, pair, summary, timed, tmpdir
from prometheus_client import CollectorRegistry

from cpcreds import CredentialEngine, ProviderConfig, ProviderRegistry

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.fakes
from tests.fakes.azure import FakeEntra  # noqa: E402

BIN = Path(sys.executable).parent
SCRIPT = BIN / "cpcreds-azure"
CLIENT_ID = "11111111-2222-3333-4444-555555555555"
SECRET = "bench-secret-0123456789"
PROFILE = {
    "apiVersion": "multicluster.x-k8s.io/v1alpha1",
    "kind": "ClusterProfile",
    "metadata": {"name": "aks-1", "namespace": "fleet-system", "uid": "uid-aks-1", "resourceVersion": "1"},
    "status": {"accessProviders": [{"name": "aks", "cluster": {"server": "https://aks-1.example:443"}}]},
}


def options(entra: FakeEntra) -> dict[str, str]:
    return {"login": "spn", "clientId": CLIENT_ID, "tenantId": entra.tenant, "disableInstanceDiscovery": "true"}


def engine_for(entra: FakeEntra) -> CredentialEngine:
    from cpcreds_azure import plugin

    config = ProviderConfig.from_dict({"providers": [{"name": "aks", "type": "azure", "options": options(entra)}]})
    return CredentialEngine(config, registry=ProviderRegistry(entry_points=False, plugins=(plugin,)), prometheus_registry=CollectorRegistry())


def run_script(entra: FakeEntra, *python_flags: str) -> str:
    """Run ``cpcreds-azure get-token`` as client-go would; its standard error."""
    info = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "spec": {"interactive": False}}
    flags = [f"--{name}={value}" for name, value in options(entra).items()]
    command = [str(SCRIPT), "get-token", *flags]
    if python_flags:
        command = [sys.executable, *python_flags, *command]
    result = subprocess.run(command, env={**os.environ, "KUBERNETES_EXEC_INFO": json.dumps(info)}, capture_output=True, text=True, check=False)
    if result.returncode != 0 or not entra.verify(json.loads(result.stdout)["status"]["token"]):
        sys.exit(f"cpcreds-azure failed: {result.stderr.strip()[-500:]}")
    return result.stderr


def cold(entra: FakeEntra, rounds: int) -> None:
    run_script(entra)  # warm the OS caches for the script
    engine_for(entra).get_credential(PROFILE)  # imports azure-identity and msal once per process
    ours, script, ratios, hits = [], [], [], []
    for number in range(rounds):
        engine = engine_for(entra)
        took_ours, took_script = pair(number, lambda: engine.get_credential(PROFILE), lambda: run_script(entra))
        hits.append(timed(lambda: engine.get_credential(PROFILE)))
        engine.close()
        ours.append(took_ours)
        script.append(took_script)
        ratios.append(took_script / took_ours)
    print(f"(a) cold in-process (new engine, OpenID configuration + token): {summary(ours)}")
    print(f"    cpcreds-azure get-token console script:                     {summary(script)}")
    print(f"    in-process is {statistics.median(script) / statistics.median(ours):.0f}x faster (ratio of medians); "
          f"median of per-round ratios {statistics.median(ratios):.0f}x")
    print(f"    cached hit (engine.get_credential again):                   {summary(hits)}")


def startup(entra: FakeEntra, rounds: int) -> None:
    python = Path(sys.executable)
    bare = [timed(lambda: subprocess.run([str(python), "-c", "pass"], check=True)) for _ in range(rounds)]
    full = [timed(lambda: run_script(entra)) for _ in range(rounds)]
    print(f"(b) cpcreds-azure get-token, whole run: {summary(full)}")
    print(f"    bare .venv/bin/python -c pass:      {summary(bare)}")
    print(f"    ratio of medians {statistics.median(full) / statistics.median(bare):.1f}")
    print(imports_line(lambda: run_script(entra, "-X", "importtime"), rounds, min_ms=10, top=12))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    rounds = parser.parse_args().rounds
    folder = tmpdir()
    with FakeEntra() as entra:
        entra.add_secret(CLIENT_ID, SECRET)
        ca = folder / "entra-ca.pem"
        ca.write_bytes(entra.ca_pem)
        os.environ.update({"REQUESTS_CA_BUNDLE": str(ca), "AZURE_AUTHORITY_HOST": entra.authority, "AZURE_CLIENT_SECRET": SECRET,
                           "NO_PROXY": "127.0.0.1"})
        cold(entra, rounds)
        startup(entra, rounds)


if __name__ == "__main__":
    main()
