"""Azure Container Registry credentials for the kubelet (KEP-2133), for the registries
cloud-provider-azure's ``acr-credential-provider`` serves.

ACR takes, as a password with the username ``00000000-0000-0000-0000-000000000000``, a refresh
token it issues for an Entra ID access token: ``POST https://<registry>/oauth2/exchange`` with
``grant_type=access_token``, ``service=<registry>``, ``tenant`` and ``access_token`` answers
``{"refresh_token": ...}`` (what ``az acr login`` and ``acr-credential-provider`` do). The Entra
token is for the ACR audience, ``https://containerregistry.azure.net``, in every cloud: a registry
may refuse ARM-audience tokens (its ``azureADAuthenticationAsArmPolicy`` disabled), and never
refuses the ACR audience. Where there is no ACR audience (Azure Local, Azure Stack Hub), the
``acrAudience`` option names ``arm`` (the registry's cloud's ARM) or the ARM endpoint itself.

Which images are ACR's, as ``acr-credential-provider`` decides it: the image's host is a registry
name (letters and digits) followed by one of the login-server suffixes (``.azurecr.io``,
``.azurecr.cn``, ``.azurecr.de``, ``.azurecr.us``, and a cloud's own suffix given as
``containerRegistryDnsSuffix``), or is listed in ``registries``; ``registryMirror`` maps a source
registry (``docker.io``) to the ACR that mirrors it, whose credential answers for both. Any other
image is answered with no credentials, as that plugin does, so that a broad ``matchImages`` does
not make the kubelet log an error on every pull.

The answer is for the requested registry only (``cacheKeyType: Registry``), cached until the
refresh token (a JWT, 3 hours on ACR) enters the engine's refresh window.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # the options import this module: an exec plugin's run loads no KEP-2133 types
    from cpcreds.sdk import CredentialProviderResponse

__all__ = [
    "USERNAME",
    "ACR_AUDIENCE",
    "ACR_SUFFIXES",
    "Target",
    "login_server",
    "target_of",
    "arm_audience",
    "parse_refresh_token",
    "image_response",
    "no_credentials",
]

#: The username ACR expects with a refresh token as the password.
USERNAME = "00000000-0000-0000-0000-000000000000"
#: The audience of Entra tokens for ACR, in every cloud (acr-credential-provider's ``AcrAudience``).
ACR_AUDIENCE = "https://containerregistry.azure.net"
#: ACR's login-server suffixes (acr-credential-provider's list) and the ARM audience of each cloud.
ACR_SUFFIXES: dict[str, str] = {
    ".azurecr.io": "https://management.azure.com",
    ".azurecr.cn": "https://management.chinacloudapi.cn",
    ".azurecr.de": "https://management.microsoftazure.de",
    ".azurecr.us": "https://management.usgovcloudapi.net",
}
_NAME = re.compile(r"[A-Za-z0-9]+")  # an ACR registry name: letters and digits only
_TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_DOCKER_HUB = "docker.io"


def _host(image: str) -> str:
    """The first path component of an image reference: its registry host when it has one."""
    return image.partition("/")[0]


def login_server(image: str, suffixes: Iterable[str], registries: Iterable[str] = ()) -> str:
    """The ACR login server an image is pulled from, as written in the image; ``""`` when the
    image's host is no ``<name><suffix>`` (``name`` letters and digits) nor one of ``registries``."""
    host = _host(image)
    if not host.isascii():
        return ""
    lowered = host.lower()
    if lowered in registries:
        return host
    for suffix in suffixes:
        if lowered.endswith(suffix) and _NAME.fullmatch(host[: -len(suffix)]):
            return host
    return ""


class Target(NamedTuple):
    """Where an image's credential comes from: the ACR ``login_server`` (``""``: not ACR), and
    ``source``, the registry it mirrors when the image was mapped by ``registryMirror``."""

    login_server: str
    source: str = ""


def target_of(image: str, suffixes: Iterable[str], registries: Iterable[str] = (), mirrors: Mapping[str, str] | None = None) -> Target:
    """The image's :class:`Target`. A mirror maps the image's registry host exactly (a Docker Hub
    short name, ``nginx`` or ``library/nginx``, is ``docker.io``'s), never a prefix of it."""
    host = _host(image).lower()
    if "/" not in image or not ("." in host or ":" in host or host == "localhost"):
        host = _DOCKER_HUB
    mirror = (mirrors or {}).get(host)
    if mirror is not None:
        # The mirror is checked to be an ACR login server when the options are read.
        return Target(mirror, host)
    return Target(login_server(image, suffixes, registries))


def arm_audience(registry: str, suffixes: Mapping[str, str], default: str) -> str:
    """The ARM audience of ``registry``'s cloud, by its suffix; ``default`` for a host of no
    known cloud (a listed registry, a custom cloud's suffix)."""
    lowered = registry.lower()
    for suffix, audience in suffixes.items():
        if lowered.endswith(suffix):
            return audience
    return default


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


def image_response(target: Target, refresh_token: str, cache_seconds: float) -> CredentialProviderResponse:
    """The answer for ``target``: its refresh token under ACR's username for the login server
    (and for the mirrored source registry), cacheKeyType Registry, ``cacheDuration``
    ``cache_seconds`` rounded down (0, "do not cache", when under a second)."""
    from cpcreds.sdk import CACHE_KEY_REGISTRY, AuthConfig, CredentialProviderResponse

    seconds = math.floor(cache_seconds) if math.isfinite(cache_seconds) and cache_seconds >= 1 else 0
    auth = AuthConfig(username=USERNAME, password=refresh_token)
    keys = (target.login_server, target.source) if target.source else (target.login_server,)
    return CredentialProviderResponse(CACHE_KEY_REGISTRY, dict.fromkeys(keys, auth), cache_duration=seconds)


def no_credentials() -> CredentialProviderResponse:
    """The answer for an image that is not ACR's: no credentials, not to be cached by registry."""
    from cpcreds.sdk import CACHE_KEY_REGISTRY, CredentialProviderResponse

    return CredentialProviderResponse(CACHE_KEY_REGISTRY, {}, cache_duration=0)
