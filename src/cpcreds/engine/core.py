"""CredentialEngine: the one stateful part of cpcreds, a façade over parts with one job each.

``profile -> plan (access.resolve) -> cached credential, or one provider call``.

What it guarantees, per AccessPlan (equal plans share everything below):

- **Cache**: a credential is reused until its ``expirationTimestamp`` (for the life of the engine
  when it has none). The cache is bounded; expired and least recently used entries are purged.
  An answer that has already expired is a failure, never handed out.
- **Single-flight**: concurrent callers, threads and asyncio tasks alike, share one provider call
  (a :class:`~cpcreds.engine.flight.Flight`). Each waiter's cancellation or Ctrl-C is its own.
- **Refresh ahead**: inside the refresh window before expiry, the next caller starts one background
  refresh and still gets the valid cached credential; nobody waits unless it has expired.
- **Invalidate**: after a 401, :meth:`CredentialEngine.invalidate` (or :meth:`Binding.invalidate
  <cpcreds.engine.binding.Binding.invalidate>`) drops the credential only if it is still the cached one.
- **Backoff**: after a failure, the provider is not called again until an exponentially growing,
  jittered, capped delay has passed; meanwhile callers get the last error at once (or the cached
  credential, while it is still valid). A success resets it. Work that stopped without an answer
  (Ctrl-C, a closed event loop) is nobody's failure: no backoff, nothing cached.
- **Deadlines and workers**: every fetch ends by ``timeout`` after the request that started it.
- **Failover** (``failover: true``): when a profile's provider fails, the next provider the config
  lists and the profile offers answers instead; see docs/failover.md.

The parts: :mod:`~cpcreds.engine.plancache` (profile identity -> plan), :mod:`~cpcreds.engine.entries`
(per plan: credential, flight, backoff), :mod:`~cpcreds.engine.failover` (the walk across a profile's
providers), :mod:`~cpcreds.engine.fetching` and :mod:`~cpcreds.engine.workers` (where and how a fetch runs, and
how its outcome is counted), :mod:`~cpcreds.engine.binding` (a profile's handle, and the one answer flow
driven by sync and asyncio callers alike). The kubernetes adapters (:mod:`cpcreds.adapters.kubernetes`) use the
engine through :meth:`CredentialEngine.bind` only; this module imports them, never the reverse.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .binding import Answers, Binding, Closing
from ..config import ProviderConfig, load_config
from ..credential import Credential
from .entries import CredentialStore, closed_error
from .failover import Answer, FailoverWalk, Route
from .fetching import FetchRunner, call_provider
from ..logs import get_logger, redact_text
from ..metrics import Metrics
from ..plan import AccessPlan
from .plancache import PlanCache, profile_identity
from .policies import BackoffPolicy, RefreshPolicy
from ..providers.registry import ProviderRegistry
from .workers import DEFAULT_MAX_CONCURRENT_FETCHES, DEFAULT_MAX_FETCHES_PER_PROVIDER, Workers

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from ..config.wire import ClusterProfile

__all__ = ["CredentialEngine", "Answer", "Binding", "RefreshPolicy", "BackoffPolicy", "call_provider"]

_log = get_logger("cpcreds.engine")


class CredentialEngine:
    """Gets credentials for ClusterProfiles, cached per AccessPlan, refreshed ahead of expiry.

    ``config`` is a :class:`~cpcreds.ProviderConfig`; ``registry`` the provider types (default:
    built-ins plus installed plugins); ``prometheus_registry`` where metrics show (default:
    prometheus_client's ``REGISTRY``; engines given one registry share its series, see
    docs/metrics.md). ``max_concurrent_fetches`` bounds the fetches running at once and
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
        self.registry = registry or ProviderRegistry()
        self.refresh_policy = refresh
        self.backoff_policy = backoff
        self.max_entries = max_entries
        self.metrics = Metrics.for_registry(prometheus_registry)
        self._providers = dict(self.registry.create_all(config, policy_observer=self.metrics.count_policy_decision))
        self._planner = PlanCache(config, max_entries)
        self._plans = self._planner.plans  # read on every call: one attribute lookup less
        self._store = CredentialStore(refresh_policy=refresh, backoff_policy=backoff, max_entries=max_entries, metrics=self.metrics, clock=clock)
        self._workers = Workers(max_concurrent_fetches, max_fetches_per_provider)
        self._runner = FetchRunner(self._store, self._providers, self._workers, self.metrics)
        self._store.refresh = self._runner.refresh
        self._answers = Answers(self._store, self._runner, FailoverWalk(config, self._store, self.metrics))
        self._closing = Closing()
        #: Providers whose failure moves on to the next one (config ``failover``).
        self._failover_providers = frozenset(name for name in config.names if config.fails_over(name))
        self.metrics.watch_lookups(self)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], **kwargs: Any) -> CredentialEngine:
        """An engine for the provider config file at ``path`` (YAML or JSON)."""
        return cls(load_config(path), **kwargs)

    def resolve(self, profile: ClusterProfile | Mapping[str, Any]) -> AccessPlan:
        """The plan for ``profile`` (remembered under the profile's identity)."""
        return self._planner.plan(profile)

    def bind(self, profile: ClusterProfile | Mapping[str, Any], *, owned: bool = False, hold: bool = False) -> Binding:
        """A :class:`~cpcreds.Binding`: ``profile``'s handle on this engine (credential, answer,
        invalidate after a 401; sync and asyncio). Resolves now: raises what :meth:`resolve` raises.
        ``owned``: the caller hands ``profile`` over and never changes it afterwards, so the plan
        may share parts of it instead of copying them (see :func:`cpcreds.resolve`).
        ``hold``: the caller will call :meth:`Binding.release` when the profile goes; the
        plan's credential then leaves the cache as soon as no held binding uses it (without
        ``hold`` it stays until it expires or the cache's bound evicts it)."""
        identity = profile_identity(profile)
        plan = self._plans.get(identity) or self._planner.resolve(profile, identity, owned)
        route = None
        if plan.provider in self._failover_providers:
            # A held binding's route is its own (its holds are its own); an owned profile's is
            # never looked up again under its identity, so it is not remembered either.
            route = Route(plan, profile) if hold or owned else self._planner.route(profile, identity, plan)
        if not hold:
            return Binding(plan, route, self._answers, self._closing)
        store = self._store
        with store.lock:
            if store.closed:  # its every call raises EngineClosed: nothing to hold
                return Binding(plan, route, self._answers, self._closing)
            store.add_holds([plan.key])
            if route is not None:
                route.held = True
        return Binding(plan, route, self._answers, self._closing, held=True)

    def fails_over(self, plan: AccessPlan) -> bool:
        """Whether a failure of ``plan``'s provider moves on to the next provider (config ``failover``)."""
        return plan.provider in self._failover_providers

    # -- getting (each is bind(profile) and one call, without making the binding) ------------

    def get_credential(self, profile: ClusterProfile | Mapping[str, Any]) -> Credential:
        """A valid credential for ``profile``; waits for a provider call only when none is cached.

        Raises only :class:`CredentialError` subclasses (and ``KeyboardInterrupt`` /
        ``SystemExit``, which pass through untouched)."""
        identity = profile_identity(profile)
        plan = self._plans.get(identity) or self._planner.resolve(profile, identity)
        if plan.provider in self._failover_providers:
            return self._answers.answer(plan, self._planner.route(profile, identity, plan)).credential
        credential = self._store.hit(plan)
        return credential if credential is not None else self._answers.run(self._answers.plan_flow(plan)).credential

    def get_answer(self, profile: ClusterProfile | Mapping[str, Any]) -> Answer:
        """As :meth:`get_credential`, with the plan whose provider answered: with failover, a
        later provider's plan when the preferred one failed. When failover tried several
        providers and each failed, :class:`~cpcreds.AllProvidersFailed` (a policy refusal is
        raised as it is, and stops failover)."""
        return self.bind(profile).answer()

    def get_credential_for_plan(self, plan: AccessPlan) -> Credential:
        """As :meth:`get_credential`, for a plan already resolved: this plan's provider only,
        without failover (the plan does not know the profile's other providers)."""
        return self._answers.answer(plan, None).credential

    async def aget_credential(self, profile: ClusterProfile | Mapping[str, Any]) -> Credential:
        """asyncio version of :meth:`get_credential`: same cache, same single-flight.

        The fetch never runs in the calling task: exec plugins and synchronous providers run in a
        worker thread, a provider's ``async def aget_credential`` in a task of its own on this
        loop. Cancelling this call (a timeout, a TaskGroup abort) cancels only this caller's wait.
        """
        return (await self.bind(profile).aanswer()).credential

    async def aget_answer(self, profile: ClusterProfile | Mapping[str, Any]) -> Answer:
        """asyncio version of :meth:`get_answer`."""
        return await self.bind(profile).aanswer()

    async def aget_credential_for_plan(self, plan: AccessPlan) -> Credential:
        """As :meth:`aget_credential`, for a plan already resolved (without failover)."""
        return (await self._answers.aanswer(plan, None)).credential

    def invalidate(self, profile: ClusterProfile | Mapping[str, Any] | AccessPlan, credential: Credential) -> bool:
        """``credential`` was rejected (HTTP 401): drop it if it is still the cached one.

        Returns True when it was dropped (the next call fetches a new one). A credential that was
        already replaced is left alone, so a late 401 cannot discard a newer credential. For a
        profile that failed over, the credential is looked for among all its providers' plans;
        with an :class:`Answer`'s plan, only there."""
        plans = (profile,) if isinstance(profile, AccessPlan) else self.bind(profile).plans
        return self._store.invalidate(list(plans), credential)

    def lookup_counts(self) -> dict[tuple[str, str], int]:
        """(provider, result) -> cache lookups so far (read by the metrics collector)."""
        return self._store.lookup_counts()

    def cache_entries(self) -> int:
        """Plans this engine's cache holds now (read by the metrics collector)."""
        return len(self._store.entries)

    # -- adapters and lifetime ---------------------------------------------------------------

    def on_close(self, resource: Any) -> Callable[[], None]:
        """Call ``resource.close()`` when this engine closes (the kubernetes adapters register
        their client bindings here). Held weakly; returns a function that cancels this."""
        return self._closing.add(resource)

    # The adapters live in cpcreds.adapters.kubernetes (imported on first use) and reach the engine through bind().

    def build_config(self, profile: ClusterProfile | Mapping[str, Any]) -> Any:
        """A ``kubernetes.client.Configuration`` for the profile's cluster that stays fresh."""
        from ..adapters import kubernetes as kube

        return kube.build_config(self, profile)

    def api_client(self, profile: ClusterProfile | Mapping[str, Any]) -> Any:
        """A ``kubernetes.client.ApiClient``; a 401 refreshes the credential and retries once."""
        from ..adapters import kubernetes as kube

        return kube.api_client(self, profile)

    async def abuild_config(self, profile: ClusterProfile | Mapping[str, Any]) -> Any:
        """``kubernetes.aio`` version of :meth:`build_config`."""
        from ..adapters import kubernetes as kube

        return await kube.abuild_config(self, profile)

    async def aapi_client(self, profile: ClusterProfile | Mapping[str, Any]) -> Any:
        """``kubernetes.aio`` version of :meth:`api_client`."""
        from ..adapters import kubernetes as kube

        return await kube.aapi_client(self, profile)

    @property
    def closed(self) -> bool:
        return self._store.closed

    def close(self) -> None:
        """End everything, without waiting for running work.

        Every waiting caller (threads and tasks) is released at once with :class:`EngineClosed`,
        as is every later call; running exec plugins are killed; a fetch that finishes afterwards
        stores and counts nothing; adapters remove their certificate files; providers with a
        ``close()`` are closed. Idempotent."""
        flights = self._store.close()
        if flights is None:
            return
        self._planner.clear()
        self._runner.close()
        closed = closed_error()
        for flight in flights:
            flight.fail(closed)
        self.metrics.retire_lookups(self)
        self._closing.close_all()
        for provider in self._providers.values():
            closer = getattr(provider, "close", None)
            if callable(closer):
                try:
                    closer()
                except Exception as exc:  # one provider's bug must not keep the others open
                    _log.warning("provider close failed", error=redact_text(f"{type(exc).__name__}: {exc}"))

    async def aclose(self) -> None:
        """:meth:`close`, then wait (briefly) for this loop's async-provider tasks to end."""
        import asyncio  # only where a coroutine runs: a one-shot command never loads asyncio

        loop = asyncio.get_running_loop()
        mine = [task for task in list(self._runner.tasks) if task.get_loop() is loop]
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
