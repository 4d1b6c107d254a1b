"""Whether an Entra ID access token is for the resource it was asked for.

azure-identity hands on whatever token the endpoint (or ``az``) answered, and the token then goes
to the cluster or the registry: a token for another audience (Graph, ARM) would let that server
act as us elsewhere. So the provider reads the token's ``aud`` claim (without verifying the
signature: the point is not to send it, not to trust it) and a managed identity answer's
``resource``, and hands the token on only when they name what was asked.

One resource has several spellings in Entra's answers: a scope ``<resource>/.default`` names
``<resource>``; a v2 token's ``aud`` is the resource's application ID (a GUID) while a v1
token's is the identifier as requested, so the application ID and its default identifier URI
``api://<application ID>`` are one resource; identifier URIs compare without case and without a
trailing slash; ARM answers to its identifier URIs of each cloud and to its application ID.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

__all__ = ["resource_of", "audience_of", "is_for", "shown"]

_GUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_SEGMENT = re.compile(r"[A-Za-z0-9_-]+={0,2}")
_MAX_TOKEN_CHARS = 64 * 1024
# Azure Resource Manager: one application, an identifier URI per cloud and a legacy one per cloud.
_ARM_APP_ID = "797f4846-ba00-4fd7-ba43-dac1f8f63013"
_ARM = (
    ("https://management.azure.com", "https://management.core.windows.net"),
    ("https://management.chinacloudapi.cn", "https://management.core.chinacloudapi.cn"),
    ("https://management.usgovcloudapi.net", "https://management.core.usgovcloudapi.net"),
    ("https://management.microsoftazure.de", "https://management.core.cloudapi.de"),
)
_SHOWN = re.compile(r"(?:https?|api)://[a-z0-9.\-]{1,253}/?|[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}", re.IGNORECASE)


def resource_of(scope: str) -> str:
    """The resource a scope asks for: ``<resource>/.default`` → ``<resource>``."""
    return scope[: -len("/.default")] if scope.endswith("/.default") else scope


def _key(identifier: str) -> str:
    lowered = identifier.lower()
    return lowered[:-1] if lowered.endswith("/") else lowered


def _spellings(resource: str) -> frozenset[str]:
    key = _key(resource)
    names = {key}
    if _GUID.fullmatch(key):
        names.add(f"api://{key}")
    elif key.startswith("api://") and _GUID.fullmatch(key[len("api://"):]):
        names.add(key[len("api://"):])
    for cloud in _ARM:
        if key in cloud:
            names.update((*cloud, _ARM_APP_ID))
    return frozenset(names)


def _matches(value: Any, names: frozenset[str]) -> bool:
    return isinstance(value, str) and _key(value) in names


def is_for(scope: str, audience: Any) -> bool:
    """True when ``audience`` (an ``aud`` claim or a ``resource``: a string, or a non-empty list
    of strings, each of them) names the resource of ``scope``."""
    names = _spellings(resource_of(scope))
    if isinstance(audience, list):
        return bool(audience) and all(_matches(item, names) for item in audience)
    return _matches(audience, names)


def audience_of(token: str) -> Any:
    """The ``aud`` claim of a JWT (any JSON value), ``None`` when the token is no readable JWT or
    has no ``aud``: a token whose audience cannot be read is not for what was asked."""
    if len(token) > _MAX_TOKEN_CHARS or token.count(".") != 2:
        return None
    payload = token.split(".")[1]
    if not _SEGMENT.fullmatch(payload):
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (ValueError, binascii.Error, RecursionError):
        return None
    return claims.get("aud") if isinstance(claims, dict) else None


def shown(audience: Any) -> str:
    """An audience as a message may show it: an identifier URI's scheme and host, or a GUID;
    anything else (it came from the endpoint, it may echo a secret) is only described."""
    if isinstance(audience, str) and _SHOWN.fullmatch(audience):
        return audience
    if audience is None:
        return "none"
    return "a value that is no resource identifier"
