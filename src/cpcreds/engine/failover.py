"""Failover: which providers a profile may fall back on, which one answered last, and the walk.

The cache, the flights and the backoff are per plan (:mod:`cpcreds.entries`); this module holds
what is per *profile*: a :class:`Route` (the profile's preferred plan, the chain of candidates
built from it on its first failure, the index of the candidate whose credential the profile was
last handed), the words and labels a failover is counted and logged with, and
:class:`FailoverWalk`, which walks a route's candidates for an answer.

Why a route remembers the provider that answered: a profile that failed over must not run its
failing provider on every call. Its next calls take the answering provider's cached credential,
without a lock, for as long as every provider before it is unavailable (in backoff, or being
retried); the engine retries the preferred provider in the background when its backoff ends, and
the profile goes back to it as soon as it answers.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Generator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from ..config.access import AccessPlan, Candidate, resolve_chain
from ..credential import Credential
from .entries import CredentialStore, fresh_copy
from ..errors import AllProvidersFailed, CredentialError, EngineClosed, PluginNotAllowed, ProfileError, ProviderError, result_label
from .flight import Flight
from ..logs import get_logger, redact_text
from ..config.profiles import profile_ref

if TYPE_CHECKING:
    from ..config.wire import ClusterProfile
    from ..config import ProviderConfig
    from ..metrics import Metrics

__all__ = ["Answer", "Route", "FailoverWalk", "Step", "FAILOVER_REASONS", "failover_reason", "moves_on", "profile_label"]

_log = get_logger("cpcreds.engine")

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
    drops exactly that credential (as does ``binding.invalidate(answer.credential)``)."""

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
    api = sys.modules.get("cpcreds.config.wire")  # a model exists only if its module was imported
    if api is not None and isinstance(profile, api.ClusterProfile):
        return profile.ref
    return profile_ref(profile)


class Route:
    """One profile's failover state. ``current`` is written under the engine's lock and read
    without it (an int read is atomic); the chain is built once, on the first failure, and is
    pure, so two threads building it at once build equal chains."""

    __slots__ = ("primary", "ref", "current", "until", "held", "_profile", "_chain")

    def __init__(self, primary: AccessPlan, profile: ClusterProfile | Mapping[str, Any]) -> None:
        self.primary = primary
        self.ref = profile_label(profile)
        #: Index in the chain of the candidate whose credential this profile was last handed.
        self.current = 0
        #: Monotonic time until which every candidate before ``current`` is backing off (so the
        #: lock-free path answers from ``current`` without looking at them).
        self.until = 0.0
        #: None: a route no held binding owns; True: its binding is held (its chain's plans are
        #: held in the store as the chain is built); False: released, its profile is gone.
        self.held: bool | None = None
        self._profile = profile
        self._chain: tuple[Candidate, ...] | None = None

    @property
    def built(self) -> tuple[Candidate, ...] | None:
        """The chain, or None while the preferred provider has never failed."""
        return self._chain

    def chain(self, config: ProviderConfig, store: CredentialStore) -> tuple[Candidate, ...]:
        """Every candidate, the preferred one first (see :func:`~cpcreds.config.access.resolve_chain`).
        A held route's later plans are held in ``store`` as the chain is set, under its lock, so
        a release racing the build drops exactly what was held."""
        chain = self._chain
        if chain is None:
            try:
                chain = resolve_chain(config, self._profile)
            except CredentialError:  # resolve accepted the profile; nothing to fall back on then
                chain = (Candidate(self.primary.provider, self.primary),)
            if chain[0].plan != self.primary:  # the profile object changed under the same identity
                chain = (Candidate(self.primary.provider, self.primary),)
            with store.lock:
                if self._chain is None:
                    self._chain = chain
                    if self.held:
                        store.add_holds(self.later_keys())
                chain = self._chain
        return chain

    def later_keys(self) -> list[str]:
        """The keys of the plans after the preferred one (none before the chain is built)."""
        chain = self._chain
        return [candidate.plan.key for candidate in chain[1:] if candidate.plan is not None] if chain is not None else []


#: What a walk (or any answer flow) asks its driver for: ``(plan, flight, deadline)``: lead the
#: fetch of ``flight`` when ``deadline`` is set (else another caller leads it), wait until it ends,
#: then resume the walk.
Step = tuple[AccessPlan, Flight, "float | None"]


class FailoverWalk:
    """Answers for failover profiles, over one engine's credential store."""

    def __init__(self, config: ProviderConfig, store: CredentialStore, metrics: Metrics) -> None:
        self.config = config
        self.store = store
        self.metrics = metrics
        self._lock = threading.Lock()  # orders the writes of Route.current (and their counting)

    def hit(self, route: Route) -> Answer | None:
        """Without a lock: the preferred plan's cache hit; or, for a profile that failed over,
        the answering plan's hit while every plan before it is unavailable (in backoff, or
        being fetched). Anything else (one of them may answer again) is :meth:`walk`'s."""
        store = self.store
        primary = route.primary
        credential = store.hit(primary)
        if credential is not None:
            if route.current:
                self._moved(route, 0, [])
            return Answer(credential, primary)
        current = route.current
        chain = route.built
        if not current or chain is None:
            return None
        mono = time.monotonic()
        if mono >= route.until:  # not every provider before the answering one is known to back off
            now = store.clock()
            for candidate in chain[:current]:
                if candidate.plan is not None and not store.unavailable(candidate.plan, now, mono):
                    return None
        plan = chain[current].plan
        assert plan is not None
        credential = store.hit(plan)
        return None if credential is None else Answer(credential, plan)

    def walk(self, route: Route) -> Generator[Step, None, Answer]:
        """The failover walk: yields a :data:`Step` whenever its driver must lead or wait for a
        fetch, and returns the :class:`Answer`.

        Candidates are tried in order. A cached credential answers. A plan in backoff is skipped
        at once with its last error. A plan without a credential is fetched and waited for,
        unless a later candidate holds a valid credential: then its fetch runs in the
        background, and the profile goes back to it once it answers. A failure moves on when the
        provider fails over (the chain ends at the first that does not) and is not a refusal.
        When several providers were tried and each failed: :class:`~cpcreds.AllProvidersFailed`."""
        attempts: list[tuple[str, CredentialError]] = []
        chain = route.built
        index = 0
        while True:
            if index == 0:
                plan: AccessPlan | None = route.primary
                provider = route.primary.provider
            else:
                if route.held is False:
                    break  # its profile is gone: start no fetch of another provider for it
                if chain is None:  # the first failure of the preferred provider: build the rest
                    chain = route.chain(self.config, self.store)
                if index >= len(chain):
                    break
                candidate = chain[index]
                plan, provider = candidate.plan, candidate.provider
                if plan is None:
                    assert candidate.error is not None
                    attempts.append((provider, candidate.error))
                    index += 1
                    continue
            assert plan is not None
            try:
                credential, flight, deadline = self.store.claim(plan, wait=not self._ready_after(chain, index))
            except EngineClosed:
                raise
            except CredentialError as exc:  # backing off: its last error, at once
                error = exc
            else:
                if credential is None and flight is not None:
                    yield plan, flight, deadline
                    if flight.abandoned:
                        continue  # nobody's failure: claim again
                    credential = flight.credential
                    if credential is None:
                        assert flight.error is not None
                        error = fresh_copy(flight.error)
                if credential is not None:
                    self._moved(route, index, attempts)
                    if index:
                        assert chain is not None
                        route.until = self.store.backing_off_until(chain[:index])
                    return Answer(credential, plan)
                if flight is None:  # fetched in the background; a later provider answers meanwhile
                    error = self.store.last_error(plan)
            if not moves_on(error):
                raise error
            attempts.append((provider, error))
            if index == 0 and not self.config.fails_over(provider):
                break
            index += 1
        if len(attempts) == 1:
            raise attempts[0][1]
        raise AllProvidersFailed(route.ref, tuple(attempts))

    def _ready_after(self, chain: tuple[Candidate, ...] | None, index: int) -> bool:
        """Whether a candidate after ``index`` holds a valid credential (then nobody waits for
        the ones before it: they are fetched in the background)."""
        if chain is None:
            return False
        now = self.store.clock()
        return any(candidate.plan is not None and self.store.valid(candidate.plan, now) for candidate in chain[index + 1 :])

    def _moved(self, route: Route, index: int, attempts: list[tuple[str, CredentialError]]) -> None:
        """Record that ``route``'s profile was answered by candidate ``index``; count and log
        each failover (once per move down the chain, whichever caller made it)."""
        if route.current == index:
            return
        with self._lock:
            previous, route.current = route.current, index
        chain = route.built
        if index > previous and chain is not None:
            for at in range(previous, index):
                source, target = chain[at].provider, chain[at + 1].provider
                error = attempts[at][1] if at < len(attempts) else None
                reason = failover_reason(error) if error is not None else "provider_error"
                self.metrics.failovers.labels(source, target, reason).inc()
                _log.warning(
                    "failing over to the next provider",
                    profile=route.ref,
                    from_provider=source,
                    to_provider=target,
                    reason=reason,
                    error=redact_text(str(error)) if error is not None else None,
                )
        elif index < previous and chain is not None:
            _log.info("a preferred provider answers again", profile=route.ref, provider=chain[index].provider, instead_of=chain[previous].provider)
