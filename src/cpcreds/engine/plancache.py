"""The plan cache: a profile's identity -> its AccessPlan (and, for failover, its Route).

Resolving a profile (:func:`cpcreds.config.access.resolve`) costs tens of microseconds; a cache hit must
cost one. So a plan is remembered under a cheap *identity* of the profile that changes whenever
the profile's access data may have changed (see :func:`profile_identity`), and the engine's hot
path is one identity computation and one dict lookup. Old identities (superseded
resourceVersions) are dropped oldest first once there are many.
"""

from __future__ import annotations

import json
import marshal
import sys
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..config.access import AccessPlan, resolve
from .failover import Route

if TYPE_CHECKING:
    from ..config.wire import ClusterProfile
    from ..config import ProviderConfig

__all__ = ["PlanCache", "profile_identity"]


def profile_identity(profile: Any) -> Any:
    """A cheap key that changes whenever the profile's access data may have changed, or None.

    Only ``resourceVersion`` changes on every write (``generation`` does not move on status
    updates, where the access providers live), so without one the key is a fingerprint of the
    access providers themselves. The namespace and name are always part of the key: copies of
    one exported object (same uid and resourceVersion, another name and server) are different
    profiles and never share a plan. Hostile shapes give None (always resolve), never an error.
    """
    if type(profile) is dict:  # the common case (the kubernetes client's dicts), checked first
        meta = profile.get("metadata")
        if type(meta) is dict:
            uid = meta.get("uid")
            rv = meta.get("resourceVersion")
            if type(uid) is str and type(rv) is str and uid and rv:
                name, namespace = meta.get("name"), meta.get("namespace")
                if type(name) is str and (namespace is None or type(namespace) is str):
                    return (uid, rv, namespace, name)
            status = profile.get("status")
            if type(status) is dict and type(meta) is dict:
                # No uid/resourceVersion (a hand-written dict): the access data itself is the key.
                # marshal serialises only exact builtin types (a subclass or any other object
                # raises ValueError) and its output decodes to one value, so equal bytes mean
                # equal plain values: an exact fingerprint at a fraction of json.dumps' cost.
                # Format 0 has no back-references and no interned-string marks, so the bytes
                # depend on the values only, not on which objects are shared. Key order is part
                # of the bytes: the same profile written in another order is a miss, never a
                # wrong hit.
                try:
                    return (
                        "plain",
                        marshal.dumps(
                            (meta.get("name"), meta.get("namespace"), status.get("accessProviders"), status.get("credentialProviders")),
                            0,
                        ),
                    )
                except ValueError:
                    pass  # not plain values: the general fingerprint below
    # A ClusterProfile model exists only if its module was imported: never import it here.
    api = sys.modules.get("cpcreds.config.wire")
    if api is not None and isinstance(profile, api.ClusterProfile):
        meta = profile.metadata
        if meta.uid and meta.resource_version:
            return ("uid", meta.uid, meta.resource_version, meta.namespace, meta.name)
        try:
            return ("model", meta.namespace, meta.name, profile.status.model_dump_json())
        except Exception:
            return None
    if isinstance(profile, Mapping):
        meta = profile.get("metadata")
        if isinstance(meta, Mapping):
            uid, rv = meta.get("uid"), meta.get("resourceVersion")
            name, namespace = meta.get("name"), meta.get("namespace")
            if type(uid) is str and type(rv) is str and uid and rv and type(name) is str and (namespace is None or type(namespace) is str):
                return ("uid", uid, rv, namespace, name)
        else:
            name = namespace = None
        status = profile.get("status")
        try:
            fingerprint = json.dumps(
                [name, namespace, status.get("accessProviders"), status.get("credentialProviders")]
                if isinstance(status, Mapping)
                else [name, namespace, status],
                sort_keys=True,
                default=str,
            )
        except (TypeError, ValueError, RecursionError):
            return None
        return ("dict", fingerprint)
    return None


class PlanCache:
    """Profile identity -> plan, and -> failover :class:`~cpcreds.engine.failover.Route` (failover
    profiles only). ``plans`` is read without a lock (a dict read is atomic); writes take one."""

    def __init__(self, config: ProviderConfig, max_entries: int) -> None:
        self.config = config
        self.plans: dict[Any, AccessPlan] = {}
        self.routes: dict[Any, Route] = {}
        self._limit = 4 * max_entries
        self._lock = threading.Lock()

    def plan(self, profile: ClusterProfile | Mapping[str, Any]) -> AccessPlan:
        """The plan for ``profile`` (resolved once per identity). Raises what resolve raises."""
        identity = profile_identity(profile)
        return self.plans.get(identity) or self.resolve(profile, identity)

    def resolve(self, profile: ClusterProfile | Mapping[str, Any], identity: Any, owned: bool = False) -> AccessPlan:
        """Resolve ``profile`` (``owned``: see :func:`~cpcreds.config.access.resolve`) and remember its
        plan under ``identity`` (None: not remembered). An owned profile's plan is not
        remembered either: its one caller (a fleet) binds a profile once per change and keeps
        the binding, so an entry would never be read again and would only hold memory for every
        profile (the identity of a profile without a resourceVersion is its access data, marshalled)."""
        plan = resolve(self.config, profile, owned=owned)
        if identity is not None and not owned:
            with self._lock:
                if len(self.plans) >= self._limit:
                    for stale in list(self.plans)[: len(self.plans) // 2]:
                        del self.plans[stale]
                        self.routes.pop(stale, None)
                self.plans[identity] = plan
        return plan

    def route(self, profile: ClusterProfile | Mapping[str, Any], identity: Any, plan: AccessPlan) -> Route:
        """The failover state of ``profile`` (remembered under its identity, as its plan is)."""
        route = self.routes.get(identity) if identity is not None else None
        if route is None or route.primary is not plan:
            route = Route(plan, profile)
            if identity is not None:
                with self._lock:
                    known = self.routes.get(identity)
                    if known is not None and known.primary is plan:
                        return known  # another thread made it meanwhile
                    # None, or made for a plan object this identity no longer maps to
                    self.routes[identity] = route
        return route

    def clear(self) -> None:
        with self._lock:
            self.plans.clear()
            self.routes.clear()
