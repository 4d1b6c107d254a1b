"""What serve knows about each cluster, as the status page, ``/v1/clusters`` and ``/metrics``
show it. Never a token, a key or a certificate: only names, times, states and messages that
went through redaction."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ..fleet.health import control_plane_healthy
from ..logs import redact_text

__all__ = ["ClusterStatus", "ProbeResult", "StatusBoard", "STATES", "control_plane_healthy"]

#: pending: not fetched yet; ready: a valid credential is held; failing: the last fetch failed
#: (an older credential may still be valid); unmatched: no configured provider fits the profile;
#: invalid: the profile cannot be used.
STATES = ("pending", "ready", "failing", "unmatched", "invalid")


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


@dataclass
class ClusterStatus:
    """The state of one profile. Written by the keeper (one event loop), read by HTTP threads
    through :class:`StatusBoard` snapshots."""

    key: str
    origin: str
    provider: str | None = None
    state: str = "pending"
    expires_at: float | None = None  # epoch seconds; None: no expiry, or no credential
    last_success: float | None = None
    last_error: str | None = None
    failures: int = 0
    next_refresh: float | None = None
    probe: ProbeResult | None = None
    #: The profile's ControlPlaneHealthy condition: {"status": "True", "reason": ..., "message": ...}.
    control_plane_healthy: Mapping[str, str] | None = None
    server: str | None = None
    #: The provider whose credential is held: ``provider`` (the preferred one) unless the profile
    #: failed over to another (``failover: true``); None before the first success.
    answered_by: str | None = None

    def to_dict(self) -> dict[str, Any]:
        namespace, _, name = self.key.rpartition("/")
        return {
            "key": self.key,
            "namespace": namespace,
            "name": name,
            "origin": self.origin,
            "server": self.server,
            "provider": self.provider,
            "answeredBy": self.answered_by,
            "state": self.state,
            "expirationTimestamp": _rfc3339(self.expires_at),
            "lastSuccess": _rfc3339(self.last_success),
            "lastError": self.last_error,
            "consecutiveFailures": self.failures,
            "nextRefresh": _rfc3339(self.next_refresh),
            "probe": self.probe.to_dict() if self.probe is not None else None,
            "controlPlaneHealthy": dict(self.control_plane_healthy) if self.control_plane_healthy else None,
        }


@dataclass
class StatusBoard:
    """Every profile's :class:`ClusterStatus`, plus the service's own state, behind one lock."""

    source: str = "directory"
    _clusters: dict[str, ClusterStatus] = field(default_factory=dict)
    _problems: dict[str, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    synced: bool = False
    started_at: float = 0.0
    #: Why serve is not ready although its first sync is done (the profiles folder is gone).
    not_ready: str | None = None
    _kubeconfig_errors: dict[str, str] = field(default_factory=dict)
    #: Why the last config reload failed (serve runs the previous config), until one succeeds.
    config_error: str | None = None

    def put(self, status: ClusterStatus) -> None:
        with self._lock:
            self._clusters[status.key] = status

    def drop(self, key: str) -> None:
        with self._lock:
            self._clusters.pop(key, None)

    def set_problem(self, origin: str, problem: str) -> None:
        with self._lock:
            if problem:
                self._problems[origin] = redact_text(problem)
            else:
                self._problems.pop(origin, None)

    def set_kubeconfig_error(self, key: str, problem: str | None) -> None:
        """Why the profile's kubeconfig files cannot be written now (None: they are written)."""
        with self._lock:
            if problem:
                self._kubeconfig_errors[key] = redact_text(problem)
            else:
                self._kubeconfig_errors.pop(key, None)

    def readiness(self) -> str | None:
        """None when serve is ready (what ``/readyz`` answers 200 to), else why not."""
        if not self.synced:
            return "first sync in progress"
        return self.not_ready

    def _shown(self, status: ClusterStatus) -> dict[str, Any]:
        return {**status.to_dict(), "kubeconfigError": self._kubeconfig_errors.get(status.key)}

    def snapshot(self) -> tuple[list[dict[str, Any]], dict[str, str]]:
        """Every cluster as ``/v1/clusters`` shows it (sorted by key), and the inventory problems."""
        with self._lock:
            clusters = [self._shown(status) for status in self._clusters.values()]
            problems = dict(self._problems)
        clusters.sort(key=lambda c: c["key"])
        return clusters, problems

    def one(self, key: str) -> dict[str, Any] | None:
        """One cluster as ``/v1/clusters`` shows it, or None."""
        with self._lock:
            status = self._clusters.get(key)
            return self._shown(status) if status is not None else None

    def counts(self) -> dict[str, int]:
        with self._lock:
            counts = dict.fromkeys(STATES, 0)
            for status in self._clusters.values():
                counts[status.state] = counts.get(status.state, 0) + 1
        return counts

    def __len__(self) -> int:
        with self._lock:
            return len(self._clusters)

    def _rows(self) -> list[ClusterStatus]:
        with self._lock:
            return list(self._clusters.values())


class ServeCollector(Collector):
    """serve's metrics, computed from the board at scrape time (no per-profile gauges to keep in
    step with the inventory, so a deleted profile's series vanish with it)."""

    def __init__(self, board: StatusBoard) -> None:
        self.board = board

    def collect(self) -> Iterator[GaugeMetricFamily]:
        rows = self.board._rows()
        inventory = GaugeMetricFamily("cpcreds_serve_inventory_profiles", "ClusterProfiles in the inventory, by state.", labels=["source", "state"])
        for state, count in self.board.counts().items():
            inventory.add_metric([self.board.source, state], count)
        yield inventory
        ready = GaugeMetricFamily("cpcreds_serve_ready", "1 when serve is ready (/readyz answers 200): the first full sync is done and the inventory source is usable.")
        ready.add_metric([], 1.0 if self.board.readiness() is None else 0.0)
        yield ready
        expiry = GaugeMetricFamily("cpcreds_serve_credential_expiry_timestamp_seconds", "When the held credential expires (Unix time); absent without an expiry.", labels=["profile", "provider"])
        success = GaugeMetricFamily("cpcreds_serve_credential_last_success_timestamp_seconds", "When the last fetch succeeded (Unix time).", labels=["profile", "provider"])
        failing = GaugeMetricFamily("cpcreds_serve_credential_consecutive_failures", "Fetches failed in a row for the profile (0 when the last one succeeded).", labels=["profile", "provider"])
        probe_up = GaugeMetricFamily("cpcreds_serve_probe_up", "1 if the last probe of the cluster's API server succeeded, else 0.", labels=["profile"])
        probe_seconds = GaugeMetricFamily("cpcreds_serve_probe_duration_seconds", "How long the last probe took.", labels=["profile"])
        for row in rows:
            labels = [row.key, row.provider or ""]
            if row.expires_at is not None:
                expiry.add_metric(labels, row.expires_at)
            if row.last_success is not None:
                success.add_metric(labels, row.last_success)
            failing.add_metric(labels, float(row.failures))
            if row.probe is not None:
                probe_up.add_metric([row.key], 1.0 if row.probe.ok else 0.0)
                probe_seconds.add_metric([row.key], row.probe.latency_seconds)
        yield from (expiry, success, failing, probe_up, probe_seconds)

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(())

