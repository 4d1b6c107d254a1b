"""``cpcreds.Fleet``: every cluster of an inventory with a working credential, engaged and
disengaged as clusters come, change, turn unhealthy and go.

This module is the façade a program constructs, from settings grouped as a program thinks of
them (:mod:`~cpcreds.fleet.options`); the work is done by the parts it assembles, each with one
job: :mod:`~cpcreds.fleet.tracker` (which clusters the fleet tracks, from the
inventory's changes), :mod:`~cpcreds.fleet.keeper` (each cluster's credential kept fresh, with
:mod:`~cpcreds.fleet.scheduler`), :mod:`~cpcreds.fleet.gate` (engaged or not),
:mod:`~cpcreds.fleet.events` (the events to iterators and callbacks), :mod:`~cpcreds.fleet.progress`
(the first sync), :mod:`~cpcreds.fleet.sharding` (the shard's membership and fencing) and
:mod:`~cpcreds.fleet.runtime` (the thread or the program's loop, and closing).

The fleet runs on its own event loop in one thread (``cpcreds-fleet``; or on the program's loop,
see :meth:`Fleet.run`): the inventory source, one scheduler of every cluster's fetches (fetch,
refresh ahead of expiry, back off on failure; a task per fetch only while it runs) and the
decisions. The program talks to it from any thread or event loop: sync (``with Fleet(...)``,
callbacks) or asyncio (``async with``, ``async for event in fleet.events()``). Callbacks run in
one thread of their own (``cpcreds-fleet-callbacks``), in order; an async iterator's events
arrive on the iterator's own loop. Neither can slow the fleet down: a slow consumer only falls
behind.

A cluster is engaged when its profile stands (not a KEP-4322 duplicate), resolves to a plan,
its credential has been fetched once, and its ``ControlPlaneHealthy`` condition is True (unless
``require_healthy=False``). With a :class:`~cpcreds.shard.Shard`, only the clusters this replica
owns are engaged (see :mod:`cpcreds.fleet.ownership`). Engaged clusters stay engaged while a
later refresh fails (the state says ``failing``): the credential they hold may still be valid,
and flapping every controller on one failed refresh helps nobody.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Unpack

from ..config import ProviderConfig, load_config
from ..engine import CredentialEngine
from ..engine.policies import BackoffPolicy
from ..lifecycle import StartedInContext
from .cluster import FleetCluster, FleetEvent
from .events import EventFanout
from .gate import Gate, OnUnhealthy
from .hooks import FleetHooks
from .keeper import Keeper
from .metrics import fleet_readings
from .options import Engagement, Fetching, FleetKeywords, GroupField, Inventory, Listeners, grouped
from .ownership import Ownership
from .parts import FleetParts
from .progress import SyncProgress
from .runtime import FleetRuntime
from .sharding import ShardLink
from .tracker import Tracker

if TYPE_CHECKING:
    from ..shard import Shard

__all__ = ["Fleet"]


class Fleet(StartedInContext, end="close"):
    """The clusters of an inventory, each with a fresh credential and clients (see the module doc).

    ``config`` is a provider config file path, a :class:`~cpcreds.ProviderConfig` or a
    :class:`~cpcreds.CredentialEngine` (shared with the program: the fleet does not close it).
    The rest comes in groups (:mod:`cpcreds.fleet.options`), each also given field by field as
    keywords of their own (``Fleet(config, hub=..., require_healthy=False)``):

    - ``inventory`` (:class:`Inventory`): exactly one of ``hub``, ``folder`` (rescanned every
      ``scan_interval`` seconds), ``feed`` or ``source``;
    - ``engagement`` (:class:`Engagement`): ``require_healthy`` (default True) engages only
      clusters whose ``ControlPlaneHealthy`` condition is True; ``on_unhealthy``, ``"disengage"``
      (default) or ``"mark"`` (it stays engaged, ``state`` ``unhealthy``, and an
      :class:`Updated` event says so); ``dedupe`` (default True) acts on one profile per KEP-4322
      inventory member;
    - ``fetching`` (:class:`Fetching`): ``concurrency``, ``backoff`` and ``jitter``;
    - ``listeners`` (:class:`Listeners`): ``on_engage``, ``on_update`` and ``on_disengage``,
      called with the :class:`FleetCluster`, and ``hooks`` (a
      :class:`~cpcreds.fleet.hooks.FleetHooks`), which hears every change of a cluster's state,
      plan and inventory, and may probe clusters.

    ``shard`` (a :class:`~cpcreds.shard.Shard`) splits the inventory with the fleet's other
    replicas: only the clusters this replica owns (``namespace/name`` through the shard's
    rendezvous assignment) are engaged; on a membership change the clusters that moved away are
    disengaged (reason ``moved``) and those that arrived engaged; before every fetch the fleet
    checks the shard is fresh and still owns the cluster (self-fencing). The fleet starts the
    shard (unless it runs already) and stops it when it closes, after its own tasks, releasing
    the Lease so the other replicas take over at once.

    Start it with ``with``/``async with`` or :meth:`start`; :meth:`close` ends every watch,
    task, thread and plugin process within about a second. Construction raises
    :class:`~cpcreds.ConfigError` for a config that does not load; nothing else the inventory
    or a provider does raises here: it shows in :attr:`problems` and the clusters' state.
    """

    Inventory, Engagement, Fetching, Listeners = Inventory, Engagement, Fetching, Listeners

    def __init__(
        self,
        config: str | os.PathLike[str] | ProviderConfig | CredentialEngine,
        inventory: Inventory | None = None,
        *,
        engagement: Engagement | None = None,
        fetching: Fetching | None = None,
        listeners: Listeners | None = None,
        shard: Shard | None = None,
        prometheus_registry: Any = None,
        **keywords: Unpack[FleetKeywords],
    ) -> None:
        groups = grouped({"inventory": inventory, "engagement": engagement, "fetching": fetching, "listeners": listeners}, dict(keywords))
        #: The groups the fleet was made of, as given (and filled from keywords).
        self.inventory: Inventory = groups["inventory"]
        self.engagement: Engagement = groups["engagement"]
        self.fetching: Fetching = groups["fetching"]
        self.listeners: Listeners = groups["listeners"]
        self.source = source = self.inventory.open()
        self._lock = threading.RLock()  # clusters, subscribers, problems: written by the fleet loop
        listen = self.listeners
        self._events = EventFanout(self._lock, {"engage": listen.on_engage, "update": listen.on_update, "disengage": listen.on_disengage})
        self._gate = Gate(self.engagement.require_healthy, self.engagement.on_unhealthy, self._events)
        engine, owns_engine = _engine(config, self.fetching.concurrency, prometheus_registry)
        self.hooks = listen.hooks or FleetHooks()
        self.shard = shard
        #: With a shard: the :class:`~cpcreds.fleet.ownership.Ownership` filter holding every
        #: standing profile of the inventory (who owns what); else None.
        self.ownership = Ownership(shard.owns) if shard is not None else None
        self._progress = SyncProgress(self.hooks, claimed=shard is None)  # a shard's replica owns nothing before its first claim
        link = ShardLink(shard, self.ownership, self._progress) if self.ownership is not None else None
        parts = FleetParts(self._lock, {}, self._gate, self._events, self._progress, self.hooks)
        fenced = link.fenced if link is not None else None
        self._keeper = Keeper(engine, parts, concurrency=self.fetching.concurrency, backoff=self.fetching.backoff, jitter=self.fetching.jitter, fenced=fenced)
        # cpcreds' own sources parse (or copy) every profile and never change one once sent:
        # the engine may keep them as they are. A program's source may not promise that.
        owned_profiles = getattr(source, "sends_own_profiles", False) is True
        self._tracker = Tracker(parts, self._keeper, dedupe=self.dedupe, ownership=self.ownership, owned_profiles=owned_profiles)
        self._runtime = FleetRuntime(self._lock, source, self._tracker, self._keeper, self._events, link, owns_engine=owns_engine)
        # Shown in prometheus_registry (default: prometheus_client's REGISTRY), summed with the
        # other fleets there; close() takes this fleet out.
        self._readings = fleet_readings(prometheus_registry)
        self._readings.attach(self)
        if shard is not None:
            shard.register_metrics(prometheus_registry)  # its overlap series, as serve shows them

    # -- how it was made -------------------------------------------------------------------------

    @property
    def engine(self) -> CredentialEngine:
        """The engine the clusters' credentials come from (see :meth:`use_engine`)."""
        return self._keeper.engine

    #: Whether only clusters whose ``ControlPlaneHealthy`` condition is True are engaged.
    require_healthy: GroupField[bool] = GroupField("engagement")
    #: What happens to an engaged cluster that turns unhealthy: ``disengage`` or ``mark``.
    on_unhealthy: GroupField[OnUnhealthy] = GroupField("engagement")
    #: Whether one profile per KEP-4322 inventory member is acted on.
    dedupe: GroupField[bool] = GroupField("engagement")
    #: The most credential fetches at once.
    concurrency: GroupField[int] = GroupField("fetching")
    #: The share of the time to a refresh point by which refreshes come earlier, at most.
    jitter: GroupField[float] = GroupField("fetching")
    #: The pace of fetches after failures.
    backoff: GroupField[BackoffPolicy] = GroupField("fetching")

    # -- what the program reads ----------------------------------------------------------------

    @property
    def clusters(self) -> dict[str, FleetCluster]:
        """Every cluster the fleet tracks now (engaged or not), by ``namespace/name``."""
        with self._lock:
            return dict(self._tracker.clusters)

    @property
    def engaged(self) -> dict[str, FleetCluster]:
        """The engaged clusters, by ``namespace/name``."""
        with self._lock:
            return {key: cluster for key, cluster in self._tracker.clusters.items() if cluster.engaged}

    @property
    def duplicates(self) -> dict[tuple[str, str], list[str]]:
        """KEP-4322 members with more than one profile: (namespace, member id) -> their keys.
        Only the oldest of each is acted on, none when the oldest tie (empty with ``dedupe=False``)."""
        with self._lock:
            return self._tracker.members.index.duplicates() if self.dedupe else {}

    @property
    def duplicate_count(self) -> int:
        """Profiles not acted on because another profile stands for their cluster."""
        with self._lock:
            return self._tracker.members.index.count() if self.dedupe else 0

    @property
    def problems(self) -> dict[str, str]:
        """What is wrong with the inventory now (a hub that cannot be listed, a file that
        cannot be read), by where; empty when all is well."""
        with self._lock:
            return {origin: problem for origin, problem in self._tracker.problems.items() if problem}

    @property
    def members(self) -> Any:
        """The KEP-4322 :class:`~cpcreds.fleet.members.MemberIndex` (``stands(key)``): read it
        on the fleet's loop (a :class:`~cpcreds.fleet.hooks.FleetHooks` method)."""
        return self._tracker.members.index

    def __len__(self) -> int:
        """How many clusters the fleet tracks now (engaged or not)."""
        return len(self._tracker.clusters)

    @property
    def progress(self) -> tuple[int, int]:
        """(clusters whose first fetch is done, clusters tracked): the first sync's progress."""
        with self._lock:
            total = len(self._tracker.clusters)
            return total - len(self._progress.waiting), total

    @property
    def synced(self) -> bool:
        """True once the inventory has been listed and every cluster had its first fetch."""
        return self._progress.done.is_set()

    def wait_synced(self, timeout: float | None = None) -> bool:
        """Block until :attr:`synced` (or ``timeout`` seconds); returns :attr:`synced`."""
        return self._progress.done.wait(timeout)

    async def await_synced(self, timeout: float | None = None) -> bool:
        """asyncio version of :meth:`wait_synced` (the wait runs off the calling loop)."""
        return await asyncio.to_thread(self._progress.done.wait, timeout)

    def events(self) -> AsyncIterator[FleetEvent]:
        """An async iterator of :class:`Engaged`, :class:`Updated` and :class:`Disengaged`
        events, delivered on the calling loop. It starts with an :class:`Engaged` for every
        cluster engaged when it was made (so nothing falls between a look at :attr:`engaged`
        and the first event), and ends when the fleet closes. Leaving the ``async for`` (or
        cancelling the task in it) ends only this iterator."""
        with self._lock:
            engaged = [cluster for cluster in self._tracker.clusters.values() if cluster.engaged]
            return self._events.subscribe(engaged, ended=self._runtime.closed)

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> Fleet:
        """Start the fleet's thread (once); returns the fleet."""
        self._runtime.start()
        return self

    async def run(self) -> None:
        """Run the fleet on the calling event loop (no thread of its own) until the task is
        cancelled, then end its watches, tasks and clients as :meth:`close` does (the shard is
        stopped, an engine the fleet made closed). For a program whose own work shares the
        fleet's loop, as ``cpcreds serve`` does; callbacks still run in their own thread."""
        try:
            await self._runtime.run()
        finally:
            self._readings.detach(self)

    async def use_engine(self, engine: CredentialEngine) -> None:
        """Resolve every cluster again through ``engine`` and keep its credentials from now on
        (``cpcreds serve``'s config reload). Call it on the fleet's loop (with :meth:`run`);
        the previous engine is the caller's to close. An engaged cluster whose plan is the same
        keeps its engagement and gets new clients (an :class:`Updated` event)."""
        self._keeper.engine = engine
        self._tracker.rebind_all()

    def close(self) -> None:
        """Stop the inventory, every cluster task and every client the clusters handed out,
        end the event iterators, kill running plugins (when the fleet made its engine), and end
        the fleet's threads, within about a second. Sends no :class:`Disengaged` events.
        Idempotent; safe from any thread but the fleet's own. A fleet in :meth:`run` is
        asked to end (its task cancelled) and closes as that task ends."""
        self._readings.detach(self)
        self._runtime.close()


def _engine(config: str | os.PathLike[str] | ProviderConfig | CredentialEngine, concurrency: int, prometheus_registry: Any) -> tuple[CredentialEngine, bool]:
    """The engine the fleet's credentials come from, and whether the fleet made it (and closes it)."""
    if isinstance(config, CredentialEngine):
        return config, False
    loaded = config if isinstance(config, ProviderConfig) else load_config(config)
    # As serve does: every cluster stays cached (the fleet, not LRU eviction, drops what goes),
    # and the fleet's concurrency is the engine's, also for one provider.
    engine = CredentialEngine(
        loaded,
        prometheus_registry=prometheus_registry,
        max_entries=1_000_000,
        max_concurrent_fetches=concurrency,
        max_fetches_per_provider=concurrency,
    )
    return engine, True
