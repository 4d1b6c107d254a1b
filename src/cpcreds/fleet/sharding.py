"""A :class:`~cpcreds.Fleet`'s link to its :class:`~cpcreds.shard.Shard`: the fleet joins the
shard when it starts (starting it unless it runs already), rebalances its clusters on every
membership change (one rebalance at a time on the fleet's loop, changes arriving meanwhile make
one more after it), fences each fetch (none while this replica's Lease is stale or the key moved
away), and stops the shard when it closes, after its own tasks, releasing the Lease so the other
replicas take over at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .inventory import Change
    from .ownership import Ownership
    from .progress import SyncProgress

__all__ = ["ShardLink"]


class ShardLink:
    """Links ``shard`` to a fleet: ``ownership`` holds the fleet's standing profiles (who owns
    what), ``progress`` hears the shard's first claim (before it, this replica owns nothing)."""

    def __init__(self, shard: Any, ownership: Ownership, progress: SyncProgress) -> None:
        self.shard = shard
        self.ownership = ownership
        self.progress = progress
        self._loop: asyncio.AbstractEventLoop | None = None
        self._apply: Callable[[Change], None] | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._left = False
        self._rebalancing: asyncio.Task[None] | None = None
        self._rebalance_again = False

    def join(self, loop: asyncio.AbstractEventLoop, apply: Callable[[Change], None]) -> None:
        """Follow the shard's membership from now on: each change's moves go to ``apply`` on
        ``loop`` (the fleet's). Starts the shard unless it runs already."""
        self._loop, self._apply = loop, apply
        self._unsubscribe = self.shard.subscribe(self._membership_changed)
        if not self.shard.running:
            self.shard.start()
        self._membership_changed(self.shard.membership)

    def leave(self) -> None:
        """Follow the membership no more (the shard itself runs until :meth:`stop`)."""
        self._left = True
        if self._unsubscribe is not None:
            self._unsubscribe()

    def stop(self) -> None:
        """Stop the shard: its Lease is released."""
        self.shard.stop()

    def fenced(self, key: str) -> float | None:
        """How soon to look again if this replica may not fetch for ``key`` now, else None."""
        # Self-fencing: this replica's Lease is stale or the key moved; the rebalance under way
        # drops the cluster, or gives the key back, within a renew interval.
        shard = self.shard
        return shard.retry_interval if not shard.may_fetch(key) else None

    def tasks(self) -> list[asyncio.Task[None]]:
        """The rebalance running, if any (to cancel when the fleet closes)."""
        return [self._rebalancing] if self._rebalancing is not None else []

    # -- membership changes arrive on the shard's judge thread -----------------------------------

    def _membership_changed(self, _view: Any) -> None:
        loop = self._loop
        if loop is None or self._left:
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
        assert self._apply is not None
        while True:
            self._rebalance_again = False
            claiming = self.shard.claiming()
            self._apply(await self.ownership.reassign(self.shard))
            if claiming:
                self.progress.shard_claimed()
            if not self._rebalance_again:
                return
