"""``cpcreds.Fleet``: every cluster of an inventory with a working credential, engaged and
disengaged as clusters come, change, turn unhealthy and go.

The fleet runs on its own event loop in one thread (``cpcreds-fleet``; or on the program's loop,
see :meth:`Fleet.run`): the inventory source, one scheduler of every cluster's fetches
(:mod:`cpcreds.fleet.scheduler`: fetch, refresh ahead of expiry, back off on failure; a task per
fetch only while it runs) and the decisions. The program talks to it from any thread or event loop: sync (``with Fleet(...)``, callbacks) or
asyncio (``async with``, ``async for event in fleet.events()``). Callbacks run in one thread of
their own (``cpcreds-fleet-callbacks``), in order; an async iterator's events arrive on the
iterator's own loop. Neither can slow the fleet down: a slow consumer only falls behind.

A cluster is engaged when its profile stands (not a KEP-4322 duplicate), resolves to a plan,
its credential has been fetched once, and its ``ControlPlaneHealthy`` condition is True (unless
``require_healthy=False``). With a :class:`~cpcreds.shard.Shard`, only the clusters this replica
owns are engaged (see :mod:`cpcreds.fleet.ownership`). Engaged clusters stay engaged while a later refresh fails (the
state says ``failing``): the credential they hold may still be valid, and flapping every
controller on one failed refresh helps nobody.
"""

from __future__ import annotations

import asyncio
import os
import queue
import random
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Literal

from ..config import ProviderConfig, load_config
from ..engine import CredentialEngine
from ..errors import ConfigError, CredentialError, NoMatchingProvider
from ..logs import get_logger, redact_text
from ..policies import BackoffPolicy
from .cluster import Disengaged, Engaged, FleetCluster, FleetEvent, Updated, close_now
from .health import is_healthy
from .hooks import FleetHooks
from .hub import HubOptions, HubSource
from .inventory import Change, DirectorySource, ProfileFeed
from .members import Deduplicator
from .scheduler import FetchScheduler
from .ownership import Ownership

__all__ = ["Fleet"]

_log = get_logger("cpcreds.fleet")

Callback = Callable[[FleetCluster], Any]
#: How long closing one asyncio client on its own loop may take before the fleet moves on.
_CLIENT_CLOSE_SECONDS = 1.0
#: How soon to look again when the engine answered from its cache while its own background
#: refresh runs (the fleet then picks up the new credential), and the shortest wait after a
#: failure while the held credential is still valid.
_RECHECK_SECONDS = 1.0


class _Subscriber:
    __slots__ = ("loop", "queue")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.queue: asyncio.Queue[FleetEvent | None] = asyncio.Queue()


class Fleet:
    """The clusters of an inventory, each with a fresh credential and clients (see the module doc).

    ``config`` is a provider config file path, a :class:`~cpcreds.ProviderConfig` or a
    :class:`~cpcreds.CredentialEngine` (shared with the program: the fleet does not close it).
    The inventory is exactly one of: ``hub`` (a :class:`HubOptions`, or a kubeconfig path),
    ``folder`` (a folder of ClusterProfile files, rescanned every ``scan_interval`` seconds),
    ``feed`` (a :class:`~cpcreds.fleet.inventory.ProfileFeed` the program fills) or ``source``
    (anything with ``async run(emit, listed)``).

    ``require_healthy`` (default True) engages only clusters whose ``ControlPlaneHealthy``
    condition is True; ``on_unhealthy`` says what happens to an engaged one whose condition
    turns: ``"disengage"`` (default) or ``"mark"`` (it stays engaged, ``state`` ``unhealthy``,
    and an :class:`Updated` event says so). ``dedupe`` (default True) acts on one profile per
    KEP-4322 inventory member. ``shard`` (a :class:`~cpcreds.shard.Shard`) splits the inventory
    with the fleet's other replicas: only the clusters this replica owns (``namespace/name``
    through the shard's rendezvous assignment) are engaged; on a membership change the clusters
    that moved away are disengaged (reason ``moved``) and those that arrived engaged; before
    every fetch the fleet checks the shard is fresh and still owns the cluster (self-fencing).
    The fleet starts the shard (unless it runs already) and stops it when it closes, after its
    own tasks, releasing the Lease so the other replicas take over at once. ``on_engage``, ``on_update`` and ``on_disengage`` are called with
    the :class:`FleetCluster`. ``concurrency`` bounds the fetches the fleet starts at once.
    Refreshes come ahead of the engine's refresh point, up to ``jitter`` of the time to it
    earlier, spread at random (never later, so spreading the load never risks an expiry).
    ``hooks`` (a :class:`~cpcreds.fleet.hooks.FleetHooks`) hears every change of a cluster's
    state, plan and inventory, and may probe clusters.

    Start it with ``with``/``async with`` or :meth:`start`; :meth:`close` ends every watch,
    task, thread and plugin process within about a second. Construction raises
    :class:`~cpcreds.ConfigError` for a config that does not load; nothing else the inventory
    or a provider does raises here: it shows in :attr:`problems` and the clusters' state.
    """

    def __init__(
        self,
        config: str | os.PathLike[str] | ProviderConfig | CredentialEngine,
        *,
        hub: HubOptions | str | os.PathLike[str] | None = None,
        folder: str | os.PathLike[str] | None = None,
        feed: ProfileFeed | None = None,
        source: Any = None,
        require_healthy: bool = True,
        on_unhealthy: Literal["disengage", "mark"] = "disengage",
        dedupe: bool = True,
        on_engage: Callback | None = None,
        on_update: Callback | None = None,
        on_disengage: Callback | None = None,
        concurrency: int = 32,
        scan_interval: float = 1.0,
        backoff: BackoffPolicy | None = None,
        prometheus_registry: Any = None,
        shard: Any = None,
        jitter: float = 0.1,
        hooks: FleetHooks | None = None,
    ) -> None:
        given = [name for name, value in (("hub", hub), ("folder", folder), ("feed", feed), ("source", source)) if value is not None]
        if len(given) != 1:
            raise ConfigError(f"a Fleet needs exactly one inventory (hub=, folder=, feed= or source=), got {len(given) or 'none'}", source="Fleet")
        if on_unhealthy not in ("disengage", "mark"):
            raise ConfigError(f"on_unhealthy must be 'disengage' or 'mark', not {on_unhealthy!r}", source="Fleet")
        if isinstance(hub, (str, os.PathLike)):
            hub = HubOptions(kubeconfig=hub)
        if hub is not None:
            source = HubSource(hub)
        elif folder is not None:
            source = FolderSource(DirectorySource(folder), scan_interval)
        elif feed is not None:
            source = feed
        self.source = source
        # cpcreds' own sources parse (or copy) every profile and never change one once sent:
        # the engine may keep them as they are. A program's source may not promise that.
        self._owned_profiles = isinstance(source, (HubSource, FolderSource, ProfileFeed))
        if isinstance(config, CredentialEngine):
            self.engine, self._owns_engine = config, False
        else:
            loaded = config if isinstance(config, ProviderConfig) else load_config(config)
            # As serve does: every cluster stays cached (the fleet, not LRU eviction, drops what
            # goes), and the fleet's concurrency is the engine's, also for one provider.
            self.engine = CredentialEngine(
                loaded,
                prometheus_registry=prometheus_registry,
                max_entries=1_000_000,
                max_concurrent_fetches=concurrency,
                max_fetches_per_provider=concurrency,
            )
            self._owns_engine = True
        self.require_healthy = require_healthy
        self.on_unhealthy = on_unhealthy
        self.dedupe = dedupe
        self._callbacks = {"engage": on_engage, "update": on_update, "disengage": on_disengage}
        self.concurrency = concurrency
        self.jitter = jitter
        self.hooks = hooks or FleetHooks()
        self.backoff = backoff or BackoffPolicy(initial=1.0, maximum=300.0)
        self._lock = threading.RLock()  # clusters, subscribers, counters: written by the fleet loop
        self._clusters: dict[str, FleetCluster] = {}
        self._scheduler = FetchScheduler(concurrency, self._fetch, self._current, self._fenced)
        self._emitting: dict[str, asyncio.Task[None]] = {}
        self._members = Deduplicator()
        self.shard = shard
        #: With a shard: the :class:`~cpcreds.fleet.ownership.Ownership` filter holding every
        #: standing profile of the inventory (who owns what); else None.
        self.ownership = Ownership(shard.owns) if shard is not None else None
        # Synced waits for the shard's first claim: before it, this replica owns nothing.
        self._claimed = shard is None
        self._rebalancing: asyncio.Task[None] | None = None
        self._rebalance_again = False
        self._unsubscribe: Callable[[], None] | None = None
        self._problems: dict[str, str] = {}
        self._subscribers: set[_Subscriber] = set()
        self._waiting: set[str] = set()
        self._listed = False
        self._synced = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._callback_queue: queue.SimpleQueue[tuple[Callback, FleetCluster] | None] = queue.SimpleQueue()
        self._callback_thread: threading.Thread | None = None
        self._main: asyncio.Task[None] | None = None
        self._running: asyncio.Task[Any] | None = None  # the program's task in run()
        self._closed = False
        self._started = threading.Event()
        if prometheus_registry is not None:
            from .metrics import FleetCollector

            prometheus_registry.register(FleetCollector(self))
            if shard is not None:
                shard.register_metrics(prometheus_registry)  # its overlap series, as serve shows them

    # -- what the program reads ----------------------------------------------------------------

    @property
    def clusters(self) -> dict[str, FleetCluster]:
        """Every cluster the fleet tracks now (engaged or not), by ``namespace/name``."""
        with self._lock:
            return dict(self._clusters)

    @property
    def engaged(self) -> dict[str, FleetCluster]:
        """The engaged clusters, by ``namespace/name``."""
        with self._lock:
            return {key: cluster for key, cluster in self._clusters.items() if cluster.engaged}

    @property
    def duplicates(self) -> dict[tuple[str, str], list[str]]:
        """KEP-4322 members with more than one profile: (namespace, member id) -> their keys.
        Only the oldest of each is acted on, none when the oldest tie (empty with ``dedupe=False``)."""
        with self._lock:
            return self._members.index.duplicates() if self.dedupe else {}

    @property
    def duplicate_count(self) -> int:
        """Profiles not acted on because another profile stands for their cluster."""
        with self._lock:
            return self._members.index.count() if self.dedupe else 0

    @property
    def problems(self) -> dict[str, str]:
        """What is wrong with the inventory now (a hub that cannot be listed, a file that
        cannot be read), by where; empty when all is well."""
        with self._lock:
            return {origin: problem for origin, problem in self._problems.items() if problem}

    @property
    def members(self) -> Any:
        """The KEP-4322 :class:`~cpcreds.fleet.members.MemberIndex` (``stands(key)``): read it
        on the fleet's loop (a :class:`~cpcreds.fleet.hooks.FleetHooks` method)."""
        return self._members.index

    def __len__(self) -> int:
        """How many clusters the fleet tracks now (engaged or not)."""
        return len(self._clusters)

    @property
    def progress(self) -> tuple[int, int]:
        """(clusters whose first fetch is done, clusters tracked): the first sync's progress."""
        with self._lock:
            total = len(self._clusters)
            return total - len(self._waiting), total

    @property
    def synced(self) -> bool:
        """True once the inventory has been listed and every cluster had its first fetch."""
        return self._synced.is_set()

    def wait_synced(self, timeout: float | None = None) -> bool:
        """Block until :attr:`synced` (or ``timeout`` seconds); returns :attr:`synced`."""
        return self._synced.wait(timeout)

    async def await_synced(self, timeout: float | None = None) -> bool:
        """asyncio version of :meth:`wait_synced` (the wait runs off the calling loop)."""
        return await asyncio.to_thread(self._synced.wait, timeout)

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> Fleet:
        """Start the fleet's thread (once); returns the fleet."""
        with self._lock:
            if self._closed:
                raise ConfigError("this Fleet is closed", source="Fleet")
            if self._thread is not None:
                return self
            self._thread = threading.Thread(target=self._run_loop, name="cpcreds-fleet", daemon=True)
            self._callback_thread = threading.Thread(target=self._run_callbacks, name="cpcreds-fleet-callbacks", daemon=True)
        self._callback_thread.start()
        self._thread.start()
        self._started.wait()
        self._join_shard()
        return self

    def _join_shard(self) -> None:
        if self.shard is not None:
            self._unsubscribe = self.shard.subscribe(self._membership_changed)
            if not self.shard.running:
                self.shard.start()
            self._membership_changed(self.shard.membership)

    async def run(self) -> None:
        """Run the fleet on the calling event loop (no thread of its own) until the task is
        cancelled, then end its watches, tasks and clients as :meth:`close` does (the shard is
        stopped, an engine the fleet made closed). For a program whose own work shares the
        fleet's loop, as ``cpcreds serve`` does; callbacks still run in their own thread."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._closed or self._thread is not None:
                raise ConfigError("this Fleet is running or closed", source="Fleet")
            self._thread = threading.current_thread()
            self._loop, self._running = loop, asyncio.current_task()
            self._callback_thread = threading.Thread(target=self._run_callbacks, name="cpcreds-fleet-callbacks", daemon=True)
        self._callback_thread.start()
        self._main = loop.create_task(self._watch_inventory(), name="cpcreds-fleet-inventory")
        self._join_shard()
        try:
            await asyncio.Event().wait()  # until cancelled
        finally:
            with self._lock:
                self._closed = True
            if self._unsubscribe is not None:
                self._unsubscribe()
            await self._stop_tasks()
            if self.shard is not None:
                await asyncio.to_thread(self.shard.stop)  # after the fleet's work: the Lease goes
            if self._owns_engine:
                await self.engine.aclose()
            self._callback_queue.put(None)
            for subscriber in self._take_subscribers():
                _deliver(subscriber, None)

    async def use_engine(self, engine: CredentialEngine) -> None:
        """Resolve every cluster again through ``engine`` and keep its credentials from now on
        (``cpcreds serve``'s config reload). Call it on the fleet's loop (with :meth:`run`);
        the previous engine is the caller's to close. An engaged cluster whose plan is the same
        keeps its engagement and gets new clients (an :class:`Updated` event)."""
        self.engine = engine
        for cluster in list(self._clusters.values()):
            self._upsert(cluster.key, cluster.profile, cluster.origin, rebind=True)

    def close(self) -> None:
        """Stop the inventory, every cluster task and every client the clusters handed out,
        end the event iterators, kill running plugins (when the fleet made its engine), and end
        the fleet's threads, within about a second. Sends no :class:`Disengaged` events.
        Idempotent; safe from any thread but the fleet's own. A fleet in :meth:`run` is
        asked to end (its task cancelled) and closes as that task ends."""
        with self._lock:
            if self._closed:
                return
            if self._running is not None:  # run() on a program's loop: ending that task closes
                try:
                    self._loop.call_soon_threadsafe(self._running.cancel)  # type: ignore[union-attr]
                except RuntimeError:  # that loop is closed: the task ended with it
                    pass
                return
            self._closed = True
            thread, loop = self._thread, self._loop
        if self._unsubscribe is not None:
            self._unsubscribe()
        if thread is not None and loop is not None:
            try:
                asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout=2.0)
            except Exception as exc:  # noqa: BLE001 - closing goes on whatever went wrong
                _log.warning("fleet shutdown incomplete", error=redact_text(f"{type(exc).__name__}: {exc}"))
            thread.join(1.0)
        if self.shard is not None:
            self.shard.stop()  # after the fleet's own work: then the Lease is released
        if self._owns_engine:
            self.engine.close()
        self._callback_queue.put(None)
        if self._callback_thread is not None and self._callback_thread is not threading.current_thread():
            self._callback_thread.join(1.0)
        for subscriber in self._take_subscribers():
            _deliver(subscriber, None)

    def __enter__(self) -> Fleet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Fleet:
        return self.start()

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.close)

    def events(self) -> AsyncIterator[FleetEvent]:
        """An async iterator of :class:`Engaged`, :class:`Updated` and :class:`Disengaged`
        events, delivered on the calling loop. It starts with an :class:`Engaged` for every
        cluster engaged when it was made (so nothing falls between a look at :attr:`engaged`
        and the first event), and ends when the fleet closes. Leaving the ``async for`` (or
        cancelling the task in it) ends only this iterator."""
        subscriber = _Subscriber(asyncio.get_running_loop())
        with self._lock:
            for cluster in self._clusters.values():
                if cluster.engaged:
                    subscriber.queue.put_nowait(Engaged(cluster))
            if self._closed:
                subscriber.queue.put_nowait(None)
            else:
                self._subscribers.add(subscriber)
        return self._iterate(subscriber)

    async def _iterate(self, subscriber: _Subscriber) -> AsyncIterator[FleetEvent]:
        try:
            while True:
                event = await subscriber.queue.get()
                if event is None:
                    return
                yield event
        finally:
            with self._lock:
                self._subscribers.discard(subscriber)

    def _take_subscribers(self) -> list[_Subscriber]:
        with self._lock:
            subscribers, self._subscribers = list(self._subscribers), set()
        return subscribers

    # -- the fleet's thread ----------------------------------------------------------------------

    def _run_loop(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            self._main = loop.create_task(self._watch_inventory(), name="cpcreds-fleet-inventory")
            loop.call_soon(self._started.set)
            loop.run_forever()
        finally:
            loop.close()

    async def _watch_inventory(self) -> None:
        try:
            await self.source.run(self._apply, self._inventory_listed)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a source's bug: shown, and the fleet stays up
            problem = redact_text(f"the inventory source stopped: {type(exc).__name__}: {exc}")
            with self._lock:
                self._problems["source"] = problem
            _log.error("inventory source stopped", error=problem)

    async def _shutdown(self) -> None:
        await self._stop_tasks()
        assert self._loop is not None
        self._loop.call_soon(self._loop.stop)

    async def _stop_tasks(self) -> None:
        tasks = [task for task in (self._main, self._rebalancing, *self._scheduler.stop(), *self._emitting.values()) if task is not None and task is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=1.0)
        clients = [client for cluster in list(self._clusters.values()) for client in cluster._take_clients()]
        if clients:
            await _close_all(clients)

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

    # -- inventory changes (on the fleet's loop) -------------------------------------------------

    def _inventory_listed(self) -> None:
        self._listed = True
        self._check_synced()

    def _apply(self, change: Change) -> None:
        with self._lock:
            self._problems.update(change.problems)
        for origin, problem in change.problems.items():
            if problem:
                _log.warning("inventory problem", origin=origin, problem=problem)
        if self.dedupe:
            with self._lock:  # the index is read by duplicates from other threads
                change = self._members.apply(change)
        standing = change
        if self.ownership is not None:
            change = self.ownership.apply(change)
        self._apply_standing(change)
        self.hooks.inventory(standing, change)

    def _apply_standing(self, change: Change) -> None:
        for key in change.deletes:
            self._remove(key, "moved" if key in change.moved else "duplicate" if key in change.superseded else "deleted")
        for key, (profile, origin) in change.upserts.items():
            self._upsert(key, profile, origin)
        self._check_synced()

    # -- the shard (membership changes arrive on the shard's judge thread) ------------------------

    def _membership_changed(self, _view: Any) -> None:
        loop = self._loop
        if loop is None or self._closed:
            return
        try:
            loop.call_soon_threadsafe(self._rebalance_soon)
        except RuntimeError:  # the fleet's loop closed meanwhile
            pass

    def _rebalance_soon(self) -> None:
        """One rebalance at a time; changes arriving meanwhile make one more after it."""
        if self._rebalancing is not None and not self._rebalancing.done():
            self._rebalance_again = True
            return
        self._rebalancing = asyncio.get_running_loop().create_task(self._rebalance(), name="cpcreds-fleet-rebalance")

    async def _rebalance(self) -> None:
        assert self.shard is not None and self.ownership is not None
        while True:
            self._rebalance_again = False
            claiming = self.shard.claiming()
            self._apply_standing(await self.ownership.reassign(self.shard))
            if claiming and not self._claimed:
                self._claimed = True
                self._check_synced()
            if not self._rebalance_again:
                return

    def _upsert(self, key: str, profile: dict[str, Any], origin: str, *, rebind: bool = False) -> None:
        """Take ``profile`` for ``key``: O(1) for the fleet (one resolve, one task at most).
        ``rebind``: resolve it again through the current engine even if nothing changed."""
        cluster = self._clusters.get(key)
        if cluster is not None and not rebind:
            if cluster.profile is profile or cluster.profile == profile:
                cluster.profile, cluster.origin = profile, origin
                return
        if cluster is None:
            cluster = FleetCluster(key, profile, origin)
            with self._lock:
                self._clusters[key] = cluster
            self._waiting.add(key)
        cluster.profile, cluster.origin = profile, origin
        cluster.healthy = is_healthy(profile)
        old = cluster.binding
        try:
            binding = self.engine.bind(profile, owned=self._owned_profiles)
        except CredentialError as exc:
            self._unusable(cluster, "unmatched" if isinstance(exc, NoMatchingProvider) else "invalid", str(exc))
            return
        if not rebind and old is not None and binding.plan == old.plan:
            # Same endpoint and provider: same binding and clients; only the gate may change.
            if self._gate(cluster) == "stay":
                self._emit(cluster, Updated(cluster, False))
            self.hooks.plan(key, old.plan, profile)
            self.hooks.changed(cluster)
            return
        cluster._replacing = cluster.engaged
        cluster.binding, cluster.state, cluster.last_error, cluster.failures = binding, "pending", None, 0
        cluster.expires_at = cluster.next_refresh = cluster.answered_by = cluster._answered = cluster._credential = None
        cluster._credentialed = False
        cluster._next_probe = 0.0
        self.hooks.plan(key, binding.plan, profile)
        self.hooks.changed(cluster)
        self._scheduler.schedule(cluster, binding, 0.0)  # the old binding's fetch, if any, is ignored when it ends

    def _unusable(self, cluster: FleetCluster, state: str, message: str) -> None:
        cluster._due = None
        cluster.binding, cluster.state, cluster.last_error = None, state, redact_text(message)
        cluster.expires_at = cluster.next_refresh = cluster.answered_by = None
        _log.warning("profile not usable", profile=cluster.key, state=state, error=cluster.last_error)
        if cluster.engaged:
            self._disengage(cluster, "unusable")
        self.hooks.plan(cluster.key, None, None)
        self.hooks.changed(cluster)
        self._first_done(cluster.key)

    def _remove(self, key: str, reason: str) -> None:
        cluster = self._clusters.get(key)
        if cluster is None:
            return
        cluster._due = None
        with self._lock:
            del self._clusters[key]
        if cluster._answered is not None and cluster._credential is not None:
            self.engine.invalidate(cluster._answered, cluster._credential)  # a gone cluster's credential goes
        self._first_done(key)
        if cluster.engaged:
            self._disengage(cluster, reason)
        elif cluster._clients or cluster._stale:
            self._emit(cluster, None)  # close what a program took from a cluster never engaged
        self.hooks.removed(cluster)
        self.hooks.plan(key, None, None)

    # -- one cluster ---------------------------------------------------------------------------

    def _current(self, cluster: FleetCluster, binding: Any) -> bool:
        """Whether ``binding`` is still ``cluster``'s and the cluster still the fleet's."""
        return cluster.binding is binding and self._clusters.get(cluster.key) is cluster

    def _fenced(self, key: str) -> float | None:
        # Self-fencing: this replica's Lease is stale or the key moved; the rebalance under way
        # drops the cluster, or gives the key back, within a renew interval.
        shard = self.shard
        return shard.retry_interval if shard is not None and not shard.may_fetch(key) else None

    async def _fetch(self, cluster: FleetCluster, binding: Any) -> None:
        """One fetch of ``cluster``'s credential; then its gate, hooks, probe and next fetch.
        A cluster that was engaged on an older binding (``_replacing``) gets an update for its
        first answer here (or, if that fails, a disengage)."""
        try:
            answer = await binding.aanswer()
            error = None
        except CredentialError as exc:
            answer, error = None, exc
        if cluster.binding is not binding or self._clusters.get(cluster.key) is not cluster:
            return
        hooks = self.hooks
        now = time.time()
        if answer is not None:
            delay = self._succeeded(cluster, answer, now)
            first = not cluster._credentialed
            cluster._credentialed = True
            if first:
                if cluster._replacing and cluster.engaged:
                    cluster._replacing = False
                    if self._gate(cluster) == "stay":
                        self._emit(cluster, Updated(cluster, True), close="stale")
                else:
                    self._gate(cluster)
                self._first_done(cluster.key)
        else:
            assert error is not None
            delay = self._failed(cluster, error, now)
            if not cluster._credentialed:
                if cluster._replacing and cluster.engaged:
                    cluster._replacing = False
                    self._disengage(cluster, "credential")
                self._first_done(cluster.key)
        hooks.changed(cluster)
        if answer is not None and hooks.probe_interval > 0 and now >= cluster._next_probe:
            self._scheduler.release()  # a probe holds no fetch slot
            cluster.probe = await hooks.probe(cluster)
            cluster._next_probe = now + hooks.probe_interval
            if delay is None or delay > hooks.probe_interval:
                delay = hooks.probe_interval
            if cluster.binding is not binding or self._clusters.get(cluster.key) is not cluster:
                return
            hooks.changed(cluster)
        self._scheduler.schedule(cluster, binding, delay)

    def _succeeded(self, cluster: FleetCluster, answer: Any, now: float) -> float | None:
        """Record an answer; returns how long until the next fetch (None: not before the
        profile changes, the credential does not expire)."""
        credential = answer.credential
        renewed = credential is not cluster._credential
        cluster._answered, cluster._credential, cluster.answered_by = answer.plan, credential, answer.plan.provider
        cluster.failures, cluster.last_error = 0, None
        cluster.state = "ready" if cluster.healthy or not self.require_healthy else "unhealthy"
        if renewed:
            cluster.last_success = now
        expiry = credential.expiration_timestamp
        delay: float | None
        if expiry is None:
            cluster.expires_at = delay = None
        else:
            cluster.expires_at = expiry.timestamp()
            refresh_at = self.engine.refresh_policy.refresh_at(now, cluster.expires_at)
            if refresh_at <= now:
                delay = _RECHECK_SECONDS  # answered from the cache while the engine refreshes
            else:
                # Jitter pulls the refresh earlier, never later, so spreading load never risks expiry.
                delay = (refresh_at - now) * (1.0 - random.uniform(0.0, self.jitter))
        if cluster.binding is not None and answer.plan is not cluster.binding.plan:
            # Failed over: look again at the engine's backoff pace, so the cluster goes back
            # to its preferred provider soon after that answers again.
            maximum = self.engine.backoff_policy.maximum
            delay = maximum if delay is None else min(delay, maximum)
        cluster.next_refresh = now + delay if delay is not None else None
        return delay

    def _failed(self, cluster: FleetCluster, error: CredentialError, now: float) -> float:
        """Record a failed fetch; returns the backoff until the next one (shorter while the
        held credential is still valid, so it is renewed before it expires if it can be)."""
        cluster.failures += 1
        cluster.last_error = redact_text(str(error))
        cluster.state = "failing"
        delay = self.backoff.delay(cluster.failures)
        if cluster.expires_at is not None and cluster.expires_at > now:
            delay = min(delay, max(_RECHECK_SECONDS, (cluster.expires_at - now) / 2))
        cluster.next_refresh = now + delay
        if cluster.failures == 1 or cluster.failures % 10 == 0:
            _log.warning("credential fetch failed", profile=cluster.key, provider=cluster.provider, error=cluster.last_error, failures=cluster.failures)
        return delay

    def _gate(self, cluster: FleetCluster) -> str:
        """Engage or disengage ``cluster`` as its credential and health say; returns what it
        is now: ``engaged`` (just now), ``stay`` (was and is), ``disengaged`` or ``idle``."""
        healthy = cluster.healthy or not self.require_healthy
        credentialed = cluster._credentialed and cluster.binding is not None
        if cluster.binding is not None and credentialed:
            cluster.state = "ready" if healthy else "unhealthy"
            if cluster.state == "ready" and cluster.failures:
                cluster.state = "failing"
        if credentialed and healthy:
            if not cluster.engaged:
                cluster.engaged = True
                self._emit(cluster, Engaged(cluster))
                return "engaged"
            return "stay"
        if cluster.engaged:
            if credentialed and self.on_unhealthy == "mark":
                return "stay"  # the Updated event the caller sends says unhealthy
            self._disengage(cluster, "unhealthy")
            return "disengaged"
        return "idle"

    def _disengage(self, cluster: FleetCluster, reason: str) -> None:
        cluster.engaged = False
        self._emit(cluster, Disengaged(cluster, reason), close=True)

    def _first_done(self, key: str) -> None:
        if key in self._waiting:
            self._waiting.discard(key)
            self._check_synced()

    def _check_synced(self) -> None:
        if self._listed and self._claimed and not self._waiting and not self._synced.is_set():
            self._synced.set()
            self.hooks.synced()

    # -- events ----------------------------------------------------------------------------------

    def _emit(self, cluster: FleetCluster, event: FleetEvent | None, *, close: bool | str = False) -> None:
        """Send ``event`` about ``cluster`` after the cluster's earlier events, closing its
        clients first when ``close`` (``"stale"``: only those of an older binding; no event:
        closing is all there is)."""
        previous = self._emitting.get(cluster.key)
        closing = (close or event is None) and bool(cluster._clients or cluster._stale)
        if previous is None and not closing:
            if event is not None:
                self._publish(event)  # the usual case: no task, no wait
            return
        self._emitting[cluster.key] = asyncio.get_running_loop().create_task(self._emit_after(previous, cluster, event, close == "stale"))

    async def _emit_after(self, previous: asyncio.Task[None] | None, cluster: FleetCluster, event: FleetEvent | None, stale_only: bool) -> None:
        try:
            if previous is not None:
                await asyncio.shield(previous)
            await _close_all(cluster._take_clients(stale_only=stale_only))
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


async def _close_all(clients: list[tuple[Any, Any]]) -> None:
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
        await asyncio.wait(waits, timeout=_CLIENT_CLOSE_SECONDS)


def _deliver(subscriber: _Subscriber, event: FleetEvent | None) -> bool:
    try:
        subscriber.loop.call_soon_threadsafe(subscriber.queue.put_nowait, event)
    except RuntimeError:  # the subscriber's loop is closed
        return False
    return True


class FolderSource:
    """A folder of ClusterProfile files as a fleet's source: rescanned every ``scan_interval``
    seconds; ``on_scan(problem)`` hears after each scan whether the folder could be listed."""

    def __init__(self, directory: DirectorySource, scan_interval: float, on_scan: Callable[[str | None], None] | None = None) -> None:
        self.directory, self.scan_interval, self.on_scan = directory, scan_interval, on_scan

    async def run(self, emit: Callable[[Change], None], listed: Callable[[], None]) -> None:
        await self.directory.run(emit, listed, scan_interval=self.scan_interval, on_scan=self.on_scan)
