"""The aws provider's answer to a kubelet image credential request (KEP-2133): ECR's
``GetAuthorizationToken``, as the kubelet's ``ecr-credential-provider`` answers.

Only ECR registries are answered for, with ecr-credential-provider's patterns:
``<account>.dkr.ecr.<region>.amazonaws.com`` (and ``.amazonaws.com.cn``, ``.amazonaws.eu``, the
``dkr.ecr-fips`` FIPS hosts, the dual-stack ``on.aws`` names and the isolated partitions'
suffixes), and ECR Public (``public.ecr.aws``, ``ecr-public.aws.com``). A private registry's
token is asked of its region (its FIPS endpoint for a FIPS host), ECR Public's of ``ecr-public``
in ``us-east-1`` (its only region). The answer is the decoded ``user:password`` (user ``AWS``) of
the ``authorizationData`` entry whose ``proxyEndpoint`` is the registry's (its account and
region; none such: an error; ECR Public answers one entry), for the registry's host,
``cacheKeyType: Registry``, cached for half the token's remaining lifetime and never longer
than 6 hours (ECR tokens live 12: an ``expiresAt`` far ahead is broken or hostile, and would set
the kubelet's cache for as long); an answer without ``expiresAt`` is not cached
(``cacheDuration: 0``), as ecr-credential-provider answers it.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from cpcreds.sdk import CACHE_KEY_REGISTRY, AuthConfig, CredentialProviderResponse

from .failures import Unusable

__all__ = ["ECR_HOST", "ECR_PUBLIC_HOSTS", "ECR_PUBLIC_REGION", "MAX_CACHE_SECONDS", "EcrRegistry", "ecr_registry", "image_response"]

#: ecr-credential-provider's pattern (cloud-provider-aws, cmd/ecr-credential-provider/main.go).
ECR_HOST = re.compile(
    r"(?P<account>[0-9]{12})\.dkr[.\-]ecr(?P<fips>-fips)?\.(?P<region>[a-zA-Z0-9][a-zA-Z0-9\-_]*)\."
    r"(amazonaws\.(?:com(?:\.cn)?|eu)|on\.(?:aws|amazonwebservices\.com\.cn)|sc2s\.sgov\.gov|c2s\.ic\.gov|cloud\.adc-e\.uk|csp\.hci\.ic\.gov)",
    re.ASCII,
)
#: ECR Public's registry hosts (IPv4 and dual-stack), as ecr-credential-provider lists them.
ECR_PUBLIC_HOSTS = ("public.ecr.aws", "ecr-public.aws.com")
#: ECR Public's API is only in this region (of the aws partition).
ECR_PUBLIC_REGION = "us-east-1"
# ECR's password is a few KiB; the decoded token is bounded to refuse nonsense early.
_MAX_TOKEN_CHARS = 64 * 1024
#: The longest cache duration answered: half of an ECR token's 12 hours.
MAX_CACHE_SECONDS = 6 * 3600


@dataclass(frozen=True)
class EcrRegistry:
    """An ECR registry: a private one (``account``, ``region``, ``fips``) or ECR Public's (``public``)."""

    host: str
    account: str
    region: str
    fips: bool
    public: bool = False

    @property
    def service(self) -> str:
        """The botocore service that hands out its tokens."""
        return "ecr-public" if self.public else "ecr"

    @property
    def operation(self) -> str:
        return "ECR Public GetAuthorizationToken" if self.public else "ECR GetAuthorizationToken"


def ecr_registry(image: str) -> EcrRegistry | None:
    """The ECR registry ``image`` is in, or ``None`` when its registry is not ECR's. The registry
    is the image's first component (all of it when it has no ``/``, as ecr-credential-provider reads it)."""
    host = image.split("/", 1)[0].lower()
    if host in ECR_PUBLIC_HOSTS:
        return EcrRegistry(host, "", ECR_PUBLIC_REGION, False, public=True)
    match = ECR_HOST.fullmatch(host)
    if match is None:
        return None
    return EcrRegistry(host, match["account"], match["region"], match["fips"] is not None)


def image_response(registry: EcrRegistry, answer: Any, now: datetime | None = None) -> CredentialProviderResponse:
    """The response for ECR's ``GetAuthorizationToken`` ``answer`` (botocore's parsed dict).
    Raises :class:`~cpcreds_aws.failures.Unusable` saying what is wrong with an answer that is not usable (never quoting it)."""
    name = registry.operation
    data = answer.get("authorizationData") if isinstance(answer, dict) else None
    if registry.public:  # one entry, for ECR Public
        data = [data] if isinstance(data, dict) else None
    if not isinstance(data, list) or not data:
        raise Unusable(f"{name} answered without authorizationData")
    entry = data[0] if registry.public else next(
        (item for item in data if isinstance(item, dict) and _is_for(item.get("proxyEndpoint"), registry)), None
    )
    if entry is None:
        raise Unusable(f"{name} answered no authorizationData for {registry.host}")
    token, expires_at = entry.get("authorizationToken"), entry.get("expiresAt")
    if not isinstance(token, str) or not 0 < len(token) <= _MAX_TOKEN_CHARS:
        raise Unusable(f"{name} answered without an authorizationToken")
    try:
        username, sep, password = base64.b64decode(token, validate=True).decode("utf-8").partition(":")
    except (binascii.Error, ValueError):  # not base64, or not UTF-8
        username, sep, password = "", "", ""
    if not sep or not username or not password:
        raise Unusable(f"{name} answered with an authorizationToken that is not base64 of user:password")
    auth = {registry.host: AuthConfig(username=username, password=password)}
    if expires_at is None:  # not cached (ecr-credential-provider's answer)
        return CredentialProviderResponse(CACHE_KEY_REGISTRY, auth, cache_duration=0)
    if not isinstance(expires_at, datetime):
        raise Unusable(f"{name} answered an expiresAt that is not a time")
    expires_at = expires_at if expires_at.tzinfo else expires_at.replace(tzinfo=timezone.utc)
    remaining = (expires_at - (now or datetime.now(timezone.utc))).total_seconds()
    if remaining <= 0:
        raise Unusable(f"{name} answered with a token that has already expired")
    half = remaining / 2
    seconds = min(math.floor(half), MAX_CACHE_SECONDS) if math.isfinite(half) and half >= 1 else 0
    return CredentialProviderResponse(CACHE_KEY_REGISTRY, auth, cache_duration=seconds)


def _is_for(endpoint: object, registry: EcrRegistry) -> bool:
    # ECR names the registry a token opens by URL (https://<account>.dkr.ecr.<region>.amazonaws.com):
    # the same account and region as the image's host, whichever of its names (FIPS, dual-stack) that is.
    if not isinstance(endpoint, str) or len(endpoint) > 300:
        return False
    host = endpoint.removeprefix("https://").split("/", 1)[0].lower()
    match = ECR_HOST.fullmatch(host)
    return match is not None and match["account"] == registry.account and match["region"] == registry.region
