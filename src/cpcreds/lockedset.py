"""A set that several threads add to and take from while one of them iterates it.

Used for what a long-lived object must reach when it stops or reports: the open watch responses of
a hub source (held strongly, to shut them down), the engines and fleets a metrics collector reads
at scrape time (held weakly, so a forgotten engine is not kept alive by its metrics).
"""

from __future__ import annotations

import threading
import weakref
from typing import Generic, TypeVar

__all__ = ["LockedSet"]

T = TypeVar("T")


class LockedSet(Generic[T]):
    """``add``/``discard`` from any thread; :meth:`snapshot` is a list to iterate without the lock
    (members added meanwhile are not in it). ``weak=True`` holds the members weakly."""

    __slots__ = ("_items", "_lock")

    def __init__(self, *, weak: bool = False) -> None:
        self._items: set[T] | weakref.WeakSet[T] = weakref.WeakSet() if weak else set()  # type: ignore[type-var]
        self._lock = threading.Lock()

    def add(self, item: T) -> None:
        with self._lock:
            self._items.add(item)

    def discard(self, item: T) -> None:
        with self._lock:
            self._items.discard(item)

    def snapshot(self) -> list[T]:
        with self._lock:
            return list(self._items)
