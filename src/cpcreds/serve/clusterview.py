"""One cluster of serve's fleet as ``/v1/clusters`` and the status page show it: names, times,
states, the last probe (:class:`ProbeResult`) and the ``ControlPlaneHealthy`` condition. Never a
token, a key or a certificate: only what went through redaction (a URL through
:func:`~cpcreds._show.shown_url`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from .._show import shown_url
from ..fleet.health import control_plane_healthy

if TYPE_CHECKING:
    from ..fleet.cluster import FleetCluster

__all__ = ["ProbeResult", "cluster_dict"]


def _rfc3339(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class ProbeResult:
    """One probe of a cluster's API server with its credential."""

    ok: bool
    status: int | None  # HTTP status, None when no answer came
    latency_seconds: float
    at: float  # epoch seconds
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "status": self.status,
            "latencySeconds": round(self.latency_seconds, 4),
            "at": _rfc3339(self.at),
            "error": self.error,
        }


def cluster_dict(cluster: FleetCluster) -> dict[str, Any]:
    """One cluster of serve's fleet as ``/v1/clusters`` shows it (read from any thread: the
    fleet's loop writes each attribute whole)."""
    key = cluster.key
    namespace, _, name = key.rpartition("/")
    probe = cluster.probe
    condition = control_plane_healthy(cluster.profile)
    return {
        "key": key,
        "namespace": namespace,
        "name": name,
        "origin": cluster.origin,
        "server": shown_url(server) if (server := cluster.server) is not None else None,
        "provider": cluster.provider,
        "answeredBy": cluster.answered_by,
        "state": cluster.state,
        "expirationTimestamp": _rfc3339(cluster.expires_at),
        "lastSuccess": _rfc3339(cluster.last_success),
        "lastError": cluster.last_error,
        "consecutiveFailures": cluster.failures,
        "nextRefresh": _rfc3339(cluster.next_refresh),
        "probe": probe.to_dict() if probe is not None else None,
        "controlPlaneHealthy": dict(condition) if condition else None,
    }
