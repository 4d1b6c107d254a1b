"""What serve knows about each cluster, as the status page, ``/v1/clusters`` and ``/metrics``
show it. Never a token, a key or a certificate: only names, times, states and messages that
went through redaction.

Sized for fleets of 100,000 profiles: the board keeps its profiles in sorted indexes (by key,
by state, by provider, and in the page's "needs attention first" order) and its counts up to
date as each profile changes, so a page of ``/v1/clusters`` or of the status page costs
O(log N + page size), never a sort or a walk of every profile. The parts it uses:
:mod:`~cpcreds.serve.sortedindex` (the indexes), :mod:`~cpcreds.serve.paging` (queries and
continue tokens), :mod:`~cpcreds.serve.clusterview` (one cluster as shown); the metrics read it
in :mod:`~cpcreds.serve.metrics`.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..logs import redact_text
from .clusterview import cluster_dict
from .paging import BadQuery, PageTokens, Query
from .sortedindex import SortedIndex

if TYPE_CHECKING:
    from ..fleet.cluster import FleetCluster
    from .shardstatus import ShardStatus

# Query and BadQuery are the board's query and its refusal (defined with the paging).
__all__ = ["StatusBoard", "Query", "BadQuery", "STATES"]

#: pending: not fetched yet; ready: a valid credential is held; failing: the last fetch failed
#: (an older credential may still be valid); unmatched: no configured provider fits the profile;
#: invalid: the profile cannot be used.
STATES = ("pending", "ready", "failing", "unmatched", "invalid")
#: The page's order: what needs a person first (failing, then unusable, then not yet fetched),
#: then the ready ones whose credential expires soonest.
_RANK = {"failing": 0, "invalid": 1, "unmatched": 2, "pending": 3, "ready": 4}


def _filing(status: FleetCluster) -> tuple[str, str, float]:
    """What a profile is filed under: (state, provider, expiry; +inf for none)."""
    return status.state, status.provider or "", math.inf if status.expires_at is None else status.expires_at


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
    _index: dict[str, SortedIndex] = field(default_factory=dict)
    _attention: SortedIndex = field(default_factory=SortedIndex)
    _filed: dict[str, tuple[str, str, float]] = field(default_factory=dict)
    _counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    #: Keys changed since the indexes were last brought up to date. Filing is deferred to the
    #: next reader: a profile's several changes in one fetch (state, expiry) are filed once,
    #: and a first sync of 100,000 is filed in one sorted rebuild, not 100,000 insertions.
    _dirty: set[str] = field(default_factory=set)
    #: This board's continue tokens (a token of another serve is refused as expired).
    _tokens: PageTokens = field(default_factory=PageTokens)

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
        self._index = {name: SortedIndex.of(keys) for name, keys in by.items()}
        self._index[""] = SortedIndex.of(list(filed))
        self._attention = SortedIndex.of([(_RANK.get(state, len(_RANK)), expiry, key) for key, (state, _, expiry) in filed.items()])

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

    def _index_of(self, name: str) -> SortedIndex:
        index = self._index.get(name)
        if index is None:
            index = self._index[name] = SortedIndex()
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
        after = self._tokens.decode(query) if query.continue_ else None
        with self._lock:
            self._file_changes()
            items, more = self._walk(query, after)
            clusters = [self._shown(self._clusters[item if isinstance(item, str) else item[2]]) for item in items]
            token = self._tokens.encode(query, items[-1]) if more and items else None
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
            index = self._index.get(name) or SortedIndex()
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

    def rows(self) -> list[FleetCluster]:
        """Every cluster filed, in no order."""
        with self._lock:
            return list(self._clusters.values())
