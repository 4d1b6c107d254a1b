"""Which of the inventory's profiles this replica acts on, when a :class:`~cpcreds.shard.Shard`
splits the fleet across replicas.

Every replica keeps watching the whole inventory; this filter, after the KEP-4322 deduplication,
passes on only the profiles this replica owns. ``Fleet(shard=...)`` and ``cpcreds serve --shard``
both filter through one of these, so they split a fleet the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .inventory import Change
from .packed import unpacked

__all__ = ["Ownership"]


class Ownership:
    """Standing profiles in (a :class:`~cpcreds.fleet.members.Deduplicator`'s output), the changes
    of those this replica owns out.

    ``owns(key)`` says whether ``namespace/name`` is this replica's now (:meth:`cpcreds.shard.Shard.owns`:
    false for every key while this replica's Lease is stale). :meth:`apply` passes on a change's
    owned upserts, and the deletes of keys it passed on before; :meth:`rebalance` asks again for
    every profile held, after a membership change: a key that arrived is an upsert, one that moved
    away a delete (listed in ``Change.moved`` too). Problems pass through."""

    def __init__(self, owns: Callable[[str], bool]) -> None:
        self.owns = owns
        self._held: dict[str, tuple[dict[str, Any], str]] = {}
        self._out: set[str] = set()  # keys passed on as owned
        #: How long the last :meth:`reassign` took to compute who owns what (seconds).
        self.rebalance_seconds = 0.0

    @property
    def keys(self) -> list[str]:
        """Every standing profile's key, owned or not (what an assignment is computed over)."""
        return list(self._held)

    def holds(self, key: str) -> bool:
        """Whether ``key`` is a standing profile of the inventory (owned here or elsewhere)."""
        return key in self._held

    def profile(self, key: str) -> dict[str, Any] | None:
        """The standing profile ``key`` (owned here or elsewhere) as a new dict, or None."""
        held = self._held.get(key)
        return unpacked(held[0]) if held is not None else None

    def unowned(self) -> list[str]:
        """The standing profiles' keys this replica does not own."""
        return [key for key in self._held if key not in self._out]

    def __len__(self) -> int:
        return len(self._held)

    @property
    def owned(self) -> frozenset[str]:
        """The keys passed on as owned."""
        return frozenset(self._out)

    def apply(self, change: Change) -> Change:
        out = Change(problems=dict(change.problems))
        for key in change.deletes:
            self._held.pop(key, None)
            if key in self._out:
                self._out.discard(key)
                out.deletes.add(key)
                if key in change.superseded:
                    out.superseded.add(key)
        for key, held in change.upserts.items():
            self._held[key] = held
            self._settle(key, held, self.owns(key), out)
        return out

    def rebalance(self, owns: Callable[[str], bool] | None = None) -> Change:
        """What changes for this replica now that ownership changed: ``owns`` (default: the
        filter's own) is asked once per profile held. From an event loop with many profiles,
        compute an :class:`~cpcreds.shard.Assignment` in a thread and pass its lookup."""
        owns = owns or self.owns
        out = Change()
        for key, held in self._held.items():
            self._settle(key, held, owns(key), out, only_moves=True)
        return out

    async def reassign(self, shard: Any) -> Change:
        """:meth:`rebalance` after ``shard``'s membership changed: who owns each profile is
        computed in a thread (:meth:`~cpcreds.shard.Shard.assign`), so 100,000 profiles do not
        hold the event loop; nothing is owned while the shard does not claim keys. The
        computation's wall time is kept in :attr:`rebalance_seconds`."""
        claiming, identity = shard.claiming(), shard.identity
        assignment = await shard.assign(self.keys)
        self.rebalance_seconds = assignment.seconds
        owners = assignment.owners

        def owns(key: str) -> bool:
            # A key added while the assignment ran is asked of the shard itself.
            held = owners.get(key)
            return claiming and (held == identity if held is not None else bool(shard.owns(key)))

        return self.rebalance(owns)

    def _settle(self, key: str, held: tuple[dict[str, Any], str], owned: bool, out: Change, *, only_moves: bool = False) -> None:
        if owned:
            if key not in self._out or not only_moves:
                self._out.add(key)
                out.upserts[key] = held
        elif key in self._out:
            self._out.discard(key)
            out.deletes.add(key)
            out.moved.add(key)
