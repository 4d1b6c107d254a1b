"""What one replica has seen of its shard group, on its own monotonic clock, and the one
condition that guards it: shared by the renewer, the peer watcher, the judge and the cleaner
(:mod:`~cpcreds.shard.membership` wires them).

One condition for all of it, as client-go's leader election keeps its observed record and
observed time under one lock: the judge must read a consistent picture (when this replica last
renewed, when the watch last spoke, the peers' Leases), and every writer notifies it, so a change
is judged at once rather than at the next tick.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any

__all__ = ["Peer", "Seen", "Timings"]


@dataclass(frozen=True)
class Timings:
    """client-go's leader-election knobs: ``lease_duration`` (how long peers wait for a
    renewal), ``renew_deadline`` (how long this replica acts without one: self-fencing) and
    ``retry_interval`` (how often it renews, and how long a newcomer waits to claim)."""

    lease_duration: float
    renew_deadline: float
    retry_interval: float


@dataclass
class Peer:
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


class Seen:
    """The shared picture; read and written with :attr:`cond` held (notify it after a write)."""

    def __init__(self, timings: Timings) -> None:
        self.timings = timings
        self.cond = threading.Condition()
        #: Set once the shard stops; every loop ends when it is.
        self.stopping = threading.Event()
        #: Peers' Leases by name (only those named for their holder).
        self.peers: dict[str, Peer] = {}
        #: Group Leases whose name is not their holder's (each logged once).
        self.ignored: set[str] = set()
        self.renewed_at = -math.inf  # monotonic start of the last successful renewal
        self.heard_at = -math.inf  # monotonic time the watch (or list) last delivered something
        self.settled_at = math.inf  # monotonic time from which this replica claims keys
        #: The last hub failure, in one line without secrets; ``""`` when the last request worked.
        self.problem = ""

    def heard(self, now: float) -> bool:
        """Whether the watch of the peers delivered something within the renew deadline."""
        return now - self.heard_at < self.timings.renew_deadline

    def fresh(self, now: float) -> bool:
        """Renewed and heard within the renew deadline, and not stopping (see ``Shard.fresh``)."""
        return not self.stopping.is_set() and now - self.renewed_at < self.timings.renew_deadline and self.heard(now)

    def claiming(self, now: float) -> bool:
        """Fresh, and settled one retry interval after becoming fresh."""
        return self.fresh(now) and now >= self.settled_at

    def holders(self) -> set[str]:
        """Every holder a peer Lease names now, alive or not."""
        return {peer.holder for peer in self.peers.values()}
