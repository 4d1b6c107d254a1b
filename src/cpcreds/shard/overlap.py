"""The brief overlap a handover allows: a key that moved to this replica while its previous owner
might still be minting it. Bounded (the window below) and counted (each fetch inside it).

A key moves here for one of three reasons, each with its own window, from the handover as seen
here (the local monotonic clock):

- ``released``: its owner emptied its Lease's holder after cancelling its work: nothing overlaps.
- ``expired``: its owner's Lease was not renewed for ``leaseDurationSeconds``; it fenced itself
  ``renew_deadline`` after its last renewal started, so it stopped before: nothing overlaps.
- ``joined``: this replica started claiming (it joined, or came back fresh) and wins the key from a
  live owner, which lets go once it sees this replica's Lease, and at the latest when its own Lease
  goes stale: the window is the owner's remaining lease, capped at ``renew_deadline``
  (self-fencing: a replica that hears nothing for that long stops).

The counting is kept here, with the ownership decision: :meth:`cpcreds.shard.Shard.may_fetch` asks
before every fetch; nothing in the fetching code knows about it.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from .rendezvous import owner

__all__ = ["Overlap", "REASONS"]

#: Why a key moved here (the ``reason`` label of ``cpcreds_shard_overlap_fetches_total``).
REASONS = ("joined", "expired", "released")


@dataclass(frozen=True)
class _Handover:
    """One membership change that moved keys here: who owned what before and after, and until
    when (local monotonic) each previous owner might still mint the keys it lost here."""

    at: float
    before: tuple[str, ...]
    after: tuple[str, ...]
    until: dict[str, float]
    reasons: dict[str, str]

    def closes(self) -> float:
        return max(self.until.values(), default=self.at)


class Overlap:
    """Overlap windows and the fetches counted in them, for the replica ``identity``.

    ``fetches`` counts, by reason, each fetch of a key that moved here while its previous owner
    might still mint it; ``bound`` is the longest window the latest handover into this replica
    opened (seconds; 0 when no key came from a live owner), never more than ``renew_deadline``;
    ``latest`` is the most seconds after its handover at which a counted fetch happened (never
    more than its window). Thread-safe: handovers come from the judge thread, fetches from any."""

    def __init__(self, identity: str, renew_deadline: float) -> None:
        self.identity, self.renew_deadline = identity, renew_deadline
        self.fetches: Counter[str] = Counter({reason: 0 for reason in REASONS})
        self.bound = 0.0
        self.latest = 0.0
        self._open: list[_Handover] = []  # newest last; only those with a window still open
        self._lock = threading.Lock()

    def handover(self, now: float, before: Iterable[str], after: Iterable[str], *, gone: dict[str, str], remaining: dict[str, float]) -> None:
        """Note a membership change at ``now``: ``before`` and ``after`` are the members taking
        keys; ``gone`` says why each member that left did (``expired`` or ``released``);
        ``remaining`` is each live peer's remaining lease as judged here (seconds)."""
        before, after = tuple(before), tuple(after)
        if self.identity not in after:
            with self._lock:
                self._open.clear()  # nothing is owned here now; what comes back comes anew
            return
        until: dict[str, float] = {}
        reasons: dict[str, str] = {}
        windows = [0.0]
        for previous in before:
            if previous == self.identity:
                continue
            if previous in gone:
                # Released after stopping, or expired after fencing itself: closed already.
                reasons[previous], until[previous] = gone[previous], now
            elif self.identity not in before:
                # This replica won keys from a live owner: it may mint them until it sees our
                # Lease, or its own goes stale.
                window = min(max(0.0, remaining.get(previous, self.renew_deadline)), self.renew_deadline)
                reasons[previous], until[previous] = "joined", now + window
                windows.append(window)
        if not reasons:
            return
        moved = _Handover(now, before, after, until, reasons)
        with self._lock:
            self.bound = max(windows)
            self._prune(now)
            # Kept even with its window closed while an older one is open: a key it brought
            # here must be judged by it (closed: no count), not by the older one.
            if self._open or moved.closes() > now:
                self._open.append(moved)

    def fetched(self, key: str, now: float) -> None:
        """Count a fetch of ``key`` (owned here) at ``now`` if its previous owner might still mint it."""
        with self._lock:
            self._prune(now)
            for handover in reversed(self._open):
                mine = owner(key, handover.after) == self.identity
                previous = owner(key, handover.before)
                if not mine or previous is None or previous == self.identity:
                    continue
                # The newest handover that brought the key here decides; past its window, no count.
                if previous in handover.until and now < handover.until[previous]:
                    self.fetches[handover.reasons[previous]] += 1
                    self.latest = max(self.latest, now - handover.at)
                return

    def _prune(self, now: float) -> None:
        """Drop the oldest handovers whose windows have closed (lock held)."""
        while self._open and self._open[0].closes() <= now:
            self._open.pop(0)
