"""One cluster of a :class:`~cpcreds.Fleet` (:class:`FleetCluster`) and the events a fleet
sends about it (:class:`Engaged`, :class:`Updated`, :class:`Disengaged`)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ..engine.binding import Binding
from ..errors import CredentialError
from .packed import packed, unpacked

__all__ = ["FleetCluster", "FleetEvent", "Engaged", "Updated", "Disengaged", "CLUSTER_STATES", "holds_clients", "take_clients", "close_now", "retire"]

#: pending: no credential yet; ready: the credential works; failing: the last fetch failed (see
#: ``last_error``; an engaged cluster stays engaged while its credential is still valid);
#: unhealthy: ``ControlPlaneHealthy`` is not True; unmatched: no configured provider fits the
#: profile; invalid: the profile cannot be used.
CLUSTER_STATES = ("pending", "ready", "failing", "unhealthy", "unmatched", "invalid")


#: Guards every cluster's client bookkeeping: held only to look up or file a client (never
#: while one is built), so one lock for the fleet costs nothing and spares one per cluster.
_CLIENTS_LOCK = threading.Lock()


class _Held:
    """The cluster's binding as the adapters' ``Binder``: every client shares it."""

    __slots__ = ("binding",)

    def __init__(self, binding: Binding) -> None:
        self.binding = binding

    def bind(self, profile: Any) -> Binding:
        return self.binding


class FleetCluster:
    """A cluster of the fleet: its ClusterProfile, its state, and clients that stay fresh.

    Read its attributes from any thread. The clients it hands out are built once per binding
    (per event loop for the asyncio ones) and shared: call ``api_client()`` whenever a client is
    needed rather than keeping one across an :class:`Updated` event with ``clients_changed``
    (the old ones are closed then) or a :class:`Disengaged` one (all are closed before it is sent).
    """

    # Slotted: one per cluster, 100,000 in a large fleet. ``packed_profile`` and the last six
    # slots are the fleet's bookkeeping, written by its tracker, keeper, gate and scheduler (so
    # not private to this module); a program may read them and must not change them, as for
    # every attribute here.
    __slots__ = (
        "key", "packed_profile", "origin", "state", "last_error", "failures", "engaged", "healthy", "binding",
        "expires_at", "next_refresh", "last_success", "answered_by", "probe",
        "_clients", "_stale", "credentialed", "answered_plan", "held_credential", "due_at", "replacing", "next_probe_at",
        "retired",
    )  # fmt: skip

    def __init__(self, key: str, profile: Mapping[str, Any], origin: str = "") -> None:
        #: ``namespace/name`` (``name`` for a profile without a namespace).
        self.key = key
        #: The ClusterProfile as the fleet holds it: packed (see :mod:`cpcreds.fleet.packed`)
        #: unless JSON would not carry it unchanged. Read :attr:`profile` instead.
        self.packed_profile = packed(profile)
        #: Where the inventory found it: the file, or the hub and namespace.
        self.origin = origin
        #: One of :data:`CLUSTER_STATES`.
        self.state = "pending"
        #: Why the last fetch failed, or why the profile is unusable (redacted; None when fine).
        self.last_error: str | None = None
        #: Failed fetches in a row.
        self.failures = 0
        #: Whether the program was told it is engaged (and not disengaged since).
        self.engaged = False
        #: Whether its ``ControlPlaneHealthy`` condition is True.
        self.healthy = False
        #: The profile's handle on the engine (None while the profile is unusable).
        self.binding: Binding | None = None
        # Clients handed out, and those of an older binding still to close: None until the
        # first (most clusters of a large fleet never build one).
        self._clients: dict[Any, Any] | None = None
        self._stale: list[tuple[Any, Any]] | None = None
        #: Whether the current binding has answered once (the fleet's gate reads it).
        self.credentialed = False
        #: When the held credential expires (epoch seconds; None: no expiry, or none held).
        self.expires_at: float | None = None
        #: When the fleet fetches again (epoch seconds; None: not planned, the credential does
        #: not expire).
        self.next_refresh: float | None = None
        #: When a fetch last brought a new credential (epoch seconds). Kept across a changed
        #: profile until the new plan's first answer.
        self.last_success: float | None = None
        #: The provider whose credential is held: :attr:`provider` unless the profile failed
        #: over to another (``failover: true``); None before the first answer.
        self.answered_by: str | None = None
        #: What the fleet's probe found last (see ``FleetHooks.probe``), or None.
        self.probe: Any = None
        #: The plan that answered and its credential (both let go when the cluster leaves the
        #: fleet, as the engine drops the credential; never shown in ``repr``).
        self.answered_plan: Any = None
        self.held_credential: Any = None
        #: When the fleet's next fetch is due (loop time; None: none planned).
        self.due_at: float | None = None
        #: Whether the first answer of a new binding replaces an engaged one's clients.
        self.replacing = False
        #: When the fleet probes next (loop time).
        self.next_probe_at = 0.0
        #: The binding a new one replaces while the clients built on it may still be in use:
        #: released (its credential dropped from the engine's cache) once they are closed.
        self.retired: Binding | None = None

    @property
    def profile(self) -> dict[str, Any]:
        """The ClusterProfile as the inventory holds it now, as a new dict on every read (the
        fleet holds it packed: read it once and keep the dict rather than reading field after
        field through this property)."""
        return unpacked(self.packed_profile)

    @property
    def namespace(self) -> str:
        """The profile's namespace ("" for none)."""
        return self.key.rpartition("/")[0]

    @property
    def name(self) -> str:
        """The profile's name."""
        return self.key.rpartition("/")[2]

    @property
    def provider(self) -> str | None:
        """The access provider of the profile's preferred plan."""
        return self.binding.plan.provider if self.binding is not None else None

    @property
    def server(self) -> str | None:
        """The cluster's API server URL (the preferred plan's)."""
        return self.binding.plan.cluster.server if self.binding is not None else None

    def _binding(self) -> Binding:
        binding = self.binding
        if binding is None:
            raise CredentialError(f"cluster {self.key} has no usable profile: {self.last_error or 'not resolved'}")
        return binding

    def _shared(self, kind: Any, build: Any) -> Any:
        binding = self._binding()
        with _CLIENTS_LOCK:
            held = self._clients.get(kind) if self._clients is not None else None
            if held is not None and held[0] is binding:
                return held[1]
        client = build(binding)
        with _CLIENTS_LOCK:
            extra, client = self._keep_client(kind, binding, client)
        if extra is not None:
            close_now(extra)
        return client

    async def _ashared(self, kind: Any, build: Any) -> Any:
        binding = self._binding()
        with _CLIENTS_LOCK:
            held = self._clients.get(kind) if self._clients is not None else None
            if held is not None and held[0] is binding:
                return held[1]
        client = await build(binding)
        with _CLIENTS_LOCK:
            extra, client = self._keep_client(kind, binding, client)
        if extra is not None:
            await extra.close()
        return client

    def _keep_client(self, kind: Any, binding: Binding, client: Any) -> tuple[Any, Any]:
        """Hold ``client`` for ``kind`` (under the lock): returns (a client to close, the one to
        use). A client of an older binding is kept aside until the fleet closes it with its
        :class:`Updated` or :class:`Disengaged` event: the program may still be using it."""
        if self._clients is None:
            self._clients = {}
        held = self._clients.get(kind)
        if held is not None and held[0] is binding:
            return client, held[1]  # another caller was first: keep one
        if held is not None:
            self._stale = [*(self._stale or ()), (kind, held[1])]
        self._clients[kind] = (binding, client)
        return None, client

    def api_client(self) -> Any:
        """A ``kubernetes.client.ApiClient`` (see :func:`cpcreds.adapters.kubernetes.api_client`). Raises
        :class:`~cpcreds.CredentialError` when no credential can be had."""
        from ..adapters import kubernetes as kube

        return self._shared("kubernetes", lambda binding: kube.api_client(_Held(binding), self.profile))

    async def aapi_client(self) -> Any:
        """A ``kubernetes.aio`` ``ApiClient`` for the calling event loop."""
        from ..adapters import kubernetes as kube

        loop = asyncio.get_running_loop()
        return await self._ashared(("kubernetes.aio", loop), lambda binding: kube.aapi_client(_Held(binding), self.profile))

    async def kubernetes_asyncio_client(self) -> Any:
        """A ``kubernetes_asyncio.client.ApiClient`` for the calling event loop (install
        ``kubernetes-asyncio``)."""
        from ..adapters import kubernetes_asyncio

        loop = asyncio.get_running_loop()
        return await self._ashared(("kubernetes_asyncio", loop), lambda binding: kubernetes_asyncio.aapi_client(_Held(binding), self.profile))

    def httpx_auth(self) -> Any:
        """An ``httpx.Auth`` (see :mod:`cpcreds.adapters.httpx_auth`); for a client certificate,
        build the client with ``verify=cluster.ssl_context()`` too."""
        from ..adapters.httpx_auth import httpx_auth

        return httpx_auth(self._binding())

    def ssl_context(self) -> Any:
        """An ``ssl.SSLContext`` with the cluster's CA and, for a certificate credential, the
        client certificate (see :func:`cpcreds.adapters.httpx_auth.ssl_context`)."""
        from ..adapters.httpx_auth import ssl_context

        return ssl_context(self._binding())

    def __repr__(self) -> str:
        return f"FleetCluster({self.key!r}, state={self.state!r}, engaged={self.engaged}, provider={self.provider!r})"


def holds_clients(cluster: FleetCluster) -> bool:
    """Whether ``cluster`` handed out clients that are still open (the fleet closes them)."""
    return bool(cluster._clients or cluster._stale)


def take_clients(cluster: FleetCluster, *, stale_only: bool = False) -> list[tuple[Any, Any]]:
    """The clients ``cluster`` handed out, taken off it (to close) as (kind, client) pairs:
    every one, or with ``stale_only`` those built on a binding the cluster no longer has."""
    with _CLIENTS_LOCK:
        clients = cluster._clients or {}
        taken = {kind: held for kind, held in clients.items() if not stale_only or held[0] is not cluster.binding}
        for kind in taken:
            del clients[kind]
        stale, cluster._stale = cluster._stale or [], None
    return stale + [(kind, client) for kind, (_, client) in taken.items()]


def retire(cluster: FleetCluster) -> None:
    """Release the binding ``cluster``'s current one replaced (its clients are closed now)."""
    retired, cluster.retired = cluster.retired, None
    if retired is not None:
        retired.release()


def close_now(client: Any) -> None:
    """Close a cluster's client now; one that fails to close is left to the collector."""
    try:
        client.close()
    except Exception:  # noqa: BLE001 - a client that fails to close is closed enough
        pass


@dataclass(frozen=True)
class FleetEvent:
    """Something happened to :attr:`cluster`. ``kind`` is ``"engage"``, ``"update"`` or ``"disengage"``."""

    cluster: FleetCluster
    kind: ClassVar[str] = ""


@dataclass(frozen=True)
class Engaged(FleetEvent):
    """The cluster is ready to be worked on: its credential works and (unless the fleet was
    told otherwise) it is healthy. Sent at most once until a :class:`Disengaged`."""

    kind: ClassVar[str] = "engage"


@dataclass(frozen=True)
class Updated(FleetEvent):
    """An engaged cluster's profile changed. ``clients_changed``: its endpoint or provider did,
    the clients handed out before are closed and ``api_client()`` gives new ones. ``state``
    ``unhealthy`` when the fleet marks (rather than disengages) unhealthy clusters."""

    clients_changed: bool = False
    kind: ClassVar[str] = "update"




@dataclass(frozen=True)
class Disengaged(FleetEvent):
    """The cluster is no longer to be worked on; its clients are closed. ``reason``: ``deleted``,
    ``unhealthy``, ``duplicate`` (another profile now stands for it), ``unusable`` (its changed
    profile cannot be resolved), ``credential`` (its changed profile's credential fails) or
    ``moved`` (another replica of the fleet's shard owns it now, or this replica's Lease is stale)."""

    reason: str = ""
    kind: ClassVar[str] = "disengage"


