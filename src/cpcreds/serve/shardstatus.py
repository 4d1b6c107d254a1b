"""What serve shows of its :class:`~cpcreds.shard.Shard` membership: readiness as a member, the
owner of a profile owned elsewhere (for redirects), and the ``shard`` section of ``/v1/clusters``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ShardStatus"]


@dataclass
class ShardStatus:
    """What serve shows of its :class:`~cpcreds.shard.Shard` membership (read from the HTTP
    thread): ``shard`` is the Shard, ``ownership`` the :class:`~cpcreds.fleet.ownership.Ownership`
    filter holding every standing profile of the inventory."""

    shard: Any
    ownership: Any

    def readiness(self) -> str | None:
        """Why this replica is not ready as a shard member (its Lease held by another replica,
        stale, or not yet claiming its profiles), or None."""
        if contended := self.shard.contended:
            return contended
        if not self.shard.fresh():
            return f"this replica's shard Lease {self.shard.namespace}/{self.shard.lease_name} is not renewed (stale); its profiles are left to the other replicas"
        if not self.shard.claiming():
            return "joining the shard: waiting one renew interval before taking profiles"
        return None

    def elsewhere(self, key: str) -> tuple[str, str] | None:
        """(owner, its status URL) when another live member owns the inventory's profile ``key``."""
        if not self.ownership.holds(key):
            return None
        view = self.shard.membership
        held = view.owner(key)
        if held is None or held == self.shard.identity:
            return None
        return held, view.status_urls.get(held, "")

    def section(self, owned: int) -> dict[str, Any]:
        """The ``shard`` section of ``/v1/clusters``: the shard's own (:meth:`~cpcreds.shard.Shard.section`) and this replica's share."""
        total = len(self.ownership)
        return {
            **self.shard.section(),
            "profiles": total,
            "owned": owned,
            "share": round(owned / total, 4) if total else 0.0,
        }
