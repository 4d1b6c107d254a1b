"""Which clusters a :class:`~cpcreds.Fleet` tracks: the inventory's changes come in (after the
KEP-4322 deduplication and, with a shard, the ownership filter), each profile is bound through
the engine, a new or changed binding goes to the :class:`~cpcreds.fleet.keeper.Keeper`, and a
cluster that leaves is disengaged, its credential dropped from the engine's cache.

Every method runs on the fleet's loop; each change costs O(1) per profile it names (one resolve,
one task at most), never a scan of the fleet.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import CredentialError, NoMatchingProvider
from ..logs import get_logger, redact_text
from .cluster import FleetCluster, Updated, holds_clients, retire
from .health import is_healthy
from .members import Deduplicator
from .packed import PackedProfile, packed, unpacked

if TYPE_CHECKING:
    from .inventory import Change
    from .keeper import Keeper
    from .ownership import Ownership
    from .parts import FleetParts

__all__ = ["Tracker"]

_log = get_logger("cpcreds.fleet")


class Tracker:
    """Keeps ``parts.clusters`` (the fleet's, by ``namespace/name``, shared with the keeper) and
    the inventory's :attr:`problems` by where, both written on the fleet's loop under
    ``parts.lock`` (other threads read them under it). ``dedupe``: act on one profile per KEP-4322 member; ``ownership``:
    act only on the profiles this replica owns. ``owned_profiles``: the source never changes a
    profile once sent, so the engine may keep it as it is."""

    def __init__(self, parts: FleetParts, keeper: Keeper, *, dedupe: bool, ownership: Ownership | None, owned_profiles: bool) -> None:
        self.parts, self.keeper = parts, keeper
        self.dedupe = dedupe
        self.ownership = ownership
        self.owned_profiles = owned_profiles
        self.clusters = parts.clusters
        self.problems: dict[str, str] = {}
        self.members = Deduplicator()

    async def watch(self, source: Any) -> None:
        """Run ``source`` (``async run(emit, listed)``) into this tracker until cancelled; a
        source that fails shows as the problem ``source`` and the fleet stays up."""
        try:
            await source.run(self.apply, self.parts.progress.inventory_listed)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a source's bug: shown, and the fleet stays up
            problem = redact_text(f"the inventory source stopped: {type(exc).__name__}: {exc}")
            with self.parts.lock:
                self.problems["source"] = problem
            _log.error("inventory source stopped", error=problem)

    def apply(self, change: Change) -> None:
        """Take one change of the inventory as the source sent it."""
        with self.parts.lock:
            self.problems.update(change.problems)
        for origin, problem in change.problems.items():
            if problem:
                _log.warning("inventory problem", origin=origin, problem=problem)
        if self.dedupe:
            with self.parts.lock:  # the index is read by duplicates from other threads
                change = self.members.apply(change)
        standing = change
        if self.ownership is not None:
            change = self.ownership.apply(change)
        self.apply_owned(change)
        self.parts.hooks.inventory(standing, change)

    def apply_owned(self, change: Change) -> None:
        """Take a change of the profiles this fleet acts on (standing, and owned with a shard)."""
        for key in change.deletes:
            self._remove(key, "moved" if key in change.moved else "duplicate" if key in change.superseded else "deleted")
        for key, (profile, origin) in change.upserts.items():
            self.upsert(key, profile, origin)
        self.parts.progress.check()

    def rebind_all(self) -> None:
        """Resolve every cluster again through the keeper's (new) engine."""
        for cluster in list(self.clusters.values()):
            self.upsert(cluster.key, cluster.packed_profile, cluster.origin, rebind=True)
        self.keeper.scheduler.compact()  # every fetch planned on the old bindings is void now

    def upsert(self, key: str, profile: Mapping[str, Any], origin: str, *, rebind: bool = False) -> None:
        """Take ``profile`` for ``key``: O(1) for the fleet (one resolve, one task at most).
        ``rebind``: resolve it again through the current engine even if nothing changed."""
        profile = packed(profile)  # held packed; decoded once below
        cluster = self.clusters.get(key)
        if cluster is not None and not rebind:
            if cluster.packed_profile is profile or cluster.packed_profile == profile:
                cluster.packed_profile, cluster.origin = profile, origin
                return
        if cluster is None:
            cluster = FleetCluster(key, profile, origin)
            with self.parts.lock:
                self.clusters[key] = cluster
            self.parts.progress.track(key)
        cluster.packed_profile, cluster.origin = profile, origin
        plain = unpacked(profile)
        cluster.healthy = is_healthy(plain)
        old = cluster.binding
        keeper, gate = self.keeper, self.parts.gate
        try:
            # A profile decoded here is nobody else's: the engine may keep parts of it as they are.
            binding = keeper.engine.bind(plain, owned=self.owned_profiles or type(profile) is PackedProfile, hold=True)
        except CredentialError as exc:
            self._unusable(cluster, "unmatched" if isinstance(exc, NoMatchingProvider) else "invalid", str(exc))
            return
        if not rebind and old is not None and binding.plan == old.plan:
            # Same endpoint and provider: same binding and clients; only the gate may change.
            binding.release()  # the old binding holds the plan already
            if gate.decide(cluster) == "stay":
                self.parts.events.emit(cluster, Updated(cluster, False))
            self.parts.hooks.plan(key, old.plan, plain)
            self.parts.hooks.changed(cluster)
            return
        cluster.replacing = cluster.engaged
        if old is not None:
            if cluster.engaged:  # its clients stay in use until the new binding's first answer
                retire(cluster)
                cluster.retired = old
            else:
                old.release()
        cluster.binding, cluster.state, cluster.last_error, cluster.failures = binding, "pending", None, 0
        cluster.expires_at = cluster.next_refresh = cluster.answered_by = cluster.answered_plan = cluster.held_credential = None
        cluster.credentialed = False
        cluster.next_probe_at = 0.0
        self.parts.hooks.plan(key, binding.plan, plain)
        self.parts.hooks.changed(cluster)
        keeper.keep(cluster, binding)

    def _unusable(self, cluster: FleetCluster, state: str, message: str) -> None:
        self.keeper.scheduler.cancel(cluster)
        retire(cluster)
        if cluster.binding is not None:
            cluster.binding.release()
        cluster.answered_plan = cluster.held_credential = None
        cluster.binding, cluster.state, cluster.last_error = None, state, redact_text(message)
        cluster.expires_at = cluster.next_refresh = cluster.answered_by = None
        _log.warning("profile not usable", profile=cluster.key, state=state, error=cluster.last_error)
        if cluster.engaged:
            self.parts.events.disengage(cluster, "unusable")
        self.parts.hooks.plan(cluster.key, None, None)
        self.parts.hooks.changed(cluster)
        self.parts.progress.first_done(cluster.key)

    def _remove(self, key: str, reason: str) -> None:
        cluster = self.clusters.get(key)
        if cluster is None:
            return
        with self.parts.lock:
            del self.clusters[key]
        self.keeper.scheduler.cancel(cluster)
        # A gone cluster's credential goes: out of the engine's cache (unless a live profile
        # shares its plan) and off the cluster object, which a program may keep.
        retire(cluster)
        if cluster.binding is not None:
            cluster.binding.release()
        cluster.answered_plan = cluster.held_credential = None
        self.parts.progress.first_done(key)
        events = self.parts.events
        if cluster.engaged:
            events.disengage(cluster, reason)
        elif holds_clients(cluster):
            events.emit(cluster, None)  # close what a program took from a cluster never engaged
        self.parts.hooks.removed(cluster)
        self.parts.hooks.plan(key, None, None)
