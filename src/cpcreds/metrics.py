"""Prometheus metrics: KEP-541's exec-plugin metrics and KEP-5339's credential metrics, as
prometheus_client's own types.

Where they are registered: in prometheus_client's default ``REGISTRY`` unless a registry is given
(``CredentialEngine(..., prometheus_registry=registry)``), as client-go registers its exec metrics
with its global registry. Each registry holds one set of cpcreds metrics, made the first time an
engine (or a fleet, a shard, serve) is given it and shared by every later one, so two engines on
one registry add up instead of clashing, and closing one leaves the series of the others.

Counting on an event (a provider call, a policy decision, a new cache entry) is a
``Counter``/``Histogram``/``Gauge`` of prometheus_client. What is state rather than an event is
read at scrape time by a :class:`Readings` collector, prometheus_client's mechanism for values it
does not hold: the cache hits (counted as plain integers under the engine's lock, because an
``inc()`` would cost more than the hit itself), the fleet's clusters, a shard's Lease.

Labels carry provider names, result classes and exit codes only: never a token, a cluster URL or
any other unbounded value.

This module imports prometheus_client; the engine imports it, so building an engine does.
``cpcreds get-credential`` answers a disk-cache hit before any engine exists and never does.
"""

from __future__ import annotations

import math
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timezone
from typing import Any, TypeVar

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from .errors import ConfigError
from .lockedset import LockedSet

__all__ = ["Metrics", "Readings", "for_registry", "register", "CERT_ROTATION_BUCKETS", "REQUEST_DURATION_BUCKETS"]

#: client-go's buckets for rest_client_exec_plugin_certificate_rotation_age (10 min .. 4 years).
CERT_ROTATION_BUCKETS = (600, 1800, 3600, 14400, 86400, 604800, 2592000, 7776000, 15552000, 31104000, 124416000)
#: Provider calls take from a millisecond (in-process) to tens of seconds (a slow exec).
REQUEST_DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

T = TypeVar("T")

# registry -> {kind: what for_registry made}. Weak: a private registry dropped by its program
# takes its metrics with it.
_made: weakref.WeakKeyDictionary[CollectorRegistry, dict[str, Any]] = weakref.WeakKeyDictionary()
_made_lock = threading.RLock()


def for_registry(registry: CollectorRegistry | None, kind: str, make: Callable[[], T]) -> T:
    """The ``kind`` metrics of ``registry`` (default: prometheus_client's ``REGISTRY``): made by
    ``make()`` and registered the first time, the same object afterwards. ``make`` returns
    something with ``collectors()``; registering is all or nothing, and a name the registry
    already holds is a :class:`~cpcreds.ConfigError` (nothing of ours is left registered)."""
    registry = REGISTRY if registry is None else registry
    with _made_lock:
        kinds = _made.setdefault(registry, {})
        made = kinds.get(kind)
        if made is None:
            made = make()
            done: list[Collector] = []
            try:
                for collector in made.collectors():  # type: ignore[attr-defined]
                    registry.register(collector)
                    done.append(collector)
            except ValueError as exc:  # prometheus_client's "Duplicated timeseries" (names only)
                for collector in done:
                    registry.unregister(collector)
                raise ConfigError(f"prometheus_registry cannot take cpcreds' {kind} metrics: {exc}", source="prometheus_registry") from None
            kinds[kind] = made
        return made  # type: ignore[no-any-return]


class Readings(Collector):
    """Series read at scrape time from every object attached to it (engines, fleets, shards):
    ``read(objects)`` yields the metric families. Objects are held weakly and detached when they
    close, so a closed engine's or fleet's state leaves the sums while the series stay."""

    def __init__(self, read: Callable[[list[Any]], Iterable[Metric]]) -> None:
        self._read = read
        self._objects: LockedSet[Any] = LockedSet(weak=True)

    def attach(self, thing: Any) -> None:
        self._objects.add(thing)

    def detach(self, thing: Any) -> None:
        self._objects.discard(thing)

    def attached(self) -> list[Any]:
        return self._objects.snapshot()

    def collect(self) -> Iterator[Metric]:
        return iter(self._read(self.attached()))

    def describe(self) -> Iterator[Metric]:
        # The families without reading anything (the names are what a registry checks).
        return iter(self._read([]))

    def collectors(self) -> tuple[Collector, ...]:
        return (self,)


def register(registry: CollectorRegistry | None = None) -> None:
    """Kept for programs written when the default metrics had to be registered by hand: they are
    now in prometheus_client's ``REGISTRY`` from the first engine on, so ``register()`` only makes
    sure they exist. ``register(registry)`` also shows them in ``registry``; engines given that
    registry later count into them. Idempotent. Raises ``ValueError`` if ``registry`` already
    holds cpcreds metrics of its own (an engine was given it before)."""
    default = Metrics.for_registry(None)
    if registry is None or registry is REGISTRY:
        return
    with _made_lock:
        kinds = _made.setdefault(registry, {})
        known = kinds.get("engine")
        if known is default:
            return
        if known is not None:
            raise ValueError("this registry already holds cpcreds metrics of its own")
        for collector in default.collectors():
            registry.register(collector)
        kinds["engine"] = default


class Metrics:
    """The engines' metrics in one registry; get them with :meth:`for_registry`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        #: The registry these metrics are registered on.
        self.registry = registry
        self.exec_plugin_calls = Counter(
            "rest_client_exec_plugin_call_total",
            "Number of calls to an exec plugin, partitioned by the type of event encountered "
            "(no_error, plugin_execution_error, plugin_not_found_error, client_internal_error) and an "
            "optional exit code. The exit code will be set to 0 if and only if the plugin call was successful.",
            ("code", "call_status"),
            registry=None,
        )
        self.certificate_rotation_age = Histogram(
            "rest_client_exec_plugin_certificate_rotation_age",
            "Histogram of the number of seconds the last auth exec plugin client certificate lived before being rotated.",
            buckets=CERT_ROTATION_BUCKETS,
            registry=None,
        )
        self.certificate_ttl = Gauge(
            "rest_client_exec_plugin_ttl_seconds",
            "Gauge of the shortest TTL (time-to-live) of the client certificate(s) managed by the auth exec "
            "plugin. The value is in seconds until certificate expiry (negative if already expired). If auth "
            "exec plugins are unused or manage no TLS certificates, the value will be +INF.",
            registry=None,
        )
        self.requests = Counter(
            "cpcreds_credential_requests_total",
            "Credential obtentions (provider calls), by access provider and result "
            "(success, or the error class: plugin_not_found, plugin_execution_error, plugin_timeout, "
            "plugin_output_error, provider_error, client_internal_error).",
            ("provider", "result"),
            registry=None,
        )
        self.request_duration = Histogram(
            "cpcreds_credential_request_duration_seconds",
            "Latency of credential obtention (one provider call), by access provider.",
            ("provider",),
            buckets=REQUEST_DURATION_BUCKETS,
            registry=None,
        )
        # Plugin policy decisions. client-go's family counts every check as allowed or denied;
        # cpcreds' own says which provider and why.
        self.plugin_policy_calls = Counter(
            "rest_client_exec_plugin_policy_call_total",
            "Number of exec plugin policy checks, partitioned by whether the plugin was allowed or denied.",
            ("status",),
            registry=None,
        )
        self.plugin_policy = Counter(
            "cpcreds_plugin_policy_total",
            "pluginPolicy decisions, by access provider and decision (allowed, allowed_pinned, denied, "
            "not_allowlisted, interpreter, digest_mismatch, unreadable).",
            ("provider", "decision"),
            registry=None,
        )
        self.failovers = Counter(
            "cpcreds_failover_total",
            "Times a ClusterProfile's credential started coming from a later provider than before (failover: true), "
            "by the provider failed over from, the one failed over to, and the class of the failure of the former "
            "(plugin_not_found, plugin_timeout, provider_timeout, plugin_execution_error, plugin_output_error, "
            "provider_error, profile_error).",
            ("from_provider", "to_provider", "reason"),
            registry=None,
        )
        self.cache_entries = Gauge("cpcreds_credential_cache_entries", "Credentials currently cached (all engines of the registry).", registry=None)
        #: The engines whose cache lookups are summed at scrape time.
        self.lookups = Readings(self._lookup_families)
        self._policy_children: dict[tuple[str, str], tuple[Any, Any]] = {}
        self._retired_lookups: dict[tuple[str, str], int] = {}
        self._cert_expiries: dict[int, dict[Any, datetime]] = {}
        self._lock = threading.Lock()
        self.certificate_ttl.set_function(self._shortest_certificate_ttl)
        # Read at scrape time from the engines, as their lookups are: a new plan's entry then
        # updates no gauge (a lock) on the way to its first fetch.
        self.cache_entries.set_function(self._cached_entries)

    @classmethod
    def for_registry(cls, registry: CollectorRegistry | None = None) -> Metrics:
        """The engines' metrics of ``registry`` (default: prometheus_client's ``REGISTRY``),
        registered on it the first time and shared by every engine given it."""
        target = REGISTRY if registry is None else registry
        return for_registry(target, "engine", lambda: cls(target))

    def collectors(self) -> tuple[Collector, ...]:
        return (
            self.exec_plugin_calls,
            self.certificate_rotation_age,
            self.certificate_ttl,
            self.requests,
            self.request_duration,
            self.plugin_policy_calls,
            self.plugin_policy,
            self.failovers,
            self.cache_entries,
            self.lookups,
        )

    # -- plugin policy ---------------------------------------------------------------------

    def count_policy_decision(self, provider: str, decision: str) -> None:
        """One pluginPolicy decision for an exec run of ``provider`` (on every exec run: the
        labelled children are looked up once per provider and decision, not per call)."""
        children = self._policy_children.get((provider, decision))
        if children is None:
            status = "allowed" if decision.startswith("allowed") else "denied"
            children = (self.plugin_policy_calls.labels(status), self.plugin_policy.labels(provider, decision))
            if len(self._policy_children) < 10_000:  # provider names come from the config: few
                self._policy_children[(provider, decision)] = children
        children[0].inc()
        children[1].inc()

    # -- certificates ----------------------------------------------------------------------

    def track_certificate(self, owner: int, key: Any, not_after: datetime | None) -> None:
        """Remember (or forget, with ``None``) the expiry of the certificate cached under ``key``."""
        with self._lock:
            owned = self._cert_expiries.setdefault(owner, {})
            if not_after is None:
                owned.pop(key, None)
            else:
                owned[key] = not_after

    def forget_owner(self, owner: int) -> None:
        with self._lock:
            self._cert_expiries.pop(owner, None)

    def _shortest_certificate_ttl(self) -> float:
        with self._lock:
            expiries = [when for owned in self._cert_expiries.values() for when in owned.values()]
        if not expiries:
            return math.inf
        return (min(expiries) - datetime.now(timezone.utc)).total_seconds()

    def observe_rotation(self, old_not_before: datetime | None) -> None:
        """A cached certificate was replaced by a new one: record how long the old one lived."""
        if old_not_before is not None:
            self.certificate_rotation_age.observe(max(0.0, time.time() - old_not_before.timestamp()))

    # -- cache lookups ---------------------------------------------------------------------

    def watch_lookups(self, engine: Any) -> None:
        """Count ``engine``'s cache lookups in cpcreds_credential_cache_lookups_total, and its
        entries in cpcreds_credential_cache_entries; ``engine`` is anything with a
        ``lookup_counts()`` method returning ``{(provider, result): count}`` and a
        ``cache_entries()`` method returning how many plans it holds (this module knows nothing
        else of the engine)."""
        self.lookups.attach(engine)

    def _cached_entries(self) -> float:
        return float(sum(engine.cache_entries() for engine in self.lookups.attached()))

    def retire_lookups(self, engine: Any) -> None:
        """A closing engine's counts stay in the totals (counters never go down)."""
        counts = engine.lookup_counts()
        with self._lock:
            self.lookups.detach(engine)
            for key, value in counts.items():
                self._retired_lookups[key] = self._retired_lookups.get(key, 0) + value

    def _lookup_families(self, engines: list[Any]) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "cpcreds_credential_cache_lookups",
            "get_credential calls answered from the cache (hit), by a fetch the caller waited for (miss), "
            "or with the last error while backing off (backoff).",
            labels=["provider", "result"],
        )
        with self._lock:  # an engine retired since the list was taken is in the totals now
            totals = dict(self._retired_lookups)
            live = {id(engine) for engine in self.lookups.attached()}
            engines = [engine for engine in engines if id(engine) in live]
        for engine in engines:
            for key, value in engine.lookup_counts().items():
                totals[key] = totals.get(key, 0) + value
        for (provider, result), value in sorted(totals.items()):
            family.add_metric([provider, result], value)
        yield family
