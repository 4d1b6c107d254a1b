"""Shard membership on Leases: :class:`Shard`, the façade a program makes, wiring the parts
that each do one job, as client-go separates leader election from its Lease lock:

- the **Lease lock** (:mod:`~cpcreds.shard.ownlease` over :mod:`~cpcreds.shard.leases`): reads,
  creates, updates and releases this replica's one Lease with its ``resourceVersion``, never
  taking it from another live holder;
- the **renewer** (:mod:`~cpcreds.shard.renewer`): renews it every ``retry_interval``, only while
  the watch of the peers is heard from;
- the **peer watcher** (:mod:`~cpcreds.shard.watcher`): lists and watches the group's Leases and
  notes, on this machine's monotonic clock, when each peer's record last changed;
- the **judge** (:mod:`~cpcreds.shard.judge`): turns both into a :class:`Membership` whenever it
  changes and tells subscribers; who owns a key is rendezvous hashing over its members;
- the **cleaner** (:mod:`~cpcreds.shard.cleaner`): deletes departed peers' Leases.

Each runs in a daemon thread of its own, none on the caller's event loop (a busy loop must not
make a healthy replica look dead); they share what they have seen under one condition
(:mod:`~cpcreds.shard.seen`).

Self-fencing: :meth:`Shard.fresh` is true only while the last successful renewal started less
than ``renew_deadline`` ago *and* the watch delivered something (every member's renewals,
this one's included, come through it) less than ``renew_deadline`` ago. Peers take a replica's
keys only ``leaseDurationSeconds`` after its last renewal reached them, later than that, so a
paused, partitioned or stalled replica stops owning keys before anyone else starts. A replica
that becomes fresh (at start, or again after a gap) claims keys one ``retry_interval`` later,
time for its peers to see its Lease and let go of them.
"""

from __future__ import annotations

import asyncio
import math
import re
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from ..errors import ConfigError
from ..fleet.hub import HubOptions
from ..lifecycle import StartedInContext
from . import STATUS_URL
from .cleaner import Cleaner
from .connection import LeaseConnection
from .judge import Judge, Membership
from .overlap import Overlap
from .ownlease import GROUP_LABEL, STATUS_ANNOTATION, OwnLease
from .renewer import Renewer
from .rendezvous import Assignment, assign
from .rules import DNS_LABEL, check_identity, default_identity, lease_name
from .seen import Seen, Timings
from .watcher import PeerWatcher

__all__ = ["Shard", "Membership", "GROUP_LABEL", "STATUS_ANNOTATION"]

_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")


class Shard(StartedInContext, end="stop"):
    """This replica's membership in a shard group on the hub, and the keys it owns.

    ``hub`` says how to reach the hub (the same :class:`~cpcreds.fleet.hub.HubOptions` the fleet
    reads ClusterProfiles with; its ``timeout`` bounds every Lease request too). ``namespace``
    holds the Leases, ``group`` names the set of replicas that split one inventory (Leases are
    labelled ``shard.cpcreds.io/group=<group>``). ``identity`` defaults to the pod name
    (``POD_NAME``, else the host name) plus a random suffix, so a restarted pod is a new member.
    ``lease_duration``, ``renew_deadline`` and ``retry_interval`` are client-go's leader-election
    knobs with its defaults (15 s, 10 s, 2 s); ``lease_duration`` is written to the Lease in whole
    seconds (rounded up). ``status_url`` is announced in the Lease's annotation.

    Invalid settings raise :class:`~cpcreds.errors.ConfigError`. :meth:`start` joins, :meth:`stop`
    leaves gracefully (the Lease's holder emptied: peers take over at once); both are also the
    sync and async context manager. Hub failures never raise from here: they are retried, logged,
    counted in :attr:`renewals`, shown in :attr:`problem`, and end in :meth:`fresh` turning false.
    """

    def __init__(
        self,
        hub: HubOptions,
        *,
        namespace: str,
        group: str = "cpcreds",
        identity: str | None = None,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_interval: float = 2.0,
        status_url: str = "",
    ) -> None:
        _check(namespace, group, Timings(lease_duration, renew_deadline, retry_interval), status_url)
        self.identity = check_identity(identity) if identity is not None else default_identity()
        #: This replica's Lease: one per identity in the group (:func:`~cpcreds.shard.rules.lease_name`).
        self.lease_name = lease_name(group, self.identity)
        self.hub, self.namespace, self.group = hub, namespace, group
        self.lease_duration, self.renew_deadline, self.retry_interval = lease_duration, renew_deadline, retry_interval
        self.status_url = status_url
        self.selector = f"{GROUP_LABEL}={group}"
        #: Renewals by result: ``renewed``, ``created``, ``conflict``, ``failed``, ``contended``
        #: (the Lease held by another live holder); and ``released``.
        self.renewals: Counter[str] = Counter()
        #: Fetches of keys that moved here while their previous owner might still mint them, and
        #: the bound on that window (:class:`~cpcreds.shard.overlap.Overlap`).
        self.overlap = Overlap(self.identity, renew_deadline)
        self._seen = Seen(Timings(lease_duration, renew_deadline, retry_interval))
        self._connection = LeaseConnection(hub, namespace)
        self._own = OwnLease(
            namespace=namespace, name=self.lease_name, group=group, identity=self.identity, status_url=status_url, lease_duration=lease_duration, counts=self.renewals
        )
        self._renewer = Renewer(self._own, self._seen, self._connection, release_within=hub.timeout)
        self._watcher = PeerWatcher(self._seen, self._connection, group=group, own_lease=self.lease_name, duration_cap=self._own.duration, request_timeout=hub.timeout)
        self._judge = Judge(self._seen, self._watcher, self.overlap, identity=self.identity, status_url=status_url)
        self._cleaner = Cleaner(self._seen, self._connection)
        self._threads: list[threading.Thread] = []
        self._started = False

    #: The Lease name of an identity in a group: ``Shard.lease_name_for(group, identity)``
    #: (:func:`~cpcreds.shard.rules.lease_name`; docs/sharding.md says the rule).
    lease_name_for = staticmethod(lease_name)

    @property
    def handovers(self) -> Counter[str]:
        """Membership changes by reason (``joined``, ``expired``, ``released``, ``fresh``, ``stale``…)."""
        return self._judge.handovers

    @property
    def cleaned(self) -> int:
        """Departed peers' Leases deleted by this replica."""
        return self._cleaner.cleaned

    @property
    def problem(self) -> str:
        """The last hub failure, in one line without secrets; ``""`` when the last request worked."""
        return self._seen.problem

    def __repr__(self) -> str:
        return f"Shard(group={self.group!r}, namespace={self.namespace!r}, identity={self.identity!r})"

    # -- life cycle ----------------------------------------------------------------------------

    def start(self) -> Shard:
        """Join: start the renewer, watcher, judge and cleaner threads (returns at once; :meth:`wait_claiming`
        waits until this replica takes keys). One-shot."""
        with self._seen.cond:
            if self._started:
                raise RuntimeError("a Shard is started once")
            self._started = True
        loops = (("renew", self._renewer.run), ("watch", self._watcher.run), ("judge", self._judge.run), ("clean", self._cleaner.run))
        for name, target in loops:
            thread = threading.Thread(target=target, name=f"cpcreds-shard-{name}", daemon=True)
            self._threads.append(thread)
            thread.start()
        return self

    def stop(self) -> None:
        """Leave gracefully: stop claiming (subscribers see ``stopped``), end the threads, then
        release the Lease (holder emptied, one attempt bounded by ``renew_deadline``) so peers
        take this replica's keys at once. Idempotent; returns within about a renew deadline."""
        seen = self._seen
        if seen.stopping.is_set():
            return
        with seen.cond:
            seen.stopping.set()
            seen.settled_at = math.inf
            seen.cond.notify_all()
        self._judge.stopped()
        self._watcher.end()
        for thread in self._threads:
            if thread is not threading.current_thread():  # stop() called from a subscriber
                thread.join(self.renew_deadline)
        if self._started:
            self._renewer.release()
        self._connection.close()

    # -- what callers ask ----------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether :meth:`start` was called and :meth:`stop` not yet."""
        return self._started and not self._seen.stopping.is_set()

    def fresh(self) -> bool:
        """Whether this replica may act on its keys now: its Lease was renewed, and the watch of
        its peers heard from, within ``renew_deadline`` (checked at each call, not by a thread)."""
        now = time.monotonic()
        with self._seen.cond:
            return self._seen.fresh(now)

    @property
    def contended(self) -> str:
        """Why this replica may not hold its own Lease now (another live holder has it: another
        process given this identity, or one whose identity maps to the same Lease), else ``""``.
        While set, this replica is not fresh and serves nothing; ``/readyz`` says it."""
        return self._own.contended

    def claiming(self) -> bool:
        """Whether this replica takes keys now: :meth:`fresh`, and settled after becoming fresh."""
        return self.fresh() and time.monotonic() >= self._seen.settled_at

    def owns(self, key: str) -> bool:
        """Whether this replica owns ``key`` (``namespace/name``) now: claiming, and the key's
        rendezvous winner among the live members. Call it before every fetch (self-fencing)."""
        return self.claiming() and self._judge.membership.owner(key) == self.identity

    def may_fetch(self, key: str) -> bool:
        """:meth:`owns`, asked right before fetching ``key``'s credential: a fetch it allows of a
        key that moved here while its previous owner might still mint it is counted in
        :attr:`overlap` (the overlap a handover allows: bounded, and counted here)."""
        if not self.owns(key):
            return False
        self.overlap.fetched(key, time.monotonic())
        return True

    @property
    def membership(self) -> Membership:
        """The latest view (see :class:`Membership`)."""
        return self._judge.membership

    def section(self) -> dict[str, Any]:
        """This replica's membership as ``/v1/clusters`` shows it in its ``shard`` section (JSON
        names): ``identity``, ``group``, ``namespace``, ``fresh``, ``claiming``, ``members``
        (each ``identity`` and ``statusUrl``) and ``overlapBoundSeconds`` (:attr:`overlap`'s
        ``bound``: the longest window the latest handover here opened in which the previous owner
        might still fetch; 0 when none did)."""
        view = self._judge.membership
        return {
            "identity": self.identity,
            "group": self.group,
            "namespace": self.namespace,
            "fresh": self.fresh(),
            "claiming": self.claiming(),
            "members": [{"identity": member, "statusUrl": view.status_urls.get(member, "")} for member in view.members],
            "overlapBoundSeconds": round(self.overlap.bound, 3),
        }

    def register_metrics(self, registry: Any = None) -> None:
        """Show this shard's own series (``cpcreds_shard_overlap_fetches_total{reason}``,
        ``cpcreds_shard_overlap_bound_seconds``, ``cpcreds_shard_lease_contended``) in
        ``registry`` (a ``prometheus_client`` ``CollectorRegistry``; default its ``REGISTRY``).
        Idempotent: serve and a ``Fleet`` given the same registry may both ask."""
        from .metrics import shard_readings

        shard_readings(registry).attach(self)

    def assignment(self, keys: Iterable[str]) -> Assignment:
        """Who owns each of ``keys`` in the latest view (CPU-bound: from a loop, use :meth:`assign`)."""
        return assign(keys, self._judge.membership.members)

    async def assign(self, keys: Iterable[str]) -> Assignment:
        """:meth:`assignment` in a thread, so 100,000 keys do not hold the event loop."""
        return await asyncio.to_thread(self.assignment, list(keys))

    def subscribe(self, callback: Callable[[Membership], None]) -> Callable[[], None]:
        """Call ``callback(membership)`` on every change, from the judge thread (quickly: it
        judges nobody meanwhile; an exception is logged and ignored). Returns an unsubscribe."""
        return self._judge.subscribe(callback)

    async def changes(self) -> AsyncIterator[Membership]:
        """The current view, then every change, on the running loop; ends after ``stopped``."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Membership] = asyncio.Queue()

        def deliver(view: Membership) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, view)
            except RuntimeError:  # the loop closed meanwhile
                pass

        unsubscribe = self.subscribe(deliver)
        try:
            view = self._judge.membership
            while True:
                yield view
                if view.reason == "stopped":
                    return
                view = await queue.get()
        finally:
            unsubscribe()

    def wait_claiming(self, timeout: float) -> bool:
        """Block until this replica claims keys (True) or ``timeout`` seconds pass (False)."""
        deadline = time.monotonic() + timeout
        seen = self._seen
        with seen.cond:
            while not (self._judge.membership.claiming and self.identity in self._judge.membership.members):
                remaining = deadline - time.monotonic()
                if remaining <= 0 or seen.stopping.is_set():
                    return False
                seen.cond.wait(remaining)
            return True


def _check(namespace: str, group: str, timings: Timings, status_url: str) -> None:
    """Raise :class:`ConfigError` for settings no Lease could carry or no group could keep."""
    if not DNS_LABEL.fullmatch(namespace or "") or len(namespace) > 63:
        raise ConfigError(f"shard namespace {namespace!r} is not a valid namespace name", field="namespace")
    if not group or len(group) > 63 or not _LABEL_VALUE.fullmatch(group):
        raise ConfigError(f"shard group {group!r} must be a label value: 1-63 letters, digits, '-', '_' or '.'", field="group")
    lease_duration, renew_deadline, retry_interval = timings.lease_duration, timings.renew_deadline, timings.retry_interval
    if not 0 < retry_interval < renew_deadline < lease_duration:
        raise ConfigError(
            f"shard timings must satisfy 0 < retry_interval ({retry_interval:g}s) < renew_deadline ({renew_deadline:g}s) "
            f"< lease_duration ({lease_duration:g}s)",
            field="lease_duration",
        )
    if status_url and not STATUS_URL.fullmatch(status_url):
        raise ConfigError(f"shard status URL {status_url!r} must be http(s)://HOST[:PORT]", field="status_url")
