#!/usr/bin/env python3
"""A local fleet to try cpcreds against: one HTTPS API server on 127.0.0.1, and the files to use it.

    .venv/bin/python scripts/dev-cluster.py [--dir DIR] [--port PORT] [--clusters N]

The server is the fake kube-apiserver of the test suite (tests/fakes/spoke.py): real TLS, bearer
tokens checked, ``kubectl get namespaces`` answered. Here it also plays the hub: it serves the
ClusterProfiles of namespace ``fleet`` (list, get, and a watch that stays quiet: they never
change), healthy, so the controllers of docs/fleet.md engage them. Every ClusterProfile points at this same server.

Written to DIR (a new temporary folder unless --dir is given):

    token                 the token the server accepts for the clusters (a file provider reads it)
    providers.yaml        provider config: ``projected-token`` = the built-in file provider
    clusterprofiles.yaml  a ClusterProfileList: spoke-1 ... spoke-N in namespace fleet
    hub.kubeconfig        kubeconfig for the hub (a static token; for kubectl and the kubernetes client)
    ca.crt                the server's CA certificate

It prints what to run, then serves until Ctrl-C (or SIGTERM); a temporary DIR is then removed.
Needs the test dependencies (``pip install -e '.[test]'``: trustme).
"""

from __future__ import annotations

import argparse
import base64
import shutil
import signal
import sys
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

try:
    import yaml

    from tests.fakes.pki import PKI
    from tests.fakes.apiserver import bearer_token
    from tests.fakes.spoke import SpokeServer, _Handler, _status
except ImportError as exc:  # pragma: no cover - depends on the environment
    sys.exit(f"dev-cluster: {exc}; install the test dependencies first: pip install -e '.[test]'")

GROUP, VERSION = "multicluster.x-k8s.io", "v1alpha1"
NAMESPACE = "fleet"
PROVIDER = "projected-token"
CLUSTER_TOKEN = "fleet-token-123"
HUB_TOKEN = "hub-token-456"
PROFILES_PATH = f"/apis/{GROUP}/{VERSION}/namespaces/{NAMESPACE}/clusterprofiles"


class _DevHandler(_Handler):
    def _handle(self) -> None:
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        if self.command == "GET" and parts.path.rstrip("/") == PROFILES_PATH and query.get("watch", [""])[0] in ("true", "1"):
            self._watch(query)
        else:
            super()._handle()

    def _watch(self, query: dict[str, list[str]]) -> None:
        """A watch of the profiles, which never change here: no event, until timeoutSeconds or
        the server stops (so a Fleet or informer on this hub watches quietly, as on a real one)."""
        server = self.server.owner
        authorization = self.headers.get("Authorization")
        if server._authenticate(authorization, bearer_token(authorization), self._peer_cert) not in ("token", "client-cert"):
            super()._handle()  # the 401
            return
        timeout = float((query.get("timeoutSeconds") or ["300"])[0] or 300)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        server.stopping.wait(timeout)
        try:
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True


class DevServer(SpokeServer):
    """The spoke fake, also serving ClusterProfiles and their API discovery, as a hub would."""

    handler_class = _DevHandler

    def __init__(self, pki: PKI, profiles: list[dict[str, Any]], **kwargs: Any) -> None:
        super().__init__(pki, **kwargs)
        self.profiles = profiles
        self.stopping = threading.Event()

    def _stopping(self) -> None:
        self.stopping.set()  # watches end

    def _respond(self, method: str, path: str) -> tuple[int, dict[str, Any]]:
        path = path.rstrip("/") or "/"
        if method == "GET":
            if path == "/apis":
                return 200, {
                    "kind": "APIGroupList",
                    "apiVersion": "v1",
                    "groups": [
                        {
                            "name": GROUP,
                            "versions": [{"groupVersion": f"{GROUP}/{VERSION}", "version": VERSION}],
                            "preferredVersion": {"groupVersion": f"{GROUP}/{VERSION}", "version": VERSION},
                        }
                    ],
                }
            if path == f"/apis/{GROUP}/{VERSION}":
                return 200, {
                    "kind": "APIResourceList",
                    "apiVersion": "v1",
                    "groupVersion": f"{GROUP}/{VERSION}",
                    "resources": [
                        {
                            "name": "clusterprofiles",
                            "singularName": "clusterprofile",
                            "namespaced": True,
                            "kind": "ClusterProfile",
                            "verbs": ["get", "list", "watch"],
                        }
                    ],
                }
            if path == PROFILES_PATH:
                return 200, {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": "ClusterProfileList",
                    "metadata": {"resourceVersion": "200"},
                    "items": self.profiles,
                }
            if path.startswith(PROFILES_PATH + "/"):
                name = unquote(path[len(PROFILES_PATH) + 1 :])
                for profile in self.profiles:
                    if profile["metadata"]["name"] == name:
                        return 200, profile
                return 404, _status(404, "NotFound", f'clusterprofiles.{GROUP} "{name}" not found', details={"name": name, "group": GROUP, "kind": "clusterprofiles"})
        return super()._respond(method, path)


def cluster_profile(name: str, server: str, ca_pem: bytes) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ClusterProfile",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"dev-cluster/{name}")),
            "resourceVersion": "100",
        },
        "spec": {"displayName": name, "clusterManager": {"name": "dev-cluster"}},
        "status": {
            "conditions": [{"type": "ControlPlaneHealthy", "status": "True", "reason": "DevCluster", "message": "served by dev-cluster.py", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "accessProviders": [
                {
                    "name": PROVIDER,
                    "cluster": {
                        "server": server,
                        "certificate-authority-data": base64.b64encode(ca_pem).decode("ascii"),
                        "extensions": [{"name": "client.authentication.k8s.io/exec", "extension": {"clusterName": name}}],
                    },
                }
            ]
        },
    }


def write_files(folder: Path, server: str, ca_pem: bytes, profiles: list[dict[str, Any]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "token").write_text(CLUSTER_TOKEN + "\n")
    (folder / "ca.crt").write_bytes(ca_pem)
    providers = {"providers": [{"name": PROVIDER, "type": "file", "options": {"tokenFile": str(folder / "token")}}]}
    (folder / "providers.yaml").write_text(yaml.safe_dump(providers, sort_keys=False))
    profile_list = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterProfileList", "items": profiles}
    (folder / "clusterprofiles.yaml").write_text(yaml.safe_dump(profile_list, sort_keys=False))
    hub = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "hub", "cluster": {"server": server, "certificate-authority-data": base64.b64encode(ca_pem).decode("ascii")}}],
        "users": [{"name": "hub-admin", "user": {"token": HUB_TOKEN}}],
        "contexts": [{"name": "hub", "context": {"cluster": "hub", "user": "hub-admin", "namespace": NAMESPACE}}],
        "current-context": "hub",
    }
    path = folder / "hub.kubeconfig"
    path.write_text(yaml.safe_dump(hub, sort_keys=False))
    path.chmod(0o600)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dev-cluster.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, help="write the files here (kept on exit); default: a temporary folder, removed on exit")
    parser.add_argument("--clusters", type=int, default=2, help="how many ClusterProfiles (default 2)")
    args = parser.parse_args(argv)

    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda *_: stop.set())

    pki = PKI()
    folder = args.dir.resolve() if args.dir else Path(tempfile.mkdtemp(prefix="cpcreds-dev-"))
    server = DevServer(pki, [], tokens=[CLUSTER_TOKEN, HUB_TOKEN]).start()
    try:
        server.profiles[:] = [cluster_profile(f"spoke-{i}", server.url, pki.ca_pem) for i in range(1, args.clusters + 1)]
        write_files(folder, server.url, pki.ca_pem, server.profiles)
        print(
            f"""dev cluster: {server.url} (CA: {folder}/ca.crt)
  clusters accept the token in {folder}/token; the hub ({PROFILES_PATH}) accepts hub.kubeconfig's
files: {folder}/{{providers.yaml,clusterprofiles.yaml,hub.kubeconfig,token,ca.crt}}

try, in another shell:
  cd {folder}
  cpcreds get-credential --config providers.yaml --profile clusterprofiles.yaml --name spoke-1
  cpcreds kubeconfig --config providers.yaml --profile clusterprofiles.yaml -o fleet.kubeconfig
  KUBECONFIG=fleet.kubeconfig kubectl --context fleet/spoke-1 get namespaces
  KUBECONFIG=hub.kubeconfig kubectl get clusterprofiles
the controllers of docs/fleet.md: python controller.py {folder}

Ctrl-C stops the server{'' if args.dir else ' and removes ' + str(folder)}.""",
            flush=True,
        )
        stop.wait()
    finally:
        server.stop()
        if not args.dir:
            shutil.rmtree(folder, ignore_errors=True)
    print("dev cluster stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
