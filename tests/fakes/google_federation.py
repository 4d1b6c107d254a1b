"""The workload identity federation side of :class:`tests.fakes.google.FakeGoogle`: a Kubernetes
cluster's service-account token issuer (what kube-apiserver signs pods' tokens with, and what a
kubelet hands an image credential provider under KEP-4412), and the check Google's STS makes on
such a token for a workload identity pool's OIDC provider.

STS, for an OIDC provider with an uploaded JWKS (a cluster whose issuer is not public), accepts a
subject token only if it is a JWT signed (RS256) by one of the JWKS' keys, its ``iss`` is the
provider's issuer URI, its ``aud`` names one of the provider's allowed audiences (by default the
provider's own URL, ``https://iam.googleapis.com/projects/N/locations/global/workloadIdentityPools/POOL/providers/P``),
and it is within its ``nbf``/``exp`` (a little skew allowed). The principal is then
``principal://iam.googleapis.com/projects/N/locations/global/workloadIdentityPools/POOL/subject/<sub>``
(the default attribute mapping, ``google.subject = assertion.sub``).
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

__all__ = ["ServiceAccountIssuer", "PoolProvider", "SKEW_SECONDS", "decode_claims", "b64url", "unb64url"]

#: Clock skew tolerated on ``nbf``/``exp``.
SKEW_SECONDS = 300


def b64url(data: bytes) -> str:
    """JWT's base64url, unpadded."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64url(text: str) -> bytes:
    """JWT's base64url, padding restored."""
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class ServiceAccountIssuer:
    """A cluster's service-account token issuer and its signing key."""

    issuer: str
    key_id: str
    private_key: rsa.RSAPrivateKey = field(repr=False)

    @classmethod
    def generate(cls, issuer: str = "https://container.googleapis.com/v1/projects/fake-project/locations/us-central1/clusters/fleet-1") -> ServiceAccountIssuer:
        return cls(issuer, secrets.token_hex(8), rsa.generate_private_key(public_exponent=65537, key_size=2048))

    def token(self, namespace: str = "apps", name: str = "puller", *, audience: str, lifetime: int = 3600, issuer: str | None = None) -> str:
        """A pod's projected service account token for ``audience``, as kube-apiserver signs it."""
        now = int(time.time())
        claims = {
            "aud": [audience],
            "exp": now + lifetime,
            "iat": now,
            "nbf": now,
            "iss": issuer or self.issuer,
            "sub": f"system:serviceaccount:{namespace}:{name}",
            "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": name, "uid": secrets.token_hex(8)}},
        }
        header = {"alg": "RS256", "kid": self.key_id, "typ": "JWT"}
        signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
        signature = self.private_key.sign(signing_input.encode("ascii"), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{b64url(signature)}"


@dataclass(frozen=True)
class PoolProvider:
    """A workload identity pool's OIDC provider as STS knows it: the audience STS is asked for,
    the issuer it trusts with that issuer's public key, the token audiences it allows, and the
    prefix of the principals it makes."""

    audience: str
    issuer: str
    key_id: str
    public_key: rsa.RSAPublicKey = field(repr=False)
    allowed_audiences: tuple[str, ...]
    principal_prefix: str

    def principal(self, token: str) -> str | None:
        """The principal for ``token``, or ``None`` when STS would refuse it."""
        parts = token.split(".")
        try:
            header, claims, signature = json.loads(unb64url(parts[0])), json.loads(unb64url(parts[1])), unb64url(parts[2])
        except (IndexError, ValueError):
            return None
        if len(parts) != 3 or not isinstance(header, dict) or not isinstance(claims, dict) or header.get("alg") != "RS256":
            return None
        if header.get("kid") not in (None, self.key_id):
            return None
        try:
            self.public_key.verify(signature, f"{parts[0]}.{parts[1]}".encode("ascii"), padding.PKCS1v15(), hashes.SHA256())
        except (InvalidSignature, ValueError):
            return None
        audiences = claims.get("aud")
        audiences = [audiences] if isinstance(audiences, str) else audiences
        now, exp, nbf = time.time(), claims.get("exp"), claims.get("nbf", 0)
        if (
            claims.get("iss") != self.issuer
            or not isinstance(audiences, list)
            or not set(self.allowed_audiences) & {a for a in audiences if isinstance(a, str)}
            or not isinstance(exp, (int, float))
            or exp < now - SKEW_SECONDS
            or not isinstance(nbf, (int, float))
            or nbf > now + SKEW_SECONDS
        ):
            return None
        subject = claims.get("sub")
        return self.principal_prefix + subject if isinstance(subject, str) and subject else None

    @classmethod
    def for_issuer(cls, issuer: ServiceAccountIssuer, audience: str, pool: str, allowed_audiences: tuple[str, ...]) -> PoolProvider:
        """``pool``: ``projects/N/locations/global/workloadIdentityPools/POOL``."""
        prefix = f"principal://iam.googleapis.com/{pool}/subject/"
        return cls(audience, issuer.issuer, issuer.key_id, issuer.private_key.public_key(), allowed_audiences, prefix)


def decode_claims(token: str) -> dict[str, Any]:
    """A JWT's claims, unverified (for tests that look at what was sent)."""
    return json.loads(unb64url(token.split(".")[1]))
