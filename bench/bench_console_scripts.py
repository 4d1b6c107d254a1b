"""Each contrib console script answering for real against the local fakes, against a bare start of
the interpreter plus the same round trips (issue 19; target: ratio <= 4).

    .venv/bin/python bench/bench_console_scripts.py [--rounds 10] [--only NAME]

Scripts (each run as a new process, as a Go controller or the kubelet runs it):

- ``secretreader``:  ``cpcreds-secretreader --kubeconfig K`` with KUBERNETES_EXEC_INFO, one Secret
                     GET from the hub fake (HTTPS, bearer token);
- ``secretreader-kubelet``: ``cpcreds-secretreader-credential-provider`` with a
                     CredentialProviderRequest on stdin, one image pull Secret GET from the hub fake;
- ``gcp``:           ``cpcreds-gcp`` with GOOGLE_APPLICATION_CREDENTIALS a service-account key
                     whose token_uri is the Google fake (one token POST);
- ``gcp-kubelet``:   ``cpcreds-gcp-credential-provider``, the same key, a request on stdin;
- ``spire``:         ``cpcreds-spire -audience A -socket S`` against the SPIRE Workload API fake
                     (one FetchJWTSVID over a unix socket).

``bare`` is ``python -c pass`` followed, in this process, by the script's round trips on a new
connection each (TLS handshake and request to the same fake; a gRPC call on a new channel), so
the ratio is what the script adds over starting Python and talking to the server. Rounds
alternate which side goes first. Prints the medians, the median of per-round ratios, and each
script's ``-X importtime`` profile (top 12 by cumulative time). The fakes run in this process.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import ssl
import subprocess
import sys
import tempfile
import time
import statistics
from collections.abc import Callable
from pathlib import Path

from _common import alternate

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.fakes
from tests.fakes.google import FakeGoogle, ServiceAccountKey  # noqa: E402
from tests.fakes.hub import HubServer, secret  # noqa: E402
from tests.fakes.pki import PKI  # noqa: E402
from tests.fakes.spire import DEFAULT_IDENTITY, SpireAgent  # noqa: E402

BIN = Path(sys.executable).parent
NAMESPACE = "fleet-system"
HUB_TOKEN = "bench-hub-token"
EXEC_INFO = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "spec": {"interactive": False}}
IMAGE_REQUEST = b'{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":"%s"}'


def exec_info(config: object, server: str = "https://spoke-1.example:6443") -> str:
    return json.dumps({**EXEC_INFO, "spec": {"interactive": False, "cluster": {"server": server, "config": config}}})


def run(argv: list[str], env: dict[str, str], stdin: bytes | None = None) -> None:
    result = subprocess.run(argv, env=env, input=stdin if stdin is not None else b"", capture_output=True, timeout=60)
    if result.returncode != 0:
        raise SystemExit(f"{argv[0]} exited {result.returncode}: {result.stderr.decode(errors='replace').strip()[-400:]}")


def https_get(host: str, port: int, context: ssl.SSLContext, path: str, token: str) -> None:
    connection = http.client.HTTPSConnection(host, port, context=context, timeout=10)
    connection.request("GET", path, headers={"Authorization": f"Bearer {token}", "Accept": "application/json"})
    connection.getresponse().read()
    connection.close()


def http_post(url: str, body: bytes) -> None:
    scheme, _, rest = url.partition("://")
    address, _, path = rest.partition("/")
    host, _, port = address.partition(":")
    connection = (http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection)(host, int(port or 0) or None, timeout=10)
    connection.request("POST", "/" + path, body=body, headers={"Content-Type": "application/x-www-form-urlencoded"})
    connection.getresponse().read()
    connection.close()


def scenarios(workdir: Path) -> tuple[dict[str, tuple[list[str], dict[str, str], bytes | None, Callable[[], None]]], Callable[[], None]]:
    """name -> (argv, env, stdin, the bare side's round trips); and a function stopping the fakes."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CPCREDS_") and k not in ("KUBERNETES_EXEC_INFO", "PYTHONDONTWRITEBYTECODE")}
    pki = PKI()
    hub = HubServer(pki, tokens=[HUB_TOKEN]).start()
    hub.create(secret(NAMESPACE, "spoke-1", {"token": "token-spoke-1"}))
    auths = {"auths": {"registry.example.com": {"username": "robot", "password": "pw"}}}
    hub.create(secret(NAMESPACE, "pull", {".dockerconfigjson": json.dumps(auths)}, type="kubernetes.io/dockerconfigjson"))
    kubeconfig = hub.write_kubeconfig(workdir / "hub.kubeconfig", HUB_TOKEN, namespace=NAMESPACE)
    hub_host, hub_port = hub.url.removeprefix("https://").rsplit(":", 1)
    hub_context = ssl.create_default_context(cadata=pki.ca_pem.decode())

    def hub_round_trip() -> None:
        https_get(hub_host, int(hub_port), hub_context, f"/api/v1/namespaces/{NAMESPACE}/secrets/spoke-1", HUB_TOKEN)

    google = FakeGoogle().start()
    key = google.add_service_account(ServiceAccountKey.generate())
    key_file = workdir / "key.json"
    key_file.write_text(json.dumps(google.service_account_info(key)))
    gcp_env = dict(env, GOOGLE_APPLICATION_CREDENTIALS=str(key_file), CLOUDSDK_CONFIG=str(workdir / "gcloud"))

    def google_round_trip() -> None:
        http_post(google.token_uri, b"grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=x")

    agent = SpireAgent().start()

    def spire_round_trip() -> None:
        import grpc
        from spiffe._proto import workload_pb2, workload_pb2_grpc

        with grpc.insecure_channel(agent.address) as channel:
            stub = workload_pb2_grpc.SpiffeWorkloadAPIStub(channel)
            stub.FetchJWTSVID(workload_pb2.JWTSVIDRequest(audience=["bench"]), metadata=(("workload.spiffe.io", "true"),), timeout=10)

    found = {
        "secretreader": (
            [str(BIN / "cpcreds-secretreader"), "--kubeconfig", str(kubeconfig)],
            dict(env, KUBERNETES_EXEC_INFO=exec_info({"clusterName": "spoke-1"})),
            None,
            hub_round_trip,
        ),
        "secretreader-kubelet": (
            [str(BIN / "cpcreds-secretreader-credential-provider"), "--kubeconfig", str(kubeconfig), "--secret-name=pull", f"--namespace={NAMESPACE}"],
            env,
            IMAGE_REQUEST % b"registry.example.com/team/app:1.4",
            hub_round_trip,
        ),
        "gcp": ([str(BIN / "cpcreds-gcp")], dict(gcp_env, KUBERNETES_EXEC_INFO=json.dumps(EXEC_INFO)), None, google_round_trip),
        "gcp-kubelet": ([str(BIN / "cpcreds-gcp-credential-provider")], gcp_env, IMAGE_REQUEST % b"us-docker.pkg.dev/p/app:1", google_round_trip),
        "spire": (
            [str(BIN / "cpcreds-spire"), "-audience", "bench", "-socket", agent.address, "-spiffeId", DEFAULT_IDENTITY],
            dict(env, KUBERNETES_EXEC_INFO=json.dumps(EXEC_INFO)),
            None,
            spire_round_trip,
        ),
    }

    def stop() -> None:
        hub.stop()
        google.stop()
        agent.stop()

    return found, stop


def import_profile(argv: list[str], env: dict[str, str], stdin: bytes | None, top: int = 12) -> list[tuple[int, str]]:
    result = subprocess.run([sys.executable, "-X", "importtime", *argv], env=env, input=stdin or b"", capture_output=True, timeout=60)
    rows = []
    for line in result.stderr.decode(errors="replace").splitlines():
        if line.startswith("import time:") and "|" in line:
            _, cumulative, name = (part.strip() for part in line.removeprefix("import time:").split("|"))
            if cumulative.isdigit():
                rows.append((int(cumulative), name))
    return sorted(rows, reverse=True)[:top]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--only", action="append", help="run only this script (repeatable)")
    opts = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="cpcreds-bench-"))
    (workdir / "gcloud").mkdir()
    found, stop = scenarios(workdir)
    bare = [sys.executable, "-c", "pass"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    print(f"contrib console scripts vs bare start + round trips, {opts.rounds} rounds alternating; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    try:
        for name, (argv, script_env, stdin, round_trip) in found.items():
            if opts.only and name not in opts.only:
                continue
            for _ in range(2):  # untimed: byte code written, files in the page cache, fakes warm
                run(argv, script_env, stdin)
                round_trip()

            def theirs() -> None:
                run(bare, env)
                round_trip()

            mine, base, ratios = alternate(opts.rounds, lambda _n: run(argv, script_env, stdin), theirs)
            print(f"{name}:")
            print(f"  script                  median {statistics.median(mine) * 1e3:7.1f} ms")
            print(f"  bare start + round trip median {statistics.median(base) * 1e3:7.1f} ms")
            print(f"  ratio: median of per-round ratios {statistics.median(ratios):.2f} (target: <= 4)")
            print("  imports, top 12 by cumulative time (-X importtime, us):")
            for cumulative, module in import_profile(argv, script_env, stdin):
                print(f"    {cumulative:8d}  {module}")
    finally:
        stop()


if __name__ == "__main__":
    main()
