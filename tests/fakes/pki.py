"""A throwaway PKI for tests: one CA, one server certificate, client certs on demand.

Built on trustme, which (as of 1.2.1) can already set validity and key type for
leaf certificates, so no hand-rolled X.509 is needed here.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

import trustme
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

#: Names the server certificate is valid for. ``spoke.test`` never resolves; it
#: exists so tests can connect to 127.0.0.1 while verifying a different name
#: (``tls_server_name`` / SNI).
SERVER_NAMES: tuple[str, ...] = ("127.0.0.1", "localhost", "spoke.test")

# OpenSSL's X509_V_FLAG_NO_CHECK_TIME. The ssl module has no constant for it,
# but SSLContext.verify_flags passes the integer through to OpenSSL unchanged.
_X509_V_FLAG_NO_CHECK_TIME = 0x200000

KeyType = Literal["ec", "rsa"]
_KEY_TYPES: dict[KeyType, trustme.KeyType] = {
    "ec": trustme.KeyType.ECDSA,
    "rsa": trustme.KeyType.RSA,
}


@dataclass(frozen=True)
class ClientCert:
    """A client certificate and its private key, both PEM text.

    ``not_before``/``not_after`` are read back from the issued certificate, so
    they are aware UTC datetimes truncated to whole seconds, like X.509 itself.
    """

    # Neither PEM is shown by repr(): private keys stay out of assertion
    # output, and the certificate is just noise there.
    cert_pem: str = field(repr=False)
    key_pem: str = field(repr=False)
    common_name: str
    not_before: datetime
    not_after: datetime

    @property
    def expired(self) -> bool:
        return datetime.now(UTC) > self.not_after


class PKI:
    """A CA plus a server certificate for :data:`SERVER_NAMES`."""

    def __init__(self) -> None:
        self.ca = trustme.CA()
        self.ca_pem: bytes = self.ca.cert_pem.bytes()
        self.server_cert: trustme.LeafCert = self.ca.issue_cert(*SERVER_NAMES)

    def server_ssl_context(self, require_client_cert: bool = False) -> ssl.SSLContext:
        """A server-side context serving :attr:`server_cert`.

        Client certificates are requested, and must chain to this CA to get
        through the handshake. Their validity period is deliberately *not*
        checked here: kube-apiserver completes the handshake and lets its x509
        authenticator turn an expired certificate into a 401, and SpokeServer
        does the same, so tests see the real API server's behaviour.
        """
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.server_cert.configure_cert(ctx)
        self.ca.configure_trust(ctx)
        ctx.verify_mode = ssl.CERT_REQUIRED if require_client_cert else ssl.CERT_OPTIONAL
        # Python 3.13 makes create_default_context() apply OpenSSL's strict X.509 checks, which
        # refuse client certificates that kube-apiserver (Go's crypto/x509) accepts, such as
        # trustme's leaf for a bare common name: the fake verifies as the real server does. Set
        # in one assignment: reading verify_flags back (an enum) drops NO_CHECK_TIME's bit.
        flags = int(ctx.verify_flags) & ~int(getattr(ssl, "VERIFY_X509_STRICT", 0))
        ctx.verify_flags = flags | _X509_V_FLAG_NO_CHECK_TIME
        return ctx

    def issue_client_cert(
        self,
        common_name: str,
        *,
        not_before: datetime | None = None,
        not_after: datetime | None = None,
        key_type: KeyType = "ec",
    ) -> ClientCert:
        """Issue a client certificate for ``CN=common_name``.

        The default validity is an hour in the past (tolerates clock skew) to a
        day ahead. Pass ``not_after`` in the past for an expired certificate.
        """
        now = datetime.now(UTC)
        leaf = self.ca.issue_cert(
            common_name=common_name,
            not_before=not_before or now - timedelta(hours=1),
            not_after=not_after or now + timedelta(days=1),
            key_type=_KEY_TYPES[key_type],
        )
        cert_pem = leaf.cert_chain_pems[0].bytes()
        cert = x509.load_pem_x509_certificate(cert_pem)
        return ClientCert(
            cert_pem=cert_pem.decode("ascii"),
            key_pem=leaf.private_key_pem.bytes().decode("ascii"),
            common_name=common_name,
            not_before=cert.not_valid_before_utc,
            not_after=cert.not_valid_after_utc,
        )


def make_key_pair(
    *, not_after: datetime | None = None, common_name: str = "fleet-client"
) -> tuple[str, str, x509.Certificate]:
    """A fresh EC key and a self-signed certificate for it, both PEM text (no CA involved)."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.now(UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(hours=1))
        .not_valid_after(not_after or now + timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM).decode("ascii")
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode("ascii")
    return cert_pem, key_pem, cert
