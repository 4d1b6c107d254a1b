"""The fleet's series, read at scrape time from every open :class:`~cpcreds.Fleet` of a registry
(prometheus_client's ``REGISTRY`` unless the Fleet was given ``prometheus_registry``):
``cpcreds_fleet_clusters{state}``, ``cpcreds_fleet_engaged_clusters`` and
``cpcreds_fleet_duplicate_profiles`` (profiles not acted on: KEP-4322 duplicates). Fleets of one
registry add up; a closed fleet leaves the sums."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily

from ..metrics import Readings, for_registry
from .cluster import CLUSTER_STATES

__all__ = ["fleet_readings"]


def fleet_readings(registry: CollectorRegistry | None) -> Readings:
    """The fleets' collector of ``registry`` (default ``REGISTRY``): a fleet attaches to it when
    made and detaches when closed."""
    return for_registry(registry, "fleet", lambda: Readings(_families))


def _families(fleets: list[Any]) -> Iterator[GaugeMetricFamily]:
    by_state = dict.fromkeys(CLUSTER_STATES, 0)
    engaged = 0
    for fleet in fleets:
        for cluster in fleet.clusters.values():  # one pass: serve's fleet holds 100,000
            by_state[cluster.state] = by_state.get(cluster.state, 0) + 1
            engaged += cluster.engaged
    states = GaugeMetricFamily("cpcreds_fleet_clusters", "Clusters the fleet tracks, by state.", labels=["state"])
    for state, count in by_state.items():
        states.add_metric([state], count)
    yield states
    yield GaugeMetricFamily("cpcreds_fleet_engaged_clusters", "Clusters engaged now.", value=engaged)
    yield GaugeMetricFamily(
        "cpcreds_fleet_duplicate_profiles",
        "ClusterProfiles not acted on because another profile of the same inventory member (KEP-4322) stands for their cluster.",
        value=sum(fleet.duplicate_count for fleet in fleets),
    )
