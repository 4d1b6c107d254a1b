"""Hostile inputs: whatever a Secret, a stored kubeconfig, a token or the hub's answer holds, the
providers answer a credential or one ProviderError naming the Secret, never another exception,
never a value of the Secret in the message, never a hang or an unbounded read."""

from __future__ import annotations

import base64
import json
import math
import string
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("cpcreds_secretreader", reason="install plugins-contrib/secretreader")

from cpcreds import CredentialEngine, ProviderError  # noqa: E402
from cpcreds_secretreader.hub import MAX_SECRET_BYTES  # noqa: E402
from cpcreds_secretreader.jwt import jwt_expiry  # noqa: E402
from cpcreds_secretreader.kubeconfig import KubeconfigUser, kubeconfig_user  # noqa: E402
from cpcreds_secretreader.secret import SecretContentError, bearer_token, data_value  # noqa: E402
from secretreader_helpers import FLEET, cluster, entry  # noqa: E402
from tests.fakes.hub import HubServer, secret  # noqa: E402

Engine = Callable[..., CredentialEngine]
SECRET_PATH = f"/api/v1/namespaces/{FLEET}/secrets/spoke-1"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt_with(payload: bytes) -> str:
    return f"{b64url(b'{}')}.{b64url(payload)}.{b64url(b'sig')}"


# -- JWT exp ----------------------------------------------------------------------------------------


@given(st.text(max_size=300))
def test_jwt_expiry_of_any_text_is_none_or_an_aware_datetime(token: str) -> None:
    result = jwt_expiry(token)
    assert result is None or result.tzinfo is not None


@given(json_values)
def test_jwt_expiry_of_any_json_payload_never_raises(claims: Any) -> None:
    result = jwt_expiry(jwt_with(json.dumps(claims).encode()))
    assert result is None or result.tzinfo is not None


@given(st.binary(max_size=200))
def test_jwt_expiry_of_any_payload_bytes_never_raises(payload: bytes) -> None:
    result = jwt_expiry(jwt_with(payload))
    assert result is None or result.tzinfo is not None


@given(st.integers(min_value=0, max_value=253_402_300_799) | st.floats(min_value=0, max_value=253_402_300_799, allow_nan=False))
def test_a_numeric_exp_in_range_is_the_expiry(exp: float) -> None:
    assert jwt_expiry(jwt_with(json.dumps({"exp": exp}).encode())) == datetime.fromtimestamp(exp, timezone.utc)


@pytest.mark.parametrize(
    "payload",
    [
        b'{"exp": "1700000000"}',
        b'{"exp": true}',
        b'{"exp": null}',
        b'{"exp": [1700000000]}',
        b'{"exp": NaN}',
        b'{"exp": Infinity}',
        b'{"exp": 1e999}',
        b'{"exp": -1e300}',
        b'{"exp": 99999999999999999999}',
        b'{"exp": ' + b"9" * 5000 + b"}",
        b"[" * 100_000,
        b'{"exp": 1700000000',
        b"\xff\xfe",
        b"[]",
    ],
)
def test_an_unusable_exp_is_no_expiry(payload: bytes) -> None:
    assert jwt_expiry(jwt_with(payload)) is None


def test_a_jwt_too_long_to_be_one_is_not_parsed() -> None:
    assert jwt_expiry(jwt_with(json.dumps({"exp": 4_102_444_800, "pad": "x" * 70_000}).encode())) is None


# -- Secret data and tokens -------------------------------------------------------------------------


@given(st.dictionaries(st.sampled_from(["token", "other", "a/b"]), json_values, max_size=3) | json_values)
def test_any_data_field_is_a_value_or_a_secret_content_error(data: Any) -> None:
    try:
        value = data_value({"data": data}, "token", "Secret ns/x")
    except SecretContentError as exc:
        assert str(exc).startswith("Secret ns/x ")
    else:
        assert isinstance(value, bytes) and value


@given(st.binary(max_size=200))
def test_any_bytes_are_a_token_or_an_error_that_does_not_quote_them(raw: bytes) -> None:
    try:
        token = bearer_token(raw, "Secret ns/x data.token")
    except SecretContentError as exc:
        message = str(exc)
        assert message.startswith("Secret ns/x data.token ")
        stripped = raw.decode("utf-8", "replace").strip()
        if len(stripped) >= 4:
            assert stripped not in message
    else:
        assert token and all(33 <= ord(ch) <= 126 for ch in token)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("line-one\nline-two", "holds more than one line; a token is one line"),
        ("carriage\rreturn", "holds more than one line; a token is one line"),
        ("with space", "is not a bearer token (only visible ASCII characters, no spaces)"),
        ("tab\tinside", "is not a bearer token (only visible ASCII characters, no spaces)"),
        ("nul\x00byte", "is not a bearer token (only visible ASCII characters, no spaces)"),
        ("héllo", "is not a bearer token (only visible ASCII characters, no spaces)"),
        (" \n\t ", "is empty"),
        ("x" * 70_000, "is longer than 64 KiB; not a bearer token"),
    ],
)
def test_a_token_that_cannot_be_a_header_is_refused_without_quoting_it(value: str, reason: str) -> None:
    with pytest.raises(SecretContentError) as raised:
        bearer_token(value.encode(), "Secret ns/x data.token")
    assert str(raised.value) == f"Secret ns/x data.token {reason}"


# -- stored kubeconfigs -----------------------------------------------------------------------------

kubeconfig_keys = st.sampled_from(["users", "contexts", "current-context", "user", "context", "name", "token", "exec", "client-certificate-data", "client-key-data", "kind"])
kubeconfig_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet=string.ascii_letters + "@-", max_size=10),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(kubeconfig_keys, children, max_size=5),
    max_leaves=25,
)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(kubeconfig_like)
def test_any_kubeconfig_shaped_document_is_a_user_or_a_secret_content_error(document: Any) -> None:
    try:
        user = kubeconfig_user(yaml.safe_dump(document).encode(), context=None, what="Secret ns/k data.value")
    except SecretContentError as exc:
        assert str(exc).startswith("Secret ns/k data.value")
    else:
        assert isinstance(user, KubeconfigUser) and (user.token or user.client_certificate_data)


@given(st.binary(max_size=300))
def test_any_bytes_as_a_kubeconfig_are_a_user_or_a_secret_content_error(data: bytes) -> None:
    try:
        kubeconfig_user(data, context=None, what="Secret ns/k data.value")
    except SecretContentError as exc:
        assert str(exc).startswith("Secret ns/k data.value")


@pytest.mark.parametrize(
    "document",
    [
        b"a: &a [" + b",".join([b"*a"] * 50) + b"]\n" + b"".join(b"l%d: &l%d [*l%d,*l%d,*l%d,*l%d]\n" % (i + 1, i + 1, i, i, i, i) for i in range(20)),
        b"[" * 50_000 + b"]" * 50_000,
        b"!!python/object/apply:os.system ['true']",
        b"users: []\nusers: []\n",
    ],
)
def test_hostile_yaml_in_a_stored_kubeconfig_is_refused_quickly(document: bytes) -> None:
    with pytest.raises(SecretContentError, match="^Secret ns/k data.value is not a kubeconfig"):
        kubeconfig_user(document, context=None, what="Secret ns/k data.value")


# -- what the hub sends ------------------------------------------------------------------------------


@pytest.fixture
def engine(kubeconfig: Path, make_engine: Engine) -> CredentialEngine:
    return make_engine(entry({"kubeconfig": str(kubeconfig)}))


def error_of(engine: CredentialEngine) -> str:
    with pytest.raises(ProviderError) as raised:
        engine.get_credential(cluster("spoke-1"))
    return str(raised.value).removeprefix("provider secretreader: ")


@pytest.mark.parametrize(
    "body",
    [b"", b"<html>502 Bad Gateway</html>", b"[]", b'"a string"', b"null", b"{" * 200_000, b"[" * 200_000, b"\xff" * 100, b'{"data": NaN'],
)
def test_a_hub_answer_that_is_not_a_secret_is_named(hub: HubServer, engine: CredentialEngine, body: bytes) -> None:
    hub.inject_answer(SECRET_PATH, 200, body)
    message = error_of(engine)
    assert message in (
        f"the hub {hub.url} answered for Secret {FLEET}/spoke-1 with something that is not a Secret",
        f"Secret {FLEET}/spoke-1 has no data.token",
    )


@pytest.mark.parametrize("chunked", [False, True])
def test_a_hub_answer_larger_than_a_secret_can_be_is_cut(hub: HubServer, engine: CredentialEngine, chunked: bool) -> None:
    hub.inject_answer(SECRET_PATH, 200, b'{"data": {"token": "' + b"A" * (MAX_SECRET_BYTES + 10) + b'"}}', chunked=chunked)
    assert error_of(engine) == f"the hub's answer for Secret {FLEET}/spoke-1 is larger than {MAX_SECRET_BYTES // 1024} KiB"


def test_a_huge_error_answer_is_cut_and_not_quoted(hub: HubServer, engine: CredentialEngine) -> None:
    hub.inject_answer(SECRET_PATH, 500, b"token=hunter2 " * 100_000, content_type="text/plain", chunked=True)
    assert error_of(engine) == f"the hub {hub.url} answered HTTP 500 reading Secret {FLEET}/spoke-1"


@pytest.mark.parametrize("status", [302, 409, 429, 500, 503])
def test_other_statuses_are_named_without_the_hubs_words(hub: HubServer, engine: CredentialEngine, status: int) -> None:
    hub.inject_answer(SECRET_PATH, status, b'{"kind":"Status","message":"token=hunter2"}')
    message = error_of(engine)
    assert message == f"the hub {hub.url} answered HTTP {status} reading Secret {FLEET}/spoke-1"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("just a string", "has a malformed data field (not a map)"),
        ({"token": 12345}, "data.token is not base64 text"),
        ({"token": "!!!not base64!!!"}, "data.token is not valid base64"),
        ({"token": base64.b64encode(b"\xff\xfe\xfd").decode()}, "data.token is not UTF-8 text"),
        ({"token": base64.b64encode(b"secret-one\nsecret-two").decode()}, "data.token holds more than one line; a token is one line"),
    ],
)
def test_a_malformed_secret_is_named_and_its_value_is_not_shown(hub: HubServer, engine: CredentialEngine, data: Any, message: str) -> None:
    hub.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "spoke-1", "namespace": FLEET}, "data": data})
    shown = error_of(engine)
    assert shown == f"Secret {FLEET}/spoke-1 {message}"
    assert "secret-one" not in shown


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(value=st.binary(min_size=1, max_size=64))
def test_any_stored_token_bytes_give_a_credential_or_a_provider_error(hub: HubServer, kubeconfig: Path, make_engine: Engine, value: bytes) -> None:
    hub.put(secret(FLEET, "spoke-1", {"token": value}))
    # A new engine per example: the last one's cached credential or backoff must not answer.
    engine = make_engine(entry({"kubeconfig": str(kubeconfig)}))
    try:
        credential = engine.get_credential(cluster("spoke-1"))
    except ProviderError as exc:
        assert str(exc).startswith(f"provider secretreader: Secret {FLEET}/spoke-1 data.token ")
    else:
        assert credential.token == value.decode().strip()
    finally:
        engine.close()


def test_the_exp_of_a_stored_jwt_bounds_the_cache_even_when_its_claims_are_odd(hub: HubServer, engine: CredentialEngine) -> None:
    token = jwt_with(json.dumps({"exp": 4_102_444_800.5, "aud": ["a"] * 100, "nested": [[[[{}]]]]}).encode())
    hub.create(secret(FLEET, "spoke-1", {"token": token}))
    expiry = engine.get_credential(cluster("spoke-1")).expiration_timestamp
    assert expiry is not None and math.isclose(expiry.timestamp(), 4_102_444_800.5)


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_not_followed(hub: HubServer, engine: CredentialEngine, status: int) -> None:
    # Followed, it would answer another Secret's token (the bearer token goes along on one host).
    hub.create(secret(FLEET, "elsewhere", {"token": "t-elsewhere"}))
    hub.inject_answer(SECRET_PATH, status, b"", headers={"Location": f"/api/v1/namespaces/{FLEET}/secrets/elsewhere"})
    assert error_of(engine) == f"the hub {hub.url} answered HTTP {status} reading Secret {FLEET}/spoke-1"
    assert [r.path for r in hub.requests] == [SECRET_PATH]


#: Generous: the fetch's timeout is 2 s; this only says "it stops at all".
HANG_UP_WITHIN = 60.0


@pytest.mark.parametrize("status", [200, 500])
def test_a_body_trickling_in_is_hung_up_on_at_the_timeout(hub: HubServer, kubeconfig: Path, make_engine: Engine, status: int) -> None:
    hub.inject_answer(SECRET_PATH, status, b'{"data": {"token": "dA=="}}', trickle=0.05)
    engine = make_engine(entry({"kubeconfig": str(kubeconfig)}, timeout="5s"))  # 1 s for the provider's error to win
    with pytest.raises(ProviderError) as raised:
        engine.get_credential(cluster("spoke-1"))
    # A Secret's body cut at the deadline is a timeout; an error's body is only drained, so its
    # status is the answer.
    words = "did not answer within 5s" if status == 200 else f"answered HTTP {status}"
    assert str(raised.value) == f"provider secretreader: the hub {hub.url} {words} reading Secret {FLEET}/spoke-1"
    # The connection the trickle came on is dropped, not kept for the next fetch.
    hub.clear_faults()
    hub.create(secret(FLEET, "spoke-1", {"token": "t-spoke-1"}))
    assert make_engine(entry({"kubeconfig": str(kubeconfig)}, timeout="10s")).get_credential(cluster("spoke-1")).token == "t-spoke-1"


statuses = st.integers(min_value=200, max_value=599)
bodies = st.binary(max_size=300) | st.builds(lambda data: json.dumps({"data": data}).encode(), json_values)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(status=statuses, body=bodies, chunked=st.booleans())
def test_any_hub_answer_is_a_credential_or_one_provider_error_that_does_not_quote_it(
    hub: HubServer, kubeconfig: Path, make_engine: Engine, status: int, body: bytes, chunked: bool
) -> None:
    hub.inject_answer(SECRET_PATH, status, body, chunked=chunked)
    # A new engine per example: the last one's cached credential or backoff must not answer.
    engine = make_engine(entry({"kubeconfig": str(kubeconfig)}, timeout="10s"))
    try:
        engine.get_credential(cluster("spoke-1"))
    except ProviderError as exc:
        message = str(exc)
        assert "\n" not in message and exc.__cause__ is None
        assert message.startswith("provider secretreader: ") and f"{FLEET}/spoke-1" in message
        if status != 200:
            assert message == "provider secretreader: " + {
                404: f"Secret {FLEET}/spoke-1 not found on the hub {hub.url}",
                401: f"the hub {hub.url} refused its credentials (401 Unauthorized) reading Secret {FLEET}/spoke-1: check the hub kubeconfig or service account token",
                403: f"the hub credentials may not read Secret {FLEET}/spoke-1 (403 Forbidden): grant get on secrets in namespace {FLEET}",
            }.get(status, f"the hub {hub.url} answered HTTP {status} reading Secret {FLEET}/spoke-1")
    finally:
        engine.close()
        hub.clear_faults()
