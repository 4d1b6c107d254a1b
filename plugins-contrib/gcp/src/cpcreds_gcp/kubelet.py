"""The gcp provider's answer to a kubelet image credential request (KEP-2133).

Google's registries (Container Registry and Artifact Registry) take an OAuth access token as a
password with the username ``oauth2accesstoken``. The same token the provider gets for GKE
clusters (its scopes include cloud-platform) opens them, so the answer is that token for each of
Google's registry keys, as cloud-provider-gcp's ``auth-provider-gcp`` answers:
``container.cloud.google.com``, ``gcr.io``, ``*.gcr.io`` and ``*.pkg.dev`` (which covers
``docker.pkg.dev`` and every regional ``<region>-docker.pkg.dev``).

An image outside those registries (``registry.k8s.io``, ``docker.io``, ...) gets an empty
success: no ``auth``, so the kubelet pulls it without credentials from this plugin, and no Google
token is fetched or handed out for it. auth-provider-gcp answers such an image with the node's
token for the image's own registry as well; cpcreds does not give a Google token to a registry
that is not Google's.

The answer is cached per registry (``cacheKeyType: Registry``) for as long as the token stays
outside the provider's own refresh window (its last tenth, at least 30 s and at most 5 minutes:
``cacheDuration`` is about 55m for a fresh one-hour token), so a kubelet or
:class:`cpcreds.ImageCredentials` asks again before the registry would refuse the token.
"""

from __future__ import annotations

import math

from cpcreds.sdk import CACHE_KEY_REGISTRY, AuthConfig, CredentialProviderResponse

__all__ = ["GOOGLE_REGISTRIES", "USERNAME", "image_response", "empty_response", "is_google_registry"]

#: The registry keys a Google access token is answered for (cloud-provider-gcp's list).
GOOGLE_REGISTRIES: tuple[str, ...] = ("container.cloud.google.com", "gcr.io", "*.gcr.io", "*.pkg.dev")
#: The username Google's registries expect with an access token as the password.
USERNAME = "oauth2accesstoken"


def image_response(token: str, cache_seconds: float) -> CredentialProviderResponse:
    """The response for ``token``: every Google registry key, cacheKeyType Registry, and
    ``cacheDuration`` ``cache_seconds`` rounded down to whole seconds (0, "do not cache", when
    less than one is left)."""
    auth = AuthConfig(username=USERNAME, password=token)
    seconds = math.floor(cache_seconds) if math.isfinite(cache_seconds) and cache_seconds >= 1 else 0
    return CredentialProviderResponse(CACHE_KEY_REGISTRY, {key: auth for key in GOOGLE_REGISTRIES}, cache_duration=seconds)


def is_google_registry(image: str) -> bool:
    """Whether ``image``'s registry is one of :data:`GOOGLE_REGISTRIES`, matched as the kubelet
    matches ``matchImages`` (``*`` is one whole label of the host, and a port must be absent as
    it is in the patterns). An image without a registry host (``busybox``, ``library/nginx``) is
    Docker Hub's."""
    head, slash, _ = image.partition("/")
    if not slash or not ("." in head or ":" in head or head == "localhost"):
        return False
    host = head.lower()
    for pattern in GOOGLE_REGISTRIES:
        labels, wanted = host.split("."), pattern.split(".")
        if len(labels) == len(wanted) and all(w == "*" and label or w == label for w, label in zip(wanted, labels)):
            return True
    return False


def empty_response() -> CredentialProviderResponse:
    """The answer for an image outside Google's registries: success with no credentials, cached
    for the kubelet config's ``defaultCacheDuration``."""
    return CredentialProviderResponse(CACHE_KEY_REGISTRY, {})
