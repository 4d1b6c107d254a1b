"""What the workers of a :class:`~cpcreds.Fleet` share: made once by the fleet and handed whole
to its :class:`~cpcreds.fleet.tracker.Tracker` (which clusters there are) and its
:class:`~cpcreds.fleet.keeper.Keeper` (each one's credential), so that both work on the same
clusters and report to the same gate, events, first-sync progress and hooks.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .cluster import FleetCluster
    from .events import EventFanout
    from .gate import Gate
    from .hooks import FleetHooks
    from .progress import SyncProgress

__all__ = ["FleetParts"]


@dataclass(frozen=True, slots=True)
class FleetParts:
    """``clusters``: every cluster the fleet tracks, by ``namespace/name``, written on the fleet's
    loop under ``lock`` (other threads read it under the lock); ``gate`` decides engagement,
    ``events`` tells the program, ``progress`` follows the first sync and ``hooks`` hears every
    change."""

    lock: threading.RLock
    clusters: dict[str, FleetCluster]
    gate: Gate
    events: EventFanout
    progress: SyncProgress
    hooks: FleetHooks
