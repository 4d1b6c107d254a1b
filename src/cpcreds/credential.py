"""The one thing every provider answers with: a Credential (an ExecCredential status, validated)."""

from __future__ import annotations

import base64
import re
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from dataclasses import dataclass, field
from ._patterns import LazyPattern

if TYPE_CHECKING:  # a base type: the pydantic models are not imported to build a Credential
    from .config.wire import ExecCredentialStatus

__all__ = ["Credential", "parse_rfc3339", "format_rfc3339"]

# RFC 3339 date-time as Go's time.Parse(time.RFC3339) accepts it: a 'T' (or 't'), optional
# fraction, and a mandatory offset. Python's fromisoformat alone would accept dates without a zone.
_RFC3339 = LazyPattern(  # the general path only: compiled on first use
    r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$"
)


def parse_rfc3339(value: str) -> datetime:
    """Parse an RFC 3339 timestamp into an aware UTC datetime; ``ValueError`` if it is not one."""
    # Nearly every plugin writes 2006-01-02T15:04:05Z. That form is read here without the regex
    # engine and the offset handling, which cost more than the rest of a credential's checks when
    # the CPU's caches are cold (right after the plugin ran); anything else, and every error, is
    # the general path's (tests/test_credential.py compares them).
    if (
        type(value) is str
        and len(value) == 20
        and value[19] in "Zz"
        and value[10] in "Tt"
        and value[4] == value[7] == "-"
        and value[13] == value[16] == ":"
        and value.isascii()
    ):
        try:
            return datetime.fromisoformat(value[:19]).replace(tzinfo=timezone.utc)
        except ValueError:  # month 13, hour 25, a letter for a digit, ...
            pass
    return _parse_rfc3339(value)


def _parse_rfc3339(value: str) -> datetime:
    if not isinstance(value, str) or not _RFC3339.fullmatch(value):
        # The value is not quoted: a lying plugin may put anything there, a token included.
        raise ValueError("expirationTimestamp is not an RFC 3339 timestamp")
    text = value.upper().replace("Z", "+00:00")
    head, _, tail = text.partition(".")
    if tail:  # fromisoformat takes at most 6 fraction digits; Go allows 9
        digits = re.match(r"\d+", tail).group(0)  # type: ignore[union-attr]
        text = f"{head}.{digits[:6].ljust(6, '0')}{tail[len(digits):]}"
    reason = "expirationTimestamp is not a valid date and time"
    try:
        return datetime.fromisoformat(text).astimezone(timezone.utc)
    except ValueError:  # month 13, hour 25, offset +99:00, ...
        pass
    except OverflowError:  # 9999-12-31T23:59:59-01:00 is past the largest datetime in UTC
        reason = "expirationTimestamp is outside the years 1 to 9999 in UTC"
    # Raised outside the except block, without the value: a lying plugin may put a token there.
    raise ValueError(reason)


def format_rfc3339(moment: datetime) -> str:
    """Format an aware datetime as Kubernetes does (``2026-01-02T15:04:05Z``, whole seconds)."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True, weakref_slot=True, repr=False)  # weakref: callers may hold one weakly
class Credential:
    """A bearer token or a client certificate and key, with an optional expiry.

    Construction validates the KEP-541 contract, whoever the provider is: a token, or a
    certificate *and* key (never only one of them), PEM that parses, and a key that belongs to the
    certificate. The key is read as client-go reads it: the first PEM block labelled
    ``PRIVATE KEY`` or ``... PRIVATE KEY``, in PKCS#1, PKCS#8 or SEC1 form whatever the label says;
    a key whose label does not name its form (a SEC1 EC key under ``PRIVATE KEY``) is kept as
    PKCS#8 PEM, which every TLS library reads. ``expiration_timestamp`` is an aware datetime or ``None`` (valid for the life of
    the process). ``repr()`` and ``str()`` never show the token or the key.
    """

    # repr=False at the field: a subclass declared with @dataclass writes its own __repr__, which
    # must not show them either.
    token: str | None = field(default=None, repr=False)
    client_certificate_data: str | None = field(default=None, repr=False)
    client_key_data: str | None = field(default=None, repr=False)
    expiration_timestamp: datetime | None = None
    #: The leaf certificate's validity, when a certificate was given (for rotation metrics).
    certificate_not_before: datetime | None = field(default=None, init=False, compare=False)
    certificate_not_after: datetime | None = field(default=None, init=False, compare=False)

    def __post_init__(self) -> None:
        token = self.token or None
        cert = self.client_certificate_data or None
        key = self.client_key_data or None
        object.__setattr__(self, "token", token)
        object.__setattr__(self, "client_certificate_data", cert)
        object.__setattr__(self, "client_key_data", key)
        if token is None and cert is None and key is None:
            raise ValueError("no token and no client certificate/key pair")
        if (cert is None) != (key is None):
            raise ValueError("only one of client certificate and key; both are required")
        if token is not None and ("\r" in token or "\n" in token):
            raise ValueError("token contains a line break")
        expiry = self.expiration_timestamp
        if expiry is not None and expiry.tzinfo is None:
            raise ValueError("expiration_timestamp must be timezone-aware")
        not_before = not_after = None  # set here, not by default: a subclass's __init__ skips slots
        if cert is not None and key is not None:
            not_before, not_after, readable_key = _check_key_pair(cert, key)
            object.__setattr__(self, "client_key_data", readable_key)
        object.__setattr__(self, "certificate_not_before", not_before)
        object.__setattr__(self, "certificate_not_after", not_after)

    @classmethod
    def from_status(cls, status: ExecCredentialStatus) -> Credential:
        """Build from an ExecCredential status; ``ValueError`` names what is wrong."""
        return credential_from_status_fields(
            cls,
            status.expiration_timestamp, status.token, status.client_certificate_data, status.client_key_data
        )


    @property
    def kind(self) -> str:
        """``"token"``, ``"client-certificate"`` or ``"token+client-certificate"``."""
        if self.token and self.client_certificate_data:
            return "token+client-certificate"
        return "token" if self.token else "client-certificate"

    def expired(self, now: datetime | None = None) -> bool:
        """True once ``expiration_timestamp`` has passed (never, without one)."""
        if self.expiration_timestamp is None:
            return False
        return (now or datetime.now(timezone.utc)) >= self.expiration_timestamp

    def to_status(self) -> dict[str, Any]:
        """The ExecCredential ``status`` object, as a plugin prints it."""
        status: dict[str, Any] = {}
        if self.expiration_timestamp is not None:
            status["expirationTimestamp"] = format_rfc3339(self.expiration_timestamp)
        if self.token:
            status["token"] = self.token
        if self.client_certificate_data:
            status["clientCertificateData"] = self.client_certificate_data
            status["clientKeyData"] = self.client_key_data
        return status

    def to_exec_credential(self, api_version: str) -> dict[str, Any]:
        """A whole ExecCredential answer in ``api_version`` (what ``cpcreds get-credential`` prints)."""
        return {"apiVersion": api_version, "kind": "ExecCredential", "status": self.to_status()}

    def __repr__(self) -> str:
        expiry = format_rfc3339(self.expiration_timestamp) if self.expiration_timestamp else None
        return f"Credential(kind={self.kind!r}, expiration_timestamp={expiry!r})"

    __str__ = __repr__


def _check_key_pair(cert_pem: str, key_pem: str) -> tuple[datetime, datetime, str]:
    """The leaf certificate's validity, and the key as PEM that OpenSSL reads (``key_pem`` itself
    unless only client-go's reading of it succeeds)."""
    # Imported here: token-only users never pay for loading the X.509 machinery.
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    # Errors are raised outside the except blocks: nothing of the parser's (which may describe
    # the key) chains onto ours.
    chain = key = None
    try:
        chain = x509.load_pem_x509_certificates(cert_pem.encode("utf-8", "replace"))
    except ValueError:
        pass
    if not chain:
        raise ValueError("clientCertificateData is not a PEM certificate")
    readable = key_pem
    try:
        # Skipping the RSA consistency check keeps a 4096-bit key at microseconds, not
        # milliseconds; the public-key comparison below is the check that matters here.
        key = serialization.load_pem_private_key(
            key_pem.encode("utf-8", "replace"), password=None, unsafe_skip_rsa_key_validation=True
        )
    except (ValueError, TypeError):
        pass
    if key is None:
        # OpenSSL trusts the PEM label; client-go (tls.X509KeyPair) does not: it tries PKCS#1,
        # PKCS#8 and SEC1 on the first "* PRIVATE KEY" block. Accept what client-go accepts, and
        # keep it in the form the label promises to everyone else.
        key = _load_key_as_client_go_does(key_pem)
        if key is not None:
            readable = key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            ).decode("ascii")
    if key is None:
        raise ValueError("clientKeyData is not an unencrypted PEM private key")
    leaf = chain[0]
    raw = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if key.public_key().public_bytes(*raw) != leaf.public_key().public_bytes(*raw):
        raise ValueError("clientKeyData does not match the first certificate of clientCertificateData")
    return leaf.not_valid_before_utc, leaf.not_valid_after_utc, readable


_PEM_BEGIN = LazyPattern(r"-----BEGIN ([A-Z0-9 ]{0,64})-----")


def _load_key_as_client_go_does(key_pem: str) -> Any:
    """The private key of the first ``PRIVATE KEY`` / ``* PRIVATE KEY`` block in PKCS#1, PKCS#8
    or SEC1 form, whatever its label says; ``None`` when there is none or it does not parse."""
    from cryptography.hazmat.primitives import serialization

    # tls.X509KeyPair skips blocks of other types (a certificate given with the key).
    begin = next((m for m in _PEM_BEGIN.finditer(key_pem) if m.group(1) == "PRIVATE KEY" or m.group(1).endswith(" PRIVATE KEY")), None)
    if begin is None:
        return None
    end = key_pem.find(f"-----END {begin.group(1)}-----", begin.end())
    if end < 0:
        return None
    try:
        # A block with headers (Proc-Type: 4,ENCRYPTED) is not base64: refused as encrypted.
        der = base64.b64decode("".join(key_pem[begin.end() : end].split()), validate=True)
        # The DER reader tries PKCS#8, then the traditional forms (PKCS#1 RSA, SEC1 EC).
        return serialization.load_der_private_key(der, password=None, unsafe_skip_rsa_key_validation=True)
    except (ValueError, TypeError):  # binascii.Error is a ValueError
        return None


def credential_from_status_fields(
    cls: type[Credential], expiration_timestamp: str | None, token: str, client_certificate_data: str, client_key_data: str
) -> Credential:
    """:meth:`from_status` for the status fields as read from the wire (``expirationTimestamp``
    as RFC 3339 text, possibly empty or None), without building the model."""
    expiry = parse_rfc3339(expiration_timestamp) if expiration_timestamp else None
    return cls(
        token=token,
        client_certificate_data=client_certificate_data,
        client_key_data=client_key_data,
        expiration_timestamp=expiry,
    )
