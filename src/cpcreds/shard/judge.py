"""The judge: turns what this replica has seen (:mod:`~cpcreds.shard.seen`: its own renewals,
the watch, the peers' Leases) into a :class:`Membership` whenever it changes (a peer seen,
expired or released; this replica fresh or not) and tells subscribers, from a thread of its own.
Who owns a key is then rendezvous hashing over the view's members (:mod:`~cpcreds.shard.rendezvous`).

It wakes at the next moment something could change (a peer's lease running out, this replica's
renewal or watch growing old, the end of its settling), so a change is judged when it happens,
not at the next tick. It also reopens a watch that went silent: a hub gone without closing the
connection would otherwise fence this replica until the read timed out.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from ..fleet.hub import problem_text
from ..logs import get_logger
from .overlap import Overlap
from .rendezvous import owner
from .seen import Seen
from .watcher import PeerWatcher

__all__ = ["Judge", "Membership"]

_log = get_logger("cpcreds.shard")


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


class Judge:
    """Judges ``seen`` for ``identity`` (announcing ``status_url``), tells :attr:`overlap` of
    every handover and each subscriber of every change; ``watcher`` is reopened when silent."""

    def __init__(self, seen: Seen, watcher: PeerWatcher, overlap: Overlap, *, identity: str, status_url: str) -> None:
        self.seen, self.watcher, self.overlap = seen, watcher, overlap
        self.identity, self.status_url = identity, status_url
        #: The latest view (written with ``seen.cond`` held).
        self.membership = Membership(identity, (), claiming=False, fresh=False, reason="started")
        #: Membership changes by reason (``joined``, ``expired``, ``released``, ``fresh``, ``stale``…).
        self.handovers: Counter[str] = Counter()
        self._subscribers: list[Callable[[Membership], None]] = []
        self._kicked_at = -math.inf  # when the judge last ended a silent watch

    def run(self) -> None:
        """The judge thread: judge, publish a change, sleep until the next moment that matters."""
        seen = self.seen
        deadline = seen.timings.renew_deadline
        while not seen.stopping.is_set():
            with seen.cond:
                now = time.monotonic()
                view = self._view(now)
                before = self.membership
                changed = (view.members, view.claiming, view.fresh) != (before.members, before.claiming, before.fresh)
                if changed:
                    self.membership = view
                    self._note_handover(now, before, view)
                    seen.cond.notify_all()
                wake = self._next_wake(now)
                # Every replica's renewals, this one's included, come through the watch: silent
                # for a renew deadline, it is broken (a hub gone without closing the connection)
                # and would fence this replica until its read timeout. Reopen it now.
                silent = now - seen.heard_at >= deadline and now - self._kicked_at >= deadline
                if silent and self.watcher.watching:
                    self._kicked_at = now
                    self.watcher.end()
            if changed:
                self.publish(view, before)
            with seen.cond:
                if not seen.stopping.is_set():
                    seen.cond.wait(max(0.001, wake - time.monotonic()))

    def stopped(self) -> None:
        """Publish the view of a replica leaving: not claiming, itself no longer a member."""
        before = self.membership
        self.membership = Membership(self.identity, tuple(m for m in before.members if m != self.identity), claiming=False, fresh=False, reason="stopped")
        self.publish(self.membership, before)

    def subscribe(self, callback: Callable[[Membership], None]) -> Callable[[], None]:
        """Call ``callback(membership)`` on every change (see ``Shard.subscribe``); returns an unsubscribe."""
        with self.seen.cond:
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self.seen.cond:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)

        return unsubscribe

    def publish(self, view: Membership, before: Membership) -> None:
        self.handovers[view.reason] += 1
        _log.info(
            "shard membership changed", reason=view.reason, members=len(view.members), claiming=view.claiming, was=len(before.members)
        )
        with self.seen.cond:
            subscribers = list(self._subscribers)
        for callback in subscribers:
            try:
                callback(view)
            except Exception as exc:  # noqa: BLE001 - one subscriber's bug must not stop the judge
                _log.warning("shard subscriber failed", error=problem_text(exc))

    def _view(self, now: float) -> Membership:
        seen = self.seen
        fresh = seen.fresh(now)
        claiming = fresh and now >= seen.settled_at
        live = {p.holder: p.status_url for p in seen.peers.values() if p.alive(now)}
        live.pop(self.identity, None)  # a Lease of ours left from before is not a peer
        if claiming:
            live[self.identity] = self.status_url
        before = self.membership
        gone = set(before.members) - set(live) - {self.identity}
        if set(live) - set(before.members) - {self.identity}:
            reason = "joined"
        elif gone:
            # Expired: its Lease is still held, only not renewed in time; otherwise it was
            # released (holder emptied) or its Lease deleted.
            reason = "expired" if gone & seen.holders() else "released"
        elif claiming != before.claiming:
            reason = "fresh" if claiming else "stale"
        else:
            reason = before.reason
        return Membership(self.identity, tuple(sorted(live)), claiming=claiming, fresh=fresh, reason=reason, status_urls=live)

    def _note_handover(self, now: float, before: Membership, view: Membership) -> None:
        """Tell :attr:`overlap` who may still mint the keys this change moves here (lock held)."""
        held = self.seen.holders()
        gone = {m: ("expired" if m in held else "released") for m in set(before.members) - set(view.members) - {self.identity}}
        remaining: dict[str, float] = {}
        for peer in self.seen.peers.values():
            if peer.alive(now):
                remaining[peer.holder] = max(remaining.get(peer.holder, 0.0), peer.dies_at() - now)
        self.overlap.handover(now, before.members, view.members, gone=gone, remaining=remaining)

    def _next_wake(self, now: float) -> float:
        seen, timings = self.seen, self.seen.timings
        moments = [now + timings.retry_interval, seen.renewed_at + timings.renew_deadline, seen.heard_at + timings.renew_deadline, seen.settled_at]
        moments += [p.dies_at() for p in seen.peers.values()]
        upcoming = [m for m in moments if m > now]
        return min(upcoming) if upcoming else now + timings.retry_interval
