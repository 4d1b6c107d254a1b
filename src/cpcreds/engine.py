"""CredentialEngine: the one stateful part. Credentials cached per AccessPlan, fetched once.

Flow: ``profile -> plan (access.resolve) -> cached credential, or one provider call``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Any

from .access import AccessPlan, resolve
from .api import ClusterProfile
from .config import ProviderConfig, load_config
from .credential import Credential
from .errors import CredentialError, ProviderError
from .hookspecs import Provider
from .registry import ProviderRegistry

__all__ = ["CredentialEngine", "call_provider"]


def call_provider(provider: Provider, plan: AccessPlan) -> Credential:
    """Call a provider once; anything it raises becomes a :class:`CredentialError`."""
    try:
        credential = provider.get_credential(plan)
    except CredentialError:
        raise
    except Exception as exc:  # a third-party provider's bug must not escape as a random type
        raise ProviderError(f"{type(exc).__name__}: {exc}", provider=plan.provider) from exc
    if not isinstance(credential, Credential):
        raise ProviderError(f"returned {type(credential).__name__}, not a Credential", provider=plan.provider)
    return credential


class CredentialEngine:
    """Gets credentials for ClusterProfiles, caching each until it expires."""

    def __init__(self, config: ProviderConfig, *, registry: ProviderRegistry | None = None) -> None:
        self.config = config
        self.registry = registry or ProviderRegistry()
        self._providers = self.registry.create_all(config)
        self._lock = threading.Lock()
        self._cache: dict[AccessPlan, Credential] = {}
        self._flights: dict[AccessPlan, threading.Lock] = {}

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], **kwargs: Any) -> CredentialEngine:
        return cls(load_config(path), **kwargs)

    def resolve(self, profile: ClusterProfile | Mapping[str, Any]) -> AccessPlan:
        return resolve(self.config, profile)

    def fetch(self, plan: AccessPlan) -> Credential:
        """One provider call for ``plan``, bypassing the cache."""
        return call_provider(self._providers[plan.provider], plan)

    def get_credential(self, profile: ClusterProfile | Mapping[str, Any]) -> Credential:
        plan = self.resolve(profile)
        with self._lock:
            cached = self._cache.get(plan)
            if cached is not None and not cached.expired():
                return cached
            flight = self._flights.setdefault(plan, threading.Lock())
        with flight:
            with self._lock:
                cached = self._cache.get(plan)
                if cached is not None and not cached.expired():
                    return cached
            credential = self.fetch(plan)
            with self._lock:
                self._cache[plan] = credential
            return credential

    def close(self) -> None:
        with self._lock:
            self._cache.clear()
