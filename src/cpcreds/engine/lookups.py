"""The cache lookups of one engine by provider and result (``hit``, ``miss``, ``backoff``), as
``cpcreds_credential_cache_lookups_total`` shows them. A hit is the hottest path there is, so a
live entry counts its own hits in a plain int; what is counted here is every other lookup, and
the hits of entries that have left the cache."""

from __future__ import annotations

import collections
from collections.abc import Iterable

__all__ = ["LookupCounts"]


class LookupCounts:
    """(provider, result) -> lookups not held in live entries. Not locked itself: the store's
    lock is held around every call."""

    __slots__ = ("_counts",)

    def __init__(self) -> None:
        self._counts: collections.Counter[tuple[str, str]] = collections.Counter()

    def count(self, provider: str, result: str) -> None:
        self._counts[(provider, result)] += 1

    def retire(self, provider: str, hits: int) -> None:
        """Keep the ``hits`` of an entry of ``provider``'s that leaves the cache."""
        self._counts[(provider, "hit")] += hits

    def totals(self, live: Iterable[tuple[str, int]]) -> dict[tuple[str, str], int]:
        """Every lookup so far: these, and the hits of the ``live`` entries (provider, hits)."""
        counts = collections.Counter(self._counts)
        for provider, hits in live:
            if hits:
                counts[(provider, "hit")] += hits
        return dict(counts)
