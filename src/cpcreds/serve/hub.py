"""The hub inventory source: list, then watch, the hub's ClusterProfiles through the official
``kubernetes`` client, in a thread per watched scope (all namespaces, or one per namespace).

Per scope: discover the group's preferred version once (``v1alpha1`` or ``v1alpha2``); list in
pages; report the difference from what was known (so a relist deletes what vanished meanwhile);
watch from the list's ``resourceVersion`` with bookmarks, resuming from the last version seen
when a watch ends; relist on ``410 Gone``; back off (1 s doubling to 1 min) on any other error.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from typing import Any

import structlog

from ..logs import redact_text
from .inventory import Change, profile_key
from .settings import ServeSettings

__all__ = ["HubSource", "GROUP", "PLURAL"]

_log = structlog.get_logger("cpcreds.serve")

GROUP = "multicluster.x-k8s.io"
PLURAL = "clusterprofiles"
_VERSIONS = ("v1alpha2", "v1alpha1")  # preferred first when discovery says nothing
_PAGE = 500
_WATCH_SECONDS = 300  # server-side watch timeout; the watch then resumes from the last version


class _Gone(Exception):
    """The resourceVersion we hold is too old: relist."""


class HubSource:
    """Reports the hub's ClusterProfiles as :class:`~cpcreds.serve.inventory.Change` objects."""

    def __init__(self, settings: ServeSettings, *, watch_seconds: int = _WATCH_SECONDS) -> None:
        self.settings = settings
        self.watch_seconds = watch_seconds
        self.version: str | None = None
        self.origin = "hub"

    def _api(self) -> Any:
        from kubernetes import client, config

        configuration = client.Configuration()
        if self.settings.in_cluster:
            config.load_incluster_config(client_configuration=configuration)
            self.origin = "hub (in-cluster)"
        else:
            path = str(self.settings.hub_kubeconfig)
            config.load_kube_config(config_file=path, context=self.settings.hub_context, client_configuration=configuration)
            self.origin = f"hub ({configuration.host})"
        return client.ApiClient(configuration)

    def _discover(self, api: Any) -> str:
        from kubernetes import client

        try:
            groups = client.ApisApi(api).get_api_versions(_request_timeout=30).groups or []
        except Exception as exc:  # noqa: BLE001 - discovery is a hint; listing will say what is wrong
            _log.warning("hub discovery failed; trying the newest ClusterProfile version", error=_short(exc))
            return _VERSIONS[0]
        for group in groups:
            if group.name == GROUP:
                if group.preferred_version is not None:
                    return str(group.preferred_version.version)
                served = [v.version for v in group.versions or []]
                return next((v for v in _VERSIONS if v in served), served[0] if served else _VERSIONS[-1])
        raise RuntimeError(f"the hub serves no {GROUP} API group: is the ClusterProfile CRD installed?")

    async def run(self, emit: Callable[[Change], None], listed: Callable[[], None]) -> None:
        """Run until cancelled: ``emit`` every change, call ``listed`` once every scope has listed."""
        loop = asyncio.get_running_loop()
        stop = threading.Event()
        scopes: list[str | None] = list(self.settings.namespaces) or [None]
        pending = {"scopes": len(scopes)}
        lock = threading.Lock()

        def first_list_done() -> None:
            with lock:
                pending["scopes"] -= 1
                done = pending["scopes"] == 0
            if done:
                loop.call_soon_threadsafe(listed)

        def send(change: Change) -> None:
            loop.call_soon_threadsafe(emit, change)

        threads = [
            threading.Thread(target=self._scope, args=(namespace, send, first_list_done, stop), name=f"cpcreds-hub-{namespace or 'all'}", daemon=True)
            for namespace in scopes
        ]
        for thread in threads:
            thread.start()
        try:
            await asyncio.Event().wait()
        finally:
            stop.set()  # threads end at their next event or watch timeout; they are daemons

    def _scope(self, namespace: str | None, send: Callable[[Change], None], listed: Callable[[], None], stop: threading.Event) -> None:
        known: dict[str, dict[str, Any]] = {}
        failures = 0
        first = True
        api = None
        while not stop.is_set():
            try:
                if api is None:
                    api = self._api()
                    self.version = self.version or self._discover(api)
                version = self._relist(api, namespace, known, send)
                if first:
                    first = False
                    listed()
                failures = 0
                while not stop.is_set():
                    version = self._watch(api, namespace, version, known, send, stop)
            except _Gone:
                _log.info("hub watch expired; relisting", namespace=namespace or "*")
                continue
            except Exception as exc:  # noqa: BLE001 - anything from the hub: report, back off, retry
                failures += 1
                delay = min(60.0, 2.0 ** (failures - 1))
                problem = _short(exc)
                send(Change(problems={self._scope_name(namespace): problem}))
                _log.warning("hub list/watch failed; retrying", namespace=namespace or "*", error=problem, retry_in=delay)
                if first and failures >= 3:
                    # Readiness should not wait forever on a hub that cannot be read.
                    first = False
                    listed()
                stop.wait(delay)
                continue

    def _scope_name(self, namespace: str | None) -> str:
        return f"{self.origin} namespace {namespace}" if namespace else self.origin

    def _list_page(self, api: Any, namespace: str | None, token: str | None) -> dict[str, Any]:
        from kubernetes import client

        objects = client.CustomObjectsApi(api)
        kwargs: dict[str, Any] = {"limit": _PAGE, "_preload_content": False, "_request_timeout": 60}
        if token:
            kwargs["_continue"] = token
        if self.settings.label_selector:
            kwargs["label_selector"] = self.settings.label_selector
        assert self.version is not None
        if namespace:
            response = objects.list_namespaced_custom_object(GROUP, self.version, namespace, PLURAL, **kwargs)
        else:
            response = objects.list_cluster_custom_object(GROUP, self.version, PLURAL, **kwargs)
        # Parsed here, not by the generated client: 10,000 profiles deserialize much faster as JSON.
        return json.loads(response.data)

    def _relist(self, api: Any, namespace: str | None, known: dict[str, dict[str, Any]], send: Callable[[Change], None]) -> str:
        items: dict[str, dict[str, Any]] = {}
        token: str | None = None
        while True:
            page = self._list_page(api, namespace, token)
            for item in page.get("items") or []:
                key = profile_key(item) if isinstance(item, dict) else None
                if key is not None:
                    items[key] = item
            metadata = page.get("metadata") or {}
            token = metadata.get("continue")
            if not token:
                version = str(metadata.get("resourceVersion") or "")
                break
        change = Change(problems={self._scope_name(namespace): ""})
        origin = self._scope_name(namespace)
        for key in set(known) - set(items):
            change.deletes.add(key)
        for key, item in items.items():
            if known.get(key) != item:
                change.upserts[key] = (item, origin)
        known.clear()
        known.update(items)
        send(change)
        return version

    def _watch(
        self, api: Any, namespace: str | None, version: str, known: dict[str, dict[str, Any]], send: Callable[[Change], None], stop: threading.Event
    ) -> str:
        from kubernetes import client, watch
        from kubernetes.client.exceptions import ApiException

        objects = client.CustomObjectsApi(api)
        kwargs: dict[str, Any] = {
            "resource_version": version,
            "allow_watch_bookmarks": True,
            "timeout_seconds": self.watch_seconds,
            "_request_timeout": self.watch_seconds + 30,
        }
        if self.settings.label_selector:
            kwargs["label_selector"] = self.settings.label_selector
        assert self.version is not None
        if namespace:
            function, args = objects.list_namespaced_custom_object, (GROUP, self.version, namespace, PLURAL)
        else:
            function, args = objects.list_cluster_custom_object, (GROUP, self.version, PLURAL)
        watcher = watch.Watch()
        origin = self._scope_name(namespace)
        try:
            for event in watcher.stream(function, *args, **kwargs):
                if stop.is_set():
                    break
                kind, item = event.get("type"), event.get("object")
                if kind == "ERROR":
                    if isinstance(item, dict) and item.get("code") == 410:
                        raise _Gone()
                    raise RuntimeError(f"the watch failed: {_status_message(item)}")
                if not isinstance(item, dict):
                    continue
                version = str((item.get("metadata") or {}).get("resourceVersion") or version)
                if kind == "BOOKMARK":
                    continue
                key = profile_key(item)
                if key is None:
                    continue
                if kind == "DELETED":
                    if known.pop(key, None) is not None:
                        send(Change(deletes={key}))
                elif kind in ("ADDED", "MODIFIED") and known.get(key) != item:
                    known[key] = item
                    send(Change(upserts={key: (item, origin)}))
        except ApiException as exc:
            if exc.status == 410:
                raise _Gone() from None
            raise
        finally:
            watcher.stop()
        return version


def _status_message(item: Any) -> str:
    if isinstance(item, dict):
        return redact_text(str(item.get("message") or item.get("reason") or "unknown error"), strict=True)[:300]
    return "unknown error"


def _short(exc: BaseException) -> str:
    from kubernetes.client.exceptions import ApiException

    if isinstance(exc, ApiException):
        detail = exc.reason or ""
        try:
            body = json.loads(exc.body) if exc.body else {}
            detail = body.get("message") or detail
        except (TypeError, ValueError):
            pass
        return redact_text(f"HTTP {exc.status}: {' '.join(str(detail).split())}")[:300]
    return redact_text(f"{type(exc).__name__}: {' '.join(str(exc).split())}")[:300]
