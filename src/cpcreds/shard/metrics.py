"""The shard's own series, read at scrape time from every :class:`~cpcreds.shard.Shard` shown in
a registry (:meth:`~cpcreds.shard.Shard.register_metrics`; a ``Fleet`` given a shard does it for
its registry, prometheus_client's ``REGISTRY`` by default):
``cpcreds_shard_overlap_fetches_total{reason}`` and ``cpcreds_shard_overlap_bound_seconds``
(see :mod:`cpcreds.shard.overlap`), and ``cpcreds_shard_lease_contended`` (see
:mod:`cpcreds.shard.ownlease`). A process usually runs one shard; several in one registry add
their fetches, and show the longest bound and whether any is contended."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from ..metrics import Readings, for_registry

__all__ = ["shard_readings"]


def shard_readings(registry: CollectorRegistry | None) -> Readings:
    """The shards' collector of ``registry`` (default ``REGISTRY``)."""
    return for_registry(registry, "shard", lambda: Readings(_families))


def _families(shards: list[Any]) -> Iterator[Any]:
    fetches: dict[str, float] = {}
    for shard in shards:
        for reason, count in dict(shard.overlap.fetches).items():
            fetches[reason] = fetches.get(reason, 0.0) + count
    family = CounterMetricFamily(
        "cpcreds_shard_overlap_fetches",
        "Credential fetches of profiles that moved to this replica while their previous owner might still fetch them, by why they moved.",
        labels=["reason"],
    )
    for reason, count in sorted(fetches.items()):
        family.add_metric([reason], count)
    yield family
    yield GaugeMetricFamily(
        "cpcreds_shard_overlap_bound_seconds",
        "The longest window the latest handover to this replica opened in which the previous owner might still fetch (at most the renew deadline).",
        value=max((float(shard.overlap.bound) for shard in shards), default=0.0),
    )
    yield GaugeMetricFamily(
        "cpcreds_shard_lease_contended",
        "1 while this replica's own Lease is held by another live holder (another process given the same identity): it then serves nothing.",
        value=1.0 if any(shard.contended for shard in shards) else 0.0,
    )
