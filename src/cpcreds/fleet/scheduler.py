"""The one scheduler of a :class:`~cpcreds.Fleet`'s fetches: when each cluster's credential is
fetched next, and at most ``concurrency`` fetches at once.

One heap of due times and one timer for every cluster, instead of a task sleeping per cluster
(a task, its coroutine and its timer for each of 100,000 clusters would dominate serve's
memory). A due cluster
waits in a queue for one of the fetch slots; its fetch runs in a task of its own, so a hung
plugin holds one slot until its timeout and delays no other cluster. Heap entries are never
removed at once: an entry whose cluster was rescheduled, rebound or removed since is skipped
when it comes up (``cluster.due_at`` and the binding tell), so a change of one cluster costs
O(log N). Such void entries would keep removed clusters and old bindings (a reload's whole old
engine) alive until their due time, hours away, so once they are half of what is queued the
queues are rebuilt without them: O(1) per change, amortised, and never more void entries than
live ones.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from ..logs import get_logger, redact_text

if TYPE_CHECKING:
    from .cluster import FleetCluster

__all__ = ["FetchScheduler"]

_log = get_logger("cpcreds.fleet")

Fetch = Callable[["FleetCluster", Any], Coroutine[Any, Any, None]]


class FetchScheduler:
    """Runs ``fetch(cluster, binding)`` for each cluster when it is due, on the running loop.

    ``current(cluster, binding)`` says whether that binding is still the cluster's (else a due
    fetch is dropped); ``fenced(key)`` returns how soon to look again when this replica may not
    fetch for ``key`` now (a shard's self-fencing), else None (no ``fenced``: never). Use from
    the loop only."""

    def __init__(
        self,
        concurrency: int,
        fetch: Fetch,
        current: Callable[[FleetCluster, Any], bool],
        fenced: Callable[[str], float | None] | None = None,
    ) -> None:
        self.concurrency = concurrency
        self._fetch, self._current, self._fenced = fetch, current, fenced
        self._void = 0  # entries made void (rescheduled, cancelled) since the last compaction
        self._heap: list[tuple[float, int, FleetCluster, Any]] = []
        self._order = itertools.count()  # breaks ties between equal due times (never compares clusters)
        self._due_now: deque[tuple[FleetCluster, Any]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = float("inf")
        self._fetching: set[asyncio.Task[None]] = set()  # fetches holding a slot
        self._released: set[asyncio.Task[None]] = set()  # fetches that gave their slot back
        self._stopped = False

    def schedule(self, cluster: FleetCluster, binding: Any, delay: float | None) -> None:
        """Fetch ``cluster``'s credential through ``binding`` in ``delay`` seconds (None: not
        before it is scheduled again). Replaces what was scheduled for the cluster."""
        if cluster.due_at is not None:
            self._void += 1  # what was planned for the cluster is replaced
        if delay is None:
            cluster.due_at = None
            self._maybe_compact()
            return
        loop = asyncio.get_running_loop()
        when = loop.time() + max(delay, 0.0)
        cluster.due_at = when
        if delay <= 0:
            self._due_now.append((cluster, binding))
            self._maybe_compact()
            self._start()
            return
        heapq.heappush(self._heap, (when, next(self._order), cluster, binding))
        self._maybe_compact()
        if when < self._timer_at:
            if self._timer is not None:
                self._timer.cancel()
            self._timer, self._timer_at = loop.call_at(when, self._timer_fired), when

    def cancel(self, cluster: FleetCluster) -> None:
        """Fetch nothing more for ``cluster`` (it left the fleet, or has no usable profile)."""
        if cluster.due_at is not None:
            self._void += 1
            cluster.due_at = None
        self._maybe_compact()

    def compact(self) -> None:
        """Drop every entry that can no longer run: the heap and the due queue then hold only
        clusters and bindings still current (after a reload, none of the old engine's)."""
        heap, current = self._heap, self._current
        heap[:] = [entry for entry in heap if entry[2].due_at == entry[0] and current(entry[2], entry[3])]
        heapq.heapify(heap)
        due_now = [item for item in self._due_now if current(*item)]
        self._due_now.clear()
        self._due_now.extend(due_now)
        self._void = 0

    def _maybe_compact(self) -> None:
        if 2 * self._void > len(self._heap) + len(self._due_now):
            self.compact()

    def release(self) -> None:
        """The calling fetch task gives its slot back and goes on (to probe, say)."""
        task = asyncio.current_task()
        if task in self._fetching:
            self._fetching.discard(task)  # type: ignore[arg-type]
            self._released.add(task)  # type: ignore[arg-type]
            self._start()

    def stop(self) -> list[asyncio.Task[None]]:
        """Schedule nothing more; returns the fetch tasks still running (to cancel and await)."""
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
        self._due_now.clear()
        return [*self._fetching, *self._released]

    def _timer_fired(self) -> None:
        loop = asyncio.get_running_loop()
        now, heap = loop.time(), self._heap
        while heap and heap[0][0] <= now:
            when, _, cluster, binding = heapq.heappop(heap)
            if cluster.due_at == when and cluster.binding is binding:
                self._due_now.append((cluster, binding))
        self._timer, self._timer_at = (loop.call_at(heap[0][0], self._timer_fired), heap[0][0]) if heap else (None, float("inf"))
        self._start()

    def _start(self) -> None:
        if self._stopped:
            return
        loop = asyncio.get_running_loop()
        while self._due_now and len(self._fetching) < self.concurrency:
            cluster, binding = self._due_now.popleft()
            if not self._current(cluster, binding):
                continue  # changed or gone since it was due
            retry = self._fenced(cluster.key) if self._fenced is not None else None
            if retry is not None:
                self.schedule(cluster, binding, retry)
                continue
            cluster.due_at = None
            task = loop.create_task(self._fetch(cluster, binding))
            self._fetching.add(task)
            task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._fetching.discard(task)
        self._released.discard(task)
        if not task.cancelled() and task.exception() is not None:  # a bug: shown, never silent
            _log.error("fleet fetch failed", error=redact_text(f"{type(task.exception()).__name__}: {task.exception()}"))
        self._start()
