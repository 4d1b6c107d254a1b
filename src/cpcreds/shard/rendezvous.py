"""Rendezvous (highest-random-weight) hashing: which member owns a key.

Every member scores every key with a stable 64-bit hash of ``member + NUL + key`` (BLAKE2b,
8-byte digest: the same in every process and on every machine, unlike Python's ``hash()``, which
``PYTHONHASHSEED`` salts); the highest score wins, ties going to the greater member name. So a
key's owner depends only on the key and the member set: when a member joins, the only keys that
move are those it now wins (each moves to it, about 1/N of them), and when one leaves, only its
own keys move, each to its runner-up. Nothing moves between members that stay.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["Assignment", "assign", "owner", "weight"]


def _seed(member: str) -> hashlib._Hash:
    # The member's part of the hash, reused for every key (copying it is cheaper than rehashing).
    seeded = hashlib.blake2b(digest_size=8)
    seeded.update(member.encode() + b"\0")
    return seeded


def weight(member: str, key: str) -> int:
    """The member's score for ``key`` (an unsigned 64-bit integer, the same in every process)."""
    hashed = _seed(member)
    hashed.update(key.encode())
    return int.from_bytes(hashed.digest(), "big")


def owner(key: str, members: Iterable[str]) -> str | None:
    """The member that owns ``key`` among ``members``; ``None`` when there are none."""
    best: tuple[int, str] | None = None
    for member in members:
        scored = (weight(member, key), member)
        if best is None or scored > best:
            best = scored
    return None if best is None else best[1]


@dataclass(frozen=True)
class Assignment:
    """Who owns each key: ``owners`` maps every key given to its member (none when ``members``
    is empty); ``seconds`` is how long computing it took (wall time, for the rebalance metric)."""

    members: tuple[str, ...]
    owners: Mapping[str, str] = field(repr=False)
    seconds: float

    @classmethod
    def of(cls, keys: Iterable[str], members: Iterable[str]) -> Assignment:
        """The owner of every key among ``members``: :func:`assign`."""
        return assign(keys, members)

    def owned_by(self, member: str) -> frozenset[str]:
        """The keys ``member`` owns."""
        return frozenset(key for key, held in self.owners.items() if held == member)

    def shares(self) -> dict[str, int]:
        """How many keys each member owns (every member listed, with 0 when it owns none)."""
        counts = dict.fromkeys(self.members, 0)
        for held in self.owners.values():
            counts[held] += 1
        return counts


def assign(keys: Iterable[str], members: Iterable[str]) -> Assignment:
    """The owner of every key among ``members`` (duplicates in either are ignored).

    Pure and CPU-bound (about a microsecond per key and member): a caller on an event loop runs
    it in a thread (:meth:`cpcreds.shard.Shard.assign` does)."""
    started = time.perf_counter()
    names = tuple(sorted(set(members)))
    seeds = [(_seed(member), member) for member in names]
    owners: dict[str, str] = {}
    if seeds:
        for key in keys:
            data = key.encode()
            best, best_member = -1, ""
            for seeded, member in seeds:
                hashed = seeded.copy()
                hashed.update(data)
                score = int.from_bytes(hashed.digest(), "big")
                # Members are sorted, so ">=" gives a tie to the greater name, as owner() does.
                if score >= best:
                    best, best_member = score, member
            owners[key] = best_member
    return Assignment(members=names, owners=owners, seconds=time.perf_counter() - started)
