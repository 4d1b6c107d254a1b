"""What a :class:`~cpcreds.Fleet` is made of, grouped as a program thinks of it: where the
clusters come from (:class:`Inventory`), which of them are engaged (:class:`Engagement`), how
their credentials are fetched (:class:`Fetching`) and who hears of them (:class:`Listeners`).
Each is a small frozen dataclass; ``Fleet`` also takes every field as a keyword of its own
(``Fleet(config, hub=..., require_healthy=False)``), which fills the group it belongs to.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypedDict, TypeVar, overload

from ..errors import ConfigError
from ..engine.policies import BackoffPolicy

if TYPE_CHECKING:
    from .events import Callback
    from .gate import OnUnhealthy
    from .hooks import FleetHooks
    from .hub import HubOptions
    from .inventory import ProfileFeed

__all__ = ["Inventory", "Engagement", "Fetching", "Listeners", "FleetKeywords", "GroupField", "grouped"]

_T = TypeVar("_T")


@dataclass(frozen=True, kw_only=True)
class Inventory:
    """Where the clusters come from: exactly one of ``hub`` (a :class:`HubOptions`, or a
    kubeconfig path), ``folder`` (ClusterProfile files, rescanned every ``scan_interval``
    seconds), ``feed`` (a :class:`~cpcreds.ProfileFeed` the program fills) or ``source``
    (anything with ``async run(emit, listed)``)."""

    hub: HubOptions | str | os.PathLike[str] | None = None
    folder: str | os.PathLike[str] | None = None
    feed: ProfileFeed | None = None
    source: Any = None
    scan_interval: float = 1.0

    def open(self) -> Any:
        """The source the fleet runs; :class:`~cpcreds.ConfigError` unless exactly one is given."""
        given = [name for name in ("hub", "folder", "feed", "source") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ConfigError(f"a Fleet needs exactly one inventory (hub=, folder=, feed= or source=), got {len(given) or 'none'}", source="Fleet")
        if self.hub is not None:
            # Imported only for a hub: a folder or a feed never loads the hub's client code.
            from .hub import HubOptions, HubSource

            return HubSource(HubOptions(kubeconfig=self.hub) if isinstance(self.hub, (str, os.PathLike)) else self.hub)
        if self.folder is not None:
            from .inventory import DirectorySource, FolderSource

            return FolderSource(DirectorySource(self.folder), self.scan_interval)
        return self.feed if self.feed is not None else self.source


@dataclass(frozen=True, kw_only=True)
class Engagement:
    """Which clusters are engaged. ``require_healthy``: only those whose ``ControlPlaneHealthy``
    condition is True; ``on_unhealthy``: what happens to an engaged one whose condition turns,
    ``"disengage"`` or ``"mark"`` (it stays engaged, state ``unhealthy``); ``dedupe``: one
    profile per KEP-4322 inventory member."""

    require_healthy: bool = True
    on_unhealthy: OnUnhealthy = "disengage"
    dedupe: bool = True


@dataclass(frozen=True, kw_only=True)
class Fetching:
    """How credentials are fetched: at most ``concurrency`` at once; after failures at the pace of
    ``backoff``; refreshes ahead of the engine's refresh point, up to ``jitter`` of the time to
    it earlier, spread at random (never later, so spreading the load never risks an expiry)."""

    concurrency: int = 32
    backoff: BackoffPolicy = BackoffPolicy(initial=1.0, maximum=300.0)
    jitter: float = 0.1


@dataclass(frozen=True, kw_only=True)
class Listeners:
    """Who hears of the clusters: ``on_engage``, ``on_update`` and ``on_disengage`` are called
    with the :class:`~cpcreds.FleetCluster` (in a thread of their own); ``hooks`` (a
    :class:`~cpcreds.fleet.hooks.FleetHooks`) hears every change of state, plan and inventory
    on the fleet's loop."""

    on_engage: Callback | None = None
    on_update: Callback | None = None
    on_disengage: Callback | None = None
    hooks: FleetHooks | None = None


class FleetKeywords(TypedDict, total=False):
    """``Fleet``'s keywords that fill a group: each is the field of the same name."""

    hub: HubOptions | str | os.PathLike[str] | None
    folder: str | os.PathLike[str] | None
    feed: ProfileFeed | None
    source: Any
    scan_interval: float
    require_healthy: bool
    on_unhealthy: OnUnhealthy
    dedupe: bool
    concurrency: int
    backoff: BackoffPolicy | None
    jitter: float
    on_engage: Callback | None
    on_update: Callback | None
    on_disengage: Callback | None
    hooks: FleetHooks | None


#: Each group's argument name, and its class.
_GROUPS: dict[str, type] = {"inventory": Inventory, "engagement": Engagement, "fetching": Fetching, "listeners": Listeners}
_HOME = {field.name: name for name, group in _GROUPS.items() for field in dataclasses.fields(group)}


def grouped(given: dict[str, Any], keywords: dict[str, Any]) -> dict[str, Any]:
    """Each group of ``given`` (argument name -> a group or None) with ``keywords`` filled in:
    a group left out is made from its defaults. A keyword no group has is a ``TypeError``, as
    Python says of any unexpected keyword; a keyword given beside its own group is a
    :class:`~cpcreds.ConfigError` (which to believe would be a guess)."""
    unknown = [name for name in keywords if name not in _HOME]
    if unknown:
        raise TypeError(f"Fleet() got an unexpected keyword argument {unknown[0]!r}")
    result = {}
    for name, group in _GROUPS.items():
        fields = {key: value for key, value in keywords.items() if _HOME[key] == name}
        if name == "fetching" and fields.get("backoff", 0) is None:
            del fields["backoff"]  # backoff=None has always meant the default
        if given[name] is not None and fields:
            raise ConfigError(f"{', '.join(f'{key}=' for key in fields)} given beside {name}=: put it in {name}", source="Fleet")
        result[name] = dataclasses.replace(given[name], **fields) if given[name] is not None else group(**fields)
    return result


class GroupField(Generic[_T]):
    """A read-only attribute of the fleet that is the field of the same name in one of its
    groups: ``require_healthy = GroupField("engagement")`` reads ``fleet.engagement.require_healthy``."""

    def __init__(self, group: str) -> None:
        self.group = group
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> GroupField[_T]: ...
    @overload
    def __get__(self, instance: object, owner: type | None = None) -> _T: ...
    def __get__(self, instance: object, owner: type | None = None) -> Any:
        return self if instance is None else getattr(getattr(instance, self.group), self.name)

    def __set__(self, instance: object, value: object) -> None:
        raise AttributeError(f"{self.name} is read-only: it is {self.group}.{self.name}")
