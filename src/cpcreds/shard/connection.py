"""The shard's way to the hub: :class:`~cpcreds.shard.leases.LeaseAPI`\\ s on one namespace,
made through the same :class:`~cpcreds.fleet.hubclient.HubConnector` the fleet reads
ClusterProfiles with (a kubeconfig's exec user is run, bounded and refreshed there).

Each of the shard's threads keeps its own ``LeaseAPI`` (one caller at a time per instance) and asks
for a new one after a failure or once the connector's credential is stale.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..fleet.hubclient import HubConnector
from .leases import LeaseAPI

if TYPE_CHECKING:
    from ..fleet.hub import HubOptions

__all__ = ["LeaseConnection"]


class LeaseConnection:
    """Makes :class:`LeaseAPI`\\ s for the Leases of ``namespace`` on the hub ``hub`` says."""

    def __init__(self, hub: HubOptions, namespace: str) -> None:
        self.namespace = namespace
        kubeconfig = None if hub.kubeconfig is None else Path(hub.kubeconfig)
        self._connector = HubConnector(kubeconfig, hub.context, in_cluster=hub.in_cluster, timeout=hub.timeout)

    def api(self, current: LeaseAPI | None = None) -> LeaseAPI:
        """``current`` while its credential holds, else a new :class:`LeaseAPI`."""
        if current is not None and not self._connector.stale():
            return current
        from kubernetes import client

        made, _ = self._connector.connect()
        configuration = made.configuration
        # No urllib3 retries: a Lease write that hangs must end at the renew deadline, not be
        # sent again three times; conflicts and failures are retried by the caller, next tick.
        configuration.retries = False
        made.close()
        return LeaseAPI(client.ApiClient(configuration), self.namespace)

    def close(self) -> None:
        """Stop what the connector runs (a kubeconfig's exec plugin)."""
        self._connector.close()
