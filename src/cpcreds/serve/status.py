"""What serve knows about each cluster, as the status page, ``/v1/clusters`` and ``/metrics``
show it. Never a token, a key or a certificate: only names, times, states and messages that
went through redaction.

Sized for fleets of 100,000 profiles: the board keeps its profiles in sorted indexes (by key,
by state, by provider, and in the page's "needs attention first" order) and its counts up to
date as each profile changes, so a page of ``/v1/clusters`` or of the status page costs
O(log N + page size), never a sort or a walk of every profile.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import os
import threading
from bisect import bisect_left, bisect_right, insort
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Literal

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ..fleet.health import control_plane_healthy
from ..logs import redact_text

if TYPE_CHECKING:
    from ..fleet.cluster import FleetCluster

__all__ = [
    "ShardStatus",
    "ShardCollector",
    "cluster_dict",
    "ProbeResult",
    "StatusBoard",
    "Query",
    "BadQuery",
    "STATES",
    "PER_PROFILE_METRICS_LIMIT",
    "control_plane_healthy",
]

#: pending: not fetched yet; ready: a valid credential is held; failing: the last fetch failed
#: (an older credential may still be valid); unmatched: no configured provider fits the profile;
#: invalid: the profile cannot be used.
STATES = ("pending", "ready", "failing", "unmatched", "invalid")
#: The page's order: what needs a person first (failing, then unusable, then not yet fetched),
#: then the ready ones whose credential expires soonest.
_RANK = {"failing": 0, "invalid": 1, "unmatched": 2, "pending": 3, "ready": 4}
#: Per-profile metric series are on by default up to this many profiles (``--per-profile-metrics``
#: overrides): above it, a scrape of five series per profile grows past what Prometheus should
#: take every 15 s (see docs/metrics.md for the sizes measured).
PER_PROFILE_METRICS_LIMIT = 5000


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
        "server": cluster.server,
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


class _SortedIndex:
    """Items kept in order, in blocks of at most ``2 * _BLOCK``: adding or removing one costs a
    bisection and a move within one block (not a shift of all N, as ``insort`` into one list
    would at 100,000), reading from any point a bisection, then O(1) per item."""

    _BLOCK = 512
    __slots__ = ("_blocks", "_maxes", "_len")

    def __init__(self) -> None:
        self._blocks: list[list[Any]] = []
        self._maxes: list[Any] = []
        self._len = 0

    def __len__(self) -> int:
        return self._len

    @classmethod
    def of(cls, items: list[Any]) -> _SortedIndex:
        """An index of ``items`` (sorted here: one C sort instead of N insertions)."""
        index = cls()
        items.sort()
        index._blocks = [items[i : i + cls._BLOCK] for i in range(0, len(items), cls._BLOCK)]
        index._maxes = [block[-1] for block in index._blocks]
        index._len = len(items)
        return index

    def add(self, item: Any) -> None:
        self._len += 1
        if not self._blocks:
            self._blocks.append([item])
            self._maxes.append(item)
            return
        i = min(bisect_left(self._maxes, item), len(self._blocks) - 1)
        block = self._blocks[i]
        insort(block, item)
        self._maxes[i] = block[-1]
        if len(block) > 2 * self._BLOCK:
            self._blocks[i : i + 1] = [block[: self._BLOCK], block[self._BLOCK :]]
            self._maxes[i : i + 1] = [block[self._BLOCK - 1], block[-1]]

    def remove(self, item: Any) -> None:
        i = bisect_left(self._maxes, item)
        if i == len(self._blocks):
            return
        block = self._blocks[i]
        j = bisect_left(block, item)
        if j == len(block) or block[j] != item:
            return
        del block[j]
        self._len -= 1
        if block:
            self._maxes[i] = block[-1]
        else:
            del self._blocks[i], self._maxes[i]

    def from_(self, item: Any, *, inclusive: bool) -> Iterator[Any]:
        """The items after ``item`` (and ``item`` itself when ``inclusive``), in order."""
        cut = bisect_left if inclusive else bisect_right
        i = cut(self._maxes, item)
        if i == len(self._blocks):
            return
        block = self._blocks[i]
        yield from block[cut(block, item) :]
        for block in self._blocks[i + 1 :]:
            yield from block


def _filing(status: FleetCluster) -> tuple[str, str, float]:
    """What a profile is filed under: (state, provider, expiry; +inf for none)."""
    return status.state, status.provider or "", math.inf if status.expires_at is None else status.expires_at


class BadQuery(ValueError):
    """A ``/v1/clusters`` query serve cannot answer. ``code`` is the HTTP status (400, or 410 for
    a continue token this serve did not issue, as the API server answers an expired one) and
    ``reason`` Kubernetes' ``Status.reason`` (``BadRequest``, ``Expired``)."""

    def __init__(self, message: str, *, code: int = 400, reason: str = "BadRequest") -> None:
        super().__init__(message)
        self.code, self.reason = code, reason


@dataclass(frozen=True)
class Query:
    """A page of profiles: those in ``state`` (any when None), of ``provider`` (a configured
    provider's name), whose key (``namespace/name``) starts with ``prefix``; at most ``limit``
    (all when None), after the ``continue`` token of the previous page, in ``order``: ``key``
    (as Kubernetes lists) or ``attention`` (the status page's: failing, invalid, unmatched,
    pending, then ready; each by expiry, soonest first, then key)."""

    state: str | None = None
    provider: str | None = None
    prefix: str = ""
    order: Literal["key", "attention"] = "key"
    limit: int | None = None
    continue_: str | None = None

    @property
    def filters(self) -> list[Any]:
        return [self.state, self.provider, self.prefix, self.order]


@dataclass
class StatusBoard:
    """Every profile's :class:`~cpcreds.fleet.cluster.FleetCluster` (serve's fleet's own: the
    board holds no copy), filed in sorted indexes, plus the service's own state, behind one lock.
    The fleet's hooks :meth:`put` a cluster whenever it changed, so it is filed again."""

    source: str = "directory"
    _clusters: dict[str, FleetCluster] = field(default_factory=dict)
    _problems: dict[str, str] = field(default_factory=dict)
    _lock: threading.RLock = field(default_factory=threading.RLock)
    synced: bool = False
    started_at: float = 0.0
    #: Why serve is not ready although its first sync is done (the profiles folder is gone).
    not_ready: str | None = None
    _kubeconfig_errors: dict[str, str] = field(default_factory=dict)
    #: Why the last config reload failed (serve runs the previous config), until one succeeds.
    config_error: str | None = None
    #: Shown in the page's header: where profiles come from (the folder, or the hub and its
    #: namespaces), the kubeconfig folder, and the last reload: (epoch, why, problem or None).
    source_detail: str = ""
    kubeconfig_dir: str | None = None
    last_reload: tuple[float, str, str | None] | None = None
    #: With ``--shard``: this replica's membership (readiness, the ``shard`` section, redirects).
    shard: ShardStatus | None = None
    # The indexes: keys by key, by "state:<s>", by "provider:<p>"; (rank, expiry, key) for the
    # page; the values each profile is filed under; counts by (state, provider).
    _index: dict[str, _SortedIndex] = field(default_factory=dict)
    _attention: _SortedIndex = field(default_factory=_SortedIndex)
    _filed: dict[str, tuple[str, str, float]] = field(default_factory=dict)
    _counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    #: Keys changed since the indexes were last brought up to date. Filing is deferred to the
    #: next reader: a profile's several changes in one fetch (state, expiry) are filed once,
    #: and a first sync of 100,000 is filed in one sorted rebuild, not 100,000 insertions.
    _dirty: set[str] = field(default_factory=set)
    #: Names this board's continue tokens: a token of another serve (or of this one before a
    #: restart) is refused as expired, not misread.
    _instance: str = field(default_factory=lambda: base64.urlsafe_b64encode(os.urandom(6)).decode())

    def put(self, cluster: FleetCluster) -> None:
        """File ``cluster`` (new, or changed since it was filed): O(1) now, re-filed by the next
        reader."""
        with self._lock:
            self._clusters[cluster.key] = cluster
            self._dirty.add(cluster.key)

    def get(self, key: str) -> FleetCluster | None:
        """The cluster filed for ``key``, or None."""
        return self._clusters.get(key)

    def drop(self, key: str) -> None:
        with self._lock:
            if self._clusters.pop(key, None) is not None:
                self._dirty.add(key)

    def _file_changes(self) -> None:
        """Bring the indexes and counts up to date (lock held): O(changes x log N), or one
        sorted rebuild when a large share of the profiles changed."""
        dirty = self._dirty
        if not dirty:
            return
        self._dirty = set()
        if len(dirty) > 1000 and len(dirty) > len(self._clusters) // 4:
            self._rebuild()
            return
        for key in dirty:
            status = self._clusters.get(key)
            if status is None:
                self._unfile(key)
            else:
                self._refile(status)

    def _rebuild(self) -> None:
        filed = {key: _filing(status) for key, status in self._clusters.items()}
        by: dict[str, list[str]] = {}
        for key, (state, provider, _) in filed.items():
            by.setdefault(f"state:{state}", []).append(key)
            by.setdefault(f"provider:{provider}", []).append(key)
        self._filed = filed
        self._counts = Counter((state, provider) for state, provider, _ in filed.values())
        self._index = {name: _SortedIndex.of(keys) for name, keys in by.items()}
        self._index[""] = _SortedIndex.of(list(filed))
        self._attention = _SortedIndex.of([(_RANK.get(state, len(_RANK)), expiry, key) for key, (state, _, expiry) in filed.items()])

    def _refile(self, status: FleetCluster) -> None:
        """File ``status`` under its current state, provider and expiry: O(log N), and only the
        indexes whose value changed are touched (a refresh moves it in the page's order only)."""
        key = status.key
        filed = _filing(status)
        with self._lock:
            old = self._filed.get(key)
            if old == filed:
                return
            self._filed[key] = filed
            state, provider, expiry = filed
            if old is None:
                self._index_of("").add(key)
            else:
                self._counts[old[:2]] -= 1
                if not self._counts[old[:2]]:
                    del self._counts[old[:2]]
                self._attention.remove((_RANK.get(old[0], len(_RANK)), old[2], key))
            self._counts[(state, provider)] += 1
            self._attention.add((_RANK.get(state, len(_RANK)), expiry, key))
            for at, name in ((0, "state:"), (1, "provider:")):
                if old is None or old[at] != filed[at]:
                    if old is not None:
                        self._unindex(name + old[at], key)
                    self._index_of(name + filed[at]).add(key)

    def _index_of(self, name: str) -> _SortedIndex:
        index = self._index.get(name)
        if index is None:
            index = self._index[name] = _SortedIndex()
        return index

    def _unindex(self, name: str, key: str) -> None:
        index = self._index[name]
        index.remove(key)
        if not index and name:
            del self._index[name]

    def _unfile(self, key: str) -> None:
        filed = self._filed.pop(key, None)
        if filed is None:
            return
        state, provider, expiry = filed
        self._counts[(state, provider)] -= 1
        if not self._counts[(state, provider)]:
            del self._counts[(state, provider)]
        for name in ("", f"state:{state}", f"provider:{provider}"):
            self._unindex(name, key)
        self._attention.remove((_RANK.get(state, len(_RANK)), expiry, key))

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
        if self.shard is not None and (stale := self.shard.readiness()) is not None:
            return stale
        if not self.synced:
            return "first sync in progress"
        return self.not_ready

    def _shown(self, cluster: FleetCluster) -> dict[str, Any]:
        return {**cluster_dict(cluster), "kubeconfigError": self._kubeconfig_errors.get(cluster.key)}

    def snapshot(self) -> tuple[list[dict[str, Any]], dict[str, str]]:
        """Every cluster as ``/v1/clusters`` shows it (sorted by key), and the inventory problems."""
        clusters, _ = self.select(Query())
        return clusters, self.problems()

    def problems(self) -> dict[str, str]:
        with self._lock:
            return dict(self._problems)

    def select(self, query: Query) -> tuple[list[dict[str, Any]], str | None]:
        """The page of clusters ``query`` asks for, as ``/v1/clusters`` shows them, and the
        continue token of the next page (None when this page is the last). Raises
        :class:`BadQuery` for a token that is not one of this board's or was issued for other
        filters. Paging by key shows every profile present from the first page to the last
        exactly once, in order, however profiles come and go in between."""
        if query.limit is not None and query.limit < 1:
            raise BadQuery("limit must be a positive number")
        after = self._decode(query) if query.continue_ else None
        with self._lock:
            self._file_changes()
            items, more = self._walk(query, after)
            clusters = [self._shown(self._clusters[item if isinstance(item, str) else item[2]]) for item in items]
            token = self._encode(query, items[-1]) if more and items else None
        return clusters, token

    def _walk(self, query: Query, after: Any) -> tuple[list[Any], bool]:
        """(up to ``limit`` matching index items after ``after``, whether more match). Lock held."""
        rank = _RANK.get(query.state) if query.state is not None else None
        if query.state is not None and query.state not in _RANK:
            return [], False
        if query.order == "attention":
            index = self._attention
            start: Any = (rank, -math.inf, "") if rank is not None else (-1, -math.inf, "")
        else:
            name = f"state:{query.state}" if query.state is not None else f"provider:{query.provider}" if query.provider is not None else ""
            index = self._index.get(name) or _SortedIndex()
            start = query.prefix
        walk = index.from_(after, inclusive=False) if after is not None else index.from_(start, inclusive=True)
        items: list[Any] = []
        for item in walk:
            key = item if isinstance(item, str) else item[2]
            if query.order == "key" and not key.startswith(query.prefix):
                break  # keys in order: past the prefix's range
            state, provider, _ = self._filed[key]
            if rank is not None and query.order == "attention" and item[0] != rank:
                break
            if (query.state is not None and state != query.state) or (query.provider is not None and provider != query.provider) or not key.startswith(query.prefix):
                continue
            if query.limit is not None and len(items) == query.limit:
                return items, True
            items.append(item)
        return items, False

    def _encode(self, query: Query, last: Any) -> str:
        raw = json.dumps([1, self._instance, query.filters, last if isinstance(last, str) else list(last)], separators=(",", ":"))
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    def _decode(self, query: Query) -> Any:
        token = query.continue_ or ""
        try:
            version, instance, filters, last = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
            if version != 1:
                raise ValueError
        # RecursionError: a forged token of thousands of nested arrays (the request line allows 64 KiB).
        except (ValueError, TypeError, RecursionError, binascii.Error, UnicodeDecodeError):
            raise BadQuery("the continue token is not valid: pass the one the previous page returned, or none to start over") from None
        if instance != self._instance:
            raise BadQuery(
                "the continue token was issued by another run of serve and has expired: start the list again without it",
                code=410,
                reason="Expired",
            )
        if filters != query.filters:
            raise BadQuery("the continue token was issued for other filters: pass the same state, provider, prefix and order as the first page")
        if query.order == "key":
            if not isinstance(last, str):
                raise BadQuery("the continue token is not valid: pass the one the previous page returned, or none to start over")
            return last
        if not (isinstance(last, list) and len(last) == 3 and isinstance(last[0], int) and isinstance(last[1], (int, float)) and isinstance(last[2], str)):
            raise BadQuery("the continue token is not valid: pass the one the previous page returned, or none to start over")
        return tuple(last)

    def one(self, key: str) -> dict[str, Any] | None:
        """One cluster as ``/v1/clusters`` shows it, or None."""
        with self._lock:
            status = self._clusters.get(key)
            return self._shown(status) if status is not None else None

    def counts(self) -> dict[str, int]:
        """Profiles by state (every state, 0 included), kept as profiles change: O(states x providers)."""
        counts = dict.fromkeys(STATES, 0)
        with self._lock:
            self._file_changes()
            for (state, _), n in self._counts.items():
                counts[state] = counts.get(state, 0) + n
        return counts

    def counts_by_provider(self) -> dict[str, dict[str, int]]:
        """``{provider: {state: profiles}}`` (provider "" for profiles no provider matches)."""
        by_provider: dict[str, dict[str, int]] = {}
        with self._lock:
            self._file_changes()
            for (state, provider), n in self._counts.items():
                by_provider.setdefault(provider, {})[state] = n
        return dict(sorted(by_provider.items()))

    def __len__(self) -> int:
        with self._lock:
            return len(self._clusters)

    def _rows(self) -> list[FleetCluster]:
        with self._lock:
            return list(self._clusters.values())


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
            yield from self._per_profile(board._rows())

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
        return iter(())


@dataclass
class ShardStatus:
    """What serve shows of its :class:`~cpcreds.shard.Shard` membership (read from the HTTP
    thread): ``shard`` is the Shard, ``ownership`` the :class:`~cpcreds.fleet.ownership.Ownership`
    filter holding every standing profile of the inventory."""

    shard: Any
    ownership: Any

    def readiness(self) -> str | None:
        """Why this replica is not ready as a shard member (its Lease stale, or not yet
        claiming its profiles), or None."""
        if not self.shard.fresh():
            return f"this replica's shard Lease {self.shard.namespace}/{self.shard.lease_name} is not renewed (stale); its profiles are left to the other replicas"
        if not self.shard.claiming():
            return "joining the shard: waiting one renew interval before taking profiles"
        return None

    def elsewhere(self, key: str) -> tuple[str, str] | None:
        """(owner, its status URL) when another live member owns the inventory's profile ``key``."""
        if not self.ownership.holds(key):
            return None
        view = self.shard.membership
        held = view.owner(key)
        if held is None or held == self.shard.identity:
            return None
        return held, view.status_urls.get(held, "")

    def section(self, owned: int) -> dict[str, Any]:
        """The ``shard`` section of ``/v1/clusters``: the shard's own (:meth:`~cpcreds.shard.Shard.section`) and this replica's share."""
        total = len(self.ownership)
        return {
            **self.shard.section(),
            "profiles": total,
            "owned": owned,
            "share": round(owned / total, 4) if total else 0.0,
        }


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

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(())
