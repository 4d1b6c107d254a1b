"""serve's own series, read at scrape time (prometheus_client collectors, the package's way for
values it does not hold): the status board's counts and per-profile series
(:class:`ServeCollector`) and the shard's series (:class:`ShardCollector`). serve registers them
in the registry its ``/metrics`` shows (prometheus_client's ``REGISTRY`` unless given one) while
it runs, beside the engines', the fleet's and the shard's own series (:mod:`cpcreds.metrics`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from ..fleet.cluster import FleetCluster
    from .shardstatus import ShardStatus
    from .status import StatusBoard

__all__ = ["ServeCollector", "ShardCollector", "PER_PROFILE_METRICS_LIMIT"]

#: The per-profile series (shown up to :data:`PER_PROFILE_METRICS_LIMIT` profiles by default).
PER_PROFILE_SERIES = (
    "cpcreds_serve_credential_expiry_timestamp_seconds",
    "cpcreds_serve_credential_last_success_timestamp_seconds",
    "cpcreds_serve_credential_consecutive_failures",
    "cpcreds_serve_probe_up",
    "cpcreds_serve_probe_duration_seconds",
)
#: Per-profile metric series are on by default up to this many profiles (``--per-profile-metrics``
#: overrides): above it, a scrape of five series per profile grows past what Prometheus should
#: take every 15 s (see docs/metrics.md for the sizes measured).
PER_PROFILE_METRICS_LIMIT = 5000


class ServeCollector(Collector):
    """serve's metrics, computed from the board at scrape time (no per-profile gauges to keep in
    step with the inventory, so a deleted profile's series vanish with it).

    The counts by state and by provider are always there; the per-profile series (five per
    profile) when ``per_profile`` is True, or when it is None and the board holds at most
    :data:`PER_PROFILE_METRICS_LIMIT` profiles."""

    def __init__(self, board: StatusBoard, *, per_profile: bool | None = None) -> None:
        self.board, self.per_profile = board, per_profile

    def collect(self) -> Iterator[GaugeMetricFamily]:
        board = self.board
        inventory = GaugeMetricFamily("cpcreds_serve_inventory_profiles", "ClusterProfiles in the inventory, by state.", labels=["source", "state"])
        for state, count in board.counts().items():
            inventory.add_metric([board.source, state], count)
        yield inventory
        by_provider = GaugeMetricFamily(
            "cpcreds_serve_profiles", "ClusterProfiles by state and by the provider chosen for them (\"\" when none matches).", labels=["provider", "state"]
        )
        for provider, states in board.counts_by_provider().items():
            for state, count in states.items():
                by_provider.add_metric([provider, state], count)
        yield by_provider
        ready = GaugeMetricFamily("cpcreds_serve_ready", "1 when serve is ready (/readyz answers 200): the first full sync is done and the inventory source is usable.")
        ready.add_metric([], 1.0 if board.readiness() is None else 0.0)
        yield ready
        shown = self.per_profile if self.per_profile is not None else len(board) <= PER_PROFILE_METRICS_LIMIT
        switch = GaugeMetricFamily("cpcreds_serve_per_profile_metrics", "1 when the per-profile series (cpcreds_serve_credential_*, cpcreds_serve_probe_*) are exposed, else 0 (--per-profile-metrics).")
        switch.add_metric([], 1.0 if shown else 0.0)
        yield switch
        if shown:
            yield from self._per_profile(board.rows())

    @staticmethod
    def _per_profile(rows: list[FleetCluster]) -> Iterator[GaugeMetricFamily]:
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
        # The names only (a registry refuses a second set): reading the board is for scrapes.
        names = ("cpcreds_serve_inventory_profiles", "cpcreds_serve_profiles", "cpcreds_serve_ready", "cpcreds_serve_per_profile_metrics")
        names += PER_PROFILE_SERIES
        return iter([GaugeMetricFamily(name, "") for name in names])


class ShardCollector(Collector):
    """serve's shard series: members, owned profiles, this replica's freshness, renewals by
    result, membership changes (handovers) by reason, the last rebalance's computing time."""

    def __init__(self, status: ShardStatus, owned: Callable[[], int]) -> None:
        self.status, self.owned = status, owned

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        shard = self.status.shard
        members = GaugeMetricFamily("cpcreds_shard_members", "Replicas taking profiles now, as this replica sees them (itself included when it claims).")
        members.add_metric([], float(len(shard.membership.members)))
        owned = GaugeMetricFamily("cpcreds_shard_owned_profiles", "Profiles this replica owns and keeps warm.")
        owned.add_metric([], float(self.owned()))
        fresh = GaugeMetricFamily("cpcreds_shard_self_fresh", "1 while this replica's own Lease is renewed in time (else it serves nothing).")
        fresh.add_metric([], 1.0 if shard.fresh() else 0.0)
        renewals = CounterMetricFamily("cpcreds_shard_renewals", "Writes of this replica's Lease, by result (renewed, created, conflict, failed, released).", labels=["result"])
        for result, count in sorted(dict(shard.renewals).items()):
            renewals.add_metric([result], float(count))
        handovers = CounterMetricFamily("cpcreds_shard_handovers", "Membership changes seen, by reason (joined, expired, released, fresh, stale, stopped).", labels=["reason"])
        for reason, count in sorted(dict(shard.handovers).items()):
            handovers.add_metric([reason], float(count))
        rebalance = GaugeMetricFamily("cpcreds_shard_rebalance_seconds", "How long the last rebalance took to compute who owns each profile.")
        rebalance.add_metric([], float(self.status.ownership.rebalance_seconds))
        yield from (members, owned, fresh, renewals, handovers, rebalance)

    def describe(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        names = ("cpcreds_shard_members", "cpcreds_shard_owned_profiles", "cpcreds_shard_self_fresh", "cpcreds_shard_rebalance_seconds")
        counters = ("cpcreds_shard_renewals", "cpcreds_shard_handovers")
        return iter([*(GaugeMetricFamily(name, "") for name in names), *(CounterMetricFamily(name, "") for name in counters)])
