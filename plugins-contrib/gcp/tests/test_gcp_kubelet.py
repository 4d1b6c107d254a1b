"""The gcp provider as a kubelet image credential provider plugin (KEP-2133): the
``cpcreds-gcp-credential-provider`` console script run as the kubelet runs it, and
``GcpProvider.get_image_credential`` in-process, against the local Google fakes (the metadata
server, the OAuth token endpoint); the token it answers with opens a registry that trusts it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests

pytest.importorskip("cpcreds_gcp", reason="install plugins-contrib/gcp")

from cpcreds import ProviderError  # noqa: E402
from cpcreds.images.protocol import API_VERSION_V1, SUPPORTED_API_VERSIONS  # noqa: E402
from cpcreds.sdk import AuthConfig, CredentialProviderRequest, encode_request, parse_duration, parse_response  # noqa: E402
from cpcreds_gcp import GcpProvider  # noqa: E402
from cpcreds_gcp.kubelet import GOOGLE_REGISTRIES, USERNAME  # noqa: E402
from tests.fakes.fixtures import command_runner  # noqa: E402
from tests.fakes.google import FakeMetadataServer  # noqa: E402
from tests.fakes.registry import FakeRegistry  # noqa: E402

KUBELET_PLUGIN = Path(sys.executable).with_name("cpcreds-gcp-credential-provider")
IMAGE = "us-docker.pkg.dev/fleet-project/apps/checkout@sha256:" + "0" * 64


_run = command_runner()


def run_plugin(stdin: bytes, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run the console script as the kubelet does: request on stdin, environment as configured."""
    return _run([KUBELET_PLUGIN, *args], input=stdin.decode(), **env)


@pytest.mark.parametrize("api_version", SUPPORTED_API_VERSIONS)
def test_the_metadata_servers_token_answers_for_googles_registries(metadata: FakeMetadataServer, api_version: str) -> None:
    result = run_plugin(encode_request(IMAGE, api_version), GCE_METADATA_HOST=metadata.host)
    assert result.returncode == 0, result.stderr
    [issued] = metadata.issued
    response = parse_response(result.stdout, api_version)
    assert list(response.auth) == ["container.cloud.google.com", "gcr.io", "*.gcr.io", "*.pkg.dev"] == list(GOOGLE_REGISTRIES)
    assert set(response.auth.values()) == {AuthConfig(USERNAME, issued.token)}
    assert response.cache_key_type == "Registry"
    # The token lives 3599 s; it is reused until the provider's refresh window (its last 5 minutes).
    assert 3299 - 10 <= response.cache_duration <= 3299
    assert parse_duration(json.loads(result.stdout)["cacheDuration"]) == response.cache_duration


def test_a_service_account_key_is_exchanged_at_the_token_endpoint(google, sa_key, write_json) -> None:
    key_file = write_json(google.service_account_info(sa_key))
    result = run_plugin(encode_request("eu.gcr.io/fleet-project/app:1", API_VERSION_V1), GOOGLE_APPLICATION_CREDENTIALS=str(key_file))
    assert result.returncode == 0, result.stderr
    [issued] = google.issued
    assert issued.grant == "jwt-bearer" and issued.principal == sa_key.email
    assert parse_response(result.stdout, API_VERSION_V1).auth["*.gcr.io"] == AuthConfig(USERNAME, issued.token)


def test_options_are_the_kubelet_configs_args(google, sa_key, write_json) -> None:
    key_file = write_json(google.service_account_info(sa_key))
    scope = "https://www.googleapis.com/auth/devstorage.read_only"
    result = run_plugin(encode_request("gcr.io/p/app", API_VERSION_V1), f"--credentials-file={key_file}", f"--scopes={scope}")
    assert result.returncode == 0, result.stderr
    assert google.issued[0].scopes == (scope,)


def test_the_token_opens_a_registry_that_trusts_google(metadata: FakeMetadataServer, pki, tmp_path: Path) -> None:
    result = run_plugin(encode_request(IMAGE, API_VERSION_V1), GCE_METADATA_HOST=metadata.host)
    assert result.returncode == 0, result.stderr
    auth = parse_response(result.stdout, API_VERSION_V1).auth["*.pkg.dev"]
    ca = tmp_path / "registry-ca.pem"
    ca.write_bytes(pki.ca_pem)
    # The registry accepts exactly the tokens Google issued, with Google's username.
    with FakeRegistry(pki, users={USERNAME: token.token for token in metadata.issued}) as registry:
        assert requests.get(f"{registry.url}/v2/", verify=str(ca), timeout=10).status_code == 401
        assert requests.get(f"{registry.url}/v2/", auth=(auth.username, auth.password), verify=str(ca), timeout=10).status_code == 200
        assert requests.get(f"{registry.url}/v2/", auth=("_token", auth.password), verify=str(ca), timeout=10).status_code == 401


def test_a_refused_token_request_is_one_line_without_the_answer(metadata: FakeMetadataServer) -> None:
    metadata.fail("token", status=503, body=b"ya29.leaked-in-an-error-body")
    result = run_plugin(encode_request(IMAGE, API_VERSION_V1), GCE_METADATA_HOST=metadata.host)
    assert result.returncode == 1 and result.stdout == ""
    line = result.stderr
    assert line.count("\n") == 1 and "ya29" not in line
    assert line.startswith("cpcreds-gcp-credential-provider: provider gcp: gcp: metadata server ")
    assert line.rstrip().endswith("/default/token answered HTTP 503")


def test_a_hanging_metadata_server_fails_within_the_timeout(metadata: FakeMetadataServer) -> None:
    metadata.fail("token", hang="headers")
    began = time.monotonic()
    result = run_plugin(encode_request(IMAGE, API_VERSION_V1), GCE_METADATA_HOST=metadata.host, CPCREDS_DEFAULT_TIMEOUT="1s")
    assert result.returncode == 1 and result.stdout == ""
    assert "metadata server" in result.stderr
    assert time.monotonic() - began < 15


def test_no_credentials_anywhere_is_said_in_one_line(no_outside_credentials) -> None:
    result = run_plugin(encode_request(IMAGE, API_VERSION_V1))
    assert result.returncode == 1
    assert "found no application default credentials" in result.stderr and result.stderr.count("\n") == 1


# -- in-process -----------------------------------------------------------------------------------


@contextmanager
def provider_on_metadata_server(monkeypatch, token_lifetime: int) -> Iterator[tuple[GcpProvider, FakeMetadataServer]]:
    """A GcpProvider whose application default credentials are a fresh metadata server's tokens."""
    with FakeMetadataServer(token_lifetime=token_lifetime) as server:
        monkeypatch.setenv("GCE_METADATA_HOST", server.host)
        provider = GcpProvider({})
        try:
            yield provider, server
        finally:
            provider.close()


def test_in_process_the_held_token_is_reused_until_its_refresh_window(monkeypatch) -> None:
    with provider_on_metadata_server(monkeypatch, token_lifetime=3599) as (provider, server):
        first = provider.get_image_credential(CredentialProviderRequest(IMAGE), timeout=5)
        second = provider.get_image_credential(CredentialProviderRequest("gcr.io/p/other"), timeout=5)
        [issued] = server.issued
    assert first.auth["gcr.io"].password == second.auth["gcr.io"].password == issued.token


def test_in_process_a_token_inside_its_refresh_window_is_not_cached(monkeypatch) -> None:
    # A 40 s token is refreshed in its last 20 s: 20 s of cache at most, then a new token.
    with provider_on_metadata_server(monkeypatch, token_lifetime=40) as (provider, _):
        response = provider.get_image_credential(CredentialProviderRequest(IMAGE), timeout=5)
    assert 0 < response.cache_duration <= 20


def test_in_process_failures_are_provider_errors(metadata: FakeMetadataServer, monkeypatch) -> None:
    monkeypatch.setenv("GCE_METADATA_HOST", metadata.host)
    metadata.fail("token", status=403, body=b"{}")
    provider = GcpProvider({})
    try:
        with pytest.raises(ProviderError, match="answered HTTP 403$"):
            provider.get_image_credential(CredentialProviderRequest(IMAGE), timeout=5)
    finally:
        provider.close()


def test_the_provider_offers_the_image_contract() -> None:
    from cpcreds.sdk import ImageCredentialProvider, Provider

    provider = GcpProvider({})
    assert isinstance(provider, ImageCredentialProvider) and isinstance(provider, Provider)


# -- docs/providers-gcp.md ----------------------------------------------------------------------


def test_the_docs_console_example_runs_as_shown(metadata: FakeMetadataServer) -> None:
    page = Path(__file__).resolve().parents[3] / "docs" / "providers-gcp.md"
    lines = page.read_text(encoding="utf-8").splitlines()
    [command_at] = [i for i, line in enumerate(lines) if line.startswith("$ echo ") and "cpcreds-gcp-credential-provider" in line]
    command, shown = lines[command_at], json.loads(lines[command_at + 1])
    request = command.split("'")[1]
    result = run_plugin(request.encode(), GCE_METADATA_HOST=metadata.host)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    [issued] = metadata.issued
    # The same document, but for the token and, within a few seconds of the page's, the duration.
    assert parse_duration(shown["cacheDuration"]) - 5 <= parse_duration(answer.pop("cacheDuration")) <= parse_duration(shown.pop("cacheDuration"))
    for auth in shown["auth"].values():
        auth["password"] = issued.token
    assert answer == shown


def test_in_process_concurrent_image_requests_share_one_token(monkeypatch) -> None:
    import threading

    with FakeMetadataServer() as server:
        monkeypatch.setenv("GCE_METADATA_HOST", server.host)
        provider = GcpProvider({})
        start = threading.Barrier(16)
        answers: list[str] = []

        def ask(index: int) -> None:
            start.wait()
            response = provider.get_image_credential(CredentialProviderRequest(f"gcr.io/p/app-{index}"), timeout=10)
            answers.append(response.auth["gcr.io"].password)

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(16)]
        try:
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(30)
        finally:
            provider.close()
        [issued] = server.issued
    assert answers == [issued.token] * 16
