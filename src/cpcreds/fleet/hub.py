"""The hub inventory source: list, then watch, the hub's ClusterProfiles through the official
``kubernetes`` client, in a thread per watched scope (all namespaces, or one per namespace).

:class:`HubSource` makes the requests: it reaches the hub (:mod:`~cpcreds.fleet.hubclient`),
discovers the group's preferred version once (``v1alpha1`` or ``v1alpha2``), lists in pages and
opens watches with the label selector, and shuts every open watch when it stops. Each scope's
list-then-watch loop is a :class:`~cpcreds.fleet.reflector.Reflector`; the hub's answers are read
and checked by :mod:`~cpcreds.fleet.hubwire` (whose names this module re-exports).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..lockedset import LockedSet
from ..logs import get_logger
from .hubclient import HubConnector
from .hubwire import (
    GROUP,
    PLURAL,
    VERSIONS,
    Gone,
    HubAnswer,
    HubProblem,
    backoff_delay,
    checked_page,
    problem_text,
    read_bounded_answer,
    watch_events,
)
from .inventory import Change
from .reflector import Reflector

__all__ = ["HubSource", "HubOptions", "HubProblem", "GROUP", "PLURAL", "VERSIONS", "backoff_delay", "read_bounded_answer", "watch_events", "problem_text"]

_log = get_logger("cpcreds.fleet")

_PAGE = 500
_WATCH_SECONDS = 300  # server-side watch timeout; the watch then resumes from the last version
#: Largest list page read: a ClusterProfile is at most ~1.5 MiB (etcd's object limit), a page at
#: most _PAGE of them; a hub sending more gets an error, not our memory.
_MAX_PAGE_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class HubOptions:
    """Where and how to read the hub's ClusterProfiles.

    ``kubeconfig`` (and ``context``) or ``in_cluster=True`` (the pod's service account) say how
    to reach the hub; ``namespaces`` limit the watch (empty: all namespaces, which needs RBAC on
    all of them); ``label_selector`` filters the profiles as ``kubectl -l`` does; ``version``
    asks for one ClusterProfile version (``v1alpha1`` or ``v1alpha2``) instead of the group's
    preferred one; ``timeout`` bounds every request and the kubeconfig's exec plugin (seconds).
    """

    kubeconfig: str | os.PathLike[str] | None = None
    context: str | None = None
    in_cluster: bool = False
    namespaces: tuple[str, ...] = ()
    label_selector: str = ""
    version: str | None = None
    timeout: float = 30.0

    def __post_init__(self) -> None:
        from ..errors import ConfigError

        if (self.kubeconfig is None) == (not self.in_cluster):
            raise ConfigError("HubOptions needs exactly one of kubeconfig= and in_cluster=True", source="HubOptions")
        if self.version is not None and self.version not in VERSIONS:
            raise ConfigError(f"HubOptions.version must be one of {', '.join(VERSIONS)}, not {str(self.version)[:40]!r}", source="HubOptions")
        if isinstance(self.namespaces, str):  # ("team-a") is a string, not a tuple: one namespace
            object.__setattr__(self, "namespaces", (self.namespaces,))
        object.__setattr__(self, "namespaces", tuple(self.namespaces))


class HubSource:
    """Reports the hub's ClusterProfiles as :class:`~cpcreds.fleet.inventory.Change` objects."""

    #: Every profile sent is parsed from the hub's answer and never changed afterwards.
    sends_own_profiles = True

    def __init__(self, options: HubOptions, *, watch_seconds: int = _WATCH_SECONDS) -> None:
        self.options = options
        self.watch_seconds = watch_seconds
        self.version: str | None = options.version
        self.origin = "hub"
        kubeconfig = Path(options.kubeconfig) if options.kubeconfig is not None else None
        self._connector = HubConnector(kubeconfig, options.context, in_cluster=options.in_cluster, timeout=options.timeout)
        #: Watch responses being read, shut down when the source stops.
        self._open: LockedSet[Any] = LockedSet()

    def api(self, current: Any) -> Any:
        """``current`` (an API client), or a new one when there is none or its credential is
        stale; the first one also settles the ClusterProfile version."""
        if current is not None and not self._connector.stale():
            return current
        api, self.origin = self._connector.connect()
        self.version = self.version or self._discover(api)
        return api

    def _discover(self, api: Any) -> str:
        from kubernetes import client

        try:
            groups = client.ApisApi(api).get_api_versions(_request_timeout=self.options.timeout).groups or []
        except Exception as exc:  # noqa: BLE001 - discovery is a hint; listing will say what is wrong
            _log.warning("hub discovery failed; trying the newest ClusterProfile version", error=problem_text(exc))
            return VERSIONS[0]
        for group in groups:
            if group.name == GROUP:
                if group.preferred_version is not None:
                    return str(group.preferred_version.version)
                served = [v.version for v in group.versions or []]
                return next((v for v in VERSIONS if v in served), served[0] if served else VERSIONS[-1])
        raise HubProblem(f"the hub serves no {GROUP} API group: is the ClusterProfile CRD installed?")

    async def run(self, emit: Callable[[Change], None], listed: Callable[[], None]) -> None:
        """Run until cancelled: ``emit`` every change, call ``listed`` once every scope has listed.

        On cancellation the open watches are shut down (their sockets, so a thread blocked on a
        quiet watch wakes at once), a hub exec plugin still running is killed, and the threads
        are given up to a second to end (they are daemons: one stuck in a list request that has
        not answered ends with its request timeout, and reports nothing more)."""
        loop = asyncio.get_running_loop()
        stop = threading.Event()
        scopes: list[str | None] = list(self.options.namespaces) or [None]
        pending = {"scopes": len(scopes)}
        lock = threading.Lock()

        def later(callback: Callable[..., None], *args: Any) -> None:
            if stop.is_set():
                return  # stopping: the loop may be closed already
            try:
                loop.call_soon_threadsafe(callback, *args)
            except RuntimeError:  # the loop closed meanwhile
                pass

        def first_list_done() -> None:
            with lock:
                pending["scopes"] -= 1
                done = pending["scopes"] == 0
            if done:
                later(listed)

        def send(change: Change) -> None:
            later(emit, change)

        threads = [
            threading.Thread(target=Reflector(self, namespace, send, first_list_done, stop).run, name=f"cpcreds-hub-{namespace or 'all'}", daemon=True)
            for namespace in scopes
        ]
        for thread in threads:
            thread.start()
        try:
            await asyncio.Event().wait()
        finally:
            stop.set()
            self._shut_watches()
            self._connector.close()  # a hub exec plugin still running dies now
            deadline = time.monotonic() + 1.0
            for thread in threads:
                thread.join(max(0.0, deadline - time.monotonic()))

    def _shut_watches(self) -> None:
        for response in self._open.snapshot():
            shutdown = getattr(response, "shutdown", None)  # urllib3 >= 2.3: wakes a blocked read
            try:
                shutdown() if shutdown is not None else response.close()
            except Exception:  # noqa: BLE001 - a connection already gone is what we want anyway
                pass

    def opened(self, response: Any) -> None:
        """A watch is being read: shut down with the others when the source stops."""
        self._open.add(response)

    def closed(self, response: Any) -> None:
        self._open.discard(response)

    def scope_name(self, namespace: str | None) -> str:
        return f"{self.origin} namespace {namespace}" if namespace else self.origin

    def list_url(self, namespace: str | None) -> str:
        version = self.version or VERSIONS[0]
        where = f"/namespaces/{namespace}" if namespace else ""
        return f"{self.origin.removeprefix('hub (').rstrip(')')}/apis/{GROUP}/{version}{where}/{PLURAL}"

    def _request(self, api: Any, namespace: str | None, kwargs: dict[str, Any]) -> Any:
        """List (with ``watch``: watch) the scope's ClusterProfiles of the label selector; the
        answer is not read yet."""
        from kubernetes import client

        objects = client.CustomObjectsApi(api)
        if self.options.label_selector:
            kwargs["label_selector"] = self.options.label_selector
        assert self.version is not None
        if namespace:
            return objects.list_namespaced_custom_object(GROUP, self.version, namespace, PLURAL, **kwargs)
        return objects.list_cluster_custom_object(GROUP, self.version, PLURAL, **kwargs)

    def list_page(self, api: Any, namespace: str | None, token: str | None) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"limit": _PAGE, "_preload_content": False, "_request_timeout": self.options.timeout}
        if token:
            kwargs["_continue"] = token
        response = self._request(api, namespace, kwargs)
        # Parsed here, not by the generated client: 10,000 profiles deserialize much faster as JSON.
        try:
            if not 200 <= response.status <= 299:
                from kubernetes.client.exceptions import ApiException

                raise ApiException(http_resp=HubAnswer(response))
            body = read_bounded_answer(response, _MAX_PAGE_BYTES, "a ClusterProfile list page")
        finally:
            response.release_conn()
        try:
            page = json.loads(body)
        except ValueError:
            raise HubProblem("the hub answered the ClusterProfile list with something that is not JSON") from None
        return checked_page(page)

    def open_watch(self, api: Any, namespace: str | None, version: str) -> Any:
        """The watch answer from ``version`` (not read yet); :class:`Gone` if it is too old."""
        from kubernetes.client.exceptions import ApiException

        kwargs: dict[str, Any] = {
            "watch": True,
            "resource_version": version,
            "allow_watch_bookmarks": True,
            "timeout_seconds": self.watch_seconds,
            "_request_timeout": (self.options.timeout, self.watch_seconds + 30),
            "_preload_content": False,
        }
        try:
            return self._request(api, namespace, kwargs)
        except ApiException as exc:
            if exc.status == 410:
                raise Gone() from None
            raise
