"""Shard membership on Leases: this replica's Lease, renewed from its own thread; the peers'
Leases, listed and watched; who is alive, judged on this machine's monotonic clock.

Four daemon threads per :class:`Shard`, none on the caller's event loop (a busy loop must not
make a healthy replica look dead):

- the **renewer** writes this replica's Lease every ``retry_interval`` (creating it when absent,
  re-reading it and retrying on 409, never taking it from another live holder: see
  :mod:`~cpcreds.shard.ownlease`), and stamps when the last renewal that succeeded *started*;
  it renews only while the watch is heard from (a replica blind to its peers must let them take
  its keys, not keep telling them it is alive);
- the **watcher** lists the group's Leases (by label) and watches them, noting for every peer
  whose Lease is named for its holder (:mod:`~cpcreds.shard.rules`) when its ``renewTime`` or
  holder last changed, *as seen here* (client-go's leader election does
  the same: clock skew between machines never matters);
- the **judge** turns both into a :class:`Membership` whenever it changes (a peer seen, expired or
  released; this replica fresh or not) and tells subscribers;
- the **cleaner** deletes the Leases of departed peers (with a resourceVersion precondition, so
  one that came back in between is kept), apart so a slow delete never delays a judgement.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..fleet.hub import HubOptions, HubProblem, backoff_delay, problem_text
from ..fleet.hubclient import HubConnector
from ..logs import get_logger
from . import STATUS_URL
from .leases import LeaseAPI, events, message, shut
from .overlap import Overlap
from .ownlease import GROUP_LABEL, STATUS_ANNOTATION, LeaseHeld, OwnLease
from .rendezvous import Assignment, assign, owner
from .rules import DNS_LABEL, check_identity, declared_duration, default_identity, lease_name

__all__ = ["Shard", "Membership", "GROUP_LABEL", "STATUS_ANNOTATION"]

_log = get_logger("cpcreds.shard")

_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
#: A watch is reopened this often even when it works (the hub's own limit is usually longer).
_WATCH_SECONDS = 300


@dataclass(frozen=True)
class Membership:
    """One view of the shard, as this replica sees it.

    ``members`` are the identities that take keys now, sorted: the live peers, and this replica
    when ``claiming`` (fresh, and settled one renew interval after becoming fresh). ``fresh`` is
    this replica's own Lease renewed in time; ``status_urls`` maps live members to the status URL
    their Lease announces (``""`` when none). ``reason`` says what changed: ``started``,
    ``joined``, ``expired``, ``released``, ``fresh``, ``stale``, ``stopped``."""

    identity: str
    members: tuple[str, ...]
    claiming: bool
    fresh: bool
    reason: str
    status_urls: dict[str, str] = field(default_factory=dict, compare=False)

    def owner(self, key: str) -> str | None:
        """Who owns ``key`` (``namespace/name``) in this view; ``None`` when no member is live."""
        return owner(key, self.members)


@dataclass
class _Peer:
    """A peer's Lease as last seen, and when (local monotonic) its holder or renewTime changed."""

    name: str
    holder: str
    renew_time: Any
    duration: float
    resource_version: str
    status_url: str
    changed_at: float

    def alive(self, now: float) -> bool:
        return bool(self.holder) and now - self.changed_at < self.duration

    def dies_at(self) -> float:
        return self.changed_at + self.duration if self.holder else -math.inf


class Shard:
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
        if not DNS_LABEL.fullmatch(namespace or "") or len(namespace) > 63:
            raise ConfigError(f"shard namespace {namespace!r} is not a valid namespace name", field="namespace")
        if not group or len(group) > 63 or not _LABEL_VALUE.fullmatch(group):
            raise ConfigError(f"shard group {group!r} must be a label value: 1-63 letters, digits, '-', '_' or '.'", field="group")
        if not 0 < retry_interval < renew_deadline < lease_duration:
            raise ConfigError(
                f"shard timings must satisfy 0 < retry_interval ({retry_interval:g}s) < renew_deadline ({renew_deadline:g}s) "
                f"< lease_duration ({lease_duration:g}s)",
                field="lease_duration",
            )
        if status_url and not STATUS_URL.fullmatch(status_url):
            raise ConfigError(f"shard status URL {status_url!r} must be http(s)://HOST[:PORT]", field="status_url")
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
        self._own = OwnLease(
            namespace=namespace, name=self.lease_name, group=group, identity=self.identity, status_url=status_url, lease_duration=lease_duration, counts=self.renewals
        )
        #: Membership changes by reason (``joined``, ``expired``, ``released``, ``fresh``, ``stale``…).
        self.handovers: Counter[str] = Counter()
        #: Departed peers' Leases deleted by this replica.
        self.cleaned = 0
        #: Fetches of keys that moved here while their previous owner might still mint them, and
        #: the bound on that window (:class:`~cpcreds.shard.overlap.Overlap`).
        self.overlap = Overlap(self.identity, renew_deadline)
        #: The last hub failure, in one line without secrets; ``""`` when the last request worked.
        self.problem = ""
        self._lock = threading.Condition()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._subscribers: list[Callable[[Membership], None]] = []
        self._peers: dict[str, _Peer] = {}
        self._ignored: set[str] = set()  # group Leases whose name is not their holder's (logged once)
        self._renewed_at = -math.inf  # monotonic start of the last successful renewal
        self._heard_at = -math.inf  # monotonic time the watch (or list) last delivered something
        self._settled_at = math.inf  # monotonic time from which this replica claims keys
        self._membership = Membership(self.identity, (), claiming=False, fresh=False, reason="started")
        kubeconfig = None if hub.kubeconfig is None else Path(hub.kubeconfig)
        self._connector = HubConnector(kubeconfig, hub.context, in_cluster=hub.in_cluster, timeout=hub.timeout)
        self._cleanup_api: LeaseAPI | None = None
        self._watch_response: Any = None
        self._kicked_at = -math.inf  # when the judge last ended a silent watch
        self._withholding = False  # renewals withheld: the peers' Leases not heard from
        self._started = False
        self._registries: list[Any] = []  # where register_metrics() put this shard's series

    #: The Lease name of an identity in a group: ``Shard.lease_name_for(group, identity)``
    #: (:func:`~cpcreds.shard.rules.lease_name`; docs/sharding.md says the rule).
    lease_name_for = staticmethod(lease_name)

    def __repr__(self) -> str:
        return f"Shard(group={self.group!r}, namespace={self.namespace!r}, identity={self.identity!r})"

    # -- life cycle ----------------------------------------------------------------------------

    def start(self) -> Shard:
        """Join: start the renewer, watcher, judge and cleaner threads (returns at once; :meth:`wait_claiming`
        waits until this replica takes keys). One-shot."""
        with self._lock:
            if self._started:
                raise RuntimeError("a Shard is started once")
            self._started = True
        loops = (("renew", self._renew_loop), ("watch", self._watch_loop), ("judge", self._judge_loop), ("clean", self._clean_loop))
        for name, target in loops:
            thread = threading.Thread(target=target, name=f"cpcreds-shard-{name}", daemon=True)
            self._threads.append(thread)
            thread.start()
        return self

    def stop(self) -> None:
        """Leave gracefully: stop claiming (subscribers see ``stopped``), end the threads, then
        release the Lease (holder emptied, one attempt bounded by ``renew_deadline``) so peers
        take this replica's keys at once. Idempotent; returns within about a renew deadline."""
        if self._stop.is_set():
            return
        with self._lock:
            self._stop.set()
            self._settled_at = math.inf
            self._lock.notify_all()
        before = self._membership
        self._membership = Membership(self.identity, tuple(m for m in before.members if m != self.identity), claiming=False, fresh=False, reason="stopped")
        self._publish(self._membership, before)
        self._end_watch()
        for thread in self._threads:
            if thread is not threading.current_thread():  # stop() called from a subscriber
                thread.join(self.renew_deadline)
        if self._started:
            self._release()
        self._connector.close()

    def __enter__(self) -> Shard:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> Shard:
        return self.start()

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stop)

    # -- what callers ask ----------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether :meth:`start` was called and :meth:`stop` not yet."""
        return self._started and not self._stop.is_set()

    def fresh(self) -> bool:
        """Whether this replica may act on its keys now: its Lease was renewed, and the watch of
        its peers heard from, within ``renew_deadline`` (checked at each call, not by a thread)."""
        now = time.monotonic()
        with self._lock:
            return not self._stop.is_set() and now - self._renewed_at < self.renew_deadline and now - self._heard_at < self.renew_deadline

    @property
    def contended(self) -> str:
        """Why this replica may not hold its own Lease now (another live holder has it: another
        process given this identity, or one whose identity maps to the same Lease), else ``""``.
        While set, this replica is not fresh and serves nothing; ``/readyz`` says it."""
        return self._own.contended

    def claiming(self) -> bool:
        """Whether this replica takes keys now: :meth:`fresh`, and settled after becoming fresh."""
        return self.fresh() and time.monotonic() >= self._settled_at

    def owns(self, key: str) -> bool:
        """Whether this replica owns ``key`` (``namespace/name``) now: claiming, and the key's
        rendezvous winner among the live members. Call it before every fetch (self-fencing)."""
        return self.claiming() and self._membership.owner(key) == self.identity

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
        return self._membership

    def section(self) -> dict[str, Any]:
        """This replica's membership as ``/v1/clusters`` shows it in its ``shard`` section (JSON
        names): ``identity``, ``group``, ``namespace``, ``fresh``, ``claiming``, ``members``
        (each ``identity`` and ``statusUrl``) and ``overlapBoundSeconds`` (:attr:`overlap`'s
        ``bound``: the longest window the latest handover here opened in which the previous owner
        might still fetch; 0 when none did)."""
        view = self._membership
        return {
            "identity": self.identity,
            "group": self.group,
            "namespace": self.namespace,
            "fresh": self.fresh(),
            "claiming": self.claiming(),
            "members": [{"identity": member, "statusUrl": view.status_urls.get(member, "")} for member in view.members],
            "overlapBoundSeconds": round(self.overlap.bound, 3),
        }

    def register_metrics(self, registry: Any) -> None:
        """Add this shard's own series (``cpcreds_shard_overlap_fetches_total{reason}``,
        ``cpcreds_shard_overlap_bound_seconds``, ``cpcreds_shard_lease_contended``) to
        ``registry`` (a ``prometheus_client``
        ``CollectorRegistry``), once per registry: serve and a ``Fleet`` given the same registry
        may both ask."""
        with self._lock:
            if any(known is registry for known in self._registries):
                return
            self._registries.append(registry)
        from .metrics import OverlapCollector

        registry.register(OverlapCollector(self))

    def assignment(self, keys: Iterable[str]) -> Assignment:
        """Who owns each of ``keys`` in the latest view (CPU-bound: from a loop, use :meth:`assign`)."""
        return assign(keys, self._membership.members)

    async def assign(self, keys: Iterable[str]) -> Assignment:
        """:meth:`assignment` in a thread, so 100,000 keys do not hold the event loop."""
        return await asyncio.to_thread(self.assignment, list(keys))

    def subscribe(self, callback: Callable[[Membership], None]) -> Callable[[], None]:
        """Call ``callback(membership)`` on every change, from the judge thread (quickly: it
        judges nobody meanwhile; an exception is logged and ignored). Returns an unsubscribe."""
        with self._lock:
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)

        return unsubscribe

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
            view = self._membership
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
        with self._lock:
            while not (self._membership.claiming and self.identity in self._membership.members):
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._stop.is_set():
                    return False
                self._lock.wait(remaining)
            return True

    # -- the renewer ---------------------------------------------------------------------------

    def _renew_loop(self) -> None:
        api: LeaseAPI | None = None
        while not self._stop.is_set():
            tick = time.monotonic()
            if self._heard_recently(tick + self.retry_interval):
                api = self._renew_once(api)
            self._stop.wait(max(0.0, tick + self.retry_interval - time.monotonic()))

    def _heard_recently(self, until: float) -> bool:
        """Whether the watch of the peers was heard from within ``renew_deadline`` (waiting for it
        until ``until``, monotonic). A replica that cannot see its peers is fenced, and must not
        renew either: its renewals would tell the peers it is alive, and they would leave its keys
        to it for as long as it cannot watch. Not renewing, its share moves to them within
        ``renew_deadline`` + ``lease_duration``; once the watch is heard again it renews, and
        claims one interval later, as any replica fresh again after a gap."""
        with self._lock:
            while not self._stop.is_set():
                now = time.monotonic()
                if now - self._heard_at < self.renew_deadline:
                    if self._withholding:
                        self._withholding = False
                        _log.warning("shard Lease renewed again: the peers' Leases are watched again", lease=self.lease_name)
                    return True
                if now >= until:
                    break
                self._lock.wait(until - now)
            withheld = not self._withholding and self._heard_at > -math.inf and not self._stop.is_set()
            self._withholding = self._withholding or withheld
        if withheld:
            _log.warning(
                "shard Lease not renewed: the peers' Leases were not heard from for the renew deadline; this replica's profiles move to the peers",
                lease=self.lease_name,
                error=self.problem,
            )
        return False

    def _renew_once(self, api: LeaseAPI | None) -> LeaseAPI | None:
        """One renewal (or creation, or take-over of a free Lease); the API to use next time."""
        started = time.monotonic()
        try:
            if api is None or self._connector.stale():
                api = self._api()
            self._own.renew(api, started + self.renew_deadline)
            self.problem = ""
            with self._lock:
                done = time.monotonic()
                if done - self._renewed_at >= self.renew_deadline:
                    # Fresh again after a gap (or for the first time): peers may hold this
                    # replica's keys until they see the renewal, so claim one interval later.
                    self._settled_at = done + self.retry_interval
                self._renewed_at = started
                self._lock.notify_all()
        except LeaseHeld as exc:  # another live holder: not fresh, said in problem, /readyz, metrics
            self.renewals["contended"] += 1
            self.problem = str(exc)
        except Exception as exc:  # noqa: BLE001 - a hub failure: counted, shown, retried next tick
            if self._stop.is_set():
                return api
            self.problem = f"renewing Lease {self.namespace}/{self.lease_name}: {problem_text(exc)}"
            self.renewals["failed"] += 1
            _log.warning("shard Lease renewal failed", lease=self.lease_name, error=self.problem)
            api = None if isinstance(exc, OSError) else api
        return api

    def _release(self) -> None:
        """Empty the holder if the Lease is still ours, so peers take over at once."""
        deadline = time.monotonic() + min(self.renew_deadline, self.hub.timeout)
        try:
            self._own.release(self._api(), deadline)
        except Exception as exc:  # noqa: BLE001 - peers then take over after the lease duration
            self.problem = f"releasing Lease {self.namespace}/{self.lease_name}: {problem_text(exc)}"
            _log.warning("shard Lease release failed", lease=self.lease_name, error=self.problem)

    def _api(self) -> LeaseAPI:
        from kubernetes import client

        made, _ = self._connector.connect()
        configuration = made.configuration
        # No urllib3 retries: a Lease write that hangs must end at the renew deadline, not be
        # sent again three times; conflicts and failures are retried here, on the next tick.
        configuration.retries = False
        made.close()
        return LeaseAPI(client.ApiClient(configuration), self.namespace)

    # -- the watcher ---------------------------------------------------------------------------

    def _end_watch(self) -> None:
        """Shut the open watch's connection: a thread blocked reading it wakes at once."""
        response = self._watch_response
        if response is not None:
            shut(response)

    def _watch_loop(self) -> None:
        failures = 0
        api: LeaseAPI | None = None
        while not self._stop.is_set():
            try:
                if api is None or self._connector.stale():
                    api = self._api()
                version = self._relist(api)
                while not self._stop.is_set():
                    version = self._watch(api, version)
                    failures = 0
            except Exception as exc:  # noqa: BLE001 - report, back off (short: leases are short), relist
                if self._stop.is_set():
                    return
                failures += 1
                api = None
                self.problem = f"watching Leases in {self.namespace}: {problem_text(exc)}"
                _log.warning("shard Lease watch failed; relisting", error=self.problem)
                self._stop.wait(min(backoff_delay(failures), self.retry_interval))

    def _relist(self, api: LeaseAPI) -> str:
        status, body = api.list(self.selector, self.hub.timeout)
        if status != 200 or not isinstance(body.get("items"), list):
            raise HubProblem(f"listing Leases: HTTP {status}: {message(body)}")
        version = str((body.get("metadata") or {}).get("resourceVersion") or "")
        if not version:
            raise HubProblem("the Lease list has no metadata.resourceVersion to watch from")
        now = time.monotonic()
        with self._lock:
            seen = set()
            for item in body["items"]:
                if isinstance(item, dict) and (name := _name(item)):
                    seen.add(name)
                    self._observe(item, now)
            for name in set(self._peers) - seen:
                del self._peers[name]
            self._ignored &= seen
            self._heard_at = now
            self._lock.notify_all()
        return version

    def _watch(self, api: LeaseAPI, version: str) -> str:
        response = api.watch(self.selector, version, _WATCH_SECONDS, self.hub.timeout)
        self._watch_response = response
        try:
            if self._stop.is_set():
                return version
            for kind, item in events(response):
                if kind == "ERROR":
                    raise HubProblem(f"the Lease watch failed: {message(item)}")
                now = time.monotonic()
                seen = (item.get("metadata") or {}).get("resourceVersion")
                version = seen if isinstance(seen, str) and seen else version
                with self._lock:
                    self._heard_at = now
                    name = _name(item)
                    if kind == "DELETED" and name:
                        self._peers.pop(name, None)
                        self._ignored.discard(name)
                    elif kind != "BOOKMARK" and name:
                        self._observe(item, now)
                    self._lock.notify_all()
        finally:
            self._watch_response = None
            if self._stop.is_set():
                response.close()  # its connection too: the hub sees the watch go at once
            else:
                response.release_conn()
        return version

    def _observe(self, item: dict[str, Any], now: float) -> None:
        """Note a peer's Lease (called with the lock held); this replica's own is only heard."""
        name = _name(item)
        if not name or name == self.lease_name:
            return
        spec = item.get("spec") if isinstance(item.get("spec"), dict) else {}
        holder = spec.get("holderIdentity") if isinstance(spec.get("holderIdentity"), str) else ""
        if holder and lease_name(self.group, holder) != name:
            # Not the Lease of the member it names (a leftover, or anyone's write): it keeps
            # nobody alive, and is not ours to delete.
            self._peers.pop(name, None)
            if name not in self._ignored:
                self._ignored.add(name)
                _log.warning("shard ignores a Lease whose name is not its holder's", lease=name[:100], holder=holder[:100])
            return
        self._ignored.discard(name)
        duration = declared_duration(spec.get("leaseDurationSeconds"), self._own.duration)
        annotations = (item.get("metadata") or {}).get("annotations") or {}
        url = annotations.get(STATUS_ANNOTATION, "") if isinstance(annotations, dict) else ""
        # A malformed URL is not announced: it would be sent to clients in a Location header.
        url = url if isinstance(url, str) and STATUS_URL.fullmatch(url) else ""
        version = str((item.get("metadata") or {}).get("resourceVersion") or "")
        known = self._peers.get(name)
        renew = spec.get("renewTime")
        if known is None or known.holder != holder or known.renew_time != renew:
            self._peers[name] = _Peer(name, holder, renew, duration, version, str(url), now)
        else:
            known.duration, known.resource_version, known.status_url = duration, version, str(url)

    # -- the judge -----------------------------------------------------------------------------

    def _judge_loop(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                now = time.monotonic()
                view = self._view(now)
                before = self._membership
                changed = (view.members, view.claiming, view.fresh) != (before.members, before.claiming, before.fresh)
                if changed:
                    self._membership = view
                    self._note_handover(now, before, view)
                    self._lock.notify_all()
                wake = self._next_wake(now)
                # Every replica's renewals, this one's included, come through the watch: silent
                # for a renew deadline, it is broken (a hub gone without closing the connection)
                # and would fence this replica until its read timeout. Reopen it now.
                silent = now - self._heard_at >= self.renew_deadline and now - self._kicked_at >= self.renew_deadline
                if silent and self._watch_response is not None:
                    self._kicked_at = now
                    self._end_watch()
            if changed:
                self._publish(view, before)
            with self._lock:
                if not self._stop.is_set():
                    self._lock.wait(max(0.001, wake - time.monotonic()))

    def _view(self, now: float) -> Membership:
        fresh = now - self._renewed_at < self.renew_deadline and now - self._heard_at < self.renew_deadline and not self._stop.is_set()
        claiming = fresh and now >= self._settled_at
        live = {p.holder: p.status_url for p in self._peers.values() if p.alive(now)}
        live.pop(self.identity, None)  # a Lease of ours left from before is not a peer
        if claiming:
            live[self.identity] = self.status_url
        before = self._membership
        gone = set(before.members) - set(live) - {self.identity}
        if set(live) - set(before.members) - {self.identity}:
            reason = "joined"
        elif gone:
            # Expired: its Lease is still held, only not renewed in time; otherwise it was
            # released (holder emptied) or its Lease deleted.
            held = {p.holder for p in self._peers.values()}
            reason = "expired" if gone & held else "released"
        elif claiming != before.claiming:
            reason = "fresh" if claiming else "stale"
        else:
            reason = before.reason
        return Membership(self.identity, tuple(sorted(live)), claiming=claiming, fresh=fresh, reason=reason, status_urls=live)

    def _note_handover(self, now: float, before: Membership, view: Membership) -> None:
        """Tell :attr:`overlap` who may still mint the keys this change moves here (lock held)."""
        held = {p.holder for p in self._peers.values()}
        gone = {m: ("expired" if m in held else "released") for m in set(before.members) - set(view.members) - {self.identity}}
        remaining: dict[str, float] = {}
        for peer in self._peers.values():
            if peer.alive(now):
                remaining[peer.holder] = max(remaining.get(peer.holder, 0.0), peer.dies_at() - now)
        self.overlap.handover(now, before.members, view.members, gone=gone, remaining=remaining)

    def _next_wake(self, now: float) -> float:
        moments = [now + self.retry_interval, self._renewed_at + self.renew_deadline, self._heard_at + self.renew_deadline, self._settled_at]
        moments += [p.dies_at() for p in self._peers.values()]
        upcoming = [m for m in moments if m > now]
        return min(upcoming) if upcoming else now + self.retry_interval

    def _publish(self, view: Membership, before: Membership) -> None:
        self.handovers[view.reason] += 1
        _log.info(
            "shard membership changed", reason=view.reason, members=len(view.members), claiming=view.claiming, was=len(before.members)
        )
        with self._lock:
            subscribers = list(self._subscribers)
        for callback in subscribers:
            try:
                callback(view)
            except Exception as exc:  # noqa: BLE001 - one subscriber's bug must not stop the judge
                _log.warning("shard subscriber failed", error=problem_text(exc))

    def _clean_loop(self) -> None:
        """Delete departed peers' Leases, in its own thread: a hub slow to answer a delete must
        not hold up judging who is alive."""
        while not self._stop.is_set():
            with self._lock:
                now = time.monotonic()
                departed = [(p.name, p.resource_version) for p in self._peers.values() if not p.alive(now) and p.resource_version]
            for name, version in departed:
                self._clean(name, version)
            with self._lock:
                if not self._stop.is_set():
                    self._lock.wait(self.retry_interval)

    def _clean(self, name: str, version: str) -> None:
        """Delete a departed peer's Lease, only if it is still the version judged departed."""
        try:
            status, _ = self._api_for_cleanup().delete(name, version, self.retry_interval)
        except Exception as exc:  # noqa: BLE001 - another replica may clean it; try again later
            _log.info("shard could not delete a departed Lease", lease=name, error=problem_text(exc))
            return
        with self._lock:
            peer = self._peers.get(name)
            if status in (200, 404) and peer is not None and peer.resource_version == version:
                del self._peers[name]
            elif status == 409 and peer is not None and peer.resource_version == version:
                peer.resource_version = ""  # changed since: the watch will say how
        if status == 200:
            self.cleaned += 1

    def _api_for_cleanup(self) -> LeaseAPI:
        if self._cleanup_api is None or self._connector.stale():
            self._cleanup_api = self._api()
        return self._cleanup_api


def _name(item: dict[str, Any]) -> str:
    name = (item.get("metadata") or {}).get("name") if isinstance(item.get("metadata"), dict) else None
    return name if isinstance(name, str) else ""

