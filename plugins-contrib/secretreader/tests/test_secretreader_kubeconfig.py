"""kubeconfig-secretreader in-process: the credentials of a kubeconfig stored in a Secret on the
hub, as the Go kubeconfig-secretreader plugin reads them, refusing what points outside it."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("cpcreds_secretreader", reason="install plugins-contrib/secretreader")

from cpcreds import CredentialEngine, ProviderError  # noqa: E402
from secretreader_helpers import FLEET, entry, profile  # noqa: E402
from tests.fakes.hub import HubServer, secret  # noqa: E402
from tests.fakes.pki import PKI, make_key_pair  # noqa: E402

Engine = Callable[..., CredentialEngine]
PROVIDER = "kubeconfig-secretreader"


def stored_kubeconfig(user: dict[str, Any], *, context: str = "admin@spoke-1", others: dict[str, dict[str, Any]] | None = None) -> str:
    """A spoke kubeconfig as a cluster manager stores it: ``user`` for ``context`` (current)."""
    users = {"admin": user, **(others or {})}
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "spoke-1", "cluster": {"server": "https://spoke-1.example:6443"}}],
            "users": [{"name": name, "user": body} for name, body in users.items()],
            "contexts": [{"name": f"{name}@spoke-1", "context": {"cluster": "spoke-1", "user": name}} for name in users],
            "current-context": context,
        }
    )


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.fixture
def engine(kubeconfig: Path, make_engine: Engine) -> CredentialEngine:
    return make_engine(entry({"kubeconfig": str(kubeconfig)}, name=PROVIDER, type=PROVIDER))


def get(engine: CredentialEngine, **extension: Any) -> Any:
    return engine.get_credential(profile({"name": "spoke-1-kubeconfig", "key": "value", **extension}, provider=PROVIDER))


def error_of(engine: CredentialEngine, **extension: Any) -> str:
    with pytest.raises(ProviderError) as raised:
        get(engine, **extension)
    return str(raised.value).removeprefix(f"provider {PROVIDER}: ")


def test_a_token_user_gives_its_token(hub: HubServer, engine: CredentialEngine) -> None:
    hub.create(secret(FLEET, "spoke-1-kubeconfig", {"value": stored_kubeconfig({"token": "spoke-admin-token"})}))

    credential = get(engine)

    assert credential.token == "spoke-admin-token"
    assert credential.client_certificate_data is None and credential.expiration_timestamp is None


def test_a_certificate_user_gives_its_pem_pair_expiring_with_the_certificate(hub: HubServer, pki: PKI, engine: CredentialEngine) -> None:
    issued = pki.issue_client_cert("spoke-admin", not_after=datetime.now(UTC) + timedelta(hours=5))
    user = {"client-certificate-data": b64(issued.cert_pem), "client-key-data": b64(issued.key_pem)}
    hub.create(secret(FLEET, "spoke-1-kubeconfig", {"value": stored_kubeconfig(user)}))

    credential = get(engine)

    assert (credential.client_certificate_data, credential.client_key_data) == (issued.cert_pem, issued.key_pem)
    assert credential.token is None
    assert credential.expiration_timestamp == issued.not_after


def test_a_user_with_both_gives_both(hub: HubServer, pki: PKI, engine: CredentialEngine) -> None:
    issued = pki.issue_client_cert("spoke-admin")
    user = {"token": "t", "client-certificate-data": b64(issued.cert_pem), "client-key-data": b64(issued.key_pem)}
    hub.create(secret(FLEET, "spoke-1-kubeconfig", {"value": stored_kubeconfig(user)}))
    assert get(engine).kind == "token+client-certificate"


def test_the_extension_picks_the_namespace_and_the_context(hub: HubServer, engine: CredentialEngine) -> None:
    stored = stored_kubeconfig({"token": "admin-token"}, others={"viewer": {"token": "viewer-token"}})
    hub.create(secret("other-team", "spoke-1-kubeconfig", {"value": stored}))

    assert get(engine, namespace="other-team").token == "admin-token"
    assert get(engine, namespace="other-team", context="viewer@spoke-1").token == "viewer-token"


def test_a_json_kubeconfig_is_read_too(hub: HubServer, engine: CredentialEngine) -> None:
    as_json = json.dumps(yaml.safe_load(stored_kubeconfig({"token": "t"})))
    hub.create(secret(FLEET, "spoke-1-kubeconfig", {"value": as_json}))
    assert get(engine).token == "t"


def test_a_pinned_namespace_refuses_a_profile_naming_another(hub: HubServer, kubeconfig: Path, make_engine: Engine) -> None:
    engine = make_engine(entry({"kubeconfig": str(kubeconfig), "namespace": FLEET}, name=PROVIDER, type=PROVIDER))
    hub.create(secret(FLEET, "spoke-1-kubeconfig", {"value": stored_kubeconfig({"token": "t"})}))

    assert get(engine, namespace=FLEET).token == "t"
    assert error_of(engine, namespace="kube-system") == (
        f"the client.authentication.k8s.io/exec extension names namespace kube-system, but this provider reads only namespace {FLEET} (option namespace)"
    )
    assert [r.path.rsplit("/", 3)[-3] for r in hub.requests] == [FLEET]


@pytest.mark.parametrize(
    ("user", "message"),
    [
        ({"tokenFile": "x", "token-file": "/var/run/token"}, " has token-file (a file path), which is not supported: put the token itself in token"),
        ({"client-certificate": "/etc/tls.crt", "client-key-data": "eA=="}, " has client-certificate (a file path), which is not supported: use client-certificate-data"),
        ({"client-certificate-data": "eA==", "client-key": "/etc/tls.key"}, " has client-key (a file path), which is not supported: use client-key-data"),
        (
            {"token": "t", "exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "/bin/sh", "args": ["-c", "rm -rf /"]}},
            " runs an exec plugin, which is not supported: make that plugin an access provider of the ClusterProfile instead",
        ),
        ({"auth-provider": {"name": "oidc", "config": {}}}, " uses an auth-provider, which is not supported: store a token or a client certificate"),
        ({"username": "admin", "password": "hunter2"}, " has neither a token nor client-certificate-data and client-key-data (username/password is not supported)"),
        ({}, " has neither a token nor client-certificate-data and client-key-data"),
        ({"client-certificate-data": b64("-----BEGIN CERTIFICATE-----")}, " has client-certificate-data but no client-key-data"),
        ({"client-key-data": "not base64!"}, ": client-key-data is not base64-encoded PEM"),
        ({"token": "two\nlines"}, " token holds more than one line; a token is one line"),
    ],
)
def test_what_a_kubeconfig_user_points_at_is_refused_with_what_to_use_instead(
    hub: HubServer, engine: CredentialEngine, user: dict[str, Any], message: str
) -> None:
    hub.create(secret(FLEET, "spoke-1-kubeconfig", {"value": stored_kubeconfig(user)}))
    assert error_of(engine) == f"Secret {FLEET}/spoke-1-kubeconfig data.value user 'admin'{message}"


def test_a_key_that_is_not_the_certificates_is_an_error(hub: HubServer, pki: PKI, engine: CredentialEngine) -> None:
    issued = pki.issue_client_cert("spoke-admin")
    _, other_key, _ = make_key_pair()
    user = {"client-certificate-data": b64(issued.cert_pem), "client-key-data": b64(other_key)}
    hub.create(secret(FLEET, "spoke-1-kubeconfig", {"value": stored_kubeconfig(user)}))
    assert error_of(engine) == (
        f"Secret {FLEET}/spoke-1-kubeconfig data.value: clientKeyData does not match the first certificate of clientCertificateData"
    )


def test_an_expired_certificate_is_an_error(hub: HubServer, pki: PKI, engine: CredentialEngine) -> None:
    issued = pki.issue_client_cert("spoke-admin", not_before=datetime(2020, 1, 1, tzinfo=UTC), not_after=datetime(2021, 1, 1, tzinfo=UTC))
    user = {"client-certificate-data": b64(issued.cert_pem), "client-key-data": b64(issued.key_pem)}
    hub.create(secret(FLEET, "spoke-1-kubeconfig", {"value": stored_kubeconfig(user)}))
    assert error_of(engine) == f"Secret {FLEET}/spoke-1-kubeconfig data.value: the client certificate expired at 2021-01-01T00:00:00Z"


@pytest.mark.parametrize(
    ("stored", "extension", "message"),
    [
        (stored_kubeconfig({"token": "t"}), {"context": "absent"}, "data.value: context 'absent' not found in the kubeconfig"),
        (stored_kubeconfig({"token": "t"}, context=""), {}, "data.value: no context given and the kubeconfig has no current-context"),
        (stored_kubeconfig({"token": "t"}, context="ghost@spoke-1"), {}, "data.value: context 'ghost@spoke-1' not found in the kubeconfig"),
        ("apiVersion: v1\nkind: Secret\n", {}, "data.value is not a kubeconfig"),
        ("users: [\n", {}, "data.value is not a kubeconfig: "),
        ("contexts: {a: 1}\ncurrent-context: a\n", {}, "data.value: contexts is not a list"),
    ],
)
def test_a_kubeconfig_that_does_not_lead_to_a_user_is_named(
    hub: HubServer, engine: CredentialEngine, stored: str, extension: dict[str, Any], message: str
) -> None:
    hub.create(secret(FLEET, "spoke-1-kubeconfig", {"value": stored}))
    assert error_of(engine, **extension).startswith(f"Secret {FLEET}/spoke-1-kubeconfig {message}")


@pytest.mark.parametrize(
    ("extension", "message"),
    [
        ({"name": None}, "missing name in the client.authentication.k8s.io/exec extension"),
        ({"key": ""}, "missing key in the client.authentication.k8s.io/exec extension"),
        ({"name": 7}, "name in the client.authentication.k8s.io/exec extension is not a string"),
        ({"name": "../x"}, "name '../x' in the client.authentication.k8s.io/exec extension is not a Secret name"),
        ({"key": "a b"}, "key 'a b' in the client.authentication.k8s.io/exec extension is not a Secret data key"),
        ({"namespace": "Kube System"}, "namespace 'Kube System' in the client.authentication.k8s.io/exec extension is not a namespace name"),
        ({"context": ["x"]}, "context in the client.authentication.k8s.io/exec extension is not a context name"),
    ],
)
def test_a_bad_extension_is_an_error_before_any_request(hub: HubServer, engine: CredentialEngine, extension: dict[str, Any], message: str) -> None:
    assert error_of(engine, **extension) == message
    assert hub.requests == []


def test_a_missing_secret_is_named(hub: HubServer, engine: CredentialEngine) -> None:
    assert error_of(engine) == f"Secret {FLEET}/spoke-1-kubeconfig not found on the hub {hub.url}"


def test_a_missing_key_is_named(hub: HubServer, engine: CredentialEngine) -> None:
    hub.create(secret(FLEET, "spoke-1-kubeconfig", {"kubeconfig": stored_kubeconfig({"token": "t"})}))
    assert error_of(engine) == f"Secret {FLEET}/spoke-1-kubeconfig has no data.value (its keys: kubeconfig)"


def test_secretreader_options_are_not_kubeconfig_secretreader_options(make_engine: Engine) -> None:
    from cpcreds import ConfigError

    with pytest.raises(ConfigError, match="field options.secretName: is not a known field"):
        make_engine(entry({"secretName": "{clusterName}"}, name=PROVIDER, type=PROVIDER))
