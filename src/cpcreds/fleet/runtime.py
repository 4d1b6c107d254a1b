"""Where a :class:`~cpcreds.Fleet` runs and how it ends: on its own event loop in one thread
(``cpcreds-fleet``, :meth:`FleetRuntime.start`) or on the program's loop
(:meth:`FleetRuntime.run`), with the program's callbacks in a thread of their own either way;
closing ends the inventory watch, every fetch, event and rebalance task, every client the
clusters handed out, the shard (after the fleet's own work: then its Lease goes), an engine the
fleet made and both threads, within about a second.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from ..logs import get_logger, redact_text
from .cluster import take_clients
from .events import close_clients

if TYPE_CHECKING:
    from .events import EventFanout
    from .keeper import Keeper
    from .sharding import ShardLink
    from .tracker import Tracker

__all__ = ["FleetRuntime"]

_log = get_logger("cpcreds.fleet")


class FleetRuntime:
    """Runs ``source`` into ``tracker`` and ends the fleet's parts (see the module doc).
    ``owns_engine``: the keeper's engine is the fleet's to close. ``lock`` is the fleet's."""

    def __init__(
        self,
        lock: threading.RLock,
        source: Any,
        tracker: Tracker,
        keeper: Keeper,
        events: EventFanout,
        link: ShardLink | None,
        *,
        owns_engine: bool,
    ) -> None:
        self._lock = lock
        self.source = source
        self.tracker, self.keeper, self.events, self.link = tracker, keeper, events, link
        self.owns_engine = owns_engine
        #: Set once the fleet closes (or its :meth:`run` ends); never cleared.
        self.closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._main: asyncio.Task[None] | None = None
        self._running: asyncio.Task[Any] | None = None  # the program's task in run()
        self._started = threading.Event()

    def start(self) -> None:
        """Start the fleet's thread (once). Raises :class:`~cpcreds.ConfigError` once closed."""
        with self._lock:
            if self.closed:
                raise ConfigError("this Fleet is closed", source="Fleet")
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._run_loop, name="cpcreds-fleet", daemon=True)
            callbacks = self.events.callback_thread()
        callbacks.start()
        self._thread.start()
        self._started.wait()
        self._join_shard()

    def _join_shard(self) -> None:
        if self.link is not None:
            assert self._loop is not None
            self.link.join(self._loop, self.tracker.apply_owned)

    async def run(self) -> None:
        """Run on the calling loop until the calling task is cancelled, then end as
        :meth:`close` does. Raises :class:`~cpcreds.ConfigError` when running or closed."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self.closed or self._thread is not None:
                raise ConfigError("this Fleet is running or closed", source="Fleet")
            self._thread = threading.current_thread()
            self._loop, self._running = loop, asyncio.current_task()
            callbacks = self.events.callback_thread()
        callbacks.start()
        self._main = loop.create_task(self.tracker.watch(self.source), name="cpcreds-fleet-inventory")
        self._join_shard()
        try:
            await asyncio.Event().wait()  # until cancelled
        finally:
            with self._lock:
                self.closed = True
            if self.link is not None:
                self.link.leave()
            await self._stop_tasks()
            if self.link is not None:
                await asyncio.to_thread(self.link.stop)  # after the fleet's work: the Lease goes
            if self.owns_engine:
                await self.keeper.engine.aclose()
            self.events.end(join=False)

    def close(self) -> None:
        """End everything within about a second (see the module doc); idempotent, from any
        thread but the fleet's own. A fleet in :meth:`run` has its task cancelled instead."""
        with self._lock:
            if self.closed:
                return
            if self._running is not None:  # run() on a program's loop: ending that task closes
                try:
                    self._loop.call_soon_threadsafe(self._running.cancel)  # type: ignore[union-attr]
                except RuntimeError:  # that loop is closed: the task ended with it
                    pass
                return
            self.closed = True
            thread, loop = self._thread, self._loop
        if self.link is not None:
            self.link.leave()
        if thread is not None and loop is not None:
            try:
                asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout=2.0)
            except Exception as exc:  # noqa: BLE001 - closing goes on whatever went wrong
                _log.warning("fleet shutdown incomplete", error=redact_text(f"{type(exc).__name__}: {exc}"))
            thread.join(1.0)
        if self.link is not None:
            self.link.stop()  # after the fleet's own work: then the Lease is released
        if self.owns_engine:
            self.keeper.engine.close()
        self.events.end(join=True)

    # -- the fleet's thread ----------------------------------------------------------------------

    def _run_loop(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            self._main = loop.create_task(self.tracker.watch(self.source), name="cpcreds-fleet-inventory")
            loop.call_soon(self._started.set)
            loop.run_forever()
        finally:
            loop.close()

    async def _shutdown(self) -> None:
        await self._stop_tasks()
        assert self._loop is not None
        self._loop.call_soon(self._loop.stop)

    async def _stop_tasks(self) -> None:
        link_tasks = self.link.tasks() if self.link is not None else []
        running = (self._main, *link_tasks, *self.keeper.scheduler.stop(), *self.events.tasks())
        tasks = [task for task in running if task is not None and task is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=1.0)
        clients = [client for cluster in list(self.tracker.clusters.values()) for client in take_clients(cluster)]
        if clients:
            await close_clients(clients)
