"""The EKS token, byte for byte as ``aws eks get-token`` and aws-iam-authenticator make it.

An STS ``GetCallerIdentity`` GET request, presigned with SigV4 query parameters for 60 seconds,
with the header ``x-k8s-aws-id: <cluster name or id>`` among the signed headers; the token is
``k8s-aws-v1.`` followed by the URL in unpadded base64url. The cluster's authenticator sends the
request to STS (with the header) and maps the ARN STS answers to a Kubernetes user. It accepts a
URL up to 15 minutes after its ``X-Amz-Date``, so the credential is said to expire after 14.

Signed by :func:`cpcreds_aws.sigv4.presign_get` (botocore's ``SigV4QueryAuth`` steps on the
standard library): neither a botocore client (the STS service model) nor botocore's signer
module (several times a bare interpreter's start to import) is needed for a token.
"""

from __future__ import annotations

import base64
from datetime import datetime, timedelta, timezone
from typing import NamedTuple

from .endpoints import EndpointSettings, sts_endpoint
from .sigv4 import presign_get

__all__ = ["TOKEN_PREFIX", "CLUSTER_ID_HEADER", "URL_SECONDS", "TOKEN_SECONDS", "Keys", "eks_token"]

TOKEN_PREFIX = "k8s-aws-v1."
CLUSTER_ID_HEADER = "x-k8s-aws-id"
#: How long the presigned URL says it is valid (aws eks get-token's ExpiresIn).
URL_SECONDS = 60
#: The token's expirationTimestamp, from now: the authenticator's 15 minutes, less one.
TOKEN_SECONDS = 14 * 60
_PARAMS = {"Action": "GetCallerIdentity", "Version": "2011-06-15"}


class Keys(NamedTuple):
    """What signing needs (botocore's ReadOnlyCredentials shape), and for temporary keys when
    they expire and where they came from (in a user's words); ``repr`` shows the key id only."""

    access_key: str
    secret_key: str
    token: str | None = None
    expires_at: datetime | None = None
    source: str | None = None

    def __repr__(self) -> str:
        return f"Keys(access_key={self.access_key!r}, secret_key=..., token={'...' if self.token else None})"


def eks_token(
    keys: Keys, cluster: str, region: str | None, *, settings: EndpointSettings | None = None, now: datetime | None = None
) -> tuple[str, datetime]:
    """The token for ``cluster`` (its name, or an Outposts cluster's id) and when it expires,
    signed at ``now`` (default: the current time).

    Signed for ``region``'s STS endpoint and signing region as botocore resolves them with
    ``settings`` (FIPS, dual-stack, legacy global endpoint; default: the environment's), see
    :mod:`cpcreds_aws.endpoints`."""
    now = now or datetime.now(timezone.utc)
    endpoint = sts_endpoint(region, settings)
    url = presign_get(
        f"{endpoint.url}/",
        _PARAMS,
        {CLUSTER_ID_HEADER: cluster},
        access_key=keys.access_key,
        secret_key=keys.secret_key,
        token=keys.token,
        service="sts",
        region=endpoint.signing_region,
        expires=URL_SECONDS,
        now=now,
    )
    token = TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode("utf-8")).decode("ascii").rstrip("=")
    return token, now.replace(microsecond=0) + timedelta(seconds=TOKEN_SECONDS)
