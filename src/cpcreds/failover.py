"""Failover bookkeeping: which providers a profile may fall back on, and which one answered last.

The engine drives failover (it owns the cache, the flights and the backoff, all per plan); this
module holds what is per *profile*: a :class:`Route` (the profile's preferred plan, the chain of
candidates built from it on its first failure, the index of the candidate whose credential the
profile was last handed) and the words and labels a failover is counted and logged with.

Why a route remembers the provider that answered: a profile that failed over must not run its
failing provider on every call. Its next calls take the answering provider's cached credential,
without a lock, for as long as every provider before it is unavailable (in backoff, or being
retried); the engine retries the preferred provider in the background when its backoff ends, and
the profile goes back to it as soon as it answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from .access import AccessPlan, Candidate, resolve_chain
from .api import ClusterProfile
from .config import ProviderConfig
from .credential import Credential
from .errors import CredentialError, PluginNotAllowed, ProfileError, ProviderError, result_label
from .profiles import profile_ref

__all__ = ["Answer", "Route", "FAILOVER_REASONS", "failover_reason", "moves_on", "profile_label"]

#: The values of the ``reason`` label of ``cpcreds_failover_total``: the class of the failure of
#: the provider failed over from (never error text).
FAILOVER_REASONS = (
    "plugin_not_found",
    "plugin_timeout",
    "provider_timeout",
    "plugin_execution_error",
    "plugin_output_error",
    "provider_error",
    "client_internal_error",
    "profile_error",
)


class Answer(NamedTuple):
    """A credential and the plan whose provider answered it: with failover, not always the
    profile's preferred plan. After a 401, ``engine.invalidate(answer.plan, answer.credential)``
    drops exactly that credential."""

    credential: Credential
    plan: AccessPlan


def failover_reason(error: BaseException) -> str:
    """The ``reason`` label for a failover away from a provider that failed with ``error``: the
    class :func:`~cpcreds.errors.result_label` gives it, or ``profile_error``."""
    return "profile_error" if isinstance(error, ProfileError) else result_label(error)


def moves_on(error: BaseException) -> bool:
    """Whether failover may move past a provider that failed with ``error``: any provider failure
    (timeouts included) but a policy refusal, which is a configuration decision, not an outage;
    never an engine that was closed, or anything that is not the provider's failure."""
    return isinstance(error, (ProviderError, ProfileError)) and not isinstance(error, PluginNotAllowed)


def profile_label(profile: ClusterProfile | Mapping[str, Any]) -> str:
    """``namespace/name`` of a profile model or dict, for messages."""
    if isinstance(profile, ClusterProfile):
        return profile.ref
    return profile_ref(profile)


class Route:
    """One profile's failover state. ``current`` is written under the engine's lock and read
    without it (an int read is atomic); the chain is built once, on the first failure, and is
    pure, so two threads building it at once build equal chains."""

    __slots__ = ("primary", "ref", "current", "until", "_profile", "_chain")

    def __init__(self, primary: AccessPlan, profile: ClusterProfile | Mapping[str, Any]) -> None:
        self.primary = primary
        self.ref = profile_label(profile)
        #: Index in the chain of the candidate whose credential this profile was last handed.
        self.current = 0
        #: Monotonic time until which every candidate before ``current`` is backing off (so the
        #: lock-free path answers from ``current`` without looking at them).
        self.until = 0.0
        self._profile = profile
        self._chain: tuple[Candidate, ...] | None = None

    @property
    def built(self) -> tuple[Candidate, ...] | None:
        """The chain, or None while the preferred provider has never failed."""
        return self._chain

    def chain(self, config: ProviderConfig) -> tuple[Candidate, ...]:
        """Every candidate, the preferred one first (see :func:`~cpcreds.access.resolve_chain`)."""
        chain = self._chain
        if chain is None:
            try:
                chain = resolve_chain(config, self._profile)
            except CredentialError:  # resolve accepted the profile; nothing to fall back on then
                chain = (Candidate(self.primary.provider, self.primary),)
            if chain[0].plan != self.primary:  # the profile object changed under the same identity
                chain = (Candidate(self.primary.provider, self.primary),)
            self._chain = chain
        return chain
