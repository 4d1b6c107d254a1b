"""A broken or hostile agent: whatever it answers, the provider returns a usable bearer token with
the token's own expiry, or one line of error that quotes nothing of the token."""

from __future__ import annotations

import base64
import json
import math
import time
from datetime import datetime, timezone
from types import MappingProxyType
from typing import Any

import pytest

pytest.importorskip("cpcreds_spire", reason="install plugins-contrib/spire")

import grpc  # noqa: E402
from hypothesis import HealthCheck, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from cpcreds import AccessPlan, ExecCluster, ProviderError  # noqa: E402
from cpcreds_spire.plugin import SpireProvider  # noqa: E402
from cpcreds_spire.svid import MAX_TOKEN_CHARS, UnusableToken, check_token, expiry_from_exp  # noqa: E402
from tests.fakes.builders import access_provider, cluster_profile  # noqa: E402
from tests.fakes.spire import DEFAULT_IDENTITY  # noqa: E402

AUDIENCE = "https://spoke-1.example"
PLAN = AccessPlan(
    provider="spire-agent",
    kind="spire",
    cluster=ExecCluster(server="https://spoke-1.example:6443"),
    options=MappingProxyType({}),
    timeout=5.0,
)
CHECKS = (
    "it is empty",
    f"it is longer than {MAX_TOKEN_CHARS // 1024} KiB",
    "it is not a compact JWT (three base64url parts, nothing else)",
)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forge(claims: Any, header: Any = None, signature: bytes = b"\x01" * 64) -> str:
    """A JWT with these claims, signed by nobody (the provider reads, the API server verifies)."""
    header = {"alg": "ES256", "typ": "JWT", "kid": "k1"} if header is None else header
    return ".".join((b64(json.dumps(header).encode()), b64(json.dumps(claims, allow_nan=True).encode()), b64(signature)))


def forge_text(payload: str) -> str:
    """A JWT whose payload is this JSON text as is (for payloads Python would not write)."""
    header = b64(json.dumps({"alg": "ES256", "typ": "JWT"}).encode())
    return f"{header}.{b64(payload.encode())}.{b64(b'sig' * 20)}"


def good_claims(**changes: Any) -> dict[str, Any]:
    claims = {"sub": DEFAULT_IDENTITY, "aud": [AUDIENCE], "exp": int(time.time()) + 600, "iat": int(time.time())}
    claims.update(changes)
    return {k: v for k, v in claims.items() if v is not ...}


def assert_safe_error(error: ProviderError, token: str) -> None:
    message = str(error)
    assert "\n" not in message and "\r" not in message
    assert message.startswith("provider spire-agent: spire: ")
    for part in token.split("."):
        if len(part) >= 8:
            assert part not in message
    assert error.__cause__ is None and error.__context__ is None


@pytest.fixture
def provider(agent):
    made = SpireProvider({"socket": agent.address, "audience": AUDIENCE})
    yield made
    made.close()


def fetch_with_answer(agent, provider: SpireProvider, answer: list[str]) -> Any:
    agent.answer = answer
    return provider.get_credential(PLAN)


@pytest.mark.parametrize(
    ("name", "token", "reason"),
    [
        ("garbage", "this is not a token at all", "it is not a well-formed JWT-SVID"),
        ("empty", "", "it is not a well-formed JWT-SVID"),
        ("payload not an object", forge(["sub", "aud"]), "it is not a well-formed JWT-SVID"),
        ("exp a numeric string", forge(good_claims(exp=str(int(time.time()) + 600))), "its exp claim is not a number"),
        ("exp a word", forge(good_claims(exp="soon")), "its exp claim is not a number"),
        ("exp NaN", forge(good_claims(exp=math.nan)), "it is not a well-formed JWT-SVID"),
        ("exp past 9999", forge(good_claims(exp=10**12)), "its exp claim is beyond the year 9999"),
        ("exp a boolean", forge(good_claims(exp=True)), "it has expired"),
        ("expired", forge(good_claims(exp=int(time.time()) - 5)), "it has expired"),
        ("no sub", forge(good_claims(sub=...)), "it lacks one of the claims aud, exp and sub"),
        ("sub not a SPIFFE ID", forge(good_claims(sub="eyJhbGciOi.secretish.value")), "its sub is not a SPIFFE ID"),
        ("aud without ours", forge(good_claims(aud=["someone-else"])), "its aud claim does not hold every audience asked for"),
        ("aud a mapping", forge(good_claims(aud={"x": 1})), "its aud claim does not hold every audience asked for"),
        ("aud empty", forge(good_claims(aud=[""])), "its aud claim does not hold every audience asked for"),
        ("alg none", forge(good_claims(), header={"alg": "none"}), "its alg is not one that JWT-SVIDs may use"),
        ("alg HS256", forge(good_claims(), header={"alg": "HS256"}), "its alg is not one that JWT-SVIDs may use"),
        ("typ other", forge(good_claims(), header={"alg": "ES256", "typ": "secret-typ"}), "its typ is neither JWT nor JOSE"),
        ("deeply nested claim", forge_text('{"sub": "%s", "aud": "%s", "x": %s}' % (DEFAULT_IDENTITY, AUDIENCE, "[" * 100_000 + "]" * 100_000)), "it is not a well-formed JWT-SVID"),
    ],
)
def test_a_bad_jwt_svid_is_an_error_naming_why(agent, provider, name, token, reason) -> None:
    with pytest.raises(ProviderError) as caught:
        fetch_with_answer(agent, provider, [token])
    assert str(caught.value) == (
        f"provider spire-agent: spire: the SPIFFE Workload API at {agent.address} returned a JWT-SVID that is not usable: {reason}"
    )
    assert_safe_error(caught.value, token)


@pytest.mark.parametrize("where", ["start", "middle", "end"])
@pytest.mark.parametrize("junk", ["\n", "\r\n", " ", "\t", "\x00"])
def test_a_token_with_whitespace_or_line_breaks_is_refused(agent, provider, where, junk) -> None:
    token = agent.issue(DEFAULT_IDENTITY, [AUDIENCE])
    at = {"start": 0, "middle": token.index(".") + 3, "end": len(token)}[where]
    broken = token[:at] + junk + token[at:]
    with pytest.raises(ProviderError) as caught:
        fetch_with_answer(agent, provider, [broken])
    assert "returned a JWT-SVID that is not usable: " in str(caught.value)
    assert_safe_error(caught.value, token)


def test_a_huge_token_is_refused(agent, provider) -> None:
    token = agent.issue(DEFAULT_IDENTITY, [AUDIENCE], padding="x" * MAX_TOKEN_CHARS)
    with pytest.raises(ProviderError) as caught:
        fetch_with_answer(agent, provider, [token])
    assert str(caught.value).endswith(f"is not usable: it is longer than {MAX_TOKEN_CHARS // 1024} KiB")
    assert_safe_error(caught.value, token)


def test_an_empty_answer_is_no_jwt_svid(agent, provider) -> None:
    with pytest.raises(ProviderError) as caught:
        fetch_with_answer(agent, provider, [])
    assert str(caught.value) == f"provider spire-agent: spire: the SPIFFE Workload API at {agent.address} returned no JWT-SVID"


def test_one_bad_svid_among_several_fails_the_fetch(agent, provider) -> None:
    good = agent.issue(DEFAULT_IDENTITY, [AUDIENCE])
    with pytest.raises(ProviderError, match="not usable"):
        fetch_with_answer(agent, provider, [good, "junk"])


def test_through_the_engine_the_error_quotes_nothing_either(agent, engine_for) -> None:
    token = forge(good_claims(exp="soon"))  # the library refuses it; we say which claim
    agent.answer = [token]
    profile = cluster_profile("spoke-1", access_provider("spire-agent", exec_extension={"audience": AUDIENCE}))
    with pytest.raises(ProviderError) as caught:
        engine_for({"socket": agent.address}).get_credential(profile)
    assert str(caught.value).endswith("is not usable: its exp claim is not a number")
    for part in token.split("."):
        assert part not in str(caught.value)


# -- properties ---------------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@given(st.text(max_size=300) | st.binary(max_size=200).map(b64) | st.builds(lambda a, b, c: f"{a}.{b}.{c}", st.text(), st.text(), st.text()))
def test_check_token_accepts_only_compact_jws(text: str) -> None:
    try:
        assert check_token(text) == text
    except UnusableToken as exc:
        assert str(exc) in CHECKS
        return
    parts = text.split(".")
    assert len(parts) == 3 and all(parts)
    assert all(ch.isascii() and (ch.isalnum() or ch in "-_.") for ch in text)


@given(json_values | st.integers(min_value=-(2**70), max_value=2**70) | st.floats(allow_nan=True, allow_infinity=True))
def test_expiry_from_exp_is_the_numeric_date_or_a_refusal(exp: Any) -> None:
    try:
        moment = expiry_from_exp(exp)
    except UnusableToken as exc:
        assert str(exc).startswith("its exp claim is ")
        return
    assert isinstance(exp, (int, float)) and not isinstance(exp, bool) and exp > 0
    assert moment.tzinfo is not None
    assert moment == datetime.fromtimestamp(exp, timezone.utc)


now = int(time.time())
FIELDS = {
    "sub": (
        st.sampled_from([DEFAULT_IDENTITY, "spiffe://example.org/other"]),
        st.sampled_from(["", "spiffe://", "not-a-uri", "SPIFFE://Example.org/x"]) | st.text(max_size=30) | json_values,
    ),
    "aud": (
        st.sampled_from([AUDIENCE, [AUDIENCE], [AUDIENCE, "x"]]),
        st.sampled_from([[], ["x"], [""]]) | json_values,
    ),
    "exp": (
        st.integers(min_value=now + 60, max_value=now + 10**8) | st.floats(min_value=now + 60, max_value=now + 10**8),
        st.sampled_from([now - 1, 0, -5, 10**15, str(now + 600), math.nan, math.inf]) | json_values,
    ),
    "alg": (
        st.sampled_from(["ES256", "ES384", "RS256", "PS512"]),
        st.sampled_from(["none", "HS256", "", "es256"]) | st.text(max_size=10) | json_values,
    ),
}


@st.composite
def answers(draw: Any) -> tuple[dict[str, Any], Any]:
    """Claims and an alg with none, one or two fields hostile (so good tokens are common enough
    for the accepting branch to be exercised, not only the refusals), plus extra claims."""
    broken = draw(st.sets(st.sampled_from(sorted(FIELDS)), max_size=2))
    values = {name: draw(bad if name in broken else good) for name, (good, bad) in FIELDS.items()}
    extra = draw(st.dictionaries(st.text(max_size=8), json_values, max_size=3))
    alg = values.pop("alg")
    return {**extra, **values}, alg


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(answer=answers())
def test_any_answer_gives_its_token_and_exp_or_a_safe_error(agent, provider, answer) -> None:
    claims, alg = answer
    token = forge(claims, header={"alg": alg, "typ": "JWT"})
    try:
        credential = fetch_with_answer(agent, provider, [token])
    except ProviderError as exc:
        event("refused")
        assert_safe_error(exc, token)
        return
    event("accepted")
    assert credential.token == token
    assert credential.expiration_timestamp == datetime.fromtimestamp(claims["exp"], timezone.utc)
    assert credential.expiration_timestamp > datetime.now(timezone.utc)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(before=st.text(max_size=100), after=st.text(max_size=100))
def test_the_agents_status_text_is_shown_on_one_line_without_a_token(agent, provider, before, after) -> None:
    token = agent.issue(DEFAULT_IDENTITY, [AUDIENCE])
    agent.failure = (grpc.StatusCode.PERMISSION_DENIED, f"{before} {token} {after}")
    try:
        with pytest.raises(ProviderError) as caught:
            provider.get_credential(PLAN)
    finally:
        agent.failure = None
    assert_safe_error(caught.value, token)
    assert "(PERMISSION_DENIED" in str(caught.value)
