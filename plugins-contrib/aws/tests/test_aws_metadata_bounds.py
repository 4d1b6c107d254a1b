"""What the instance metadata service and the container credentials endpoint answer is read
within bounds: an answer without end is cut at once (the fake sees the client hang up long before
its own cap), and keys that expire soon, or have expired, never sign a token said to outlive them."""

from __future__ import annotations

import logging
from datetime import datetime, timezone

import pytest

pytest.importorskip("cpcreds_aws", reason="install plugins-contrib/aws")

from cpcreds import CredentialError  # noqa: E402

from aws_helpers import CLUSTER, profile  # noqa: E402


@pytest.fixture
def imds(metadata, monkeypatch):
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "false")
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", metadata.url)
    return metadata


@pytest.fixture
def container(metadata, monkeypatch):
    monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", metadata.container_url)
    monkeypatch.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", metadata.container_authorization)
    return metadata


@pytest.mark.parametrize(("source", "endpoint"), [("imds", "imds-token"), ("imds", "imds-credentials"), ("container", "container")])
def test_an_answer_without_end_is_cut_at_once(request, spoke, make_engine, source, endpoint) -> None:
    server = request.getfixturevalue(source)
    server.fail(endpoint, status=200, endless=True, times=3)
    with pytest.raises(CredentialError) as caught:
        make_engine(timeout="3s").get_credential(profile(spoke))
    assert "\n" not in str(caught.value)
    # The client hung up: it did not read on until the fake's cap (64 MiB; what the kernel's
    # socket buffers hold besides is a few MiB on loopback).
    sent = server.sent(endpoint)
    assert sent.hung_up and not sent.capped
    assert sent.bytes < 32 * 1024 * 1024


def test_an_oversized_container_answer_names_the_endpoint(container, spoke, make_engine) -> None:
    container.fail("container", status=200, endless=True)
    with pytest.raises(CredentialError, match="container credentials endpoint"):
        make_engine(timeout="3s").get_credential(profile(spoke))


@pytest.mark.parametrize("source", ["imds", "container"])
def test_a_token_never_outlives_the_keys_that_signed_it(request, aws, spoke, make_engine, source) -> None:
    server = request.getfixturevalue(source)
    server.token_lifetime = 300  # keys with five minutes left; the token alone would say 14
    credential = make_engine().get_credential(profile(spoke))
    keys = server.handed_out[-1]
    assert keys.expires_at is not None and credential.expiration_timestamp is not None
    assert credential.expiration_timestamp <= keys.expires_at
    assert aws.authenticator(CLUSTER)(credential.token)


def test_expired_instance_keys_sign_nothing_and_say_so(imds, spoke, make_engine, caplog) -> None:
    caplog.set_level(logging.WARNING)
    imds.token_lifetime = -600  # IMDS answering keys that expired ten minutes ago (static stability)
    with pytest.raises(CredentialError) as caught:
        make_engine().get_credential(profile(spoke))
    [keys] = imds.handed_out[-1:]
    assert keys.expires_at is not None and keys.expires_at < datetime.now(timezone.utc)
    assert "expired" in str(caught.value) and "instance metadata service" in str(caught.value)
    assert keys.secret_key not in str(caught.value) and keys.token not in str(caught.value)
    assert any("expired" in record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING)
    assert keys.secret_key not in caplog.text


@pytest.mark.parametrize(("source", "endpoint"), [("imds", "imds-credentials"), ("container", "container")])
def test_an_abandoned_fetch_stops_reading(request, spoke, make_engine, source, endpoint) -> None:
    server = request.getfixturevalue(source)
    server.trickle(endpoint, seconds=60)  # each wait far shorter than botocore's socket timeouts
    with pytest.raises(CredentialError):
        make_engine(timeout="3s").get_credential(profile(spoke))
    # The client shut the connection (at its deadline), long before the fake's 60 s were up.
    assert server.sent(endpoint, timeout=120).hung_up
