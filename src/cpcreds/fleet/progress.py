"""A :class:`~cpcreds.Fleet`'s first sync: done once the inventory has been listed, the shard
(if any) claims keys, and every cluster tracked has had its first fetch (or proved unusable)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .hooks import FleetHooks

__all__ = ["SyncProgress"]


class SyncProgress:
    """The first sync's bookkeeping; written on the fleet's loop, :attr:`done` read anywhere.
    ``claimed``: whether the fleet may own clusters already (False until a shard's first claim)."""

    def __init__(self, hooks: FleetHooks, *, claimed: bool) -> None:
        self.hooks = hooks
        #: Keys of the clusters whose first fetch is still to come.
        self.waiting: set[str] = set()
        self.listed = False
        self.claimed = claimed
        #: Set once the first sync is done (``FleetHooks.synced`` is called then).
        self.done = threading.Event()

    def track(self, key: str) -> None:
        """A new cluster: the sync waits for its first fetch."""
        self.waiting.add(key)

    def first_done(self, key: str) -> None:
        """``key``'s first fetch is over (or it went, or cannot be used)."""
        if key in self.waiting:
            self.waiting.discard(key)
            self.check()

    def inventory_listed(self) -> None:
        self.listed = True
        self.check()

    def shard_claimed(self) -> None:
        if not self.claimed:
            self.claimed = True
            self.check()

    def check(self) -> None:
        """Mark the sync done (once) if nothing is left to wait for."""
        if self.listed and self.claimed and not self.waiting and not self.done.is_set():
            # An emptied set keeps the table its largest size needed (4 MB at 100,000 keys).
            self.waiting = set()
            self.done.set()
            self.hooks.synced()
