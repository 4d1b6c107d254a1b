"""KEP-4322's inventory members: ClusterProfiles in one namespace (an inventory) with the same
non-empty ``multicluster.x-k8s.io/inventory-member-id`` label describe one cluster.

A consumer deduplicates among the profiles it selects, as the KEP prescribes: it acts on the
oldest profile of a member (``metadata.creationTimestamp``) and on none of them when the oldest
tie (no profile is "the" cluster then, and guessing could hand one cluster's workload to
another's credential). Times are compared as instants. A profile without a creationTimestamp (a
file), or with one that is not an RFC 3339 time, counts as newer than any with one; a member
whose profiles all lack one is a tie.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..credential import parse_rfc3339
from .inventory import Change
from .packed import PackedProfile

__all__ = ["MEMBER_ID_LABEL", "MemberIndex", "Deduplicator", "member_of"]

#: The label a cluster manager puts on each member cluster's ClusterProfile (KEP-4322).
MEMBER_ID_LABEL = "multicluster.x-k8s.io/inventory-member-id"

Member = tuple[str, str]  # (namespace, member id)


def member_of(profile: Mapping[str, Any]) -> Member | None:
    """(namespace, member id) of a profile that carries a non-empty member id label, else None."""
    meta = profile.get("metadata")
    if not isinstance(meta, Mapping):
        return None
    labels = meta.get("labels")
    member = labels.get(MEMBER_ID_LABEL) if isinstance(labels, Mapping) else None
    if not isinstance(member, str) or not member:
        return None
    namespace = meta.get("namespace")
    return (namespace if isinstance(namespace, str) else "", member)


def _created(profile: Mapping[str, Any]) -> float | None:
    created = (profile.get("metadata") or {}).get("creationTimestamp")
    if not isinstance(created, str) or not created:
        return None
    # Compared as instants, not as text: a file may write a fraction or an offset
    # ("...05.5Z", "...+02:00"), which sort wrongly as text; an API server writes whole seconds in UTC.
    try:
        return parse_rfc3339(created).timestamp()
    except ValueError:  # not a time: as a profile without one
        return None


class MemberIndex:
    """Which profiles stand for their cluster. ``update`` and ``remove`` return the keys whose
    standing may have changed; :meth:`stands` answers for one key."""

    def __init__(self) -> None:
        self._member: dict[str, Member] = {}  # key -> its member
        self._keys: dict[Member, dict[str, float | None]] = {}  # member -> {key: creationTimestamp}
        self._winner: dict[Member, str | None] = {}
        # Members with more than one profile, kept as keys come and go, so that reading the
        # duplicates after each change costs what there is to report, never a scan of the fleet.
        self._crowded: set[Member] = set()

    def update(self, key: str, profile: Mapping[str, Any]) -> set[str]:
        touched = self.remove(key)
        if type(profile) is PackedProfile:
            # Most profiles of a fleet carry no member id: tell without decoding them.
            if not profile.mentions(MEMBER_ID_LABEL):
                return touched | {key}
            profile = profile.unpack()
        member = member_of(profile)
        if member is None:
            return touched | {key}
        self._member[key] = member
        keys = self._keys.setdefault(member, {})
        keys[key] = _created(profile)
        if len(keys) > 1:
            self._crowded.add(member)
        self._settle(member)
        return touched | set(self._keys[member])

    def remove(self, key: str) -> set[str]:
        member = self._member.pop(key, None)
        if member is None:
            return {key}
        keys = self._keys[member]
        del keys[key]
        if len(keys) <= 1:
            self._crowded.discard(member)
        if not keys:
            del self._keys[member], self._winner[member]
            return {key}
        self._settle(member)
        return {key, *keys}

    def _settle(self, member: Member) -> None:
        keys = self._keys[member]
        dated = [(created, key) for key, created in keys.items() if created is not None]
        if len(keys) == 1:
            self._winner[member] = next(iter(keys))
        elif not dated:
            self._winner[member] = None
        else:
            oldest = min(created for created, _ in dated)
            first = [key for created, key in dated if created == oldest]
            self._winner[member] = first[0] if len(first) == 1 else None

    def stands(self, key: str) -> bool:
        """Whether ``key`` is acted on: it has no member id, or it is its member's one oldest."""
        member = self._member.get(key)
        return member is None or self._winner.get(member) == key

    def duplicates(self) -> dict[Member, list[str]]:
        """Every member with more than one profile: (namespace, member id) -> keys, sorted."""
        return {member: sorted(self._keys[member]) for member in self._crowded}

    def count(self) -> int:
        """Profiles that do not stand because another profile describes their cluster."""
        return sum(len(self._keys[member]) - (self._winner.get(member) is not None) for member in self._crowded)


class Deduplicator:
    """A source's changes in, the changes of the profiles that stand out: a profile that stops
    standing (deleted, or another profile of its member now stands) is a delete (in
    ``superseded`` when it is still there); one that starts standing is an upsert. Problems pass
    through. ``Fleet`` and ``cpcreds serve`` both filter their inventory through one of these."""

    def __init__(self) -> None:
        self.index = MemberIndex()
        # The profiles of inventory members, to pass on when their standing changes; a profile
        # without a member id always stands, is passed on as it comes and never held here.
        self._held: dict[str, tuple[dict[str, Any], str]] = {}
        self._out: set[str] = set()  # keys passed on as standing

    def apply(self, change: Change) -> Change:
        touched: set[str] = set()
        for key in change.deletes:
            self._held.pop(key, None)
            touched |= self.index.remove(key)
        for key, held in change.upserts.items():
            touched |= self.index.update(key, held[0])
            if key in self.index._member:
                self._held[key] = held
            else:
                self._held.pop(key, None)
        out = Change(problems=dict(change.problems))
        for key in touched:
            held = change.upserts.get(key) or self._held.get(key)
            if held is not None and self.index.stands(key):
                if key not in self._out or key in change.upserts:
                    out.upserts[key] = held
                    self._out.add(key)
            elif key in self._out:
                self._out.discard(key)
                out.deletes.add(key)
                if held is not None:
                    out.superseded.add(key)
        return out
