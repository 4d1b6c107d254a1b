"""The gcp provider's answer to a kubelet image credential request (KEP-2133).

Google's registries (Container Registry and Artifact Registry) take an OAuth access token as a
password with the username ``oauth2accesstoken``. The same token the provider gets for GKE
clusters (its scopes include cloud-platform) opens them, so the answer is that token for each of
Google's registry keys, as cloud-provider-gcp's ``auth-provider-gcp`` answers:
``container.cloud.google.com``, ``gcr.io``, ``*.gcr.io`` and ``*.pkg.dev`` (which covers
``docker.pkg.dev`` and every regional ``<region>-docker.pkg.dev``).

The answer is cached per registry (``cacheKeyType: Registry``) for as long as the token stays
outside the provider's own refresh window (its last tenth, at least 30 s and at most 5 minutes:
``cacheDuration`` is about 55m for a fresh one-hour token), so a kubelet or
:class:`cpcreds.ImageCredentials` asks again before the registry would refuse the token.
"""

from __future__ import annotations

import math

from cpcreds.sdk import CACHE_KEY_REGISTRY, AuthConfig, CredentialProviderResponse

__all__ = ["GOOGLE_REGISTRIES", "USERNAME", "image_response"]

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
