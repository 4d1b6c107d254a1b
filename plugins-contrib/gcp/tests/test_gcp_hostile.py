"""Hostile input: credentials files that are broken, huge, special files or built to leak, and
server answers that echo secrets or lie about expiry. Every failure is one line naming the file or
endpoint and the field, and holds no value from the input."""

from __future__ import annotations

import json
import os
import string
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("cpcreds_gcp", reason="install plugins-contrib/gcp")

from cpcreds import ProviderError  # noqa: E402
from cpcreds_gcp.files import SUPPORTED_TYPES, CredentialsFileError, load_credentials_info, read_credentials_file  # noqa: E402
from cpcreds_gcp.metadata import MAX_TOKEN_SECONDS, UnusableAnswer, parse_token_answer  # noqa: E402
from cpcreds_gcp.options import DEFAULT_SCOPES  # noqa: E402
from cpcreds.sdk import error_detail, safe_summary  # noqa: E402

# Letters and digits, 32 characters or more, as access tokens, refresh tokens, key IDs and client
# secrets are.
CANARY = "ya29a0AfB_CANARYsecret0x9f3b2e7d1c5a"
PEM_CANARY = f"-----BEGIN PRIVATE KEY-----\nMIIE{CANARY}AAAA\n-----END PRIVATE KEY-----\n"

_FIELDS = (
    "type", "private_key", "private_key_id", "client_email", "client_id", "client_secret", "refresh_token", "token_uri",
    "token_url", "audience", "subject_token_type", "credential_source", "service_account_impersonation_url",
    "source_credentials", "delegates", "universe_domain", "quota_project_id", "token", "expiry",
)  # fmt: skip


def _secretish() -> st.SearchStrategy[str]:
    return st.sampled_from([CANARY, PEM_CANARY, f"https://{CANARY}.example/token", f"http://x/{CANARY}", f"eyJ{CANARY}.eyJ{CANARY}.{CANARY}"])


_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=30), _secretish()),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(_FIELDS + ("file", "url", "executable")), inner, max_size=5)),
    max_leaves=12,
)
_fields = st.dictionaries(st.sampled_from(_FIELDS), _values, max_size=12)
# Half the documents have a real type, so that the checks behind the type run too.
_documents = _fields | st.builds(lambda kind, rest: {**rest, "type": kind}, st.sampled_from(SUPPORTED_TYPES), _fields)


def _check_message(message: str) -> None:
    assert "\n" not in message and len(message) < 600
    assert CANARY not in message


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_documents)
def test_a_hostile_credentials_document_is_loaded_or_refused_without_quoting_it(document):
    try:
        loaded = load_credentials_info(document, DEFAULT_SCOPES)
    except CredentialsFileError as exc:
        _check_message(str(exc))
        assert exc.__cause__ is None and exc.__context__ is None
        return
    assert loaded.kind in SUPPORTED_TYPES


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=2000) | st.text(max_size=500).map(str.encode))
def test_any_bytes_as_a_credentials_file_are_a_json_object_or_a_clear_error(tmp_path, data):
    path = tmp_path / "credentials.json"
    path.write_bytes(data + CANARY.encode())
    try:
        document = read_credentials_file(path)
    except CredentialsFileError as exc:
        _check_message(str(exc))
        return
    assert isinstance(document, dict)


def test_a_real_key_with_hostile_neighbours_never_shows_the_key(sa_key):
    key_body = sa_key.private_key_pem.splitlines()[1]
    for broken in ({"client_email": 42}, {"token_uri": "file:///etc/passwd"}, {"private_key": sa_key.private_key_pem[:-200]}):
        with pytest.raises(CredentialsFileError) as caught:
            load_credentials_info(sa_key.info("https://oauth2.googleapis.com/token") | broken, DEFAULT_SCOPES)
        assert key_body not in str(caught.value) and "PRIVATE KEY" not in str(caught.value)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "is empty"),
        (b" \n", "is empty"),
        (b"\xff\xfe not utf-8", "is not UTF-8 text"),
        (b"[" * 10000 + b"]" * 10000, "is not JSON ("),
        (b'{"type": "service_account", "private_key": "' + CANARY.encode() + b'"', "is not JSON ("),
        (b'["service_account"]', "is not a JSON object"),
        (json.dumps({"type": "gdch_service_account"}).encode(), "has type 'gdch_service_account'; supported: service_account, "),
        (json.dumps({"type": CANARY}).encode(), "has type not one of them; supported: "),
        (json.dumps({"type": "service_account", "client_email": "a@b"}).encode(), "has no private_key"),
        (json.dumps({"type": "service_account", "client_email": "a@b", "private_key": PEM_CANARY}).encode(),
         "field private_key is not an unencrypted PEM RSA private key"),
        (json.dumps({"type": "authorized_user", "client_id": "x", "client_secret": ["x"]}).encode(), "field client_secret is not a non-empty string"),
        (json.dumps({"type": "external_account", "audience": "a", "subject_token_type": "t", "credential_source": {"file": "/f", "url": "http://u"}}).encode(),
         "field credential_source needs exactly one of file, url and executable"),
        (json.dumps({"type": "impersonated_service_account", "service_account_impersonation_url": "https://x/y"}).encode(),
         "field service_account_impersonation_url is not a generateAccessToken URL"),
    ],
    ids=["empty", "blank", "not-utf8", "deep", "truncated", "array", "gdch", "type-is-a-secret", "no-key", "bad-key", "wrong-type", "two-sources", "bad-url"],
)  # fmt: skip
def test_a_broken_credentials_file_names_the_file_and_the_problem(write_json, make_engine, gke_profile, content, problem):
    path = write_json(content)
    with pytest.raises(ProviderError) as caught:
        make_engine({"credentialsFile": str(path)}).get_credential(gke_profile())
    message = str(caught.value)
    assert message.startswith(f"provider google: gcp: credentials file {path} (credentialsFile) ")
    assert problem in message
    _check_message(message)


def test_a_credentials_file_that_is_too_large_is_refused_before_parsing(write_json, make_engine, gke_profile):
    path = write_json(b'{"type": "service_account", "pad": "' + b"x" * (300 * 1024) + b'"}')
    with pytest.raises(ProviderError, match=r"\(credentialsFile\) is larger than 256 KiB$"):
        make_engine({"credentialsFile": str(path)}).get_credential(gke_profile())


@pytest.mark.parametrize("kind", ["fifo", "directory", "device"])
def test_a_credentials_path_that_is_not_a_regular_file_is_refused_at_once(tmp_path, make_engine, gke_profile, kind):
    if kind == "fifo":
        path = tmp_path / "fifo"
        os.mkfifo(path)  # nobody writes: reading it would wait for ever
    elif kind == "directory":
        path = tmp_path
    else:
        path = "/dev/zero"
    with pytest.raises(ProviderError, match=r"\(credentialsFile\) is (not a regular file|a directory)$"):
        make_engine({"credentialsFile": str(path)}).get_credential(gke_profile())


def test_a_missing_file_named_by_the_environment_is_an_error_not_a_fallback(make_engine, gke_profile, monkeypatch, tmp_path, metadata):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "gone.json"))
    monkeypatch.setenv("GCE_METADATA_HOST", metadata.host)
    with pytest.raises(ProviderError) as caught:
        make_engine().get_credential(gke_profile())
    assert str(caught.value) == f"provider google: gcp: credentials file {tmp_path / 'gone.json'} (GOOGLE_APPLICATION_CREDENTIALS) does not exist"
    assert metadata.seen == []


_token_chars = st.text(alphabet=string.ascii_letters + string.digits + "-._~+/", min_size=1, max_size=60)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["access_token", "expires_in", "token_type", "scope"]),
        st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20), st.floats(), st.floats(0, 2), st.text(max_size=40), _token_chars),
        max_size=4,
    )
)
def test_any_metadata_token_answer_is_usable_or_refused_without_quoting_it(answer):
    now = datetime.now(UTC)
    body = json.dumps(answer).encode()  # NaN and Infinity included, as a careless server sends them
    try:
        token, expiry = parse_token_answer(body, now)
    except UnusableAnswer as exc:
        token_value = answer.get("access_token")
        if isinstance(token_value, str) and len(token_value) > 3:
            assert token_value not in str(exc)
        return
    assert token == answer["access_token"] and token.strip() == token and "\n" not in token
    assert expiry.tzinfo is None  # naive UTC, google-auth's convention
    assert now.replace(tzinfo=None) + timedelta(seconds=1) <= expiry <= now.replace(tzinfo=None) + timedelta(seconds=MAX_TOKEN_SECONDS)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(st.text(max_size=30), st.sampled_from(["invalid_grant", "PERMISSION_DENIED", "server_error"])),
    st.text(max_size=60),
    st.booleans(),
)
def test_an_error_answer_never_yields_an_echoed_secret(code, prose, google_style):
    description = f"{prose} {CANARY} {prose}"
    body = {"error": {"status": code, "message": description}} if google_style else {"error": code, "error_description": description}
    detail = error_detail(json.dumps(body).encode())
    assert detail is None or (CANARY not in detail and "\n" not in detail and len(detail) < 300)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_an_exception_summary_blanks_secrets(text):
    summary = safe_summary(ValueError(f"{text} {CANARY} -----BEGIN PRIVATE KEY-----\nMIIEabc\n {text}"))
    assert CANARY not in summary and "MIIEabc" not in summary and "\n" not in summary and len(summary) <= 200
