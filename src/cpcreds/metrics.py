"""Prometheus metrics: KEP-541's exec-plugin metrics and KEP-5339's credential metrics.

Counting never needs prometheus_client: every engine counts into plain in-process counters (a
few integer additions per fetch), and prometheus_client is imported only when something reads
them — a registry's scrape. Where the counts of an engine show:

- an engine given ``prometheus_registry=registry`` counts into that registry's metrics (created
  once per registry and shared by every engine given it; registered on it at once);
- an engine given none counts into the process's *default* metrics. Those are registered on
  prometheus_client's default ``REGISTRY`` when an engine is built in a process that has already
  imported prometheus_client (an application that serves or reads metrics has), or by
  :func:`register` at any time — before or after the engines are built, nothing counted is lost.
  A one-shot command (``cpcreds get-credential``) never imports prometheus_client.

Labels carry provider names, result classes and exit codes only: never a token, a cluster URL or
any other unbounded value.
"""

from __future__ import annotations

import bisect
import math
import sys
import threading
import weakref
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric

__all__ = ["Metrics", "register", "CERT_ROTATION_BUCKETS", "REQUEST_DURATION_BUCKETS"]

#: client-go's buckets for rest_client_exec_plugin_certificate_rotation_age (10 min .. 4 years).
CERT_ROTATION_BUCKETS = (600, 1800, 3600, 14400, 86400, 604800, 2592000, 7776000, 15552000, 31104000, 124416000)
#: Provider calls take from a millisecond (in-process) to tens of seconds (a slow exec).
REQUEST_DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

_by_registry: dict[int, Metrics] = {}
_by_registry_lock = threading.Lock()
_default: Metrics | None = None


def register(registry: CollectorRegistry | None = None) -> None:
    """Expose the default metrics (those of every engine built without ``prometheus_registry``)
    in ``registry`` (default: prometheus_client's ``REGISTRY``). Counts made before the call are
    included. Idempotent. Engines built later with ``prometheus_registry=registry`` count into
    the same metrics. Raises ``ValueError`` if ``registry`` already holds metrics of its own (an
    engine was given it before): they would be two sets of the same names."""
    from prometheus_client import REGISTRY

    registry = REGISTRY if registry is None else registry
    default = _default_metrics()
    with _by_registry_lock:
        known = _by_registry.get(id(registry))
        if known is default:
            return
        if known is not None:
            raise ValueError("this registry already holds cpcreds metrics of its own")
        registry.register(_Collector(default))
        _by_registry[id(registry)] = default
        if default.registry is None:
            default.registry = registry


def _default_metrics() -> Metrics:
    global _default
    with _by_registry_lock:
        if _default is None:
            _default = Metrics()
        return _default


class _Family:
    """One metric family's plain counts: ``labels(*values)`` gives the child that counts one
    label combination (as prometheus_client's families do), read at scrape time."""

    __slots__ = ("kind", "name", "help", "labelnames", "buckets", "children", "lock", "function", "_single")

    def __init__(self, kind: str, name: str, help: str, labelnames: tuple[str, ...] = (), buckets: tuple[float, ...] = ()) -> None:
        self.kind, self.name, self.help, self.labelnames, self.buckets = kind, name, help, labelnames, buckets
        self.children: dict[tuple[str, ...], _Child] = {}
        self.lock = threading.Lock()
        self.function: Any = None
        # An unlabelled family has one child from the start (prometheus_client shows it at 0).
        self._single = self.labels() if not labelnames else None

    def labels(self, *values: Any) -> _Child:
        key = tuple(str(value) for value in values)
        child = self.children.get(key)
        if child is None:
            if len(key) != len(self.labelnames):
                raise ValueError(f"{self.name} takes labels {self.labelnames}")
            with self.lock:
                child = self.children.setdefault(key, _Child(self))
        return child

    # An unlabelled family is used as its own child.
    def inc(self, amount: float = 1) -> None:
        self._single.inc(amount)  # type: ignore[union-attr]

    def dec(self, amount: float = 1) -> None:
        self._single.inc(-amount)  # type: ignore[union-attr]

    def set(self, value: float) -> None:
        self._single.set(value)  # type: ignore[union-attr]

    def observe(self, value: float) -> None:
        self._single.observe(value)  # type: ignore[union-attr]

    def set_function(self, function: Any) -> None:
        self.function = function


class _Child:
    """The counts of one label combination: a value, or a histogram's bucket counts and sum."""

    __slots__ = ("family", "value", "counts", "created")

    def __init__(self, family: _Family) -> None:
        self.family = family
        self.value = 0.0
        self.counts = [0] * (len(family.buckets) + 1) if family.kind == "histogram" else None
        self.created = time.time()

    def inc(self, amount: float = 1) -> None:
        with self.family.lock:  # += on an attribute is not atomic across threads
            self.value += amount

    def dec(self, amount: float = 1) -> None:
        self.inc(-amount)

    def set(self, value: float) -> None:
        self.value = value

    def observe(self, value: float) -> None:
        index = bisect.bisect_left(self.family.buckets, value)  # le: the first bound >= value
        with self.family.lock:
            self.counts[index] += 1  # type: ignore[index]
            self.value += value


class Metrics:
    """The metric families of one registry (or of the default metrics); get them with
    :meth:`for_registry`. Counting is plain arithmetic; see the module's docstring."""

    def __init__(self) -> None:
        #: The registry these metrics were first registered on (None: not registered yet).
        self.registry: CollectorRegistry | None = None
        self.exec_plugin_calls = _Family(
            "counter",
            "rest_client_exec_plugin_call_total",
            "Number of calls to an exec plugin, partitioned by the type of event encountered "
            "(no_error, plugin_execution_error, plugin_not_found_error, client_internal_error) and an "
            "optional exit code. The exit code will be set to 0 if and only if the plugin call was successful.",
            ("code", "call_status"),
        )
        self.certificate_rotation_age = _Family(
            "histogram",
            "rest_client_exec_plugin_certificate_rotation_age",
            "Histogram of the number of seconds the last auth exec plugin client certificate lived before being rotated.",
            buckets=CERT_ROTATION_BUCKETS,
        )
        self.certificate_ttl = _Family(
            "gauge",
            "rest_client_exec_plugin_ttl_seconds",
            "Gauge of the shortest TTL (time-to-live) of the client certificate(s) managed by the auth exec "
            "plugin. The value is in seconds until certificate expiry (negative if already expired). If auth "
            "exec plugins are unused or manage no TLS certificates, the value will be +INF.",
        )
        self.requests = _Family(
            "counter",
            "cpcreds_credential_requests",
            "Credential obtentions (provider calls), by access provider and result "
            "(success, or the error class: plugin_not_found, plugin_execution_error, plugin_timeout, "
            "plugin_output_error, provider_error, client_internal_error).",
            ("provider", "result"),
        )
        self.request_duration = _Family(
            "histogram",
            "cpcreds_credential_request_duration_seconds",
            "Latency of credential obtention (one provider call), by access provider.",
            ("provider",),
            buckets=REQUEST_DURATION_BUCKETS,
        )
        # Plugin policy decisions (issue: which plugins may run). client-go's family counts every
        # check as allowed or denied; cpcreds' own says which provider and why.
        self.plugin_policy_calls = _Family(
            "counter",
            "rest_client_exec_plugin_policy_call_total",
            "Number of exec plugin policy checks, partitioned by whether the plugin was allowed or denied.",
            ("status",),
        )
        self.plugin_policy = _Family(
            "counter",
            "cpcreds_plugin_policy",
            "pluginPolicy decisions, by access provider and decision (allowed, allowed_pinned, denied, "
            "not_allowlisted, interpreter, digest_mismatch, unreadable).",
            ("provider", "decision"),
        )
        self.failovers = _Family(
            "counter",
            "cpcreds_failover",
            "Times a ClusterProfile's credential started coming from a later provider than before (failover: true), "
            "by the provider failed over from, the one failed over to, and the class of the failure of the former "
            "(plugin_not_found, plugin_timeout, provider_timeout, plugin_execution_error, plugin_output_error, "
            "provider_error, profile_error).",
            ("from_provider", "to_provider", "reason"),
        )
        self.cache_entries = _Family(
            "gauge", "cpcreds_credential_cache_entries", "Credentials currently cached (all engines of the process)."
        )
        self._policy_children: dict[tuple[str, str], tuple[Any, Any]] = {}
        self._lookup_sources: weakref.WeakSet[Any] = weakref.WeakSet()
        self._retired_lookups: dict[tuple[str, str], int] = {}
        self._cert_expiries: dict[int, dict[Any, datetime]] = {}
        self._lock = threading.Lock()
        self.certificate_ttl.set_function(self._shortest_certificate_ttl)

    @classmethod
    def for_registry(cls, registry: CollectorRegistry | None = None) -> Metrics:
        """The metrics of ``registry`` (made and registered on it the first time); with None,
        the default metrics, registered on prometheus_client's ``REGISTRY`` if the process has
        imported prometheus_client (see the module's docstring)."""
        if registry is None:
            default = _default_metrics()
            if "prometheus_client" in sys.modules:
                register()
            return default
        with _by_registry_lock:
            metrics = _by_registry.get(id(registry))
            if metrics is None:
                metrics = cls()
                metrics.registry = registry
                registry.register(_Collector(metrics))
                _by_registry[id(registry)] = metrics
            return metrics

    def families(self) -> tuple[_Family, ...]:
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


class _Collector:
    """A prometheus_client collector over one :class:`Metrics`: builds the families from the
    plain counts at scrape time (the only place prometheus_client is imported)."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def describe(self) -> list[Metric]:
        return list(self._families(with_samples=False))

    def collect(self) -> Iterator[Metric]:
        return self._families(with_samples=True)

    def _families(self, *, with_samples: bool) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
        from prometheus_client.utils import floatToGoString

        metrics = self._metrics
        for family in metrics.families():
            labels = list(family.labelnames)
            with family.lock:
                children = [(key, child.value, list(child.counts or ()), child.created) for key, child in family.children.items()]
            if family.kind == "counter":
                out: Any = CounterMetricFamily(family.name, family.help, labels=labels)
                for key, value, _, created in children if with_samples else ():
                    out.add_metric(list(key), value, created=created)
            elif family.kind == "gauge":
                out = GaugeMetricFamily(family.name, family.help, labels=labels)
                for key, value, _, _ in children if with_samples else ():
                    out.add_metric(list(key), family.function() if family.function is not None else value)
            else:
                out = HistogramMetricFamily(family.name, family.help, labels=labels)
                bounds = [floatToGoString(bound) for bound in family.buckets] + ["+Inf"]
                for key, total, counts, created in children if with_samples else ():
                    cumulative, running = [], 0
                    for bound, count in zip(bounds, counts):
                        running += count
                        cumulative.append((bound, running))
                    out.add_metric(list(key), cumulative, total)
                    out.add_sample(family.name + "_created", dict(zip(labels, key)), created)
            yield out
        lookups = CounterMetricFamily(
            "cpcreds_credential_cache_lookups",
            "get_credential calls answered from the cache (hit), by a fetch the caller waited for (miss), "
            "or with the last error while backing off (backoff).",
            labels=["provider", "result"],
        )
        if with_samples:
            # A cache hit is the hottest path of the library: the engines count lookups in plain
            # integers under the lock they already hold, summed here.
            for (provider, result), value in sorted(metrics.lookup_totals().items()):
                lookups.add_metric([provider, result], value)
        yield lookups
