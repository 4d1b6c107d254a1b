"""The shard's own series, read at scrape time from a :class:`~cpcreds.shard.Shard`:
``cpcreds_shard_overlap_fetches_total{reason}`` and ``cpcreds_shard_overlap_bound_seconds``
(see :mod:`cpcreds.shard.overlap`), and ``cpcreds_shard_lease_contended`` (see
:mod:`cpcreds.shard.ownlease`). Imported only by what serves metrics."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

__all__ = ["OverlapCollector"]


class OverlapCollector(Collector):
    """Fetches of keys that moved here while their previous owner might still mint them, by why
    the key moved (``joined``, ``expired``, ``released``), the longest such window the latest
    handover into this replica opened, and whether this replica's Lease is held by another."""

    def __init__(self, shard: Any) -> None:  # a Shard (not imported: nothing here needs it)
        self.shard = shard

    def collect(self) -> Iterator[Any]:
        overlap = self.shard.overlap
        fetches = CounterMetricFamily(
            "cpcreds_shard_overlap_fetches",
            "Credential fetches of profiles that moved to this replica while their previous owner might still fetch them, by why they moved.",
            labels=["reason"],
        )
        for reason, count in sorted(dict(overlap.fetches).items()):
            fetches.add_metric([reason], float(count))
        yield fetches
        yield GaugeMetricFamily(
            "cpcreds_shard_overlap_bound_seconds",
            "The longest window the latest handover to this replica opened in which the previous owner might still fetch (at most the renew deadline).",
            value=float(overlap.bound),
        )
        yield GaugeMetricFamily(
            "cpcreds_shard_lease_contended",
            "1 while this replica's own Lease is held by another live holder (another process given the same identity): it then serves nothing.",
            value=1.0 if self.shard.contended else 0.0,
        )

    def describe(self) -> Iterator[Any]:
        return iter(())
