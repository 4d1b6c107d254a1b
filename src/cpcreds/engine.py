"""CredentialEngine: the one stateful part of cpcreds.

``profile -> plan (access.resolve) -> cached credential, or one provider call``.

What it guarantees, per AccessPlan (equal plans share everything below):

- **Cache**: a credential is reused until its ``expirationTimestamp`` (for the life of the engine
  when it has none). The cache is bounded; expired and least recently used entries are purged.
- **Single-flight**: concurrent callers, threads and asyncio tasks alike, share one provider call.
- **Refresh ahead**: inside the refresh window before expiry, the next caller starts one background
  refresh and still gets the valid cached credential; nobody waits unless it has expired.
- **Invalidate**: after a 401, :meth:`CredentialEngine.invalidate` drops the credential only if it
  is still the cached one (client-go's rule: a stale 401 must not throw away a newer credential).
- **Backoff**: after a failure, the provider is not called again until an exponentially growing,
  jittered, capped delay has passed; meanwhile callers get the last error at once (or the cached
  credential, while it is still valid). A success resets it.
- **Fast hits**: a profile's plan is remembered under a cheap identity (uid + resourceVersion /
  generation, else namespace/name + a fingerprint of its access providers), so a hit costs a
  dict lookup and an expiry check, not a resolve.

One lock guards all of this state. Provider calls run outside it.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import copy
import json
import os
import random
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry

from .access import AccessPlan, resolve
from .api import ClusterProfile
from .config import ProviderConfig, load_config
from .credential import Credential
from .errors import (
    CLIENT_INTERNAL_ERROR,
    CredentialError,
    InteractiveModeError,
    PluginNotFound,
    PluginOutputError,
    PluginTimeout,
    ProviderError,
    ProviderTimeout,
)
from .hookspecs import Provider
from .logs import get_logger
from .metrics import Metrics
from .providers.exec import ExecProvider
from .registry import ProviderRegistry

__all__ = ["CredentialEngine", "RefreshPolicy", "BackoffPolicy", "call_provider"]

_log = get_logger(__name__)


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


@dataclass(frozen=True)
class RefreshPolicy:
    """When to refresh ahead of expiry: the last ``fraction`` of a credential's lifetime, at least
    ``min_window`` and at most ``max_window`` seconds, and never more than half its lifetime (so a
    very short-lived credential is not refreshed on every call)."""

    fraction: float = 0.1
    min_window: float = 30.0
    max_window: float = 300.0

    def refresh_at(self, fetched_at: float, expires_at: float) -> float:
        lifetime = max(0.0, expires_at - fetched_at)
        window = min(max(self.fraction * lifetime, self.min_window), self.max_window, lifetime / 2)
        return expires_at - window


@dataclass(frozen=True)
class BackoffPolicy:
    """Delay before retrying a failed plan: ``initial * factor**(failures-1)``, capped at
    ``maximum``, each delay scaled by a random factor in ``[1 - jitter, 1]``."""

    initial: float = 1.0
    maximum: float = 60.0
    factor: float = 2.0
    jitter: float = 0.2

    def delay(self, failures: int) -> float:
        base = min(self.maximum, self.initial * self.factor ** max(0, failures - 1))
        return base * (1.0 - self.jitter * random.random())


class _Entry:
    """Everything the engine knows about one plan. Guarded by the engine's lock."""

    __slots__ = ("plan", "credential", "expires_at", "refresh_at", "flight", "error", "failures", "retry_at", "hits", "used")

    def __init__(self, plan: AccessPlan) -> None:
        self.plan = plan
        self.credential: Credential | None = None
        self.expires_at = 0.0  # wall-clock seconds; inf when the credential has no expiry
        self.refresh_at = 0.0
        self.flight: concurrent.futures.Future[Credential] | None = None
        self.error: CredentialError | None = None
        self.failures = 0
        self.retry_at = 0.0  # monotonic seconds
        self.hits = 0  # a plain int under the engine lock: a Prometheus inc() costs more than the hit
        self.used = 0.0


def _result_label(exc: BaseException) -> str:
    if isinstance(exc, PluginNotFound):
        return "plugin_not_found"
    if isinstance(exc, PluginTimeout):
        return "plugin_timeout"
    if isinstance(exc, ProviderTimeout):
        return "provider_timeout"
    if isinstance(exc, PluginOutputError):
        return "plugin_output_error"
    if isinstance(exc, InteractiveModeError):
        return CLIENT_INTERNAL_ERROR
    if isinstance(exc, ProviderError):
        return "plugin_execution_error" if exc.call_status == "plugin_execution_error" and exc.exit_code is not None else "provider_error"
    return CLIENT_INTERNAL_ERROR


def _fresh_copy(error: CredentialError) -> CredentialError:
    # Many callers may be handed the same stored error; each gets its own instance so that
    # raising it in several threads does not chain their tracebacks together.
    try:
        clone = copy.copy(error)
    except Exception:  # an exception type that cannot be rebuilt from its args
        return error
    return clone.with_traceback(None)


def _profile_identity(profile: Any) -> Any:
    """A cheap key that changes whenever the profile's access data may have changed."""
    if type(profile) is dict:  # the common case (the kubernetes client's dicts), checked first
        meta = profile.get("metadata")
        if type(meta) is dict:
            uid = meta.get("uid")
            rv = meta.get("resourceVersion")
            if uid and rv:  # any change to the object changes its resourceVersion
                return (uid, rv)
    if isinstance(profile, ClusterProfile):
        meta = profile.metadata
        if meta.uid and (meta.resource_version or meta.generation is not None):
            return ("uid", meta.uid, meta.resource_version, meta.generation)
        return ("model", meta.namespace, meta.name, profile.status.model_dump_json())
    if isinstance(profile, Mapping):
        meta = profile.get("metadata")
        if isinstance(meta, Mapping):
            uid = meta.get("uid")
            rv = meta.get("resourceVersion")
            generation = meta.get("generation")
            if uid and (rv or generation is not None):
                return ("uid", uid, rv, generation)
            name, namespace = meta.get("name"), meta.get("namespace")
        else:
            name = namespace = None
        status = profile.get("status")
        if isinstance(status, Mapping):
            try:
                fingerprint = json.dumps(
                    [status.get("accessProviders"), status.get("credentialProviders")], sort_keys=True, default=str
                )
            except (TypeError, ValueError):
                return None
        else:
            fingerprint = repr(status)
        return ("dict", namespace, name, fingerprint)
    return None


class CredentialEngine:
    """Gets credentials for ClusterProfiles, cached per AccessPlan, refreshed ahead of expiry.

    ``config`` is a :class:`~cpcreds.ProviderConfig`; ``registry`` the provider types (default:
    built-ins plus installed plugins); ``prometheus_registry`` where metrics go (default: the
    process-wide one). Thread-safe and asyncio-safe; one engine per process is the usual setup.
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
        max_workers: int = 4,
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
        self._providers = dict(self.registry.create_all(config))
        self._lock = threading.Lock()
        self._entries: dict[AccessPlan, _Entry] = {}
        self._plans: dict[Any, AccessPlan] = {}
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="cpcreds-fetch")
        self._provider_pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=max_workers, thread_name_prefix="cpcreds-provider"
        )
        self._closed = False
        # Weak: a client the application drops without close() must not be kept alive by us.
        self._adapters: weakref.WeakSet[Any] = weakref.WeakSet()
        #: (provider, result) -> count of lookups not held in entries (misses, backoffs, hits of
        #: purged entries); the metrics collector adds the live entries' hits at scrape time.
        self._lookups: collections.Counter[tuple[str, str]] = collections.Counter()
        self.metrics.watch_lookups(self)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], **kwargs: Any) -> CredentialEngine:
        """An engine for the provider config file at ``path`` (YAML or JSON)."""
        return cls(load_config(path), **kwargs)

    # -- resolving -------------------------------------------------------------------------

    def resolve(self, profile: ClusterProfile | Mapping[str, Any]) -> AccessPlan:
        """The plan for ``profile`` (remembered under the profile's identity)."""
        identity = _profile_identity(profile)
        if identity is not None:
            with self._lock:
                plan = self._plans.get(identity)
            if plan is not None:
                return plan
        plan = resolve(self.config, profile)
        if identity is not None:
            with self._lock:
                if len(self._plans) >= 4 * self.max_entries:
                    # Old identities (superseded resourceVersions) are dropped oldest first.
                    for stale in list(self._plans)[: len(self._plans) // 2]:
                        del self._plans[stale]
                self._plans[identity] = plan
        return plan

    # -- getting ---------------------------------------------------------------------------

    def _cached(self, profile: Any) -> tuple[AccessPlan | None, Credential | None]:
        """The fast path: the profile's remembered plan and, when it needs no refresh yet, the
        cached credential. A dict lookup and a clock read under the lock, nothing more."""
        identity = _profile_identity(profile)
        if identity is None:
            return None, None
        with self._lock:
            plan = self._plans.get(identity)
            entry = self._entries.get(plan) if plan is not None else None
            if entry is not None and entry.credential is not None:
                now = self._clock()
                if now < entry.refresh_at:
                    entry.used = now
                    entry.hits += 1
                    return plan, entry.credential
        return plan, None

    def get_credential(self, profile: ClusterProfile | Mapping[str, Any]) -> Credential:
        """A valid credential for ``profile``; waits for a provider call only when none is cached."""
        plan, credential = self._cached(profile)
        if credential is not None:
            return credential
        return self.get_credential_for_plan(plan or self.resolve(profile))

    def get_credential_for_plan(self, plan: AccessPlan) -> Credential:
        """As :meth:`get_credential`, for a plan already resolved."""
        credential, flight, leader = self._claim(plan)
        if credential is not None:
            return credential
        assert flight is not None
        if leader:
            self._fetch(plan, flight)
        return flight.result()

    async def aget_credential(self, profile: ClusterProfile | Mapping[str, Any]) -> Credential:
        """asyncio version of :meth:`get_credential`: same cache, same single-flight. Exec plugins
        and synchronous providers run in the engine's worker threads, never on the event loop; a
        provider with ``async def aget_credential`` is awaited on the caller's loop."""
        plan, credential = self._cached(profile)
        if credential is not None:
            return credential
        plan = plan or self.resolve(profile)
        credential, flight, leader = self._claim(plan)
        if credential is not None:
            return credential
        assert flight is not None
        if leader:
            provider = self._providers.get(plan.provider)
            if asyncio.iscoroutinefunction(getattr(provider, "aget_credential", None)):
                await self._afetch(plan, flight, provider)
            else:
                self._executor.submit(self._fetch, plan, flight)
        return await asyncio.wrap_future(flight)

    def _claim(self, plan: AccessPlan) -> tuple[Credential | None, concurrent.futures.Future[Credential] | None, bool]:
        """Under the lock: a usable cached credential, or the flight to wait on (and whether the
        caller must run it). Starts a background refresh when the credential is in its window."""
        if self._closed:
            raise CredentialError("the CredentialEngine is closed")
        now = self._clock()
        background: concurrent.futures.Future[Credential] | None = None
        with self._lock:
            entry = self._entries.get(plan)
            if entry is None:
                entry = self._new_entry(plan)
            entry.used = now
            credential = entry.credential
            in_backoff = entry.error is not None and time.monotonic() < entry.retry_at
            if credential is not None and now < entry.expires_at:
                if now >= entry.refresh_at and entry.flight is None and not in_backoff:
                    background = entry.flight = concurrent.futures.Future()
                entry.hits += 1
                result: tuple[Credential | None, concurrent.futures.Future[Credential] | None, bool] = (credential, None, False)
            elif entry.flight is not None:
                self._lookups[(plan.provider, "miss")] += 1
                result = (None, entry.flight, False)
            elif in_backoff:
                self._lookups[(plan.provider, "backoff")] += 1
                raise _fresh_copy(entry.error) from None
            else:
                self._lookups[(plan.provider, "miss")] += 1
                entry.flight = concurrent.futures.Future()
                result = (None, entry.flight, True)
        if background is not None:
            try:
                self._executor.submit(self._fetch, plan, background, True)
            except RuntimeError:  # executor shut down by close(): just serve the cached credential
                with self._lock:
                    entry.flight = None
        return result

    def _new_entry(self, plan: AccessPlan) -> _Entry:
        if len(self._entries) >= self.max_entries:
            self._purge()
        entry = self._entries[plan] = _Entry(plan)
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
            if self._entries.pop(entry.plan, None) is not None:
                self._lookups[(entry.plan.provider, "hit")] += entry.hits
                self.metrics.cache_entries.dec()
                self.metrics.track_certificate(id(self), entry.plan, None)

    def _fetch(self, plan: AccessPlan, flight: concurrent.futures.Future[Credential], background: bool = False) -> None:
        """Run the provider once (in this thread) and publish the outcome."""
        started = time.perf_counter()
        credential, error = None, None
        try:
            credential = self._call(plan)
        except CredentialError as exc:
            error = exc
        except BaseException as exc:  # noqa: BLE001 - waiters must never hang on a lost flight
            error = ProviderError(f"internal error: {type(exc).__name__}: {exc}", provider=plan.provider)
        self._publish(plan, flight, credential, error, time.perf_counter() - started, background)

    async def _afetch(self, plan: AccessPlan, flight: concurrent.futures.Future[Credential], provider: Any) -> None:
        """As :meth:`_fetch`, on the event loop, for a provider with ``async def aget_credential``."""
        started = time.perf_counter()
        credential, error = None, None
        try:
            result = await asyncio.wait_for(provider.aget_credential(plan), plan.timeout)
            if not isinstance(result, Credential):
                raise ProviderError(f"returned {type(result).__name__}, not a Credential", provider=plan.provider)
            credential = result
        except asyncio.TimeoutError:
            error = ProviderTimeout(f"did not answer within {plan.timeout:g}s", provider=plan.provider)
        except CredentialError as exc:
            error = exc
        except asyncio.CancelledError:
            error = ProviderError("cancelled while fetching", provider=plan.provider)
            self._publish(plan, flight, None, error, time.perf_counter() - started, False)
            raise
        except Exception as exc:
            error = ProviderError(f"{type(exc).__name__}: {exc}", provider=plan.provider)
        self._publish(plan, flight, credential, error, time.perf_counter() - started, False)

    def _call(self, plan: AccessPlan) -> Credential:
        provider = self._providers.get(plan.provider)
        if provider is None:
            raise CredentialError(f"provider {plan.provider}: not in this engine's config")
        if isinstance(provider, ExecProvider):
            return call_provider(provider, plan)  # the exec runner enforces plan.timeout itself
        # An in-process provider cannot be killed; it runs in its own pool and is waited for at
        # most plan.timeout, so a hung provider fails its callers instead of hanging them.
        future = self._provider_pool.submit(call_provider, provider, plan)
        try:
            return future.result(timeout=plan.timeout)
        except concurrent.futures.TimeoutError:
            raise ProviderTimeout(f"did not answer within {plan.timeout:g}s", provider=plan.provider) from None

    def _publish(
        self,
        plan: AccessPlan,
        flight: concurrent.futures.Future[Credential],
        credential: Credential | None,
        error: CredentialError | None,
        duration: float,
        background: bool,
    ) -> None:
        """Store the outcome of one fetch and wake everyone waiting on ``flight``."""
        if flight.done():  # already published (a cancelled async fetch); nothing left to tell
            return
        self._record(plan, credential, error, duration)
        old = None
        with self._lock:
            entry = self._entries.get(plan)
            if entry is None:  # purged meanwhile: keep a home for the result
                entry = self._new_entry(plan)
            if entry.flight is flight:
                entry.flight = None
            if credential is not None:
                old = entry.credential
                entry.credential = credential
                fetched_at = self._clock()
                expiry = credential.expiration_timestamp
                entry.expires_at = expiry.timestamp() if expiry is not None else float("inf")
                entry.refresh_at = (
                    self.refresh_policy.refresh_at(fetched_at, entry.expires_at) if expiry is not None else float("inf")
                )
                entry.error, entry.failures, entry.retry_at = None, 0, 0.0
            else:
                assert error is not None
                entry.error = error
                entry.failures += 1
                entry.retry_at = time.monotonic() + self.backoff_policy.delay(entry.failures)
            failures = entry.failures
        if credential is not None:
            self._note_certificate(plan, old, credential)
            flight.set_result(credential)
        else:
            # A caller waiting on this flight gets the error itself; only a background refresh,
            # which nobody waits for, needs the log to be seen.
            log = _log.warning if background else _log.debug
            log("credential fetch failed", provider=plan.provider, error=str(error), failures=failures, background=background)
            flight.set_exception(error)  # type: ignore[arg-type]

    def _record(self, plan: AccessPlan, credential: Credential | None, error: CredentialError | None, duration: float) -> None:
        metrics = self.metrics
        metrics.request_duration.labels(plan.provider).observe(duration)
        metrics.requests.labels(plan.provider, "success" if error is None else _result_label(error)).inc()
        if plan.kind == "exec" and not isinstance(error, InteractiveModeError):
            if error is None:
                metrics.exec_plugin_calls.labels("0", "no_error").inc()
            elif isinstance(error, ProviderError):
                code = error.exit_code if error.exit_code is not None else -1
                metrics.exec_plugin_calls.labels(str(code), error.call_status).inc()
            else:
                metrics.exec_plugin_calls.labels("-1", CLIENT_INTERNAL_ERROR).inc()

    def _note_certificate(self, plan: AccessPlan, old: Credential | None, new: Credential) -> None:
        self.metrics.track_certificate(id(self), plan, new.certificate_not_after)
        if old is not None and old.client_certificate_data and old.client_certificate_data != new.client_certificate_data:
            self.metrics.observe_rotation(old.certificate_not_before)

    # -- after a 401 ------------------------------------------------------------------------

    def invalidate(self, profile: ClusterProfile | Mapping[str, Any] | AccessPlan, credential: Credential) -> bool:
        """``credential`` was rejected (HTTP 401): drop it if it is still the cached one.

        Returns True when it was dropped (the next call fetches a new one). A credential that was
        already replaced is left alone, so a late 401 cannot discard a newer credential.
        """
        plan = profile if isinstance(profile, AccessPlan) else self.resolve(profile)
        with self._lock:
            entry = self._entries.get(plan)
            if entry is None or entry.credential is not credential or entry.expires_at == 0.0:
                return False
            # Kept (as expired) rather than dropped: the next fetch compares certificates with it.
            entry.expires_at = entry.refresh_at = 0.0
            return True

    # -- adapters and lifetime ---------------------------------------------------------------

    def _register_adapter(self, adapter: Any) -> None:
        """Remember a client binding so that :meth:`close` can remove its certificate files."""
        with self._lock:
            self._adapters.add(adapter)

    def _unregister_adapter(self, adapter: Any) -> None:
        with self._lock:
            self._adapters.discard(adapter)

    def build_config(self, profile: ClusterProfile | Mapping[str, Any]) -> Any:
        """A ``kubernetes.client.Configuration`` for the profile's cluster that stays fresh."""
        from .kube import build_config

        return build_config(self, profile)

    def api_client(self, profile: ClusterProfile | Mapping[str, Any]) -> Any:
        """A ``kubernetes.client.ApiClient``; a 401 refreshes the credential and retries once."""
        from .kube import api_client

        return api_client(self, profile)

    async def abuild_config(self, profile: ClusterProfile | Mapping[str, Any]) -> Any:
        """``kubernetes.aio`` version of :meth:`build_config`."""
        from .kube import abuild_config

        return await abuild_config(self, profile)

    async def aapi_client(self, profile: ClusterProfile | Mapping[str, Any]) -> Any:
        """``kubernetes.aio`` version of :meth:`api_client`."""
        from .kube import aapi_client

        return await aapi_client(self, profile)

    def close(self) -> None:
        """Stop background refreshes, close adapters and providers, drop every credential."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            adapters = list(self._adapters)
            self._adapters.clear()
            count = len(self._entries)
            for entry in self._entries.values():
                self._lookups[(entry.plan.provider, "hit")] += entry.hits
            self._entries.clear()
            self._plans.clear()
        self.metrics.retire_lookups(self)
        self.metrics.cache_entries.dec(count)
        self.metrics.forget_owner(id(self))
        self._executor.shutdown(wait=True, cancel_futures=True)
        self._provider_pool.shutdown(wait=False, cancel_futures=True)  # a hung provider is not waited for
        for adapter in adapters:
            adapter.close()
        for provider in self._providers.values():
            closer = getattr(provider, "close", None)
            if callable(closer):
                closer()

    def __enter__(self) -> CredentialEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def lookup_counts(engine: CredentialEngine) -> dict[tuple[str, str], int]:
    """(provider, result) -> cache lookups so far (for the metrics collector)."""
    with engine._lock:
        counts = collections.Counter(engine._lookups)
        for entry in engine._entries.values():
            if entry.hits:
                counts[(entry.plan.provider, "hit")] += entry.hits
    return dict(counts)
