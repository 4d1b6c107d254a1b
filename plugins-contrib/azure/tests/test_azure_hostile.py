"""Hostile cloud answers through the in-process provider: errors, throttling, slow endpoints past
the plan's timeout, malformed and oversized JSON, echoed secrets. Each is a one-line error within
the plan's timeout, naming the endpoint and never a secret."""

from __future__ import annotations

import time

import pytest

from cpcreds import CredentialError
from tests.fakes.azure import Fault

from azure_helpers import CLIENT_ID, SECRET, profile


@pytest.fixture
def spn(entra, make_engine):
    entra.add_secret(CLIENT_ID, SECRET)

    def make(timeout: str = "2s"):
        return make_engine({"login": "spn", "clientId": CLIENT_ID, "tenantId": entra.tenant, "clientSecret": SECRET,
                            "disableInstanceDiscovery": True}, timeout=timeout)

    return make


def _failure(engine, spoke) -> tuple[str, float]:
    started = time.monotonic()
    with pytest.raises(CredentialError) as caught:
        engine.get_credential(profile(spoke))
    message = str(caught.value)
    assert "\n" not in message and SECRET not in message and "Qx7Qx7" not in message
    chain = caught.value.__cause__ or caught.value.__context__
    assert chain is None or SECRET not in repr(chain)
    return message, time.monotonic() - started


@pytest.mark.parametrize(
    "fault, expected",
    [
        (Fault(status=500, body={"error": "server_error", "error_description": "AADSTS90033: busy"}, headers=(("Retry-After", "0"),)), "HTTP 500 (server_error AADSTS90033)"),
        (Fault(status=400, body=b"{not json"), "HTTP 400"),
        (Fault(status=200, body=b"{not json"), "answered without a usable token"),
        (Fault(status=200, body={"token_type": "Bearer", "expires_in": 3600}), "answered without a usable token"),
        (Fault(status=400, echo=True), "HTTP 400 (invalid_request)"),
    ],
    ids=["server-error", "bad-json-error", "bad-json-200", "no-token", "echo"],
)
def test_a_bad_answer_is_one_line(entra, spoke, spn, fault, expected) -> None:
    # Server errors are retried while time is left: every attempt gets the fault.
    entra.fail("token", *[fault] * 3)
    message, _ = _failure(spn(), spoke)
    assert expected in message and "Entra ID token endpoint" in message


def test_throttling_is_retried_after_its_retry_after_then_succeeds(entra, spoke, spn) -> None:
    entra.fail("token", Fault(status=429, body={"error": "throttled"}, headers=(("Retry-After", "0"),)))
    assert entra.verify(spn(timeout="5s").get_credential(profile(spoke)).token)


def test_throttling_past_the_timeout_is_reported_as_throttled(entra, spoke, spn) -> None:
    entra.fail("token", Fault(status=429, body={"error": "throttled"}, headers=(("Retry-After", "30"),)))
    message, took = _failure(spn(timeout="5s"), spoke)
    assert "HTTP 429 (throttled)" in message and took < 5


@pytest.mark.parametrize("hang", ["headers", "body"])
def test_a_slow_endpoint_fails_within_the_timeout(entra, spoke, spn, hang) -> None:
    entra.fail("token", Fault(status=200, body={"access_token": "x"}, hang=hang))
    # 3 s: the provider's own error comes 0.6 s before the engine's timeout, room for a loaded machine.
    message, took = _failure(spn(timeout="3s"), spoke)
    assert "3s timeout" in message and took < 3 + 1.5


def test_an_endless_answer_is_cut_off(entra, spoke, spn) -> None:
    entra.fail("token", Fault(status=200, endless=True))
    message, took = _failure(spn(timeout="3s"), spoke)
    assert "more than 1024 KiB" in message and took < 3


def test_a_slow_openid_configuration_is_named(entra, spoke, spn) -> None:
    entra.fail("openid", Fault(status=200, hang="headers"))
    message, _ = _failure(spn(timeout="3s"), spoke)  # 0.6 s for the provider's own error to win
    assert "Entra ID OpenID configuration" in message


def test_an_unreachable_authority_is_named(spoke, make_engine, entra) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        address = f"https://127.0.0.1:{sock.getsockname()[1]}"
        engine = make_engine({"login": "spn", "clientId": CLIENT_ID, "tenantId": entra.tenant, "clientSecret": SECRET,
                              "authorityHost": address, "disableInstanceDiscovery": True}, timeout="2s")
        message, _ = _failure(engine, spoke)
    assert "connection refused" in message


def test_msi_endpoint_refusing_the_header_is_one_line(entra, spoke, make_engine, monkeypatch) -> None:
    entra.add_managed_identity(CLIENT_ID)
    monkeypatch.setenv("IDENTITY_ENDPOINT", entra.identity_endpoint)
    monkeypatch.setenv("IDENTITY_HEADER", "wrong-" + SECRET)
    message, _ = _failure(make_engine({"login": "msi"}, timeout="2s"), spoke)
    assert "managed identity" in message or "HTTP 401" in message


@pytest.mark.parametrize(
    "fault, expected",
    [
        (Fault(status=200, hang="headers"), "did not answer within the 5s timeout"),
        (Fault(status=200, body=b"<html>not json</html>"), "managed identity endpoint (IMDS)"),
        (Fault(status=500, body={"error": "unknown_error"}), "HTTP 500 (unknown_error)"),
    ],
    ids=["hanging", "not-json", "server-error"],
)
def test_a_hostile_instance_metadata_service_is_one_line_within_the_timeout(entra, spoke, make_engine, monkeypatch, fault, expected) -> None:
    entra.add_managed_identity(CLIENT_ID)
    monkeypatch.setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", entra.imds_authority)
    entra.fail("imds", *[fault] * 3)
    # 5 s: a hang's own error must come in the last fifth of the timeout, before the engine's
    # (2 s leaves 0.4 s, too little on a loaded machine).
    message, took = _failure(make_engine({"login": "msi"}, timeout="5s"), spoke)
    assert expected in message and took < 5 + 1.5


def test_a_missing_federated_token_file_is_named(spoke, make_engine, entra, tmp_path) -> None:
    engine = make_engine({"login": "workloadidentity", "clientId": CLIENT_ID, "tenantId": entra.tenant,
                          "federatedTokenFile": str(tmp_path / "absent"), "disableInstanceDiscovery": True})
    message, _ = _failure(engine, spoke)
    assert "workload identity" in message


def test_a_missing_tenant_is_named(spoke, make_engine, monkeypatch) -> None:
    message, _ = _failure(make_engine({"login": "spn", "clientId": CLIENT_ID, "clientSecret": SECRET}), spoke)
    assert "tenantId" in message and "AZURE_TENANT_ID" in message
