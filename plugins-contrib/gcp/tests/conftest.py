"""Fixtures for the gcp provider's tests: the Google fakes, an environment in which application
default credentials find nothing real, and helpers to run the provider in-process (through a
CredentialEngine with a registry of this plugin only) and as an exec plugin (through ``cpcreds``)."""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cpcreds.config.wire import EXEC_INFO_ENV
from tests.fakes import fixtures as spoke_fixtures
from tests.fakes.google import FakeGoogle, FakeMetadataServer, ServiceAccountIssuer, ServiceAccountKey

BIN = Path(sys.executable).parent
CPCREDS = BIN / "cpcreds"
CPCREDS_GCP = BIN / "cpcreds-gcp"
PROVIDER = "google"  # the access-provider name GKE fleets publish
SERVER = "https://34.118.0.10"

# The spoke fixtures of the core suite, for kubectl against a fake cluster.
pki = spoke_fixtures.pki
make_spoke = spoke_fixtures.make_spoke

#: Variables that would let application default credentials (or a proxy) reach something real.
_OUTSIDE = (
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GCE_METADATA_HOST",
    "GCE_METADATA_ROOT",
    "GCE_METADATA_IP",
    "GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    EXEC_INFO_ENV,
)


@pytest.fixture(scope="session")
def sa_key() -> ServiceAccountKey:
    """One service account key for the session: RSA key generation is the slow part."""
    return ServiceAccountKey.generate("fleet-reader@fake-project.iam.gserviceaccount.com")


@pytest.fixture(scope="session")
def target_key() -> ServiceAccountKey:
    """A second service account: the one impersonated, or a key Google does not know."""
    return ServiceAccountKey.generate("gke-deployer@fake-project.iam.gserviceaccount.com")


@pytest.fixture(scope="session")
def cluster_issuer() -> ServiceAccountIssuer:
    """The cluster's service-account token issuer (kube-apiserver's signing key), for the pods'
    tokens a kubelet hands the image plugin (KEP-4412)."""
    return ServiceAccountIssuer.generate()


@pytest.fixture
def google() -> Iterator[FakeGoogle]:
    with FakeGoogle() as server:
        yield server


@pytest.fixture
def metadata(google: FakeGoogle) -> Iterator[FakeMetadataServer]:
    with FakeMetadataServer() as server:
        google.trust(server)  # Google's APIs accept the metadata server's tokens
        yield server


@pytest.fixture
def google_via_proxy(google: FakeGoogle, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeGoogle:
    """The fake reached at Google's real URLs (oauth2/sts/iamcredentials.googleapis.com) through
    HTTPS_PROXY, its CA trusted through REQUESTS_CA_BUNDLE: for what google-auth always sends to
    Google, and for the provider's defaults."""
    monkeypatch.setenv("HTTPS_PROXY", google.url)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(google.write_ca(tmp_path / "google-ca.pem")))
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    return google


@pytest.fixture
def refused_address() -> Iterator[str]:
    """``127.0.0.1:<port>`` where connecting is refused: the port is bound (so nothing else
    takes it) but not listening."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture(autouse=True)
def no_outside_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, google: FakeGoogle) -> Path:
    """Nothing of the machine's: no GOOGLE_APPLICATION_CREDENTIALS, an empty gcloud config folder,
    no proxy, and a "metadata IP" that answers like an ordinary web server (404 without
    Metadata-Flavor), so the probe fails at once. Returns the gcloud config folder."""
    for name in _OUTSIDE:
        monkeypatch.delenv(name, raising=False)
    gcloud = tmp_path / "gcloud"
    gcloud.mkdir()
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(gcloud))
    monkeypatch.setenv("GCE_METADATA_IP", google.url.removeprefix("http://"))
    return gcloud


@pytest.fixture
def write_json(tmp_path: Path) -> Callable[..., Path]:
    """Write a document to a fresh file; returns its path."""
    count = 0

    def write(document: Any, name: str | None = None) -> Path:
        nonlocal count
        count += 1
        path = tmp_path / (name or f"credentials-{count}.json")
        if isinstance(document, bytes):
            path.write_bytes(document)
        else:
            path.write_text(document if isinstance(document, str) else json.dumps(document), encoding="utf-8")
        return path

    return write


def _gke_profile(name: str = "gke-1", server: str = SERVER, provider: str = PROVIDER) -> dict[str, Any]:
    return {
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": name, "namespace": "fleet-system"},
        "status": {"accessProviders": [{"name": provider, "cluster": {"server": server, "certificate-authority-data": ""}}]},
    }


@pytest.fixture
def gke_profile() -> Callable[..., dict[str, Any]]:
    """``gke_profile(name="gke-1")``: a ClusterProfile for a GKE cluster offering ``google``."""
    return _gke_profile


#: ``make_engine(options, timeout="5s")``: an engine whose only provider is ``type: gcp`` with
#: these options, from a registry that knows only this plugin (closed after the test);
#: ``run_command(args, input=None, **env)``: a command run with the test's environment minus
#: ``CPCREDS_*``, only this plugin loadable by cpcreds, plus ``env``.
make_engine, run_command = spoke_fixtures.plugin_fixtures("cpcreds_gcp.plugin", "gcp", PROVIDER, CPCREDS_PLUGINS="gcp")  # whatever else is installed cannot change the outcome


@pytest.fixture
def exec_files(tmp_path: Path) -> Callable[..., tuple[Path, Path]]:
    """``exec_files(api_version, args=[], timeout="20s")``: a provider config whose ``google``
    provider runs ``cpcreds-gcp`` as an exec plugin (``provideClusterInfo: true``), and a
    ClusterProfile file offering it."""

    def make(api_version: str, args: list[str] | None = None, timeout: str = "20s") -> tuple[Path, Path]:
        config = tmp_path / f"exec-{api_version.rsplit('/', 1)[-1]}.json"
        entry = {
            "name": PROVIDER,
            "execConfig": {
                "apiVersion": api_version,
                "command": str(CPCREDS_GCP),
                "args": args or [],
                "provideClusterInfo": True,
                "interactiveMode": "Never",
            },
            "timeout": timeout,
        }
        config.write_text(json.dumps({"providers": [entry]}), encoding="utf-8")
        profile = tmp_path / "gke-1.json"
        profile.write_text(json.dumps(_gke_profile()), encoding="utf-8")
        return config, profile

    return make
