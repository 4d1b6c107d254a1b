"""CredentialEngine: the one stateful part of cpcreds.

``profile -> plan (access.resolve) -> cached credential, or one provider call``.

What it guarantees, per AccessPlan (equal plans share everything below):

- **Cache**: a credential is reused until its ``expirationTimestamp`` (for the life of the engine
  when it has none). The cache is bounded; expired and least recently used entries are purged.
  An answer that has already expired is a failure, never handed out.
- **Single-flight**: concurrent callers, threads and asyncio tasks alike, share one provider call
  (a :class:`~cpcreds.flight.Flight`). Each waiter's cancellation or Ctrl-C is its own.
- **Refresh ahead**: inside the refresh window before expiry, the next caller starts one background
  refresh and still gets the valid cached credential; nobody waits unless it has expired.
- **Invalidate**: after a 401, :meth:`CredentialEngine.invalidate` drops the credential only if it
  is still the cached one (client-go's rule: a stale 401 must not throw away a newer credential).
- **Backoff**: after a failure, the provider is not called again until an exponentially growing,
  jittered, capped delay has passed; meanwhile callers get the last error at once (or the cached
  credential, while it is still valid). A success resets it. Work that stopped without an answer
  (Ctrl-C, a closed event loop) is nobody's failure: no backoff, nothing cached.
- **Deadlines and workers**: every fetch ends by ``timeout`` after the request that started it;
  where it runs and how many run at once is :class:`~cpcreds.workers.Workers`' business.
- **Failover** (``failover: true``): when a profile's provider fails, the next provider the config
  lists and the profile offers answers instead (:meth:`CredentialEngine.get_answer` says which);
  everything above still holds per plan, so a provider in backoff is skipped at once. See
  docs/failover.md and :mod:`cpcreds.failover`.

How one fetch flows: :meth:`get_credential` → ``_claim`` (under the lock: a cached credential, or
the flight to wait on, and whether this caller leads it) → the leader runs ``_fetch`` (slot,
provider call, freshness check) → ``_publish`` (store, count, wake the waiters) → every waiter
reads the flight's outcome.
"""

from __future__ import annotations

import asyncio
import collections
import copy
import inspect
import json
import os
import threading
import time
import weakref
from collections.abc import Callable, Generator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # prometheus_client is imported only when metrics are asked for (cpcreds.metrics)
    from prometheus_client import CollectorRegistry

from .access import AccessPlan, resolve
from .api import ClusterProfile
from .config import ProviderConfig, load_config
from .credential import Credential, format_rfc3339
from .errors import (
    CLIENT_INTERNAL_ERROR,
    AllProvidersFailed,
    CredentialError,
    EngineClosed,
    NO_ERROR,
    InteractiveModeError,
    PluginError,
    PluginOutputError,
    ProviderError,
    ProviderTimeout,
    result_label,
)
from .failover import Answer, Route, failover_reason, moves_on
from .flight import Flight
from .hookspecs import Provider
from .logs import get_logger, redact_text
from .metrics import Metrics
from .policies import BackoffPolicy, RefreshPolicy
from .providers.exec import ExecProvider
from .registry import ProviderRegistry
from .workers import DEFAULT_MAX_CONCURRENT_FETCHES, DEFAULT_MAX_FETCHES_PER_PROVIDER, Workers

__all__ = ["CredentialEngine", "Answer", "RefreshPolicy", "BackoffPolicy", "call_provider"]

_log = get_logger(__name__)


def call_provider(provider: Provider, plan: AccessPlan) -> Credential:
    """Call a provider once, in this thread; anything it raises becomes a :class:`CredentialError`."""
    try:
        credential = provider.get_credential(plan)
    except CredentialError:
        raise
    except Exception as exc:  # a third-party provider's bug must not escape as a random type
        error = _provider_bug(exc, plan.provider)
    else:
        if isinstance(credential, Credential):
            return credential
        error = ProviderError(f"returned {type(credential).__name__}, not a Credential", provider=plan.provider)
    raise error  # outside the except block: no __context__ that could carry the provider's data


def _cannot_start(exc: BaseException, provider: str) -> ProviderError:
    error = ProviderError(f"cannot start the fetch: {type(exc).__name__}: {exc}", provider=provider)
    error.call_status = CLIENT_INTERNAL_ERROR
    return error


def _provider_bug(exc: BaseException, provider: str) -> ProviderError:
    return ProviderError(redact_text(f"{type(exc).__name__}: {exc}"), provider=provider)


class _Entry:
    """Everything the engine knows about one plan. Written under the engine's lock."""

    __slots__ = ("plan", "fresh", "expires_at", "flight", "error", "failures", "retry_at", "hits", "used")

    def __init__(self, plan: AccessPlan) -> None:
        self.plan = plan
        #: (credential, refresh_at) replaced as one value, so the lock-free hit path never sees
        #: a credential with another one's refresh time.
        self.fresh: tuple[Credential | None, float] = (None, 0.0)
        self.expires_at = 0.0  # wall-clock seconds; inf when the credential has no expiry
        self.flight: Flight | None = None
        self.error: CredentialError | None = None
        self.failures = 0
        self.retry_at = 0.0  # monotonic seconds
        self.hits = 0  # a plain int: a Prometheus inc() costs more than the whole hit
        self.used = 0.0

    @property
    def credential(self) -> Credential | None:
        return self.fresh[0]


def _fresh_copy(error: CredentialError) -> CredentialError:
    # Many callers are handed one stored error; each gets its own instance, without the original's
    # traceback and chained exceptions (which may hold a plugin's output).
    try:
        clone = copy.copy(error)
    except Exception:  # an exception type that cannot be rebuilt from its args
        clone = CredentialError(str(error))
    clone.__cause__ = clone.__context__ = None
    return clone.with_traceback(None)


def _profile_identity(profile: Any) -> Any:
    """A cheap key that changes whenever the profile's access data may have changed, or None.

    Only ``resourceVersion`` changes on every write (``generation`` does not move on status
    updates, where the access providers live), so without one the key is a fingerprint of the
    access providers themselves. The namespace and name are always part of the key: copies of
    one exported object (same uid and resourceVersion, another name and server) are different
    profiles and never share a plan. Hostile shapes give None (always resolve), never an error.
    """
    if type(profile) is dict:  # the common case (the kubernetes client's dicts), checked first
        meta = profile.get("metadata")
        if type(meta) is dict:
            uid = meta.get("uid")
            rv = meta.get("resourceVersion")
            if type(uid) is str and type(rv) is str and uid and rv:
                name, namespace = meta.get("name"), meta.get("namespace")
                if type(name) is str and (namespace is None or type(namespace) is str):
                    return (uid, rv, namespace, name)
    if isinstance(profile, ClusterProfile):
        meta = profile.metadata
        if meta.uid and meta.resource_version:
            return ("uid", meta.uid, meta.resource_version, meta.namespace, meta.name)
        try:
            return ("model", meta.namespace, meta.name, profile.status.model_dump_json())
        except Exception:
            return None
    if isinstance(profile, Mapping):
        meta = profile.get("metadata")
        if isinstance(meta, Mapping):
            uid, rv = meta.get("uid"), meta.get("resourceVersion")
            name, namespace = meta.get("name"), meta.get("namespace")
            if type(uid) is str and type(rv) is str and uid and rv and type(name) is str and (namespace is None or type(namespace) is str):
                return ("uid", uid, rv, namespace, name)
        else:
            name = namespace = None
        status = profile.get("status")
        try:
            fingerprint = json.dumps(
                [name, namespace, status.get("accessProviders"), status.get("credentialProviders")]
                if isinstance(status, Mapping)
                else [name, namespace, status],
                sort_keys=True,
                default=str,
            )
        except (TypeError, ValueError, RecursionError):
            return None
        return ("dict", fingerprint)
    return None


class CredentialEngine:
    """Gets credentials for ClusterProfiles, cached per AccessPlan, refreshed ahead of expiry.

    ``config`` is a :class:`~cpcreds.ProviderConfig`; ``registry`` the provider types (default:
    built-ins plus installed plugins); ``prometheus_registry`` where metrics go (default: the
    process-wide one). ``max_concurrent_fetches`` bounds the fetches running at once and
    ``max_fetches_per_provider`` those of one access provider (see :mod:`cpcreds.workers`).
    Thread-safe and asyncio-safe; one engine per process is the usual setup. Use it as a context
    manager (``with`` or ``async with``) or call :meth:`close`.
    """

    def __init__(
        self,
        config: ProviderConfig,
        *,
        registry: ProviderRegistry | None = None,
        prometheus_registry: CollectorRegistry | None = None,
        refresh: RefreshPolicy = RefreshPolicy(),
        backoff: BackoffPolicy = BackoffPolicy(),
        max_entries: int = 1024,
        max_concurrent_fetches: int = DEFAULT_MAX_CONCURRENT_FETCHES,
        max_fetches_per_provider: int = DEFAULT_MAX_FETCHES_PER_PROVIDER,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        #: Wall-clock seconds, compared with expirationTimestamp; replaceable for simulations.
        self._clock = clock
        self.registry = registry or ProviderRegistry()
        self.refresh_policy = refresh
        self.backoff_policy = backoff
        self.max_entries = max_entries
        self.metrics = Metrics.for_registry(prometheus_registry)
        self._providers = dict(self.registry.create_all(config, policy_observer=self.metrics.count_policy_decision))
        self._workers = Workers(max_concurrent_fetches, max_fetches_per_provider)
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}  # plan.key -> entry
        self._plans: dict[Any, AccessPlan] = {}  # profile identity -> plan
        #: Providers whose failure moves on to the next one (config ``failover``).
        self._failover_providers = frozenset(name for name in config.names if config.fails_over(name))
        self._routes: dict[Any, Route] = {}  # profile identity -> failover state (failover profiles only)
        self._closed = False
        # Tasks running async providers; held here because the loop keeps only weak references.
        self._tasks: set[asyncio.Task[None]] = set()
        # Weak: a client the application drops without close() must not be kept alive by us.
        self._adapters: weakref.WeakSet[Any] = weakref.WeakSet()
        #: (provider, result) -> cache lookups not held in entries (misses, backoffs, hits of
        #: purged entries); the metrics collector adds the live entries' hits at scrape time.
        self._lookups: collections.Counter[tuple[str, str]] = collections.Counter()
        self._metric_children: dict[tuple[str, str], tuple[Any, Any]] = {}
        self._exec_call_children: dict[tuple[int, str], Any] = {}  # (code, call_status) -> counter
        self.metrics.watch_lookups(self)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], **kwargs: Any) -> CredentialEngine:
        """An engine for the provider config file at ``path`` (YAML or JSON)."""
        return cls(load_config(path), **kwargs)

    # -- resolving -------------------------------------------------------------------------

    def resolve(self, profile: ClusterProfile | Mapping[str, Any]) -> AccessPlan:
        """The plan for ``profile`` (remembered under the profile's identity)."""
        identity = _profile_identity(profile)
        return self._plans.get(identity) or self._resolve(profile, identity)

    def _resolve(self, profile: ClusterProfile | Mapping[str, Any], identity: Any) -> AccessPlan:
        plan = resolve(self.config, profile)
        if identity is not None:
            with self._lock:
                if len(self._plans) >= 4 * self.max_entries:
                    # Old identities (superseded resourceVersions) are dropped oldest first.
                    for stale in list(self._plans)[: len(self._plans) // 2]:
                        del self._plans[stale]
                        self._routes.pop(stale, None)
                self._plans[identity] = plan
        return plan

    # -- getting ---------------------------------------------------------------------------

    def get_credential(self, profile: ClusterProfile | Mapping[str, Any]) -> Credential:
        """A valid credential for ``profile``; waits for a provider call only when none is cached.

        Raises only :class:`CredentialError` subclasses (and ``KeyboardInterrupt`` /
        ``SystemExit``, which pass through untouched)."""
        identity = _profile_identity(profile)
        plan = self._plans.get(identity) or self._resolve(profile, identity)
        if self._failover_providers and plan.provider in self._failover_providers:
            route = self._routes.get(identity)
            if route is not None and route.primary is plan and not route.current:
                credential = self._hit(plan)  # the preferred provider answers: as fast as without failover
                if credential is not None:
                    return credential
            return self._answer(self._route(profile, identity, plan)).credential
        return self.get_credential_for_plan(plan)

    def get_answer(self, profile: ClusterProfile | Mapping[str, Any]) -> Answer:
        """As :meth:`get_credential`, with the plan whose provider answered: with failover, a
        later provider's plan when the preferred one failed. Raises as :meth:`get_credential`
        does; when failover tried several providers and each failed,
        :class:`~cpcreds.AllProvidersFailed` (a policy refusal is raised as it is, and stops
        failover)."""
        identity = _profile_identity(profile)
        plan = self._plans.get(identity) or self._resolve(profile, identity)
        if plan.provider in self._failover_providers:
            return self._answer(self._route(profile, identity, plan))
        return Answer(self.get_credential_for_plan(plan), plan)

    def fails_over(self, plan: AccessPlan) -> bool:
        """Whether a failure of ``plan``'s provider moves on to the next provider (config ``failover``)."""
        return plan.provider in self._failover_providers

    def get_credential_for_plan(self, plan: AccessPlan) -> Credential:
        """As :meth:`get_credential`, for a plan already resolved: this plan's provider only,
        without failover (the plan does not know the profile's other providers)."""
        credential = self._hit(plan)
        if credential is not None:
            return credential
        while True:
            credential, flight, deadline = self._claim(plan)
            if credential is not None:
                return credential
            assert flight is not None
            if deadline is not None:  # this caller leads: the fetch runs in its thread
                self._fetch(plan, flight, deadline)
            flight.wait()
            if not flight.abandoned:
                return _outcome(flight)

    async def aget_credential(self, profile: ClusterProfile | Mapping[str, Any]) -> Credential:
        """asyncio version of :meth:`get_credential`: same cache, same single-flight.

        The fetch never runs in the calling task: exec plugins and synchronous providers run in a
        worker thread, a provider's ``async def aget_credential`` in a task of its own on this
        loop. Cancelling this call (a timeout, a TaskGroup abort) cancels only this caller's wait.
        """
        identity = _profile_identity(profile)
        plan = self._plans.get(identity) or self._resolve(profile, identity)
        if self._failover_providers and plan.provider in self._failover_providers:
            return (await self._aanswer(self._route(profile, identity, plan))).credential
        return await self.aget_credential_for_plan(plan)

    async def aget_answer(self, profile: ClusterProfile | Mapping[str, Any]) -> Answer:
        """asyncio version of :meth:`get_answer`."""
        identity = _profile_identity(profile)
        plan = self._plans.get(identity) or self._resolve(profile, identity)
        if plan.provider in self._failover_providers:
            return await self._aanswer(self._route(profile, identity, plan))
        return Answer(await self.aget_credential_for_plan(plan), plan)

    async def aget_credential_for_plan(self, plan: AccessPlan) -> Credential:
        """As :meth:`aget_credential`, for a plan already resolved (without failover)."""
        credential = self._hit(plan)
        if credential is not None:
            return credential
        while True:
            credential, flight, deadline = self._claim(plan)
            if credential is not None:
                return credential
            assert flight is not None
            if deadline is not None:
                self._start(plan, flight, deadline)
            await flight.wait_async()
            if not flight.abandoned:
                return _outcome(flight)

    def _hit(self, plan: AccessPlan) -> Credential | None:
        """The cached credential while it needs no refresh, else None. Takes no lock: a dict
        read and one tuple read are atomic in CPython, and this is the hottest path there is."""
        entry = self._entries.get(plan.key)
        if entry is not None:
            credential, refresh_at = entry.fresh
            if credential is not None:
                now = self._clock()
                if now < refresh_at:
                    entry.used = now
                    entry.hits += 1
                    return credential
        return None

    def _claim(self, plan: AccessPlan, wait: bool = True) -> tuple[Credential | None, Flight | None, float | None]:
        """Under the lock: a usable cached credential, or the flight to wait on and, when the
        caller must lead it, its deadline. Starts a background refresh inside the window.

        With ``wait`` False (failover, while a later provider holds a valid credential), a caller
        that would wait gets ``(None, None, None)`` instead: a fetch already running is left to
        run, and one that is due is started in the background."""
        now = self._clock()
        background: Flight | None = None
        with self._lock:
            if self._closed:
                raise EngineClosed("engine closed: this CredentialEngine was closed")
            entry = self._entries.get(plan.key)
            if entry is None:
                entry = self._new_entry(plan)
            entry.used = now
            credential, refresh_at = entry.fresh
            in_backoff = entry.error is not None and time.monotonic() < entry.retry_at
            if credential is not None and now < entry.expires_at:
                if now >= refresh_at and entry.flight is None and not in_backoff:
                    background = entry.flight = Flight()
                entry.hits += 1
                result: tuple[Credential | None, Flight | None, float | None] = (credential, None, None)
            elif entry.flight is not None:
                if wait:
                    self._lookups[(plan.provider, "miss")] += 1
                result = (None, entry.flight if wait else None, None)
            elif in_backoff:
                self._lookups[(plan.provider, "backoff")] += 1
                error = entry.error
                assert error is not None
                raise _fresh_copy(error)
            elif wait:
                self._lookups[(plan.provider, "miss")] += 1
                entry.flight = Flight()
                result = (None, entry.flight, time.monotonic() + plan.timeout)
            else:
                background = entry.flight = Flight()
                result = (None, None, None)
        if background is not None:
            try:
                self._workers.spawn(self._fetch_in_thread, plan, background, time.monotonic() + plan.timeout, True, name="cpcreds-refresh")
            except Exception as exc:  # no thread to be had: the flight must not stay open forever
                self._publish(plan, background, None, _cannot_start(exc, plan.provider), 0.0, True)
        return result

    # -- failover ----------------------------------------------------------------------------

    def _route_of(self, profile: ClusterProfile | Mapping[str, Any]) -> Route:
        """The failover state of ``profile`` (for adapters, which keep it)."""
        identity = _profile_identity(profile)
        return self._route(profile, identity, self._plans.get(identity) or self._resolve(profile, identity))

    def _route(self, profile: ClusterProfile | Mapping[str, Any], identity: Any, plan: AccessPlan) -> Route:
        """The failover state of ``profile`` (remembered under its identity, as its plan is)."""
        route = self._routes.get(identity) if identity is not None else None
        if route is None or route.primary is not plan:
            route = Route(plan, profile)
            if identity is not None:
                with self._lock:
                    known = self._routes.get(identity)
                    if known is not None and known.primary is plan:
                        return known  # another thread made it meanwhile
                    # None, or made for a plan object this identity no longer maps to
                    self._routes[identity] = route
        return route

    def _answer(self, route: Route) -> Answer:
        """The credential of the first provider of ``route`` that has one, fetching as failover
        requires (see :meth:`_failover`): this thread leads or waits for the fetches."""
        answer = self._route_hit(route)
        if answer is not None:
            return answer
        flow = self._failover(route)
        try:
            plan, flight, deadline = next(flow)
            while True:
                if deadline is not None:
                    self._fetch(plan, flight, deadline)
                flight.wait()
                plan, flight, deadline = flow.send(None)
        except StopIteration as done:
            return done.value

    async def _aanswer(self, route: Route) -> Answer:
        """asyncio version of :meth:`_answer`: fetches run off the calling task, and cancelling
        the caller cancels only its own wait."""
        answer = self._route_hit(route)
        if answer is not None:
            return answer
        flow = self._failover(route)
        try:
            plan, flight, deadline = next(flow)
            while True:
                if deadline is not None:
                    self._start(plan, flight, deadline)
                await flight.wait_async()
                plan, flight, deadline = flow.send(None)
        except StopIteration as done:
            return done.value

    def _route_hit(self, route: Route) -> Answer | None:
        """Without a lock: the preferred plan's cache hit; or, for a profile that failed over,
        the answering plan's hit while every plan before it is unavailable (in backoff, or
        being fetched). Anything else (one of them may answer again) is :meth:`_failover`'s."""
        primary = route.primary
        credential = self._hit(primary)
        if credential is not None:
            if route.current:
                self._moved(route, 0, [])
            return Answer(credential, primary)
        current = route.current
        chain = route.built
        if not current or chain is None:
            return None
        mono = time.monotonic()
        if mono < route.until:  # every provider before the answering one is backing off still
            plan = chain[current].plan
            assert plan is not None
            credential = self._hit(plan)
            return None if credential is None else Answer(credential, plan)
        now = self._clock()
        for candidate in chain[:current]:
            if candidate.plan is not None and not self._unavailable(candidate.plan, now, mono):
                return None
        plan = chain[current].plan
        assert plan is not None
        credential = self._hit(plan)
        return None if credential is None else Answer(credential, plan)

    def _unavailable(self, plan: AccessPlan, now: float, mono: float) -> bool:
        """No valid credential, and either a fetch is running or the plan is backing off."""
        entry = self._entries.get(plan.key)
        if entry is None:
            return False
        credential, _ = entry.fresh
        if credential is not None and now < entry.expires_at:
            return False
        return entry.flight is not None or (entry.error is not None and mono < entry.retry_at)

    def _ready_after(self, chain: tuple[Any, ...] | None, index: int) -> bool:
        """Whether a candidate after ``index`` holds a valid credential (then nobody waits for
        the ones before it: they are fetched in the background)."""
        if chain is None:
            return False
        now = self._clock()
        for candidate in chain[index + 1 :]:
            entry = self._entries.get(candidate.plan.key) if candidate.plan is not None else None
            if entry is not None and entry.fresh[0] is not None and now < entry.expires_at:
                return True
        return False

    def _failover(self, route: Route) -> Generator[tuple[AccessPlan, Flight, float | None], None, Answer]:
        """The failover walk, for both drivers (:meth:`_answer`, :meth:`_aanswer`): it yields
        ``(plan, flight, deadline)`` when the driver must lead (``deadline`` set) or wait for a
        fetch, and returns the :class:`Answer`.

        Candidates are tried in order. A cached credential answers. A plan in backoff is skipped
        at once with its last error. A plan without a credential is fetched and waited for,
        unless a later candidate holds a valid credential: then its fetch runs in the
        background, and the profile goes back to it once it answers. A failure moves on when the
        provider fails over (the chain ends at the first that does not) and is not a refusal."""
        attempts: list[tuple[str, CredentialError]] = []
        chain = route.built
        index = 0
        while True:
            if index == 0:
                plan: AccessPlan | None = route.primary
                provider = route.primary.provider
            else:
                if chain is None:  # the first failure of the preferred provider: build the rest
                    chain = route.chain(self.config)
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
                credential, flight, deadline = self._claim(plan, wait=not self._ready_after(chain, index))
            except EngineClosed:
                raise
            except CredentialError as exc:  # backing off: its last error, at once
                error = exc
            else:
                if credential is not None:
                    self._moved(route, index, attempts)
                    if index:
                        route.until = self._skip_until(chain, index)
                    return Answer(credential, plan)
                if flight is None:  # fetched in the background; a later provider answers meanwhile
                    error = self._last_error(plan)
                else:
                    yield plan, flight, deadline
                    if flight.abandoned:
                        continue  # nobody's failure: claim again
                    if flight.credential is not None:
                        self._moved(route, index, attempts)
                        if index:
                            route.until = self._skip_until(chain, index)
                        return Answer(flight.credential, plan)
                    assert flight.error is not None
                    error = _fresh_copy(flight.error)
            if not moves_on(error):
                raise error
            attempts.append((provider, error))
            if index == 0 and not self.config.fails_over(provider):
                break
            index += 1
        if len(attempts) == 1:
            raise attempts[0][1]
        raise AllProvidersFailed(route.ref, tuple(attempts))

    def _skip_until(self, chain: tuple[Any, ...] | None, index: int) -> float:
        """Until when (monotonic) every candidate before ``index`` is backing off without a
        valid credential, so that the lock-free path may answer from ``index`` without looking
        at them; 0.0 when one of them is being fetched or may answer."""
        if chain is None:
            return 0.0
        until, now = float("inf"), self._clock()
        for candidate in chain[:index]:
            if candidate.plan is None:  # a plan that cannot be built never answers
                continue
            entry = self._entries.get(candidate.plan.key)
            if entry is None or entry.flight is not None or entry.error is None:
                return 0.0
            if entry.fresh[0] is not None and now < entry.expires_at:
                return 0.0
            until = min(until, entry.retry_at)
        return until

    def _last_error(self, plan: AccessPlan) -> CredentialError:
        with self._lock:
            entry = self._entries.get(plan.key)
            error = entry.error if entry is not None else None
        if error is not None:
            return _fresh_copy(error)
        return ProviderError("has no credential yet (a fetch is under way)", provider=plan.provider)

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

    def _new_entry(self, plan: AccessPlan) -> _Entry:
        # Lock held.
        if len(self._entries) >= self.max_entries:
            self._purge()
        entry = self._entries[plan.key] = _Entry(plan)
        self.metrics.cache_entries.inc()
        return entry

    def _purge(self) -> None:
        # Lock held. Expired credentials first, then the least recently used, never one in flight.
        now = self._clock()
        idle = [e for e in self._entries.values() if e.flight is None]
        victims = [e for e in idle if e.credential is None or e.expires_at <= now]
        if len(self._entries) - len(victims) >= self.max_entries:
            idle.sort(key=lambda e: e.used)
            victims += idle[: max(1, len(self._entries) // 10)]
        for entry in victims:
            if self._entries.pop(entry.plan.key, None) is not None:
                self._lookups[(entry.plan.provider, "hit")] += entry.hits
                self.metrics.cache_entries.dec()
                self.metrics.track_certificate(id(self), entry.plan.key, None)

    # -- fetching ----------------------------------------------------------------------------

    def _start(self, plan: AccessPlan, flight: Flight, deadline: float) -> None:
        """Start a fetch led by an asyncio caller, off that caller's task."""
        provider = self._providers.get(plan.provider)
        try:
            if inspect.iscoroutinefunction(getattr(provider, "aget_credential", None)):
                task = asyncio.get_running_loop().create_task(self._afetch(provider, plan, flight, deadline))
                with self._lock:
                    self._tasks.add(task)
                task.add_done_callback(self._forget_task)
            else:
                self._workers.spawn(self._fetch_in_thread, plan, flight, deadline, False, name="cpcreds-fetch")
        except Exception as exc:  # no thread to be had: the flight must not stay open forever
            self._publish(plan, flight, None, _cannot_start(exc, plan.provider), 0.0, False)

    def _forget_task(self, task: asyncio.Task[None]) -> None:
        with self._lock:
            self._tasks.discard(task)

    def _fetch_in_thread(self, plan: AccessPlan, flight: Flight, deadline: float, background: bool) -> None:
        try:
            self._fetch(plan, flight, deadline, background)
        except BaseException:  # noqa: BLE001 - SystemExit in a worker: the flight is already abandoned
            pass

    def _fetch(self, plan: AccessPlan, flight: Flight, deadline: float, background: bool = False) -> None:
        """Run the provider once, in this thread, and publish the outcome.

        ``KeyboardInterrupt`` and ``SystemExit`` abandon the flight (waiters start over; nothing
        is cached, no backoff) and propagate to this thread's caller."""
        started = time.perf_counter()
        try:
            self._workers.acquire(plan.provider, deadline)
            try:
                credential = self._call(plan, deadline)
            finally:
                self._workers.release(plan.provider)
            self._check_fresh(plan, credential)
        except CredentialError as exc:
            self._publish(plan, flight, None, exc, time.perf_counter() - started, background)
        except Exception as exc:  # our own bug: waiters must never hang on a lost flight
            self._publish(plan, flight, None, _provider_bug(exc, plan.provider), time.perf_counter() - started, background)
        except BaseException:
            self._abandon(plan, flight)
            raise
        else:
            self._publish(plan, flight, credential, None, time.perf_counter() - started, background)

    async def _afetch(self, provider: Any, plan: AccessPlan, flight: Flight, deadline: float) -> None:
        """As :meth:`_fetch`, in a task of its own, for a provider with ``async def aget_credential``."""
        started = time.perf_counter()
        try:
            result = await asyncio.wait_for(provider.aget_credential(plan), max(0.0, deadline - time.monotonic()))
            if not isinstance(result, Credential):
                raise ProviderError(f"returned {type(result).__name__}, not a Credential", provider=plan.provider)
            self._check_fresh(plan, result)
        except asyncio.TimeoutError:
            error: CredentialError = ProviderTimeout(f"did not answer within {plan.timeout:g}s", provider=plan.provider)
        except CredentialError as exc:
            error = exc
        except asyncio.CancelledError:  # the loop is shutting down: nobody's failure
            self._abandon(plan, flight)
            raise
        except Exception as exc:
            error = _provider_bug(exc, plan.provider)
        except BaseException:
            self._abandon(plan, flight)
            raise
        else:
            self._publish(plan, flight, result, None, time.perf_counter() - started, False)
            return
        self._publish(plan, flight, None, error, time.perf_counter() - started, False)

    def _call(self, plan: AccessPlan, deadline: float) -> Credential:
        provider = self._providers.get(plan.provider)
        if provider is None:
            raise CredentialError(f"provider {plan.provider}: not in this engine's config")
        if isinstance(provider, ExecProvider):
            # The runner bounds the plugin by the deadline itself and kills its process group.
            return provider.get_credential(plan, deadline=deadline)
        # An in-process provider cannot be killed; it is waited for until the deadline.
        return self._workers.call(plan.key, plan.provider, lambda: call_provider(provider, plan), deadline, plan.timeout)

    def _check_fresh(self, plan: AccessPlan, credential: Credential) -> None:
        """An answer that has already expired is a failure (with backoff), not a credential."""
        expiry = credential.expiration_timestamp
        if expiry is None or expiry.timestamp() > self._clock():
            return
        reason = f"answered a credential that expired at {format_rfc3339(expiry)}"
        if plan.exec is not None:
            raise PluginOutputError(f"exec: {plan.exec.command} {reason}", provider=plan.provider, exit_code=0)
        raise ProviderError(reason, provider=plan.provider)

    def _abandon(self, plan: AccessPlan, flight: Flight) -> None:
        with self._lock:
            entry = self._entries.get(plan.key)
            if entry is not None and entry.flight is flight:
                entry.flight = None
        flight.abandon()

    def _publish(
        self,
        plan: AccessPlan,
        flight: Flight,
        credential: Credential | None,
        error: CredentialError | None,
        duration: float,
        background: bool,
    ) -> None:
        """Store the outcome of one fetch, count it, and wake everyone waiting on ``flight``."""
        old = None
        with self._lock:
            if self._closed:  # close() has released the waiters; store and count nothing
                return
            entry = self._entries.get(plan.key)
            if entry is None:  # purged meanwhile: keep a home for the result
                entry = self._new_entry(plan)
            if entry.flight is flight:
                entry.flight = None
            if credential is not None:
                old = entry.credential
                expiry = credential.expiration_timestamp
                if expiry is None:
                    entry.expires_at = refresh_at = float("inf")
                else:
                    entry.expires_at = expiry.timestamp()
                    refresh_at = self.refresh_policy.refresh_at(self._clock(), entry.expires_at)
                entry.fresh = (credential, refresh_at)
                entry.error, entry.failures, entry.retry_at = None, 0, 0.0
            else:
                assert error is not None
                entry.error = error
                entry.failures += 1
                entry.retry_at = time.monotonic() + self.backoff_policy.delay(entry.failures)
            failures = entry.failures
        self._record(plan, error, duration)
        if credential is not None:
            self._note_certificate(plan, old, credential)
            flight.succeed(credential)
        else:
            assert error is not None
            # A caller waiting on this flight gets the error itself; only a background refresh,
            # which nobody waits for, needs the log to be seen.
            log = _log.warning if background else _log.debug
            log("credential fetch failed", provider=plan.provider, error=str(error), failures=failures, background=background)
            flight.fail(error)

    def _record(self, plan: AccessPlan, error: CredentialError | None, duration: float) -> None:
        metrics = self.metrics
        result = "success" if error is None else result_label(error)
        children = self._metric_children.get((plan.provider, result))
        if children is None:  # labels() costs a lock and a tuple per call; look them up once
            children = (metrics.request_duration.labels(plan.provider), metrics.requests.labels(plan.provider, result))
            self._metric_children[(plan.provider, result)] = children
        children[0].observe(duration)
        children[1].inc()
        if plan.exec is None or isinstance(error, InteractiveModeError):
            return  # not an exec plugin, or one that was never run
        # client-go's labels: the exit code when the plugin exited non-zero, -1 when it was
        # killed, 1 for everything else that failed; 0 only for a successful call (KEP-541).
        if error is None:
            code, status = 0, NO_ERROR
        elif isinstance(error, PluginError):
            code, status = (error.exit_code if error.exit_code not in (None, 0) else 1), error.call_status
        elif isinstance(error, ProviderTimeout):
            return  # it waited for a fetch slot and never ran
        else:
            code, status = 1, CLIENT_INTERNAL_ERROR
        calls = self._exec_call_children.get((code, status))
        if calls is None:
            calls = self._exec_call_children[(code, status)] = metrics.exec_plugin_calls.labels(str(code), status)
        calls.inc()

    def _note_certificate(self, plan: AccessPlan, old: Credential | None, new: Credential) -> None:
        if new.certificate_not_after is None and (old is None or old.certificate_not_after is None):
            return  # tokens only: nothing to track or forget
        self.metrics.track_certificate(id(self), plan.key, new.certificate_not_after)
        if old is not None and old.client_certificate_data and old.client_certificate_data != new.client_certificate_data:
            self.metrics.observe_rotation(old.certificate_not_before)

    # -- after a 401 ------------------------------------------------------------------------

    def invalidate(self, profile: ClusterProfile | Mapping[str, Any] | AccessPlan, credential: Credential) -> bool:
        """``credential`` was rejected (HTTP 401): drop it if it is still the cached one.

        Returns True when it was dropped (the next call fetches a new one). A credential that was
        already replaced is left alone, so a late 401 cannot discard a newer credential. For a
        profile that failed over, the credential is looked for among all its providers' plans;
        with an :class:`Answer`'s plan, only there.
        """
        if isinstance(profile, AccessPlan):
            plans = [profile]
        else:
            identity = _profile_identity(profile)
            plans = [self._plans.get(identity) or self._resolve(profile, identity)]
            route = self._routes.get(identity) if identity is not None else None
            chain = route.built if route is not None else None
            if chain is not None:
                plans += [candidate.plan for candidate in chain[1:] if candidate.plan is not None]
        with self._lock:
            for plan in plans:
                entry = self._entries.get(plan.key)
                if entry is None or entry.credential is not credential or entry.expires_at == 0.0:
                    continue
                # Kept (as expired) rather than dropped: the next fetch compares certificates with it.
                entry.expires_at = 0.0
                entry.fresh = (credential, 0.0)
                return True
            return False

    # -- metrics -----------------------------------------------------------------------------

    def lookup_counts(self) -> dict[tuple[str, str], int]:
        """(provider, result) -> cache lookups so far (read by the metrics collector)."""
        with self._lock:
            counts = collections.Counter(self._lookups)
            for entry in self._entries.values():
                if entry.hits:
                    counts[(entry.plan.provider, "hit")] += entry.hits
        return dict(counts)

    # -- adapters and lifetime ---------------------------------------------------------------

    def _register_adapter(self, adapter: Any) -> None:
        """Remember a client binding so that :meth:`close` can remove its certificate files."""
        with self._lock:
            self._adapters.add(adapter)

    def _unregister_adapter(self, adapter: Any) -> None:
        with self._lock:
            self._adapters.discard(adapter)

    # The kubernetes adapters live in cpcreds.kube and depend on the engine; these methods only
    # hand the engine to them (imported on first use: the engine itself never needs them).

    def build_config(self, profile: ClusterProfile | Mapping[str, Any]) -> Any:
        """A ``kubernetes.client.Configuration`` for the profile's cluster that stays fresh."""
        from . import kube

        return kube.build_config(self, profile)

    def api_client(self, profile: ClusterProfile | Mapping[str, Any]) -> Any:
        """A ``kubernetes.client.ApiClient``; a 401 refreshes the credential and retries once."""
        from . import kube

        return kube.api_client(self, profile)

    async def abuild_config(self, profile: ClusterProfile | Mapping[str, Any]) -> Any:
        """``kubernetes.aio`` version of :meth:`build_config`."""
        from . import kube

        return await kube.abuild_config(self, profile)

    async def aapi_client(self, profile: ClusterProfile | Mapping[str, Any]) -> Any:
        """``kubernetes.aio`` version of :meth:`api_client`."""
        from . import kube

        return await kube.aapi_client(self, profile)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """End everything, without waiting for running work.

        Every waiting caller (threads and tasks) is released at once with :class:`EngineClosed`,
        as is every later call; running exec plugins are killed; a fetch that finishes afterwards
        stores and counts nothing; adapters remove their certificate files; providers with a
        ``close()`` are closed. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            flights = [entry.flight for entry in self._entries.values() if entry.flight is not None]
            adapters = list(self._adapters)
            self._adapters.clear()
            tasks = list(self._tasks)
            count = len(self._entries)
            for entry in self._entries.values():
                self._lookups[(entry.plan.provider, "hit")] += entry.hits
            self._entries.clear()
            self._plans.clear()
            self._routes.clear()
        self._workers.close()
        closed = EngineClosed("engine closed: this CredentialEngine was closed")
        for flight in flights:
            flight.fail(closed)
        for task in tasks:
            try:
                task.get_loop().call_soon_threadsafe(task.cancel)
            except RuntimeError:  # its loop is closed; the task is gone with it
                pass
        self.metrics.retire_lookups(self)
        self.metrics.cache_entries.dec(count)
        self.metrics.forget_owner(id(self))
        for adapter in adapters:
            adapter.close()
        for provider in self._providers.values():
            closer = getattr(provider, "close", None)
            if callable(closer):
                try:
                    closer()
                except Exception as exc:  # one provider's bug must not keep the others open
                    _log.warning("provider close failed", error=redact_text(f"{type(exc).__name__}: {exc}"))

    async def aclose(self) -> None:
        """:meth:`close`, then wait (briefly) for this loop's async-provider tasks to end."""
        with self._lock:
            loop = asyncio.get_running_loop()
            mine = [task for task in self._tasks if task.get_loop() is loop]
        self.close()
        if mine:
            await asyncio.wait(mine, timeout=1.0)

    def __enter__(self) -> CredentialEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> CredentialEngine:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _outcome(flight: Flight) -> Credential:
    if flight.credential is not None:
        return flight.credential
    assert flight.error is not None
    raise _fresh_copy(flight.error)
