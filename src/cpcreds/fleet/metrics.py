"""The fleet's metrics, registered when a ``prometheus_registry`` is given to the Fleet; serve,
which counts its clusters itself, registers only :class:`DuplicatesCollector`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from .cluster import CLUSTER_STATES

__all__ = ["FleetCollector", "DuplicatesCollector"]


class FleetCollector(Collector):
    """``cpcreds_fleet_clusters{state}``, ``cpcreds_fleet_engaged_clusters`` and
    ``cpcreds_fleet_duplicate_profiles`` (profiles not acted on: KEP-4322 duplicates), read at
    scrape time."""

    def __init__(self, fleet: Any) -> None:  # a Fleet (not imported: fleet.core imports this)
        self.fleet = fleet

    def collect(self) -> Iterator[Any]:
        clusters = self.fleet.clusters.values()
        states = GaugeMetricFamily("cpcreds_fleet_clusters", "Clusters the fleet tracks, by state.", labels=["state"])
        for state in CLUSTER_STATES:
            states.add_metric([state], sum(1 for cluster in clusters if cluster.state == state))
        yield states
        yield GaugeMetricFamily("cpcreds_fleet_engaged_clusters", "Clusters engaged now.", value=sum(1 for cluster in clusters if cluster.engaged))
        yield from DuplicatesCollector(self.fleet).collect()


class DuplicatesCollector(Collector):
    """``cpcreds_fleet_duplicate_profiles`` alone, read at scrape time without walking the
    clusters: what an operator alerts on, in serve's /metrics too."""

    def __init__(self, fleet: Any) -> None:
        self.fleet = fleet

    def collect(self) -> Iterator[Any]:
        yield GaugeMetricFamily(
            "cpcreds_fleet_duplicate_profiles",
            "ClusterProfiles not acted on because another profile of the same inventory member (KEP-4322) stands for their cluster.",
            value=self.fleet.duplicate_count,
        )
