"""serve's hub settings made into the objects they configure: the :class:`~cpcreds.HubOptions`
that the hub source and the shard share, and, with ``--shard``, this replica's
:class:`~cpcreds.Shard` (the fleet starts it and fences every fetch by it).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .settings import ServeSettings

if TYPE_CHECKING:
    from ..fleet.hub import HubOptions
    from ..shard import Shard

__all__ = ["hub_options", "make_shard", "status_url"]


def hub_options(settings: ServeSettings) -> HubOptions:
    """How serve reaches the hub (``--hub-kubeconfig`` or ``--in-cluster``, and what to watch)."""
    from ..fleet.hub import HubOptions

    return HubOptions(
        kubeconfig=settings.hub_kubeconfig,
        context=settings.hub_context,
        in_cluster=settings.in_cluster,
        namespaces=tuple(settings.namespaces),
        label_selector=settings.label_selector,
        timeout=settings.hub_timeout,
    )


def status_url(settings: ServeSettings, listening: tuple[str, int]) -> str:
    """Where peers redirect requests for this replica's profiles: ``--shard-status-url``, else
    the ``listening`` address (``POD_IP`` in place of an unspecified host such as 0.0.0.0)."""
    if settings.shard_status_url:
        return settings.shard_status_url
    host, port = listening
    if host in ("0.0.0.0", "::"):
        host = os.environ.get("POD_IP") or host
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def make_shard(settings: ServeSettings, listening: tuple[str, int]) -> Shard:
    """This replica's shard membership, from the ``--shard-*`` settings."""
    from ..shard import Shard

    return Shard(
        hub_options(settings),
        namespace=settings.shard_namespace,
        group=settings.shard_group,
        identity=settings.shard_identity,
        lease_duration=settings.shard_lease_duration,
        renew_deadline=settings.shard_renew_deadline,
        retry_interval=settings.shard_retry_interval,
        status_url=status_url(settings, listening),
    )
