"""Azure Container Registry credentials for the kubelet (KEP-2133).

ACR takes, as a password with the username ``00000000-0000-0000-0000-000000000000``, a refresh
token it issues for an Entra ID access token: ``POST https://<registry>/oauth2/exchange`` with
``grant_type=access_token``, ``service=<registry>``, ``tenant`` and ``access_token`` answers
``{"refresh_token": ...}`` (what ``az acr login`` and cloud-provider-azure's
``acr-credential-provider`` do). The Entra token is for the registry's cloud's ARM scope.

The answer is for the requested registry only (``cacheKeyType: Registry``), cached until the
refresh token (a JWT, 3 hours on ACR) enters the engine's refresh window.
"""

from __future__ import annotations

import json
import math
import re

from cpcreds.sdk import CACHE_KEY_REGISTRY, AuthConfig, CredentialProviderResponse

__all__ = ["USERNAME", "ACR_SUFFIXES", "registry_of", "default_scope", "parse_refresh_token", "image_response"]

#: The username ACR expects with a refresh token as the password.
USERNAME = "00000000-0000-0000-0000-000000000000"
#: Registry host suffixes and the ARM scope an Entra token for each cloud's registries has.
ACR_SUFFIXES: dict[str, str] = {
    ".azurecr.io": "https://management.azure.com/.default",
    ".azurecr.cn": "https://management.chinacloudapi.cn/.default",
    ".azurecr.us": "https://management.usgovcloudapi.net/.default",
}
_HOST = re.compile(r"[a-z0-9.\-]{1,253}(:[0-9]{1,5})?")
_TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")


def registry_of(image: str) -> str:
    """The registry host (``host[:port]``, lower case) of an image reference, ``""`` when it
    names none (a Docker Hub short name)."""
    first, slash, _ = image.partition("/")
    if not slash or not ("." in first or ":" in first or first == "localhost"):
        return ""
    host = first.lower()
    return host if _HOST.fullmatch(host) else ""


def default_scope(registry: str) -> str | None:
    """The ARM scope for ``registry`` by its suffix, ``None`` for a host that is no ACR name."""
    host = registry.rsplit(":", 1)[0] if registry.count(":") == 1 else registry
    for suffix, scope in ACR_SUFFIXES.items():
        if host.endswith(suffix) and len(host) > len(suffix):
            return scope
    return None


def parse_refresh_token(body: bytes) -> str | None:
    """The ``refresh_token`` of an exchange answer, ``None`` unless it is a usable token."""
    try:
        document = json.loads(body.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    token = document.get("refresh_token") if isinstance(document, dict) else None
    if not isinstance(token, str) or not 0 < len(token) <= 16 * 1024 or not _TOKEN.fullmatch(token):
        return None
    return token


def image_response(registry: str, refresh_token: str, cache_seconds: float) -> CredentialProviderResponse:
    """The answer for ``registry``: its refresh token under ACR's username, cacheKeyType Registry,
    ``cacheDuration`` ``cache_seconds`` rounded down (0, "do not cache", when under a second)."""
    seconds = math.floor(cache_seconds) if math.isfinite(cache_seconds) and cache_seconds >= 1 else 0
    auth = AuthConfig(username=USERNAME, password=refresh_token)
    return CredentialProviderResponse(CACHE_KEY_REGISTRY, {registry: auth}, cache_duration=seconds)
