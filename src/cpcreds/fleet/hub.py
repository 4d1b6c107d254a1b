"""The hub inventory source: list, then watch, the hub's ClusterProfiles through the official
``kubernetes`` client, in a thread per watched scope (all namespaces, or one per namespace).

Per scope: discover the group's preferred version once (``v1alpha1`` or ``v1alpha2``); list in
pages; report the difference from what was known (so a relist deletes what vanished meanwhile);
watch from the list's ``resourceVersion`` with bookmarks, resuming from the last version seen
when a watch ends; relist on ``410 Gone``; back off (1 s doubling to 1 min) on any other error.

The hub is not trusted to answer well. A list that is not a list (a ``Status`` answered with
200, an item without a name, no ``resourceVersion``) is an error, never an empty inventory: the
last good inventory stays and the list is retried with backoff. A watch event that is not JSON,
has no object or an unknown type is an error too, worded here, and so is a watch that fails or
ends at once: the backoff only starts over once a watch has delivered an event or run its course.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..logs import get_logger, redact_text
from .hubclient import HubAuthError, HubConnector
from .inventory import Change, held, profile_key

__all__ = ["HubSource", "HubOptions", "HubProblem", "GROUP", "PLURAL", "VERSIONS", "backoff_delay", "read_bounded_answer", "watch_events", "problem_text"]

_log = get_logger("cpcreds.fleet")

GROUP = "multicluster.x-k8s.io"
PLURAL = "clusterprofiles"
#: The ClusterProfile versions cpcreds reads, preferred first when discovery says nothing.
VERSIONS = ("v1alpha2", "v1alpha1")
_VERSIONS = VERSIONS
_PAGE = 500
_WATCH_SECONDS = 300  # server-side watch timeout; the watch then resumes from the last version
#: Backoff after a failure: 1 s, doubling, at most 1 min.
_FIRST_DELAY, _MAX_DELAY = 1.0, 60.0
#: A watch that ends sooner than this without an event did not work (a proxy cutting it, a hub
#: closing it): counted as a failure, so it is not reopened in a hot loop.
_SHORTEST_WATCH = 1.0
#: Largest list page and largest watch event read: a ClusterProfile is at most ~1.5 MiB (etcd's
#: object limit), a page at most _PAGE of them; a hub sending more gets an error, not our memory.
_MAX_PAGE_BYTES = 256 * 1024 * 1024
_MAX_EVENT_BYTES = 4 * 1024 * 1024
_CHUNK = 64 * 1024
_EVENT_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"})


class _Gone(Exception):
    """The resourceVersion we hold is too old: relist."""


class HubProblem(Exception):
    """The hub answered something unusable; the message says what, in our words."""


def backoff_delay(failures: int) -> float:
    """Seconds to wait after ``failures`` failures in a row (1 s doubling to 1 min)."""
    return min(_MAX_DELAY, _FIRST_DELAY * 2.0 ** (max(failures, 1) - 1))


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
        self._open: set[Any] = set()
        self._open_lock = threading.Lock()

    def _api(self) -> Any:
        api, self.origin = self._connector.connect()
        return api

    def _discover(self, api: Any) -> str:
        from kubernetes import client

        try:
            groups = client.ApisApi(api).get_api_versions(_request_timeout=self.options.timeout).groups or []
        except Exception as exc:  # noqa: BLE001 - discovery is a hint; listing will say what is wrong
            _log.warning("hub discovery failed; trying the newest ClusterProfile version", error=problem_text(exc))
            return _VERSIONS[0]
        for group in groups:
            if group.name == GROUP:
                if group.preferred_version is not None:
                    return str(group.preferred_version.version)
                served = [v.version for v in group.versions or []]
                return next((v for v in _VERSIONS if v in served), served[0] if served else _VERSIONS[-1])
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
            threading.Thread(target=self._scope, args=(namespace, send, first_list_done, stop), name=f"cpcreds-hub-{namespace or 'all'}", daemon=True)
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
        with self._open_lock:
            responses = list(self._open)
        for response in responses:
            shutdown = getattr(response, "shutdown", None)  # urllib3 >= 2.3: wakes a blocked read
            try:
                shutdown() if shutdown is not None else response.close()
            except Exception:  # noqa: BLE001 - a connection already gone is what we want anyway
                pass

    def _scope(self, namespace: str | None, send: Callable[[Change], None], listed: Callable[[], None], stop: threading.Event) -> None:
        known: dict[str, Mapping[str, Any]] = {}
        failures = 0
        first = True
        api = None
        while not stop.is_set():
            try:
                if api is None or self._connector.stale():
                    api = self._api()
                    self.version = self.version or self._discover(api)
                version = self._relist(api, namespace, known, send)
                if first:
                    first = False
                    listed()
                while not stop.is_set():
                    if self._connector.stale():
                        api = self._api()  # a fresh credential before the old one expires
                    version, worked = self._watch(api, namespace, version, known, send, stop)
                    if worked:
                        failures = 0
            except _Gone:
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
                problem = problem_text(exc, self._list_url(namespace))
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

    def _list_url(self, namespace: str | None) -> str:
        version = self.version or _VERSIONS[0]
        where = f"/namespaces/{namespace}" if namespace else ""
        return f"{self.origin.removeprefix('hub (').rstrip(')')}/apis/{GROUP}/{version}{where}/{PLURAL}"

    def _list_page(self, api: Any, namespace: str | None, token: str | None) -> dict[str, Any]:
        from kubernetes import client

        objects = client.CustomObjectsApi(api)
        kwargs: dict[str, Any] = {"limit": _PAGE, "_preload_content": False, "_request_timeout": self.options.timeout}
        if token:
            kwargs["_continue"] = token
        if self.options.label_selector:
            kwargs["label_selector"] = self.options.label_selector
        assert self.version is not None
        if namespace:
            response = objects.list_namespaced_custom_object(GROUP, self.version, namespace, PLURAL, **kwargs)
        else:
            response = objects.list_cluster_custom_object(GROUP, self.version, PLURAL, **kwargs)
        # Parsed here, not by the generated client: 10,000 profiles deserialize much faster as JSON.
        try:
            if not 200 <= response.status <= 299:
                from kubernetes.client.exceptions import ApiException

                raise ApiException(http_resp=_Answer(response))
            body = read_bounded_answer(response, _MAX_PAGE_BYTES, "a ClusterProfile list page")
        finally:
            response.release_conn()
        try:
            page = json.loads(body)
        except ValueError:
            raise HubProblem("the hub answered the ClusterProfile list with something that is not JSON") from None
        return _checked_page(page)

    def _relist(self, api: Any, namespace: str | None, known: dict[str, Mapping[str, Any]], send: Callable[[Change], None]) -> str:
        items: dict[str, Mapping[str, Any]] = {}
        token: str | None = None
        while True:
            page = self._list_page(api, namespace, token)
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
        self, api: Any, namespace: str | None, version: str, known: dict[str, Mapping[str, Any]], send: Callable[[Change], None], stop: threading.Event
    ) -> tuple[str, bool]:
        """Watch from ``version`` until the stream ends; return the last version seen and whether
        the watch worked (delivered an event, or ran at least a second and ended cleanly)."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        objects = client.CustomObjectsApi(api)
        kwargs: dict[str, Any] = {
            "watch": True,
            "resource_version": version,
            "allow_watch_bookmarks": True,
            "timeout_seconds": self.watch_seconds,
            "_request_timeout": (self.options.timeout, self.watch_seconds + 30),
            "_preload_content": False,
        }
        if self.options.label_selector:
            kwargs["label_selector"] = self.options.label_selector
        assert self.version is not None
        origin = self._scope_name(namespace)
        started = time.monotonic()
        delivered = False
        try:
            if namespace:
                response = objects.list_namespaced_custom_object(GROUP, self.version, namespace, PLURAL, **kwargs)
            else:
                response = objects.list_cluster_custom_object(GROUP, self.version, PLURAL, **kwargs)
        except ApiException as exc:
            if exc.status == 410:
                raise _Gone() from None
            raise
        with self._open_lock:
            self._open.add(response)
        try:
            if stop.is_set():
                return version, False
            if not 200 <= response.status <= 299:
                raise ApiException(http_resp=_Answer(response))
            for kind, item in watch_events(response):
                if stop.is_set():
                    break
                if kind == "ERROR":
                    if item.get("code") == 410:
                        raise _Gone()
                    raise HubProblem(f"the watch failed: {_status_message(item)}")
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
            with self._open_lock:
                self._open.discard(response)
            if stop.is_set():
                response.close()  # its connection too: the hub sees the watch go at once
            else:
                response.release_conn()
        if not delivered and time.monotonic() - started < _SHORTEST_WATCH and not stop.is_set():
            raise HubProblem("the hub ended the watch at once, without an event")
        return version, delivered or time.monotonic() - started >= _SHORTEST_WATCH


class _Answer:
    """What ``ApiException(http_resp=...)`` reads of an answer (status, reason, headers, body)."""

    def __init__(self, response: Any) -> None:
        self.status, self.reason = response.status, response.reason
        self.data = read_bounded_answer(response, 64 * 1024, "an error answer", cut=True)

    def getheaders(self) -> Any:
        return {}


def read_bounded_answer(response: Any, limit: int, what: str, *, cut: bool = False) -> bytes:
    """The body of ``response``, at most ``limit`` bytes (more is an error, or cut with ``cut``)."""
    data = bytearray()
    for chunk in response.stream(_CHUNK, decode_content=True):
        data += chunk
        if len(data) > limit:
            if cut:
                return bytes(data[:limit])
            raise HubProblem(f"the hub sent {what} larger than {limit // (1024 * 1024)} MiB")
    return bytes(data)


def watch_events(response: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """The watch stream's events as (type, object), each checked; a malformed one is a HubProblem."""
    buffer = bytearray()
    for chunk in response.stream(_CHUNK, decode_content=True):
        buffer += chunk
        while (end := buffer.find(b"\n")) != -1:
            line, buffer = bytes(buffer[:end]), buffer[end + 1 :]
            if line.strip():
                yield _event(line)
        if len(buffer) > _MAX_EVENT_BYTES:
            raise HubProblem(f"the hub sent a watch event larger than {_MAX_EVENT_BYTES // (1024 * 1024)} MiB")
    if buffer.strip():
        yield _event(bytes(buffer))


def _event(line: bytes) -> tuple[str, dict[str, Any]]:
    try:
        event = json.loads(line)
    except ValueError:
        raise HubProblem("the hub sent a watch event that is not JSON") from None
    if not isinstance(event, dict):
        raise HubProblem(f"the hub sent a watch event that is a JSON {type(event).__name__}, not an object")
    kind, item = event.get("type"), event.get("object")
    if kind not in _EVENT_TYPES:
        shown = repr(kind)[:40] if isinstance(kind, str) else "no type"
        raise HubProblem(f"the hub sent a watch event of unknown type {shown}")
    if not isinstance(item, dict):
        raise HubProblem(f"the hub sent a watch event ({kind}) without an object")
    return kind, item


def _checked_page(page: Any) -> dict[str, Any]:
    """``page`` if it is a list answer (``items`` a list, ``metadata`` a mapping), else a HubProblem."""
    if isinstance(page, dict) and page.get("kind") == "Status":
        raise HubProblem(f"the hub answered the ClusterProfile list with a Status, not a list: {_status_message(page)}")
    if not isinstance(page, dict) or not isinstance(page.get("items"), list):
        raise HubProblem("the hub answered the ClusterProfile list with something that is not a list (no items)")
    if not isinstance(page.get("metadata"), dict):
        raise HubProblem("the hub's ClusterProfile list has no metadata")
    return page


def _status_message(item: Any) -> str:
    if isinstance(item, dict):
        return redact_text(" ".join(str(item.get("message") or item.get("reason") or "unknown error").split()), strict=True)[:300]
    return "unknown error"


def problem_text(exc: BaseException, url: str = "") -> str:
    """``exc`` in one line for an operator: a hub answer's status and message, or the exception's
    type and text; redacted (no secret) and bounded."""
    from kubernetes.client.exceptions import ApiException

    if isinstance(exc, (HubProblem, HubAuthError)):
        return redact_text(" ".join(str(exc).split()))[:500]
    if isinstance(exc, ApiException):
        detail = exc.reason or ""
        try:
            body = json.loads(exc.body) if exc.body else {}
            detail = body.get("message") or detail if isinstance(body, dict) else detail
        except (TypeError, ValueError):
            pass
        text = f"HTTP {exc.status}: {' '.join(str(detail).split())}"
        if exc.status == 404 and url:
            text = (
                f"HTTP 404 from {url}: the hub has no ClusterProfiles there; is the ClusterProfile CRD "
                f"(clusterprofiles.{GROUP}) installed, and does every namespace of --namespaces exist? ({' '.join(str(detail).split())})"
            )
        return redact_text(text)[:500]
    return redact_text(f"{type(exc).__name__}: {' '.join(str(exc).split())}")[:300]
