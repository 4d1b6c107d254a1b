"""The gate of a :class:`~cpcreds.Fleet`: whether a cluster is engaged, as multicluster-runtime
decides it. A cluster is engaged once its credential has been fetched and its
``ControlPlaneHealthy`` condition is True (unless ``require_healthy=False``); an engaged one whose
condition turns is disengaged or, with ``on_unhealthy="mark"``, kept engaged in state
``unhealthy``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from ..errors import ConfigError

if TYPE_CHECKING:
    from .cluster import FleetCluster
    from .events import EventFanout

__all__ = ["Gate", "OnUnhealthy"]

OnUnhealthy = Literal["disengage", "mark"]


class Gate:
    """Engages and disengages clusters through ``events`` as their credential and health say.
    Raises :class:`~cpcreds.ConfigError` for an ``on_unhealthy`` other than the two it knows."""

    def __init__(self, require_healthy: bool, on_unhealthy: OnUnhealthy, events: EventFanout) -> None:
        if on_unhealthy not in ("disengage", "mark"):
            raise ConfigError(f"on_unhealthy must be 'disengage' or 'mark', not {on_unhealthy!r}", source="Fleet")
        self.require_healthy = require_healthy
        self.on_unhealthy = on_unhealthy
        self.events = events

    def passes_health(self, cluster: FleetCluster) -> bool:
        """Whether ``cluster``'s health lets it be engaged."""
        return cluster.healthy or not self.require_healthy

    def decide(self, cluster: FleetCluster) -> str:
        """Engage or disengage ``cluster`` as its credential and health say; returns what it
        is now: ``engaged`` (just now), ``stay`` (was and is), ``disengaged`` or ``idle``."""
        healthy = self.passes_health(cluster)
        credentialed = cluster.credentialed and cluster.binding is not None
        if cluster.binding is not None and credentialed:
            cluster.state = "ready" if healthy else "unhealthy"
            if cluster.state == "ready" and cluster.failures:
                cluster.state = "failing"
        if credentialed and healthy:
            if not cluster.engaged:
                self.events.engage(cluster)
                return "engaged"
            return "stay"
        if cluster.engaged:
            if credentialed and self.on_unhealthy == "mark":
                return "stay"  # the Updated event the caller sends says unhealthy
            self.events.disengage(cluster, "unhealthy")
            return "disengaged"
        return "idle"
