"""What a program built around a :class:`~cpcreds.Fleet` hears of its bookkeeping, beyond the
engage/update/disengage events: every change of a cluster's state, plan and inventory. ``cpcreds
serve`` is such a program (its status board, kubeconfig writer and probes listen here).

Every method is called on the fleet's event loop, in the order things happen, and must return
quickly (a probe is awaited, within the time the program gives it). The defaults do nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..config.access import AccessPlan
    from .cluster import FleetCluster
    from .inventory import Change

__all__ = ["FleetHooks"]


class FleetHooks:
    """Subclass and override what you need; pass an instance as ``Fleet(hooks=...)``."""

    #: Seconds between two probes of a cluster (see :meth:`probe`); 0: no probes.
    probe_interval: float = 0.0

    def changed(self, cluster: FleetCluster) -> None:
        """``cluster`` is new, or its state, times, plan or profile changed."""

    def removed(self, cluster: FleetCluster) -> None:
        """``cluster`` left the fleet (deleted, a duplicate now, or owned by another replica)."""

    def plan(self, key: str, plan: AccessPlan | None, profile: dict[str, Any] | None) -> None:
        """The profile ``key`` resolved to ``plan`` (set or changed); both None when it is gone
        or cannot be used."""

    def inventory(self, standing: Change, owned: Change) -> None:
        """An inventory change was taken: ``standing`` after KEP-4322 deduplication (with its
        ``problems``), ``owned`` what of it this replica acts on (the same without a shard)."""

    def synced(self) -> None:
        """The fleet's first sync is done (see ``Fleet.synced``)."""

    async def probe(self, cluster: FleetCluster) -> Any:
        """Probe ``cluster`` with its fresh credential; the answer is kept as ``cluster.probe``.
        Called after a successful fetch, at most every :attr:`probe_interval` seconds."""
        return None
