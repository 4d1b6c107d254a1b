"""Fixtures for the azure provider's tests: the Entra ID fake (with its managed identity endpoint)
trusted through REQUESTS_CA_BUNDLE, an environment in which azure-identity finds nothing real,
a spoke that accepts only tokens the fake issued, and helpers to run the provider in-process
(a CredentialEngine with a registry of this plugin only) and as a console script."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cpcreds.config.wire import EXEC_INFO_ENV
from tests.fakes import fixtures as spoke_fixtures
from tests.fakes.azure import AKS_SERVER_ID, FakeEntra, TunnelRecorder
from tests.fakes.registry import FakeRegistry
from tests.fakes.spoke import SpokeServer

from azure_helpers import CLIENT_ID, NODE_CLIENT_ID, PROVIDER  # noqa: E402

pki = spoke_fixtures.pki
make_spoke = spoke_fixtures.make_spoke

#: Variables that would let azure-identity reach something real, or change its choice.
_OUTSIDE = (
    "AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH",
    "AZURE_CLIENT_CERTIFICATE_PASSWORD", "AZURE_FEDERATED_TOKEN_FILE", "AZURE_AUTHORITY_HOST", "AZURE_USERNAME",
    "AZURE_PASSWORD", "AAD_SERVICE_PRINCIPAL_CLIENT_ID", "AAD_SERVICE_PRINCIPAL_CLIENT_SECRET", "IDENTITY_ENDPOINT",
    "IDENTITY_HEADER", "IDENTITY_SERVER_THUMBPRINT", "IMDS_ENDPOINT", "MSI_ENDPOINT", "MSI_SECRET",
    "AZURE_POD_IDENTITY_AUTHORITY_HOST", "AZURE_TOKEN_CREDENTIALS", "AZURE_REGIONAL_AUTHORITY_NAME",
    "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy", "CURL_CA_BUNDLE", EXEC_INFO_ENV,
)


@pytest.fixture
def entra(pki) -> Iterator[FakeEntra]:
    with FakeEntra(pki) as server:
        yield server


@pytest.fixture(autouse=True)
def azure_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, entra: FakeEntra) -> dict[str, str]:
    """Nothing of the machine's (no Azure variables, no proxy, an empty ~/.azure, no ``az``), the
    fake's CA trusted and its authority the one azure-identity uses. Returns what was set."""
    for name in _OUTSIDE:
        monkeypatch.delenv(name, raising=False)
    ca = tmp_path / "entra-ca.pem"
    ca.write_bytes(entra.ca_pem)
    home = tmp_path / "home"
    (home / ".azure").mkdir(parents=True)
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    values = {
        "REQUESTS_CA_BUNDLE": str(ca),
        "AZURE_AUTHORITY_HOST": entra.authority,
        "AZURE_CONFIG_DIR": str(home / ".azure"),
        "HOME": str(home),
        "NO_PROXY": "127.0.0.1,localhost",
        "PATH": f"{empty_bin}{os.pathsep}/usr/bin{os.pathsep}/bin",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


@pytest.fixture
def spoke(make_spoke: Callable[..., SpokeServer], entra: FakeEntra) -> SpokeServer:
    """A cluster that accepts only an unexpired token the fake issued for AKS's server ID."""
    server = make_spoke()
    server.verify_tokens_with(lambda token: entra.verify(token, AKS_SERVER_ID))
    return server


@pytest.fixture
def workload_identity(entra: FakeEntra, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The variables AKS's workload identity webhook injects, with a projected token file the
    fake accepts as the federated identity's assertion. Returns the token file."""
    token = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6ZmxlZXQ6YXJnbyJ9.c2lnbmF0dXJl"
    token_file = tmp_path / "azure-identity-token"
    token_file.write_text(token)
    entra.add_federated(CLIENT_ID, token)
    monkeypatch.setenv("AZURE_CLIENT_ID", CLIENT_ID)
    monkeypatch.setenv("AZURE_TENANT_ID", entra.tenant)
    monkeypatch.setenv("AZURE_FEDERATED_TOKEN_FILE", str(token_file))
    return token_file


@pytest.fixture
def fake_az(tmp_path: Path, entra: FakeEntra, azure_env: dict[str, str]) -> Callable[[str], Path]:
    """``fake_az(answer_json)``: an ``az`` executable first on PATH that prints ``answer_json``
    for ``az account get-access-token`` (and fails otherwise)."""

    def make(answer: str, exit_code: int = 0, stderr: str = "") -> Path:
        script = Path(azure_env["PATH"].split(os.pathsep)[0]) / "az"
        script.write_text(
            f"#!{sys.executable}\nimport sys\nif sys.argv[1:3] != ['account', 'get-access-token']:\n    sys.exit(2)\n"
            f"sys.stdout.write({answer!r})\nsys.stderr.write({stderr!r})\nsys.exit({exit_code})\n"
        )
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
        return script

    return make


@pytest.fixture
def registry(pki, entra: FakeEntra) -> Iterator[FakeRegistry]:
    """A registry fake whose ACR exchange takes the Entra fake's ACR-audience tokens only (its
    ARM-audience authentication disabled), from any identity."""
    with FakeRegistry(pki) as server:
        server.enable_acr_exchange(entra.registry_policy())
        yield server


@pytest.fixture
def tunnels(monkeypatch: pytest.MonkeyPatch) -> Iterator[TunnelRecorder]:
    """An HTTPS_PROXY that records which registry host a plugin tunnels to and lets none through
    (the fakes on 127.0.0.1 stay direct, by NO_PROXY)."""
    with TunnelRecorder() as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        yield proxy


@pytest.fixture
def node_identity(entra: FakeEntra, monkeypatch: pytest.MonkeyPatch) -> str:
    """An AKS node's kubelet identity: a system-assigned managed identity at the IMDS fake (for
    ``--login=msi``). Returns its client ID."""
    entra.add_managed_identity(NODE_CLIENT_ID)
    monkeypatch.setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", entra.imds_authority)
    return NODE_CLIENT_ID


#: ``make_engine(options, timeout="5s")``: an engine whose only provider is ``type: azure`` with
#: these options, from a registry that knows only this plugin (closed after the test);
#: ``run_command(args, input=None, **env)``: a command run with the test's environment minus
#: ``CPCREDS_*``, plus ``env``.
make_engine, run_command = spoke_fixtures.plugin_fixtures("cpcreds_azure.plugin", "azure", PROVIDER)
