"""One watched scope of the hub (all namespaces, or one), as client-go's Reflector keeps a
store in step with a ListerWatcher: list in pages and report the difference from what was known
(so a relist deletes what vanished meanwhile), watch from the list's ``resourceVersion`` with
bookmarks, resume from the last version seen when a watch ends, relist on ``410 Gone``, back off
(1 s doubling to 1 min) on any other error.

The requests themselves are the :class:`ListerWatcher`'s (:class:`~cpcreds.fleet.hub.HubSource`):
how to reach the hub, which version, which label selector, and every open watch to shut down
when the source stops. A watch that fails or ends at once is a failure: the backoff only starts
over once a watch has delivered an event or run its course.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ..logs import get_logger
from .hubwire import Gone, HubAnswer, HubProblem, backoff_delay, problem_text, status_message, watch_events
from .inventory import Change, held, profile_key

__all__ = ["Reflector", "ListerWatcher"]

_log = get_logger("cpcreds.fleet")

#: A watch that ends sooner than this without an event did not work (a proxy cutting it, a hub
#: closing it): counted as a failure, so it is not reopened in a hot loop.
_SHORTEST_WATCH = 1.0


class ListerWatcher(Protocol):
    """The requests a :class:`Reflector` makes (:class:`~cpcreds.fleet.hub.HubSource` makes them)."""

    def api(self, current: Any) -> Any:
        """``current`` (an API client), or a new one when there is none or its credential is stale."""

    def scope_name(self, namespace: str | None) -> str: ...

    def list_url(self, namespace: str | None) -> str: ...

    def list_page(self, api: Any, namespace: str | None, token: str | None) -> dict[str, Any]: ...

    def open_watch(self, api: Any, namespace: str | None, version: str) -> Any: ...

    def opened(self, response: Any) -> None: ...

    def closed(self, response: Any) -> None: ...


class Reflector:
    """Keeps one scope (``namespace``, None for all) in step with the hub until ``stop`` is set:
    every change to ``send``, ``listed()`` once after the first list (or after three failures:
    readiness does not wait forever on a hub that cannot be read). ``known`` is what was sent."""

    def __init__(
        self, lister: ListerWatcher, namespace: str | None, send: Callable[[Change], None], listed: Callable[[], None], stop: threading.Event
    ) -> None:
        self.lister, self.namespace, self.send, self.listed, self.stop = lister, namespace, send, listed, stop
        self.known: dict[str, Mapping[str, Any]] = {}

    def run(self) -> None:
        lister, namespace, stop = self.lister, self.namespace, self.stop
        failures = 0
        first = True
        api = None
        while not stop.is_set():
            try:
                api = lister.api(api)
                version = self.relist(api)
                if first:
                    first = False
                    self.listed()
                while not stop.is_set():
                    api = lister.api(api)  # a fresh credential before the old one expires
                    version, worked = self.watch(api, version)
                    if worked:
                        failures = 0
            except Gone:
                _log.info("hub watch expired; relisting", namespace=namespace or "*")
                if failures:  # 410 again before any watch worked: not in a hot loop either
                    stop.wait(backoff_delay(failures))
                failures += 1
                continue
            except Exception as exc:  # noqa: BLE001 - anything from the hub: report, back off, retry
                if stop.is_set():
                    return  # the watch was shut down on purpose
                failures += 1
                api = None  # the next try reads the kubeconfig (and runs its plugin) again
                delay = backoff_delay(failures)
                problem = problem_text(exc, lister.list_url(namespace))
                self.send(Change(problems={lister.scope_name(namespace): problem}))
                _log.warning("hub list/watch failed; retrying", namespace=namespace or "*", error=problem, retry_in=delay)
                if first and failures >= 3:
                    # Readiness should not wait forever on a hub that cannot be read.
                    first = False
                    self.listed()
                stop.wait(delay)
                continue

    def relist(self, api: Any) -> str:
        """List every page; send the difference from what was known; the version to watch from."""
        items: dict[str, Mapping[str, Any]] = {}
        token: str | None = None
        while True:
            page = self.lister.list_page(api, self.namespace, token)
            for index, item in enumerate(page["items"]):
                key = profile_key(item) if isinstance(item, dict) else None
                if key is None:
                    # Dropping it would report a profile deleted that may be there: refuse the list.
                    raise HubProblem(f"the hub's ClusterProfile list has an item without a usable metadata.name (item {index})")
                items[key] = held(item)
            metadata = page["metadata"]
            token = metadata.get("continue")
            if not token:
                version = metadata.get("resourceVersion")
                if not isinstance(version, str) or not version:
                    raise HubProblem("the hub's ClusterProfile list has no metadata.resourceVersion to watch from")
                break
        known = self.known
        origin = self.lister.scope_name(self.namespace)
        change = Change(problems={origin: ""})
        for key in set(known) - set(items):
            change.deletes.add(key)
        for key, item in items.items():
            if known.get(key) != item:
                change.upserts[key] = (item, origin)
        known.clear()
        known.update(items)
        self.send(change)
        return version

    def watch(self, api: Any, version: str) -> tuple[str, bool]:
        """Watch from ``version`` until the stream ends; return the last version seen and whether
        the watch worked (delivered an event, or ran at least a second and ended cleanly)."""
        from kubernetes.client.exceptions import ApiException

        lister, known, send, stop = self.lister, self.known, self.send, self.stop
        origin = lister.scope_name(self.namespace)
        started = time.monotonic()
        delivered = False
        response = lister.open_watch(api, self.namespace, version)
        lister.opened(response)
        try:
            if stop.is_set():
                return version, False
            if not 200 <= response.status <= 299:
                raise ApiException(http_resp=HubAnswer(response))
            for kind, item in watch_events(response):
                if stop.is_set():
                    break
                if kind == "ERROR":
                    if item.get("code") == 410:
                        raise Gone()
                    raise HubProblem(f"the watch failed: {status_message(item)}")
                delivered = True
                seen = (item.get("metadata") or {}).get("resourceVersion")
                version = seen if isinstance(seen, str) and seen else version
                if kind == "BOOKMARK":
                    continue
                key = profile_key(item)
                if key is None:
                    raise HubProblem(f"the hub sent a watch event ({kind}) whose object has no usable metadata.name")
                if kind == "DELETED":
                    if known.pop(key, None) is not None:
                        send(Change(deletes={key}))
                elif known.get(key) != (item := held(item)):
                    known[key] = item
                    send(Change(upserts={key: (item, origin)}))
        finally:
            lister.closed(response)
            if stop.is_set():
                response.close()  # its connection too: the hub sees the watch go at once
            else:
                response.release_conn()
        if not delivered and time.monotonic() - started < _SHORTEST_WATCH and not stop.is_set():
            raise HubProblem("the hub ended the watch at once, without an event")
        return version, delivered or time.monotonic() - started >= _SHORTEST_WATCH
