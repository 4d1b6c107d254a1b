"""What serve does as its fleet's clusters and inventory change (:class:`ServeHooks`, the
fleet's :class:`~cpcreds.fleet.hooks.FleetHooks`): the status board, the kubeconfig writer, the
inventory problems (KEP-4322 duplicates too) and probes.

With ``--shard`` the fleet acts only on the profiles this replica owns, yet kubeconfigs hold no
credential, so every replica writes every profile's: the fleet's plan hook writes those this
replica owns, :meth:`ServeHooks.write_unowned` the others (resolved, never fetched).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import CredentialError
from ..fleet.hooks import FleetHooks

if TYPE_CHECKING:
    from ..fleet.cluster import FleetCluster
    from ..fleet.inventory import Change
    from ..fleet.members import MemberIndex
    from .probe import Prober

__all__ = ["ServeHooks"]

#: Where duplicate inventory members show among the inventory problems.
_DUPLICATES = "inventory members (KEP-4322)"


class ServeHooks(FleetHooks):
    """The fleet's hooks of one :class:`~cpcreds.serve.service.Service` (read through its public
    attributes: ``board``, ``writer``, ``engine``, ``fleet``, ``settings``)."""

    def __init__(self, service: Any) -> None:  # a Service (not imported: it imports this)
        self.service = service
        self.board = service.board
        #: Probes each cluster after a fetch (set with each engine: it probes with its credential).
        self.prober: Prober | None = None
        self.probe_interval = service.settings.probe_interval if service.settings.probe_path else 0.0
        self.listed = False  # the first listing was taken (the merged kubeconfig may be written)
        self._duplicates: dict[tuple[str, str], list[str]] = {}

    def changed(self, cluster: FleetCluster) -> None:
        self.board.put(cluster)  # the board shows the fleet's cluster itself, filed again

    def removed(self, cluster: FleetCluster) -> None:
        self.board.drop(cluster.key)

    def plan(self, key: str, plan: Any, profile: Any) -> None:
        service = self.service
        if service.writer is None:
            return
        service.writer.update(key, plan, profile)
        fleet = service.fleet
        ownership = fleet.ownership if fleet is not None else None
        if plan is None and ownership is not None and ownership.holds(key) and key not in ownership.owned:
            self.write_unowned(key)  # moved to another replica: its kubeconfig stays here

    def inventory(self, standing: Change, owned: Change) -> None:
        service, board = self.service, self.board
        self.listed = True
        for origin, problem in standing.problems.items():
            board.set_problem(origin, problem)
        fleet = service.fleet
        if fleet is not None and fleet.dedupe:
            duplicates = fleet.duplicates
            if duplicates != self._duplicates:
                self._duplicates = duplicates
                board.set_problem(_DUPLICATES, _duplicates_problem(duplicates, fleet.members))
        if service.writer is not None and owned is not standing:
            # Kubeconfigs hold no credential: every replica writes every profile's; the fleet's
            # plan hook writes those this replica owns, these are the others.
            for key in standing.deletes - owned.deletes:
                service.writer.update(key, None, None)
            for key in standing.upserts.keys() - owned.upserts.keys():
                self.write_unowned(key)

    def synced(self) -> None:
        self.board.synced = True

    async def probe(self, cluster: FleetCluster) -> Any:
        return await self.prober(cluster.profile) if self.prober is not None else None

    def write_unowned(self, key: str) -> None:
        """Write the kubeconfig of a profile another replica owns (resolved, never fetched), as
        the service's engine resolves it now (also after a reload: its plan may differ)."""
        service = self.service
        ownership = service.fleet.ownership if service.fleet is not None else None
        profile = ownership.profile(key) if ownership is not None else None
        if service.writer is None or service.engine is None or profile is None:
            return
        try:
            plan = service.engine.resolve(profile)
        except CredentialError:
            plan = None  # its owner shows why on its page; here there is nothing to write
        service.writer.update(key, plan, profile if plan is not None else None)


def _duplicates_problem(duplicates: dict[tuple[str, str], list[str]], index: MemberIndex) -> str:
    """One line naming each member with more than one profile and the profile acted on (or
    none, when the oldest tie); empty when there are none."""
    parts = []
    for (namespace, member), keys in sorted(duplicates.items()):
        standing = next((key for key in keys if index.stands(key)), None)
        chosen = f"serving {standing}" if standing else "serving none (the oldest tie)"
        parts.append(f"member {member!r} in {namespace or 'no namespace'} has {len(keys)} profiles ({', '.join(keys)}): {chosen}")
    return "; ".join(parts)[:2000]
