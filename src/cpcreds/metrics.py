"""Prometheus metrics: KEP-541's exec-plugin metrics and KEP-5339's credential metrics.

Metrics are created once per Prometheus registry, so several engines in one process share them.
They are a no-op until someone asks for them: an engine given a registry counts into it; an
engine given none counts into prometheus_client's default registry if the process has imported
prometheus_client by the time the engine is built (an application that exposes or reads metrics
has), and otherwise counts nothing and never imports it (``cpcreds get-credential``, a script). Labels carry provider names, result
classes and exit codes only: never a token, a cluster URL or any other unbounded value.
"""

from __future__ import annotations

import math
import sys
import threading
import weakref
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import CounterMetricFamily

__all__ = ["Metrics", "NO_METRICS", "CERT_ROTATION_BUCKETS", "REQUEST_DURATION_BUCKETS"]

#: client-go's buckets for rest_client_exec_plugin_certificate_rotation_age (10 min .. 4 years).
CERT_ROTATION_BUCKETS = (600, 1800, 3600, 14400, 86400, 604800, 2592000, 7776000, 15552000, 31104000, 124416000)
#: Provider calls take from a millisecond (in-process) to tens of seconds (a slow exec).
REQUEST_DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

_by_registry: dict[int, Metrics] = {}
_by_registry_lock = threading.Lock()


class Metrics:
    """The metric families, bound to one registry. Get it with :meth:`for_registry`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        from prometheus_client import Counter, Gauge, Histogram

        self.registry = registry
        self.exec_plugin_calls = Counter(
            "rest_client_exec_plugin_call_total",
            "Number of calls to an exec plugin, partitioned by the type of event encountered "
            "(no_error, plugin_execution_error, plugin_not_found_error, client_internal_error) and an "
            "optional exit code. The exit code will be set to 0 if and only if the plugin call was successful.",
            ["code", "call_status"],
            registry=registry,
        )
        self.certificate_rotation_age = Histogram(
            "rest_client_exec_plugin_certificate_rotation_age",
            "Histogram of the number of seconds the last auth exec plugin client certificate lived before being rotated.",
            buckets=CERT_ROTATION_BUCKETS,
            registry=registry,
        )
        self.certificate_ttl = Gauge(
            "rest_client_exec_plugin_ttl_seconds",
            "Gauge of the shortest TTL (time-to-live) of the client certificate(s) managed by the auth exec "
            "plugin. The value is in seconds until certificate expiry (negative if already expired). If auth "
            "exec plugins are unused or manage no TLS certificates, the value will be +INF.",
            registry=registry,
        )
        self.requests = Counter(
            "cpcreds_credential_requests",
            "Credential obtentions (provider calls), by access provider and result "
            "(success, or the error class: plugin_not_found, plugin_execution_error, plugin_timeout, "
            "plugin_output_error, provider_error, client_internal_error).",
            ["provider", "result"],
            registry=registry,
        )
        self.request_duration = Histogram(
            "cpcreds_credential_request_duration_seconds",
            "Latency of credential obtention (one provider call), by access provider.",
            ["provider"],
            buckets=REQUEST_DURATION_BUCKETS,
            registry=registry,
        )
        # Plugin policy decisions (issue: which plugins may run). client-go's family counts every
        # check as allowed or denied; cpcreds' own says which provider and why.
        self.plugin_policy_calls = Counter(
            "rest_client_exec_plugin_policy_call_total",
            "Number of exec plugin policy checks, partitioned by whether the plugin was allowed or denied.",
            ["status"],
            registry=registry,
        )
        self.plugin_policy = Counter(
            "cpcreds_plugin_policy",
            "pluginPolicy decisions, by access provider and decision (allowed, allowed_pinned, denied, "
            "not_allowlisted, interpreter, digest_mismatch, unreadable).",
            ["provider", "decision"],
            registry=registry,
        )
        self.failovers = Counter(
            "cpcreds_failover",
            "Times a ClusterProfile's credential started coming from a later provider than before (failover: true), "
            "by the provider failed over from, the one failed over to, and the class of the failure of the former "
            "(plugin_not_found, plugin_timeout, provider_timeout, plugin_execution_error, plugin_output_error, "
            "provider_error, profile_error).",
            ["from_provider", "to_provider", "reason"],
            registry=registry,
        )
        self._policy_children: dict[tuple[str, str], tuple[Any, Any]] = {}
        self._lookup_sources: weakref.WeakSet[Any] = weakref.WeakSet()
        self._retired_lookups: dict[tuple[str, str], int] = {}
        registry.register(_LookupCollector(self))
        self.cache_entries = Gauge(
            "cpcreds_credential_cache_entries", "Credentials currently cached (all engines of the process).", registry=registry
        )
        self._cert_expiries: dict[int, dict[Any, datetime]] = {}
        self._lock = threading.Lock()
        self.certificate_ttl.set_function(self._shortest_certificate_ttl)

    @classmethod
    def for_registry(cls, registry: CollectorRegistry | None = None) -> Metrics:
        """The metrics of ``registry``; with None, of prometheus_client's default registry if
        the process has imported prometheus_client, else :data:`NO_METRICS` (see the module's
        docstring)."""
        if registry is None:
            prometheus = sys.modules.get("prometheus_client")
            if prometheus is None:
                return NO_METRICS
            registry = prometheus.REGISTRY
        with _by_registry_lock:
            metrics = _by_registry.get(id(registry))
            if metrics is None:
                metrics = _by_registry[id(registry)] = cls(registry)
            return metrics

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

    # -- cache lookups ---------------------------------------------------------------------

    def watch_lookups(self, engine: Any) -> None:
        """Count ``engine``'s cache lookups in cpcreds_credential_cache_lookups_total; ``engine``
        is anything with a ``lookup_counts()`` method returning ``{(provider, result): count}``
        (this module knows nothing else of the engine)."""
        with self._lock:
            self._lookup_sources.add(engine)

    def retire_lookups(self, engine: Any) -> None:
        """A closing engine's counts stay in the totals (counters never go down)."""
        counts = engine.lookup_counts()
        with self._lock:
            self._lookup_sources.discard(engine)
            for key, value in counts.items():
                self._retired_lookups[key] = self._retired_lookups.get(key, 0) + value

    def lookup_totals(self) -> dict[tuple[str, str], int]:
        with self._lock:
            totals = dict(self._retired_lookups)
            engines = list(self._lookup_sources)
        for engine in engines:
            for key, value in engine.lookup_counts().items():
                totals[key] = totals.get(key, 0) + value
        return totals

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


class _LookupCollector:
    """cpcreds_credential_cache_lookups_total, summed from the engines at scrape time.

    A cache hit is the hottest path of the library; a plain integer increment under the lock the
    engine already holds costs a fraction of a prometheus_client ``inc()``.
    """

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def describe(self) -> list[CounterMetricFamily]:
        return [self._family()]

    def _family(self) -> CounterMetricFamily:
        from prometheus_client.core import CounterMetricFamily

        return CounterMetricFamily(
            "cpcreds_credential_cache_lookups",
            "get_credential calls answered from the cache (hit), by a fetch the caller waited for (miss), "
            "or with the last error while backing off (backoff).",
            labels=["provider", "result"],
        )

    def collect(self) -> list[CounterMetricFamily]:
        family = self._family()
        for (provider, result), value in sorted(self._metrics.lookup_totals().items()):
            family.add_metric([provider, result], value)
        return [family]


class _NoFamily:
    """A metric family (and its labelled children) that counts nothing."""

    def labels(self, *_values: Any, **_named: Any) -> _NoFamily:
        return self

    def inc(self, _amount: float = 1) -> None:
        pass

    dec = set = observe = inc

    def set_function(self, _function: Any) -> None:
        pass


class _NoMetrics(Metrics):
    """:class:`Metrics` that count nothing and need no prometheus_client."""

    def __init__(self) -> None:  # no registry, no families: every family is a _NoFamily
        self.registry = None  # type: ignore[assignment]
        nothing = _NoFamily()
        self.exec_plugin_calls = self.certificate_rotation_age = self.certificate_ttl = nothing  # type: ignore[assignment]
        self.requests = self.request_duration = self.plugin_policy_calls = self.plugin_policy = nothing  # type: ignore[assignment]
        self.failovers = self.cache_entries = nothing  # type: ignore[assignment]

    def count_policy_decision(self, provider: str, decision: str) -> None:
        pass

    def track_certificate(self, owner: int, key: Any, not_after: datetime | None) -> None:
        pass

    def forget_owner(self, owner: int) -> None:
        pass

    def watch_lookups(self, engine: Any) -> None:
        pass

    def retire_lookups(self, engine: Any) -> None:
        pass

    def lookup_totals(self) -> dict[tuple[str, str], int]:
        return {}

    def observe_rotation(self, old_not_before: datetime | None) -> None:
        pass


#: What an engine counts into when nobody asked for metrics (see the module's docstring).
NO_METRICS: Metrics = _NoMetrics()
