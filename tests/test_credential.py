"""Credential: the validated KEP-541 answer every provider returns, and its RFC 3339 helpers."""

from __future__ import annotations

import dataclasses

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from hypothesis import given
from hypothesis import strategies as st

from cpcreds import credential as credential_module
from cpcreds.config.wire import API_VERSION_V1, API_VERSION_V1BETA1, ExecCredentialStatus
from cpcreds.credential import Credential, credential_from_status_fields, format_rfc3339, parse_rfc3339
from tests.fakes.pki import make_key_pair

UTC = timezone.utc
TOKEN = "s3cr3t-bearer-token-value"


@pytest.fixture(scope="module")
def pair() -> tuple[str, str, x509.Certificate]:
    return make_key_pair()


def _key_body(key_pem: str) -> str:
    return "".join(line for line in key_pem.splitlines() if "-----" not in line)


# -- secrets stay out of repr/str --------------------------------------------------------------


def test_repr_and_str_never_show_the_token() -> None:
    credential = Credential(token=TOKEN, expiration_timestamp=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    for text in (repr(credential), str(credential), f"{credential}", repr([credential])):
        assert TOKEN not in text
    assert repr(credential) == "Credential(kind='token', expiration_timestamp='2026-01-02T03:04:05Z')"


def test_repr_and_str_never_show_the_private_key(pair) -> None:
    cert_pem, key_pem, _ = pair
    credential = Credential(client_certificate_data=cert_pem, client_key_data=key_pem)
    body = _key_body(key_pem)
    for text in (repr(credential), str(credential)):
        assert body not in text
        assert body[:24] not in text
        assert "PRIVATE KEY" not in text
    assert "client-certificate" in repr(credential)


def test_a_subclass_declared_as_a_dataclass_never_shows_the_secrets(pair) -> None:
    # A subclass made with @dataclass writes its own __repr__ from the fields: the secret fields
    # are repr=False at the field, so that repr leaves them out too (issue 28, item 15).
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Labelled(Credential):
        label: str = "x"

    cert_pem, key_pem, _ = pair
    made = [Labelled(token=TOKEN, label="mine"), Labelled(client_certificate_data=cert_pem, client_key_data=key_pem)]
    for credential in made:
        for text in (repr(credential), str(credential), repr([credential])):
            assert TOKEN not in text and "PRIVATE KEY" not in text and _key_body(key_pem)[:24] not in text
            assert "BEGIN CERTIFICATE" not in text
    assert "label='mine'" in repr(made[0])


# -- what a credential may hold ------------------------------------------------------------------


def test_token_only_credential_is_accepted() -> None:
    credential = Credential(token=TOKEN)
    assert credential.kind == "token"
    assert credential.token == TOKEN
    assert credential.client_certificate_data is None and credential.client_key_data is None
    assert credential.certificate_not_after is None


def test_certificate_and_key_credential_is_accepted_with_validity(pair) -> None:
    cert_pem, key_pem, cert = pair
    credential = Credential(client_certificate_data=cert_pem, client_key_data=key_pem)
    assert credential.kind == "client-certificate"
    assert credential.token is None
    assert credential.certificate_not_before == cert.not_valid_before_utc
    assert credential.certificate_not_after == cert.not_valid_after_utc


def test_token_with_certificate_and_key_is_accepted(pair) -> None:
    cert_pem, key_pem, _ = pair
    assert Credential(token=TOKEN, client_certificate_data=cert_pem, client_key_data=key_pem).kind == (
        "token+client-certificate"
    )


def test_certificate_without_key_is_rejected(pair) -> None:
    cert_pem, _, _ = pair
    with pytest.raises(ValueError, match="both are required"):
        Credential(token=TOKEN, client_certificate_data=cert_pem)


def test_key_without_certificate_is_rejected(pair) -> None:
    _, key_pem, _ = pair
    with pytest.raises(ValueError, match="both are required"):
        Credential(client_key_data=key_pem)


@pytest.mark.parametrize("kwargs", [{}, {"token": ""}, {"token": "", "client_certificate_data": "", "client_key_data": ""}])
def test_credential_with_nothing_is_rejected(kwargs) -> None:
    with pytest.raises(ValueError, match="no token and no client certificate"):
        Credential(**kwargs)


def test_key_that_does_not_belong_to_the_certificate_is_rejected(pair) -> None:
    cert_pem, _, _ = pair
    _, other_key_pem, _ = make_key_pair()
    with pytest.raises(ValueError, match="does not match"):
        Credential(client_certificate_data=cert_pem, client_key_data=other_key_pem)


def test_certificate_that_is_not_pem_is_rejected(pair) -> None:
    _, key_pem, _ = pair
    with pytest.raises(ValueError, match="clientCertificateData is not a PEM certificate"):
        Credential(client_certificate_data="not a certificate", client_key_data=key_pem)


def test_key_that_is_not_pem_is_rejected(pair) -> None:
    cert_pem, _, _ = pair
    with pytest.raises(ValueError, match="clientKeyData is not an unencrypted PEM private key"):
        Credential(client_certificate_data=cert_pem, client_key_data="not a key")


def test_encrypted_key_is_rejected(pair) -> None:
    cert_pem, key_pem, _ = pair
    key = serialization.load_pem_private_key(key_pem.encode(), password=None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"passphrase"),
    ).decode("ascii")
    with pytest.raises(ValueError, match="unencrypted PEM private key"):
        Credential(client_certificate_data=cert_pem, client_key_data=encrypted)


def _relabelled(key_pem: str, form: serialization.PrivateFormat, label: str) -> str:
    """The key of ``key_pem`` written in ``form`` under the PEM label ``label``."""
    key = serialization.load_pem_private_key(key_pem.encode(), password=None)
    body = _key_body(key.private_bytes(serialization.Encoding.PEM, form, serialization.NoEncryption()).decode("ascii"))
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return "\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----", ""])


@pytest.mark.parametrize(
    ("form", "label"),
    [
        # client-go's TestTLSCredentials: an EC P-256 key in SEC1 form under the PKCS#8 label.
        (serialization.PrivateFormat.TraditionalOpenSSL, "PRIVATE KEY"),
        (serialization.PrivateFormat.PKCS8, "EC PRIVATE KEY"),
        (serialization.PrivateFormat.TraditionalOpenSSL, "ANY OTHER PRIVATE KEY"),
    ],
)
def test_a_key_client_go_reads_whatever_its_label_says_is_accepted_as_pkcs8(pair, form, label) -> None:
    cert_pem, key_pem, cert = pair
    credential = Credential(client_certificate_data=cert_pem, client_key_data=_relabelled(key_pem, form, label))
    assert credential.certificate_not_after == cert.not_valid_after_utc
    # Kept in the form its label promises, so that every TLS library (OpenSSL's PEM reader) reads it.
    assert credential.client_key_data.startswith("-----BEGIN PRIVATE KEY-----")
    stored = serialization.load_pem_private_key(credential.client_key_data.encode(), password=None)
    assert _key_body(stored.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()) == _key_body(key_pem)


def test_a_key_after_another_pem_block_is_read_as_client_go_reads_it(pair) -> None:
    cert_pem, key_pem, _ = pair
    sec1 = _relabelled(key_pem, serialization.PrivateFormat.TraditionalOpenSSL, "PRIVATE KEY")
    credential = Credential(client_certificate_data=cert_pem, client_key_data=cert_pem + sec1)
    assert credential.client_key_data.startswith("-----BEGIN PRIVATE KEY-----")


def test_a_key_with_pem_headers_is_refused_as_encrypted(pair) -> None:
    cert_pem, key_pem, _ = pair
    sec1 = _relabelled(key_pem, serialization.PrivateFormat.TraditionalOpenSSL, "PRIVATE KEY")
    with_headers = sec1.replace("-----\n", "-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\n", 1)
    with pytest.raises(ValueError, match="clientKeyData is not an unencrypted PEM private key") as raised:
        Credential(client_certificate_data=cert_pem, client_key_data=with_headers)
    assert raised.value.__cause__ is None and raised.value.__context__ is None


def test_a_pkcs8_key_is_kept_exactly_as_given(pair) -> None:
    cert_pem, key_pem, _ = pair
    assert Credential(client_certificate_data=cert_pem, client_key_data=key_pem).client_key_data == key_pem


def test_naive_expiration_timestamp_is_rejected() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        Credential(token=TOKEN, expiration_timestamp=datetime(2026, 1, 2, 3, 4, 5))


def test_token_with_a_line_break_is_rejected() -> None:
    with pytest.raises(ValueError, match="line break"):
        Credential(token="abc\ndef")


def test_certificate_not_after_is_read_from_the_leaf_certificate() -> None:
    not_after = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=10)
    cert_pem, key_pem, _ = make_key_pair(not_after=not_after)
    assert Credential(client_certificate_data=cert_pem, client_key_data=key_pem).certificate_not_after == not_after


# -- parse_rfc3339 -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-01-02T03:04:05Z", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2026-01-02t03:04:05z", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2026-01-02T05:04:05+02:00", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2026-01-01T22:04:05-05:00", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2026-01-02T03:04:05.123456789Z", datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)),
        ("2026-01-02T04:04:05.5+01:00", datetime(2026, 1, 2, 3, 4, 5, 500000, tzinfo=UTC)),
    ],
    ids=["zulu", "lowercase-t-and-z", "positive-offset", "negative-offset", "nine-digit-fraction", "fraction-with-offset"],
)
def test_parse_rfc3339_accepts_go_rfc3339_forms_as_utc(text: str, expected: datetime) -> None:
    parsed = parse_rfc3339(text)
    assert parsed == expected
    assert parsed.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    "text",
    ["2026-01-02T03:04:05", "2026-01-02", "garbage", "", "2026-01-02 03:04:05Z", "2026-01-02T03:04Z", None, 1767323045],
    ids=["no-zone", "date-only", "garbage", "empty", "space-separator", "no-seconds", "none", "number"],
)
def test_parse_rfc3339_rejects_what_is_not_rfc3339(text) -> None:
    with pytest.raises(ValueError, match="is not an RFC 3339 timestamp"):
        parse_rfc3339(text)


def test_format_rfc3339_writes_whole_seconds_in_utc() -> None:
    moment = datetime(2026, 1, 2, 5, 4, 5, 999999, tzinfo=timezone(timedelta(hours=2)))
    assert format_rfc3339(moment) == "2026-01-02T03:04:05Z"
    assert parse_rfc3339(format_rfc3339(moment)) == moment.replace(microsecond=0)


# -- the ExecCredential answer -------------------------------------------------------------------


@pytest.mark.parametrize("api_version", [API_VERSION_V1, API_VERSION_V1BETA1])
def test_to_exec_credential_for_a_token_has_the_kubernetes_shape(api_version: str) -> None:
    credential = Credential(token=TOKEN, expiration_timestamp=datetime(2026, 1, 2, 3, 4, 5, 700000, tzinfo=UTC))
    assert credential.to_exec_credential(api_version) == {
        "apiVersion": api_version,
        "kind": "ExecCredential",
        "status": {"token": TOKEN, "expirationTimestamp": "2026-01-02T03:04:05Z"},
    }


def test_to_exec_credential_for_a_certificate_has_data_fields_and_no_expiry_when_unset(pair) -> None:
    cert_pem, key_pem, _ = pair
    answer = Credential(client_certificate_data=cert_pem, client_key_data=key_pem).to_exec_credential(API_VERSION_V1)
    assert answer == {
        "apiVersion": API_VERSION_V1,
        "kind": "ExecCredential",
        "status": {"clientCertificateData": cert_pem, "clientKeyData": key_pem},
    }


def test_from_status_round_trips_the_exec_credential_status() -> None:
    original = Credential(token=TOKEN, expiration_timestamp=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    status = ExecCredentialStatus.model_validate(original.to_status())
    assert Credential.from_status(status) == original


def test_from_status_rejects_a_bad_expiration_timestamp() -> None:
    status = ExecCredentialStatus.model_validate({"token": TOKEN, "expirationTimestamp": "2026-01-02 03:04:05"})
    with pytest.raises(ValueError, match="RFC 3339"):
        Credential.from_status(status)


# -- expiry --------------------------------------------------------------------------------------


def test_credential_without_expiration_never_expires() -> None:
    credential = Credential(token=TOKEN)
    assert credential.expired() is False
    assert credential.expired(datetime(9999, 1, 1, tzinfo=UTC)) is False


def test_expired_is_false_before_and_true_from_the_expiration_timestamp() -> None:
    expiry = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    credential = Credential(token=TOKEN, expiration_timestamp=expiry)
    assert credential.expired(expiry - timedelta(microseconds=1)) is False
    assert credential.expired(expiry) is True
    assert credential.expired(expiry + timedelta(seconds=1)) is True


def test_expired_without_now_uses_the_current_time() -> None:
    now = datetime.now(UTC)
    assert Credential(token=TOKEN, expiration_timestamp=now - timedelta(seconds=1)).expired() is True
    assert Credential(token=TOKEN, expiration_timestamp=now + timedelta(hours=1)).expired() is False


@pytest.mark.parametrize(
    "value",
    ["9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59.999999999-23:59"],
)
def test_timestamp_outside_the_datetime_range_is_a_value_error_not_an_overflow(value: str) -> None:
    with pytest.raises(ValueError, match="^expirationTimestamp is outside the years 1 to 9999 in UTC$") as info:
        parse_rfc3339(value)
    assert info.value.__context__ is None


@pytest.mark.parametrize("value", ["2024-13-01T00:00:00Z", "2024-02-30T00:00:00Z", "2024-01-01T25:00:00Z", "2024-01-01T00:00:00+99:00"])
def test_impossible_timestamp_is_a_value_error_without_the_value(value: str) -> None:
    with pytest.raises(ValueError, match="^expirationTimestamp is not a valid date and time$") as info:
        parse_rfc3339(value)
    assert info.value.__context__ is None


def test_overflowing_expiry_from_a_status_is_a_value_error() -> None:
    status = ExecCredentialStatus(token=TOKEN, expirationTimestamp="9999-12-31T23:59:59-01:00")
    with pytest.raises(ValueError) as info:
        Credential.from_status(status)
    assert TOKEN not in str(info.value)


def test_garbage_key_pair_errors_chain_nothing(pair) -> None:
    cert_pem, _, _ = pair
    for cert, key in ((f"-----BEGIN CERTIFICATE-----\n{TOKEN}\n-----END CERTIFICATE-----\n", "x"), (cert_pem, f"-----BEGIN PRIVATE KEY-----\n{TOKEN}\n-----END PRIVATE KEY-----\n")):
        with pytest.raises(ValueError) as info:
            Credential(client_certificate_data=cert, client_key_data=key)
        assert info.value.__context__ is None and TOKEN not in str(info.value)


def _parsed(parse: Any, text: Any) -> Any:
    try:
        moment = parse(text)
    except ValueError as exc:
        return str(exc)
    return moment, moment.tzinfo


_stamp_parts = st.one_of(st.integers(0, 99), st.sampled_from(["٠١", "1٢", "+1", " 1", "ab"]))


@given(
    text=st.one_of(
        st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)).map(lambda moment: moment.strftime("%Y-%m-%dT%H:%M:%SZ")),
        st.tuples(st.integers(0, 10000), _stamp_parts, _stamp_parts, st.sampled_from("Tt x"), _stamp_parts, _stamp_parts, _stamp_parts, st.sampled_from("Zz+")).map(
            lambda p: f"{p[0]:04d}-{p[1]:0>2}-{p[2]:0>2}{p[3]}{p[4]:0>2}:{p[5]:0>2}:{p[6]:0>2}{p[7]}"
        ),
        st.text(max_size=22),
    )
)
def test_parse_rfc3339_reads_the_usual_form_as_the_general_path_does(text: str) -> None:
    assert _parsed(parse_rfc3339, text) == _parsed(credential_module._parse_rfc3339, text)


@given(
    token=st.one_of(st.text(max_size=6), st.sampled_from(["", "a\nb", "a\rb", "tok"])),
    cert=st.sampled_from(["", "not a certificate"]),
    key=st.sampled_from(["", "not a key"]),
    expiry=st.sampled_from([None, "", "2099-01-01T00:00:00Z", "garbage"]),
)
def test_credentials_from_answer_fields_are_the_ones_the_constructor_builds(token: str, cert: str, key: str, expiry: str | None) -> None:
    def built(make: Any) -> Any:
        try:
            credential = make()
        except ValueError as exc:
            return str(exc)
        return type(credential), [(f.name, getattr(credential, f.name)) for f in dataclasses.fields(credential)]

    moment = None
    if expiry:
        try:
            moment = parse_rfc3339(expiry)
        except ValueError:
            moment = None
    direct = built(lambda: credential_from_status_fields(Credential, expiry, token, cert, key))
    if expiry and moment is None:
        assert direct == "expirationTimestamp is not an RFC 3339 timestamp"
        return
    assert direct == built(lambda: Credential(token=token, client_certificate_data=cert, client_key_data=key, expiration_timestamp=moment))
