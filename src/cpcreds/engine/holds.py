"""Who holds each plan: a plan's credential stays cached while a held binding (or its failover
route) uses it, and leaves the cache the moment its last holder is released, rather than waiting
for the cache to fill up (:meth:`~cpcreds.engine.entries.CredentialStore.drop_holds`)."""

from __future__ import annotations

__all__ = ["PlanHolds"]


class PlanHolds:
    """How many holders each plan key has. Not locked itself: the store's lock is held around
    every call."""

    __slots__ = ("_counts",)

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def add(self, keys: list[str]) -> None:
        """One more holder for each of ``keys``."""
        counts = self._counts
        for key in keys:
            counts[key] = counts.get(key, 0) + 1

    def drop(self, keys: list[str]) -> list[str]:
        """One holder less for each of ``keys``; the keys left without a holder."""
        counts, released = self._counts, []
        for key in keys:
            left = counts.get(key, 0) - 1
            if left > 0:
                counts[key] = left
            else:
                counts.pop(key, None)
                released.append(key)
        return released

    def clear(self) -> None:
        self._counts.clear()
