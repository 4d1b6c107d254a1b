"""A sorted container for serve's status board: items kept in order in blocks, so that adding
or removing one and reading from any point cost O(log N) (plus O(1) per item read) at 100,000
items, where one sorted list would shift every item on each insertion."""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterator
from typing import Any

__all__ = ["SortedIndex"]


class SortedIndex:
    """Items kept in order, in blocks of at most ``2 * _BLOCK``: adding or removing one costs a
    bisection and a move within one block (not a shift of all N, as ``insort`` into one list
    would at 100,000), reading from any point a bisection, then O(1) per item."""

    _BLOCK = 512
    __slots__ = ("_blocks", "_maxes", "_len")

    def __init__(self) -> None:
        self._blocks: list[list[Any]] = []
        self._maxes: list[Any] = []
        self._len = 0

    def __len__(self) -> int:
        return self._len

    @classmethod
    def of(cls, items: list[Any]) -> SortedIndex:
        """An index of ``items`` (sorted here: one C sort instead of N insertions)."""
        index = cls()
        items.sort()
        index._blocks = [items[i : i + cls._BLOCK] for i in range(0, len(items), cls._BLOCK)]
        index._maxes = [block[-1] for block in index._blocks]
        index._len = len(items)
        return index

    def add(self, item: Any) -> None:
        self._len += 1
        if not self._blocks:
            self._blocks.append([item])
            self._maxes.append(item)
            return
        i = min(bisect_left(self._maxes, item), len(self._blocks) - 1)
        block = self._blocks[i]
        insort(block, item)
        self._maxes[i] = block[-1]
        if len(block) > 2 * self._BLOCK:
            self._blocks[i : i + 1] = [block[: self._BLOCK], block[self._BLOCK :]]
            self._maxes[i : i + 1] = [block[self._BLOCK - 1], block[-1]]

    def remove(self, item: Any) -> None:
        i = bisect_left(self._maxes, item)
        if i == len(self._blocks):
            return
        block = self._blocks[i]
        j = bisect_left(block, item)
        if j == len(block) or block[j] != item:
            return
        del block[j]
        self._len -= 1
        if block:
            self._maxes[i] = block[-1]
        else:
            del self._blocks[i], self._maxes[i]

    def from_(self, item: Any, *, inclusive: bool) -> Iterator[Any]:
        """The items after ``item`` (and ``item`` itself when ``inclusive``), in order."""
        cut = bisect_left if inclusive else bisect_right
        i = cut(self._maxes, item)
        if i == len(self._blocks):
            return
        block = self._blocks[i]
        yield from block[cut(block, item) :]
        for block in self._blocks[i + 1 :]:
            yield from block
