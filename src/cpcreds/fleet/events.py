"""The fan-out of a :class:`~cpcreds.Fleet`'s events: every :class:`Engaged`, :class:`Updated` and
:class:`Disengaged` to each async iterator (delivered on the iterator's own loop) and to the
program's callbacks (run in order in one thread of their own, ``cpcreds-fleet-callbacks``).

Neither kind of consumer can slow the fleet down: a slow one only falls behind. One cluster's
events go out in the order they were made, each after the clients it says are closed have been
closed. :meth:`EventFanout.engage` and :meth:`EventFanout.disengage` are the only writers of
``FleetCluster.engaged``, which keeps a cluster engaged at most once until it is disengaged.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from ..logs import get_logger, redact_text
from .cluster import Disengaged, Engaged, FleetCluster, FleetEvent, close_now, holds_clients, take_clients

__all__ = ["EventFanout", "Callback", "close_clients"]

_log = get_logger("cpcreds.fleet")

Callback = Callable[[FleetCluster], Any]
#: How long closing one asyncio client on its own loop may take before the fleet moves on.
CLIENT_CLOSE_SECONDS = 1.0


class Subscriber:
    """One async iterator's loop and queue (None in the queue ends the iterator)."""

    __slots__ = ("loop", "queue")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.queue: asyncio.Queue[FleetEvent | None] = asyncio.Queue()


class EventFanout:
    """Sends a fleet's events to its iterators and callbacks (see the module doc).

    ``lock`` is the fleet's lock: held while the subscribers are read or changed, so that a
    new iterator's first events (the clusters engaged then) and its subscription are one step.
    ``callbacks`` maps an event's ``kind`` to the program's callback, or None. :meth:`emit`,
    :meth:`engage` and :meth:`disengage` run on the fleet's loop."""

    def __init__(self, lock: threading.RLock, callbacks: dict[str, Callback | None]) -> None:
        self._lock = lock
        self._callbacks = callbacks
        self._subscribers: set[Subscriber] = set()
        self._emitting: dict[str, asyncio.Task[None]] = {}  # a cluster's event waiting on its clients' closing
        self._callback_queue: queue.SimpleQueue[tuple[Callback, FleetCluster] | None] = queue.SimpleQueue()
        self._callback_thread: threading.Thread | None = None

    # -- the engaged-at-most-once bookkeeping ----------------------------------------------------

    def engage(self, cluster: FleetCluster) -> None:
        """Mark ``cluster`` engaged and say so (the caller checked it was not)."""
        cluster.engaged = True
        self.emit(cluster, Engaged(cluster))

    def disengage(self, cluster: FleetCluster, reason: str) -> None:
        """Mark ``cluster`` disengaged and say so, after closing every client it handed out."""
        cluster.engaged = False
        self.emit(cluster, Disengaged(cluster, reason), close=True)

    # -- sending ---------------------------------------------------------------------------------

    def emit(self, cluster: FleetCluster, event: FleetEvent | None, *, close: bool | str = False) -> None:
        """Send ``event`` about ``cluster`` after the cluster's earlier events, closing its
        clients first when ``close`` (``"stale"``: only those of an older binding; no event:
        closing is all there is)."""
        previous = self._emitting.get(cluster.key)
        closing = (close or event is None) and holds_clients(cluster)
        if previous is None and not closing:
            if event is not None:
                self._publish(event)  # the usual case: no task, no wait
            return
        self._emitting[cluster.key] = asyncio.get_running_loop().create_task(self._emit_after(previous, cluster, event, close == "stale"))

    async def _emit_after(self, previous: asyncio.Task[None] | None, cluster: FleetCluster, event: FleetEvent | None, stale_only: bool) -> None:
        try:
            if previous is not None:
                await asyncio.shield(previous)
            await close_clients(take_clients(cluster, stale_only=stale_only))
            if event is not None:
                self._publish(event)
        finally:
            if self._emitting.get(cluster.key) is asyncio.current_task():
                del self._emitting[cluster.key]

    def _publish(self, event: FleetEvent) -> None:
        with self._lock:
            subscribers = list(self._subscribers)
        for subscriber in subscribers:
            if not _deliver(subscriber, event):
                with self._lock:
                    self._subscribers.discard(subscriber)
        callback = self._callbacks[event.kind]
        if callback is not None:
            self._callback_queue.put((callback, event.cluster))

    def tasks(self) -> list[asyncio.Task[None]]:
        """The events still waiting on their clients' closing (to cancel when the fleet closes)."""
        return list(self._emitting.values())

    # -- consumers -------------------------------------------------------------------------------

    def subscribe(self, engaged: Iterable[FleetCluster], *, ended: bool) -> AsyncIterator[FleetEvent]:
        """A new iterator on the calling loop: an :class:`Engaged` for each of ``engaged`` first,
        then every event sent; with ``ended`` (the fleet is closed) only those first ones."""
        subscriber = Subscriber(asyncio.get_running_loop())
        with self._lock:
            for cluster in engaged:
                subscriber.queue.put_nowait(Engaged(cluster))
            if ended:
                subscriber.queue.put_nowait(None)
            else:
                self._subscribers.add(subscriber)
        return self._iterate(subscriber)

    async def _iterate(self, subscriber: Subscriber) -> AsyncIterator[FleetEvent]:
        try:
            while True:
                event = await subscriber.queue.get()
                if event is None:
                    return
                yield event
        finally:
            with self._lock:
                self._subscribers.discard(subscriber)

    def callback_thread(self) -> threading.Thread:
        """The (not yet started) thread that runs the program's callbacks, in order."""
        self._callback_thread = threading.Thread(target=self._run_callbacks, name="cpcreds-fleet-callbacks", daemon=True)
        return self._callback_thread

    def _run_callbacks(self) -> None:
        while True:
            item = self._callback_queue.get()
            if item is None:
                return
            callback, cluster = item
            try:
                callback(cluster)
            except Exception as exc:  # noqa: BLE001 - the program's bug must not stop its events
                _log.warning("fleet callback failed", callback=getattr(callback, "__name__", "?"), cluster=cluster.key, error=redact_text(f"{type(exc).__name__}: {exc}"))

    def end(self, *, join: bool) -> None:
        """No more events: the callback thread ends after the callbacks queued (waited for up
        to a second with ``join``, unless called from that thread) and every iterator ends."""
        self._callback_queue.put(None)
        thread = self._callback_thread
        if join and thread is not None and thread is not threading.current_thread():
            thread.join(1.0)
        with self._lock:
            subscribers, self._subscribers = list(self._subscribers), set()
        for subscriber in subscribers:
            _deliver(subscriber, None)


async def close_clients(clients: list[tuple[Any, Any]]) -> None:
    """Close ``(kind, client)`` pairs within about a second: the sync ones together in one
    thread, each asyncio one on its own loop (a loop already closed took its connections along)."""
    waits: list[asyncio.Future[Any]] = []
    plain = [client for kind, client in clients if not isinstance(kind, tuple)]
    if plain:
        waits.append(asyncio.ensure_future(asyncio.to_thread(lambda: [close_now(client) for client in plain])))
    for kind, client in clients:
        loop = kind[1] if isinstance(kind, tuple) else None
        if loop is None or loop.is_closed():
            continue
        closing = client.close()
        try:
            waits.append(asyncio.wrap_future(asyncio.run_coroutine_threadsafe(closing, loop)))
        except RuntimeError:  # closed meanwhile
            closing.close()
    if waits:
        await asyncio.wait(waits, timeout=CLIENT_CLOSE_SECONDS)


def _deliver(subscriber: Subscriber, event: FleetEvent | None) -> bool:
    try:
        subscriber.loop.call_soon_threadsafe(subscriber.queue.put_nowait, event)
    except RuntimeError:  # the subscriber's loop is closed
        return False
    return True
