"""Garbage collection paced for serve, a process that builds 100k long-lived objects in its first
sync and then mostly keeps them.

With the default thresholds (700 allocations) the first sync ran a young collection every few
profiles and, as the survivors piled up, full collections scanning everything built so far: 38%
of a 10,000-profile start. So :class:`FirstSyncCollection` freezes what start-up built (modules,
config: never garbage), collects young objects rarely while the first sync builds state that
survives anyway, then freezes that state too and restores the thresholds, so later collections
scan only what changed since. Cycles are still collected; a frozen object is only never scanned
again.
"""

from __future__ import annotations

import gc

__all__ = ["FirstSyncCollection"]

#: Young-generation threshold while the first sync builds every profile's state.
_FIRST_SYNC_THRESHOLD = 50_000


class FirstSyncCollection:
    """:meth:`begin` when serve starts, :meth:`synced` once the first sync is done, :meth:`end`
    when serve ends (an in-process caller, such as a test, gets its collector back as it was)."""

    def __init__(self) -> None:
        self._thresholds = gc.get_threshold()

    def begin(self) -> None:
        self._thresholds = gc.get_threshold()
        gc.freeze()
        gc.set_threshold(_FIRST_SYNC_THRESHOLD, *self._thresholds[1:])

    def synced(self) -> None:
        gc.freeze()  # the first sync's state lives on: never scan it again
        gc.set_threshold(*self._thresholds)

    def end(self) -> None:
        gc.set_threshold(*self._thresholds)
        gc.unfreeze()
