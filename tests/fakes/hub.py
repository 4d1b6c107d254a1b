"""A fake hub kube-apiserver: Secrets and ClusterProfiles over the real Kubernetes REST API.

The hub is the cluster that holds the fleet's ClusterProfiles (``multicluster.x-k8s.io``,
``v1alpha1`` and ``v1alpha2``) and, for the secretreader providers, the Secrets with each
cluster's credentials. This fake speaks enough of the real API for the official ``kubernetes``
client (``CoreV1Api``, ``CustomObjectsApi``, ``kubernetes.watch.Watch``), kubectl and cpcreds to
use it unmodified, over real TLS (a CA from :class:`~tests.fakes.pki.PKI`) with keep-alive
connections. Only GET is served, apart from Lease writes; tests change objects through Python
methods.

Resources and paths
    ``/api/v1/namespaces/{ns}/secrets[/{name}]`` and ``/api/v1/secrets`` (all namespaces);
    ``/apis/multicluster.x-k8s.io/{v1alpha1|v1alpha2}/namespaces/{ns}/clusterprofiles[/{name}]``
    and ``.../clusterprofiles`` (all namespaces). Discovery (``/api``, ``/api/v1``, ``/apis``,
    ``/apis/multicluster.x-k8s.io[/{version}]``) and ``/version`` are served too.
    ``/apis/coordination.k8s.io/v1/namespaces/{ns}/leases[/{name}]``: Leases, the one resource
    clients may also write (create, replace, delete; see "Leases as kube-apiserver serves them"
    below, :meth:`HubServer.stall_lease_writes` and :func:`lease`).
    A ClusterProfile is stored once and served in whichever version is asked for, with its
    ``apiVersion`` rewritten (a CRD with conversion strategy ``None``).

GET one object
    The object, or ``404`` with ``{"kind":"Status","reason":"NotFound","details":{"name":…,
    "kind":"secrets"},…}`` exactly as kube-apiserver words it.

LIST
    ``{"kind":"SecretList"|"ClusterProfileList","metadata":{"resourceVersion":"N"},"items":[…]}``
    in etcd's order (namespace, then name). ``labelSelector`` (``k=v``, ``k==v``, ``k!=v``,
    ``k``, ``!k``, ``k in (a,b)``, ``k notin (a,b)``, comma-separated) and ``fieldSelector``
    (``metadata.name``, ``metadata.namespace``, and ``type`` for Secrets; ``=``, ``==``, ``!=``)
    filter it; a bad selector is a ``400`` BadRequest Status. ``limit`` + ``continue`` page
    through the *current* state (the list's ``resourceVersion`` is the first page's; a continue
    token older than the compacted history is a ``410`` Expired Status). A list's
    ``resourceVersion`` parameter is accepted and ignored: a list is always the current state,
    which is what ``""``, ``"0"`` and ``NotOlderThan`` allow.

WATCH (``?watch=1`` or ``watch=true`` on a list path)
    A chunked stream of JSON lines ``{"type":"ADDED"|"MODIFIED"|"DELETED"|"BOOKMARK"|"ERROR",
    "object":{…}}``, each object with its ``kind``, ``apiVersion`` and ``resourceVersion``.
    - ``resourceVersion`` unset or ``"0"``: an ``ADDED`` event per current object, then changes.
    - ``resourceVersion=N``: every change after ``N``, from the kept history, then live ones. The
      events of one object arrive in order, and a list's resourceVersion followed by a watch
      from it misses nothing and repeats nothing (the standard list+watch).
    - ``N`` older than the history (see :meth:`HubServer.compact`, and ``history=`` in the
      constructor): one ``ERROR`` event whose object is a ``410`` Status, reason ``Expired``
      (``too old resource version: N (M)``), then the stream ends — what kube-apiserver's watch
      cache does, and what ``kubernetes.watch.Watch`` turns into ``ApiException(410)``.
    - Selectors apply as to a list; an object changed into matching arrives as ``ADDED`` and
      one changed out of matching as ``DELETED``, as the watch cache sends them.
    - ``allowWatchBookmarks=true``: :meth:`HubServer.bookmark` sends a ``BOOKMARK`` whose
      object is only ``kind``, ``apiVersion`` and ``metadata.resourceVersion``.
    - ``timeoutSeconds=S`` ends the stream (cleanly) after ``S`` seconds; without it the stream
      lasts until the client leaves or the hub stops. :meth:`HubServer.wait_for_watchers` lets a
      test wait (without sleeping) until its watch is open.

Authentication and authorization
    Bearer tokens only. No or an unknown token: ``401`` (kube-apiserver's exact body). A known
    token whose :class:`Grant` does not allow the verb (``get``, ``list``, ``watch``), resource
    or namespace: ``403`` Forbidden Status worded as RBAC words it (``secrets "x" is forbidden:
    User "u" cannot get resource "secrets" in API group "" in the namespace "ns"``). Listing all
    namespaces needs a grant for every namespace (``namespaces=None``).

Changes
    :meth:`HubServer.create`, :meth:`~HubServer.update`, :meth:`~HubServer.put` (either) and
    :meth:`~HubServer.delete` bump the hub's one ``resourceVersion`` counter (as etcd's
    revision is shared by all resources), record the change in the history and feed every open
    watch. Objects are stored as given apart from ``metadata`` (name, namespace, uid,
    resourceVersion, creationTimestamp, generation) and a Secret's ``stringData`` (folded into
    ``data`` as base64): a test may store what a real API server would refuse, to play a
    hostile hub. :func:`secret` and :func:`cluster_profile` build well-formed objects.

Observing and breaking it
    :attr:`~HubServer.connections` counts TLS connections (to prove a client reuses one);
    :attr:`~HubServer.requests` lists :class:`HubRequest`\\ s. :meth:`~HubServer.inject_answer`
    makes a path answer with given bytes and :meth:`~HubServer.stall` makes it never answer
    (until released or the hub stops), for clients' error and timeout paths.

:meth:`HubServer.write_kubeconfig` writes a kubeconfig (server, inline CA, token, optional
namespace) for clients. All methods are safe to call from any thread.
"""

from __future__ import annotations

import base64
import bisect
import copy
import itertools
import json
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

from .apiserver import UNAUTHORIZED_STATUS, FakeAPIServer, JSONHandler, bearer_token, status_body
from .http import trickle_head
from .pki import PKI
from .spoke import VERSION_INFO

__all__ = [
    "HubServer",
    "Grant",
    "HubRequest",
    "Resource",
    "SECRETS",
    "CLUSTER_PROFILES",
    "GROUP",
    "CLUSTER_PROFILE_VERSIONS",
    "DEFAULT_USER",
    "secret",
    "cluster_profile",
    "LEASES",
    "COORDINATION_GROUP",
    "lease",
]

GROUP = "multicluster.x-k8s.io"
CLUSTER_PROFILE_VERSIONS: tuple[str, ...] = ("v1alpha1", "v1alpha2")
#: Who a token is when :meth:`HubServer.grant` is not told otherwise.
DEFAULT_USER = "system:serviceaccount:fleet-system:cpcreds"
#: The first resourceVersion the hub hands out is one more than this.
_INITIAL_RESOURCE_VERSION = 100
_VERBS = frozenset({"get", "list", "watch"})
#: The verbs served on Leases only (the one resource clients write).
_WRITE_VERBS = frozenset({"create", "update", "delete"})


@dataclass(frozen=True)
class Resource:
    """One REST resource the hub serves (all are namespaced)."""

    group: str  # "" for the core group
    versions: tuple[str, ...]
    plural: str
    kind: str

    def api_version(self, version: str) -> str:
        return f"{self.group}/{version}" if self.group else version

    @property
    def qualified(self) -> str:
        """How kube-apiserver names it in messages: ``secrets``, ``clusterprofiles.<group>``."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def details(self, name: str | None = None) -> dict[str, str]:
        details = {"name": name} if name is not None else {}
        if self.group:
            details["group"] = self.group
        details["kind"] = self.plural
        return details


SECRETS = Resource("", ("v1",), "secrets", "Secret")
CLUSTER_PROFILES = Resource(GROUP, CLUSTER_PROFILE_VERSIONS, "clusterprofiles", "ClusterProfile")
COORDINATION_GROUP = "coordination.k8s.io"
LEASES = Resource(COORDINATION_GROUP, ("v1",), "leases", "Lease")
_RESOURCES = (SECRETS, CLUSTER_PROFILES, LEASES)


@dataclass(frozen=True)
class Grant:
    """What a token may do. ``None`` means everything: every namespace (which also allows
    listing and watching across all namespaces), every resource (by plural), every verb."""

    user: str = DEFAULT_USER
    namespaces: frozenset[str] | None = None
    resources: frozenset[str] | None = None
    verbs: frozenset[str] | None = None

    def allows(self, verb: str, resource: Resource, namespace: str | None) -> bool:
        if self.verbs is not None and verb not in self.verbs:
            return False
        if self.resources is not None and resource.plural not in self.resources:
            return False
        if self.namespaces is None:
            return True
        return namespace is not None and namespace in self.namespaces


@dataclass(frozen=True)
class HubRequest:
    """One HTTP request as the hub saw it. ``token`` is the bearer token presented (accepted or
    not); ``user`` the grant's user, ``None`` when it was not authenticated; ``path`` has no
    query string, ``query`` is the raw query string. A watch is recorded when it starts.
    ``at`` is when the hub received it (``time.monotonic()``), for tests of a client's backoff."""

    method: str
    path: str
    query: str
    token: str | None
    user: str | None
    status: int
    at: float = field(default_factory=time.monotonic, compare=False)

    @property
    def watch(self) -> bool:
        """Whether the request opened a watch (``watch=1`` or ``watch=true``)."""
        return any(part in ("watch=1", "watch=true", "watch=True") for part in self.query.split("&"))


@dataclass(frozen=True)
class _Change:
    """One entry of the history: what changed at ``rv``. ``old`` is the state before (None for
    ADDED), ``new`` after (None for DELETED; then ``old`` carries the deletion's rv)."""

    rv: int
    resource: Resource
    namespace: str
    type: str
    old: dict[str, Any] | None
    new: dict[str, Any] | None


Matcher = Callable[[Mapping[str, Any]], bool]


class _SelectorError(ValueError):
    pass


@dataclass
class _Watcher:
    """An open watch stream: its filter and the events queued for it (already translated)."""

    resource: Resource
    version: str
    namespace: str | None
    matches: Matcher
    bookmarks: bool
    queue: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    ended: bool = False  # set by HubServer.end_watches: the stream ends cleanly
    muted: bool = False  # set by HubServer.mute_watches: the stream stays open, silent

    def translate(self, change: _Change) -> tuple[str, dict[str, Any]] | None:
        if change.resource is not self.resource or (self.namespace is not None and change.namespace != self.namespace):
            return None
        old = change.old is not None and self.matches(change.old)
        new = change.new is not None and self.matches(change.new)
        if new and (old or change.type == "ADDED"):
            return change.type, _served(change.new, self.resource, self.version)  # type: ignore[arg-type]
        if new:  # changed into matching
            return "ADDED", _served(change.new, self.resource, self.version)  # type: ignore[arg-type]
        if old:  # deleted, or changed out of matching: the watch cache sends DELETED
            gone = dict(change.old)  # type: ignore[arg-type]
            gone["metadata"] = {**gone["metadata"], "resourceVersion": str(change.rv)}
            return "DELETED", _served(gone, self.resource, self.version)
        return None


class HubServer(FakeAPIServer):
    """The fake hub (see the module docstring for the API it speaks).

    ``tokens`` are accepted with a :class:`Grant` to everything; :meth:`grant` gives finer ones.
    ``history`` bounds the changes kept for watches that resume from a resourceVersion; older
    ones are compacted away (a watch from before them gets ``410``).
    """

    label = "HubServer"

    def __init__(
        self,
        pki: PKI | None = None,
        *,
        tokens: Iterable[str] = (),
        history: int = 100_000,
    ) -> None:
        super().__init__(pki)
        self._changed = threading.Condition(self._lock)
        self._grants: dict[str, Grant] = {token: Grant() for token in tokens}
        self._objects: dict[tuple[Resource, str, str], dict[str, Any]] = {}
        self._rv = _INITIAL_RESOURCE_VERSION
        self._history: deque[_Change] = deque()
        self._history_limit = history
        self._compacted = _INITIAL_RESOURCE_VERSION  # watches from an rv below this get 410
        self._watchers: list[_Watcher] = []
        self._requests: deque[HubRequest] = deque(maxlen=100_000)
        self._answers: dict[tuple[str, bool | None], tuple[int, bytes, str, bool, float, tuple[tuple[str, str], ...]]] = {}
        self._stalls: dict[str, threading.Event] = {}
        self._head_trickles: dict[str, threading.Event] = {}
        self._closing = False
        #: Serializes Lease writes through the API: a check of resourceVersion and the write it
        #: guards are one step, as etcd's compare-and-swap makes them.
        self._lease_writes = threading.Lock()

    # -- who may do what ---------------------------------------------------

    def grant(
        self,
        token: str,
        *,
        user: str = DEFAULT_USER,
        namespaces: Iterable[str] | None = None,
        resources: Iterable[str] | None = None,
        verbs: Iterable[str] | None = None,
    ) -> Grant:
        """Accept ``token`` as ``user``, allowed ``verbs`` on ``resources`` (plurals) in
        ``namespaces``; ``None`` means all. Replaces the token's previous grant."""
        verb_set = None if verbs is None else frozenset(verbs)
        if verb_set is not None and not verb_set <= _VERBS | _WRITE_VERBS:
            raise ValueError(f"the hub serves only {sorted(_VERBS | _WRITE_VERBS)}")
        granted = Grant(
            user=user,
            namespaces=None if namespaces is None else frozenset(namespaces),
            resources=None if resources is None else frozenset(resources),
            verbs=verb_set,
        )
        with self._lock:
            self._grants[token] = granted
        return granted

    def revoke(self, token: str) -> None:
        """Stop accepting ``token`` (its next request gets 401)."""
        with self._lock:
            self._grants.pop(token, None)

    # -- objects -----------------------------------------------------------

    @property
    def resource_version(self) -> int:
        """The hub's current resourceVersion (that of its latest change)."""
        with self._lock:
            return self._rv

    def get(self, resource: Resource, namespace: str, name: str) -> dict[str, Any] | None:
        """A copy of the stored object, or None."""
        with self._lock:
            stored = self._objects.get((resource, namespace, name))
            return copy.deepcopy(stored) if stored is not None else None

    def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Store a new object (a Secret or a ClusterProfile, by ``apiVersion`` and ``kind``);
        ``ValueError`` if it exists. Returns the stored object."""
        return self._write(obj, must_exist=False)

    def update(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Replace an existing object; ``KeyError`` if there is none. Returns the stored object."""
        return self._write(obj, must_exist=True)

    def put(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create or replace an object. Returns the stored object."""
        return self._write(obj, must_exist=None)

    def delete(self, resource: Resource, namespace: str, name: str) -> dict[str, Any]:
        """Delete an object (``KeyError`` if absent); watchers get DELETED. Returns its last state."""
        with self._lock:
            key = (resource, namespace, name)
            if key not in self._objects:
                raise KeyError(f'{resource.qualified} "{name}" not found in namespace {namespace}')
            old = self._objects.pop(key)
            self._rv += 1
            last = {**old, "metadata": {**old["metadata"], "resourceVersion": str(self._rv)}}
            self._record_change(_Change(self._rv, resource, namespace, "DELETED", last, None))
            return copy.deepcopy(last)

    def compact(self) -> int:
        """Forget the history up to now, as etcd compaction does: a watch from an older
        resourceVersion, or a continue token from an older list, then gets ``410``. Open watches
        are not affected. Returns the resourceVersion compacted to."""
        with self._lock:
            self._history.clear()
            self._compacted = self._rv
            return self._rv

    def bookmark(self) -> int:
        """Send a BOOKMARK at the current resourceVersion to every open watch that allowed
        bookmarks. Returns that resourceVersion."""
        with self._lock:
            for watcher in self._watchers:
                if watcher.bookmarks:
                    watcher.queue.append(
                        (
                            "BOOKMARK",
                            {
                                "kind": watcher.resource.kind,
                                "apiVersion": watcher.resource.api_version(watcher.version),
                                "metadata": {"resourceVersion": str(self._rv)},
                            },
                        )
                    )
            self._changed.notify_all()
            return self._rv

    def end_watches(self) -> int:
        """End every open watch stream cleanly now, as kube-apiserver does when it restarts or a
        watch reaches its timeout; clients then resume (or relist). Returns how many ended."""
        with self._lock:
            for watcher in self._watchers:
                watcher.ended = True
            self._changed.notify_all()
            return len(self._watchers)

    # -- observing ---------------------------------------------------------

    @property
    def requests(self) -> list[HubRequest]:
        with self._lock:
            return list(self._requests)

    def clear_requests(self) -> None:
        with self._lock:
            self._requests.clear()

    @property
    def watchers(self) -> int:
        """Watch streams open now."""
        with self._lock:
            return len(self._watchers)

    def wait_for_watchers(self, count: int, timeout: float = 10.0) -> bool:
        """Block until at least ``count`` watch streams are open (True) or ``timeout`` passes (False)."""
        with self._lock:
            return self._changed.wait_for(lambda: len(self._watchers) >= count, timeout)

    # -- faults ------------------------------------------------------------

    def inject_answer(
        self,
        path: str,
        status: int,
        body: bytes,
        content_type: str = "application/json",
        *,
        chunked: bool = False,
        watch: bool | None = None,
        trickle: float = 0.0,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Answer every request for ``path`` (no query string), whoever asks, with these bytes
        (and ``headers``, e.g. a redirect's ``Location``);
        ``chunked`` sends them without a Content-Length, as Go does for large answers (and as a
        watch stream comes: ``body`` may be event lines, then the stream ends). ``watch=True``
        answers only watches of ``path``, ``False`` only the other requests (lists), ``None`` both.
        ``trickle`` (seconds; implies ``chunked``) sends the body one byte at a time that far apart,
        until the client hangs up or the hub stops: each read is quick, the answer never ends."""
        with self._lock:
            self._answers[(path, watch)] = (status, body, content_type, chunked or trickle > 0, trickle, tuple((headers or {}).items()))

    def watch_event_line(self, kind: str, obj: Any) -> bytes:
        """One watch event as the hub sends it (a JSON line), for :meth:`inject_answer` bodies."""
        return json.dumps({"type": kind, "object": obj}, separators=(",", ":")).encode() + b"\n"

    def stall(self, path: str) -> threading.Event:
        """Make requests for ``path`` get no answer until the returned event is set (or the hub
        stops); then they are served normally."""
        event = threading.Event()
        with self._lock:
            self._stalls[path] = event
        return event

    def trickle_head(self, path: str) -> threading.Event:
        """Answer requests for ``path`` with a status line and headers that never end, a byte
        at a time (:func:`tests.fakes.http.trickle_head`); the returned event is set when a
        client hangs up on one. :meth:`clear_faults` undoes it for later requests only."""
        event = threading.Event()
        with self._lock:
            self._head_trickles[path] = event
        return event

    def clear_faults(self) -> None:
        """Undo :meth:`inject_answer`, :meth:`stall` (stalled requests are released) and :meth:`trickle_head`."""
        with self._lock:
            stalls = list(self._stalls.values())
            self._answers.clear()
            self._stalls.clear()
            self._head_trickles.clear()
        for event in stalls:
            event.set()

    # -- clients -----------------------------------------------------------

    def kubeconfig(self, token: str, *, namespace: str | None = None, context: str = "hub", user: str = "hub-user") -> dict[str, Any]:
        """A kubeconfig for this hub: inline CA data, ``token``, and the context's ``namespace``."""
        context_body: dict[str, Any] = {"cluster": "hub", "user": user}
        if namespace is not None:
            context_body["namespace"] = namespace
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "hub",
                    "cluster": {"server": self.url, "certificate-authority-data": base64.b64encode(self.ca_pem).decode("ascii")},
                }
            ],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": context, "context": context_body}],
            "current-context": context,
        }

    def write_kubeconfig(self, path: str | Path, token: str, **kwargs: Any) -> Path:
        """Write :meth:`kubeconfig` as YAML to ``path`` (mode 0600) and return the path."""
        target = Path(path)
        target.write_text(yaml.safe_dump(self.kubeconfig(token, **kwargs), sort_keys=False))
        target.chmod(0o600)
        return target

    # -- internals: changes -------------------------------------------------

    def _write(self, obj: Mapping[str, Any], *, must_exist: bool | None) -> dict[str, Any]:
        resource = _resource_of(obj)
        body = copy.deepcopy(dict(obj))
        meta = dict(body.get("metadata") or {})
        name, namespace = meta.get("name"), meta.get("namespace")
        if not isinstance(name, str) or not name or not isinstance(namespace, str) or not namespace:
            raise ValueError("an object needs metadata.name and metadata.namespace")
        if resource is SECRETS and "stringData" in body:
            # What the API server does: stringData is write-only, merged into data.
            data = dict(body.get("data") or {})
            for key, value in (body.pop("stringData") or {}).items():
                data[key] = base64.b64encode(str(value).encode()).decode("ascii")
            body["data"] = data
        with self._lock:
            key = (resource, namespace, name)
            old = self._objects.get(key)
            if must_exist is True and old is None:
                raise KeyError(f'{resource.qualified} "{name}" not found in namespace {namespace}')
            if must_exist is False and old is not None:
                raise ValueError(f'{resource.qualified} "{name}" already exists in namespace {namespace}')
            self._rv += 1
            if old is None:
                meta.setdefault("uid", str(uuid.uuid4()))
                meta.setdefault("creationTimestamp", datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
                meta["generation"] = 1
            else:
                # Identity and birth are the server's, whatever the update says.
                meta["uid"] = old["metadata"]["uid"]
                meta["creationTimestamp"] = old["metadata"]["creationTimestamp"]
                changed_spec = old.get("spec") != body.get("spec")
                meta["generation"] = old["metadata"].get("generation", 1) + (1 if changed_spec else 0)
            meta["resourceVersion"] = str(self._rv)
            body["metadata"] = meta
            if resource.group:
                body.setdefault("apiVersion", resource.api_version(resource.versions[0]))
            self._objects[key] = body
            self._record_change(_Change(self._rv, resource, namespace, "ADDED" if old is None else "MODIFIED", old, body))
            return copy.deepcopy(body)

    def _record_change(self, change: _Change) -> None:
        # Called with the lock held.
        self._history.append(change)
        while len(self._history) > self._history_limit:
            dropped = self._history.popleft()
            self._compacted = dropped.rv
        for watcher in self._watchers:
            event = watcher.translate(change)
            if event is not None and not watcher.muted:
                watcher.queue.append(event)
        self._changed.notify_all()

    def _stopping(self) -> None:
        with self._lock:
            self._closing = True
            stalls = list(self._stalls.values())
            self._changed.notify_all()
        for event in stalls:
            event.set()
        with self._lock:
            # Let open watches end their streams cleanly (the terminating chunk) before the
            # sockets are shut down: clients see the end of a watch, not a broken response.
            self._changed.wait_for(lambda: not self._watchers, timeout=5)

    # -- internals: serving -------------------------------------------------

    def _record(self, seen: HubRequest) -> None:
        with self._lock:
            self._requests.append(seen)

    def _pause(self, seconds: float) -> bool:
        """Wait ``seconds``, or less when the hub stops (then True)."""
        with self._lock:
            return self._changed.wait_for(lambda: self._closing, timeout=seconds)

    def _fault(self, path: str, watch: bool) -> tuple[threading.Event | None, tuple[int, bytes, str, bool, float] | None]:
        with self._lock:
            return self._stalls.get(path), self._answers.get((path, watch), self._answers.get((path, None)))

    def _grant_for(self, token: str | None) -> Grant | None:
        if token is None:
            return None
        with self._lock:
            return self._grants.get(token)

    def _list(self, resource: Resource, version: str, namespace: str | None, query: Mapping[str, str]) -> tuple[int, Any]:
        matches = _matcher(resource, query)
        limit = _positive_int(query.get("limit"))
        start: tuple[str, str] = ("", "")
        list_rv = None
        if query.get("continue"):
            try:
                token = json.loads(base64.urlsafe_b64decode(query["continue"].encode()))
                start, list_rv = (str(token["start"][0]), str(token["start"][1])), int(token["rv"])
            except (ValueError, KeyError, TypeError, IndexError):
                return 400, status_body(400, "BadRequest", "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
        with self._lock:
            if list_rv is not None and list_rv < self._compacted:
                return 410, status_body(
                    410,
                    "Expired",
                    "The provided continue parameter is too old to display a consistent list result. "
                    "You can start a new list without the continue parameter.",
                )
            rv = self._rv if list_rv is None else list_rv
            keys = sorted(
                (ns, name)
                for (res, ns, name) in self._objects
                if res is resource and (namespace is None or ns == namespace) and (ns, name) > start
            )
            items, more = [], 0
            for ns, name in keys:
                obj = self._objects[(resource, ns, name)]
                if not matches(obj):
                    continue
                if limit is not None and len(items) == limit:
                    more += 1
                    continue
                items.append(_served(obj, resource, version, in_list=True))
        metadata: dict[str, Any] = {"resourceVersion": str(rv)}
        if more:
            last = items[-1]["metadata"]
            cursor = {"rv": rv, "start": [last["namespace"], last["name"]]}
            metadata["continue"] = base64.urlsafe_b64encode(json.dumps(cursor).encode()).decode("ascii")
            metadata["remainingItemCount"] = more
        return 200, {"kind": f"{resource.kind}List", "apiVersion": resource.api_version(version), "metadata": metadata, "items": items}

    def _open_watch(
        self, resource: Resource, version: str, namespace: str | None, query: Mapping[str, str]
    ) -> tuple[_Watcher | None, list[tuple[str, dict[str, Any]]]]:
        """Register a watcher and return it with its backlog, atomically (no change can fall
        between them); or (None, [the ERROR event]) when its resourceVersion is too old."""
        watcher = _Watcher(
            resource=resource,
            version=version,
            namespace=namespace,
            matches=_matcher(resource, query),
            bookmarks=query.get("allowWatchBookmarks") in ("true", "1"),
        )
        since = query.get("resourceVersion") or "0"
        with self._lock:
            if since == "0":
                backlog = [
                    ("ADDED", _served(obj, resource, version))
                    for (res, ns, _name), obj in sorted(self._objects.items(), key=lambda item: (item[0][1], item[0][2]))
                    if res is resource and (namespace is None or ns == namespace) and watcher.matches(obj)
                ]
            else:
                try:
                    rv = int(since)
                except ValueError:
                    rv = -1
                if rv < self._compacted:
                    expired = status_body(410, "Expired", f"too old resource version: {since} ({self._compacted})")
                    return None, [("ERROR", expired)]
                history = list(self._history)
                first = bisect.bisect_right([change.rv for change in history], rv)
                backlog = [event for change in history[first:] if (event := watcher.translate(change)) is not None]
            self._watchers.append(watcher)
            self._changed.notify_all()
        return watcher, backlog

    def _next_events(self, watcher: _Watcher, deadline: float | None) -> list[tuple[str, dict[str, Any]]] | None:
        """Wait for the watcher's next events; None when the stream should end (hub stopping or
        timeoutSeconds reached)."""
        with self._lock:
            while not watcher.queue and not self._closing and not watcher.ended:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None
                self._changed.wait(remaining)
            if self._closing or (watcher.ended and not watcher.queue):
                return None
            events, watcher.queue = watcher.queue, []
            return events

    def _close_watch(self, watcher: _Watcher) -> None:
        with self._lock:
            self._watchers.remove(watcher)
            self._changed.notify_all()

    # -- Leases ------------------------------------------------------------

    def stall_lease_writes(self, namespace: str, name: str) -> threading.Event:
        """Hold every write (create, replace, delete) of one Lease unanswered until the returned
        event is set (or the hub stops); reads of it are served. What a replica sees when its
        path to the API server hangs; :meth:`clear_faults` releases it too."""
        return self.stall(_LEASE_WRITES + _lease_path(namespace, name))

    def mute_watches(self) -> int:
        """Make every open watch stream silent from now on, its connection left open: what a
        client sees when the hub, or a proxy on the way, goes away without closing it. Watches
        opened later are served normally. Returns how many were muted."""
        with self._lock:
            for watcher in self._watchers:
                watcher.muted = True
            return len(self._watchers)

    def leases(self, namespace: str) -> dict[str, dict[str, Any]]:
        """The Leases of ``namespace`` by name (copies)."""
        with self._lock:
            return {name: copy.deepcopy(obj) for (res, ns, name), obj in self._objects.items() if res is LEASES and ns == namespace}


# -- routing ----------------------------------------------------------------------------------

_CORE = re.compile(r"/api/v1(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?")
_GROUPED = re.compile(r"/apis/(?P<group>[^/]+)/(?P<version>[^/]+)(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?")
_NOT_FOUND = status_body(404, "NotFound", "the server could not find the requested resource")


def _route(path: str) -> tuple[Resource, str, str | None, str | None] | None:
    """(resource, version, namespace, name) for a resource path, or None."""
    if match := _CORE.fullmatch(path):
        group, version = "", "v1"
    elif match := _GROUPED.fullmatch(path):
        group, version = match.group("group"), match.group("version")
    else:
        return None
    for resource in _RESOURCES:
        if resource.group == group and version in resource.versions and match.group("plural") == resource.plural:
            namespace, name = match.group("ns"), match.group("name")
            return resource, version, unquote(namespace) if namespace else None, unquote(name) if name else None
    return None


def _discovery(path: str, port: int) -> dict[str, Any] | None:
    verbs = sorted(_VERBS)
    if (leases := _lease_discovery(path)) is not None:
        return leases
    if path == "/version":
        return VERSION_INFO
    if path == "/api":
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": f"127.0.0.1:{port}"}],
        }
    if path == "/api/v1":
        return {
            "kind": "APIResourceList",
            "groupVersion": "v1",
            "resources": [{"name": "secrets", "singularName": "secret", "namespaced": True, "kind": "Secret", "verbs": verbs}],
        }
    group = {
        "name": GROUP,
        "versions": [{"groupVersion": f"{GROUP}/{v}", "version": v} for v in reversed(CLUSTER_PROFILE_VERSIONS)],
        "preferredVersion": {"groupVersion": f"{GROUP}/{CLUSTER_PROFILE_VERSIONS[-1]}", "version": CLUSTER_PROFILE_VERSIONS[-1]},
    }
    if path == "/apis":
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [group, _COORDINATION]}
    if path == f"/apis/{GROUP}":
        return {"kind": "APIGroup", "apiVersion": "v1", **group}
    for version in CLUSTER_PROFILE_VERSIONS:
        if path == f"/apis/{GROUP}/{version}":
            return {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": f"{GROUP}/{version}",
                "resources": [
                    {
                        "name": "clusterprofiles",
                        "singularName": "clusterprofile",
                        "namespaced": True,
                        "kind": "ClusterProfile",
                        "verbs": verbs,
                    }
                ],
            }
    return None


def _forbidden(grant: Grant, verb: str, resource: Resource, namespace: str | None, name: str | None) -> dict[str, Any]:
    subject = f'{resource.qualified} "{name}"' if name is not None else resource.qualified
    scope = f'in the namespace "{namespace}"' if namespace is not None else "at the cluster scope"
    message = f'{subject} is forbidden: User "{grant.user}" cannot {verb} resource "{resource.plural}" in API group "{resource.group}" {scope}'
    return status_body(403, "Forbidden", message, resource.details(name))


class _HubHandler(JSONHandler):
    def do_GET(self) -> None:
        self._handle()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def _handle(self) -> None:
        raw = self._read_body()
        hub = self.server.owner
        assert isinstance(hub, HubServer)
        split = urlsplit(self.path)
        path = split.path.rstrip("/") or "/"
        # parse_qs keeps the last value of a repeated parameter, as Go's url.Values.Get does not;
        # clients never repeat them, so either is fine.
        query = {key: values[-1] for key, values in parse_qs(split.query, keep_blank_values=True).items()}
        token = bearer_token(self.headers.get("Authorization"))
        stall, answer = hub._fault(split.path, query.get("watch") in ("1", "true"))
        if stall is not None:
            stall.wait()
        with hub._lock:
            hung_up = hub._head_trickles.get(split.path)
        if hung_up is not None:
            hub._record(HubRequest(self.command, split.path, split.query, token, None, 200))
            if trickle_head(self, hub._pause):
                hung_up.set()
            return
        grant = hub._grant_for(token)

        def record(status: int) -> None:
            # Before answering: once the client has the response, the test may look at
            # `requests`, and it must already be there.
            hub._record(HubRequest(self.command, split.path, split.query, token, grant.user if grant else None, status))

        if answer is not None:
            status, body, content_type, chunked, trickle, headers = answer
            record(status)
            if headers:
                self.send_response(status)
                for name, value in (*headers, ("Content-Type", content_type), ("Content-Length", str(len(body)))):
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)
            elif chunked:
                self._send_chunked(status, body, content_type, trickle)
            else:
                self._send_bytes(status, body, content_type)
            return
        if grant is None:
            record(401)
            self._send_json(401, UNAUTHORIZED_STATUS)
            return
        if self.command != "GET":
            _serve_lease_write(self, hub, path, raw, grant, record)
            return
        discovered = _discovery(path, hub.port)
        if discovered is not None:
            record(200)
            self._send_json(200, discovered)
            return
        routed = _route(path)
        if routed is None:
            record(404)
            self._send_json(404, _NOT_FOUND)
            return
        resource, version, namespace, name = routed
        watch = query.get("watch") in ("1", "true")
        verb = "get" if name is not None else "watch" if watch else "list"
        if not grant.allows(verb, resource, namespace):
            record(403)
            self._send_json(403, _forbidden(grant, verb, resource, namespace, name))
            return
        if name is not None:
            if namespace is None:
                record(404)
                self._send_json(404, _NOT_FOUND)
                return
            with hub._lock:
                stored = hub._objects.get((resource, namespace, name))
                body = _served(stored, resource, version) if stored is not None else None
            if body is None:
                record(404)
                self._send_json(404, status_body(404, "NotFound", f'{resource.qualified} "{name}" not found', resource.details(name)))
                return
            record(200)
            self._send_json(200, body)
            return
        try:
            if watch:
                self._watch(hub, resource, version, namespace, query, record)
                return
            status, listed = hub._list(resource, version, namespace, query)
        except _SelectorError as exc:
            record(400)
            self._send_json(400, status_body(400, "BadRequest", str(exc)))
            return
        record(status)
        self._send_json(status, listed)

    def _watch(
        self,
        hub: HubServer,
        resource: Resource,
        version: str,
        namespace: str | None,
        query: Mapping[str, str],
        record: Callable[[int], None],
    ) -> None:
        timeout = _positive_int(query.get("timeoutSeconds"))
        deadline = None if timeout is None else time.monotonic() + timeout
        watcher, backlog = hub._open_watch(resource, version, namespace, query)
        record(200)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            self._send_events(backlog)
            while watcher is not None:
                events = hub._next_events(watcher, deadline)
                if events is None:
                    break
                self._send_events(events)
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True  # the client left
        finally:
            if watcher is not None:
                hub._close_watch(watcher)

    def _send_chunked(self, status: int, body: bytes, content_type: str, trickle: float = 0.0) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        hub = self.server.owner
        assert isinstance(hub, HubServer)
        try:
            if trickle:
                for byte in itertools.cycle(body or b" "):  # never ends: the client must give up
                    self.wfile.write(b"1\r\n%c\r\n" % byte)
                    self.wfile.flush()
                    if hub._pause(trickle):
                        self.close_connection = True
                        return
            for start in range(0, len(body), 64 * 1024):
                piece = body[start : start + 64 * 1024]
                self.wfile.write(b"%X\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True  # the client stopped reading (as it should, past its limit)

    def _send_events(self, events: list[tuple[str, dict[str, Any]]]) -> None:
        # One chunk per event, as kube-apiserver flushes each one.
        for kind, obj in events:
            line = json.dumps({"type": kind, "object": obj}, separators=(",", ":")).encode() + b"\n"
            self.wfile.write(b"%X\r\n%s\r\n" % (len(line), line))


# -- objects as served ------------------------------------------------------------------------


def _resource_of(obj: Mapping[str, Any]) -> Resource:
    api_version, kind = obj.get("apiVersion", "v1" if obj.get("kind") == "Secret" else None), obj.get("kind")
    for resource in _RESOURCES:
        if kind == resource.kind and any(api_version == resource.api_version(v) for v in resource.versions):
            return resource
    raise ValueError(f"the hub stores Secrets (v1) and ClusterProfiles ({GROUP}); not {api_version}/{kind}")


def _served(obj: dict[str, Any], resource: Resource, version: str, *, in_list: bool = False) -> dict[str, Any]:
    # A core list leaves kind and apiVersion out of its items, as kube-apiserver does; a custom
    # resource list keeps them; single objects and watch events always have them.
    body = {key: value for key, value in obj.items() if key not in ("apiVersion", "kind")}
    if in_list and not resource.group:
        return body
    return {"apiVersion": resource.api_version(version), "kind": resource.kind, **body}


def _positive_int(value: str | None) -> int | None:
    if value is None or not value.isdigit() or int(value) <= 0:
        return None
    return int(value)


_REQUIREMENT = re.compile(
    r"\s*(?:(?P<not>!)\s*(?P<absent>[^\s,!=()]+)"
    r"|(?P<key>[^\s,!=()]+)\s*(?:(?P<op>==|!=|=)\s*(?P<value>[^\s,!=()]*)"
    r"|\s+(?P<setop>in|notin)\s*\((?P<values>[^()]*)\))?)\s*"
)


def _split_requirements(text: str) -> list[str]:
    parts, depth, current = [], 0, []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [part for part in parts if part.strip()]


def _label_matcher(text: str) -> Matcher:
    tests: list[Callable[[Mapping[str, str]], bool]] = []
    for requirement in _split_requirements(text):
        match = _REQUIREMENT.fullmatch(requirement)
        if match is None:
            raise _SelectorError(f"unable to parse requirement: {requirement.strip()!r}")
        if match.group("absent"):
            key = match.group("absent")
            tests.append(lambda labels, k=key: k not in labels)
        elif match.group("op"):
            key, value, equal = match.group("key"), match.group("value"), match.group("op") != "!="
            tests.append(lambda labels, k=key, v=value, e=equal: (labels.get(k) == v) == e)
        elif match.group("setop"):
            key = match.group("key")
            values = frozenset(v.strip() for v in match.group("values").split(",") if v.strip())
            inside = match.group("setop") == "in"
            tests.append(lambda labels, k=key, vs=values, i=inside: (labels.get(k) in vs) == i if k in labels else not i)
        else:
            key = match.group("key")
            tests.append(lambda labels, k=key: k in labels)

    def matches(obj: Mapping[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        return all(test(labels) for test in tests)

    return matches


def _field_matcher(resource: Resource, text: str) -> Matcher:
    fields = {"metadata.name": ("metadata", "name"), "metadata.namespace": ("metadata", "namespace")}
    if resource is SECRETS:
        fields["type"] = ("type",)
    tests: list[Callable[[Mapping[str, Any]], bool]] = []
    for requirement in _split_requirements(text):
        match = re.fullmatch(r"\s*([^\s!=]+)\s*(==|!=|=)\s*([^\s]*)\s*", requirement)
        if match is None:
            raise _SelectorError(f"invalid selector: '{requirement.strip()}'; can't understand '{requirement.strip()}'")
        name, op, value = match.groups()
        if name not in fields:
            raise _SelectorError(f'"{name}" is not a known field selector: only "{", ".join(sorted(fields))}"')

        def get(obj: Mapping[str, Any], path: tuple[str, ...] = fields[name]) -> Any:
            current: Any = obj
            for part in path:
                current = current.get(part) if isinstance(current, Mapping) else None
            return current

        tests.append(lambda obj, g=get, v=value, e=op != "!=": (g(obj) == v) == e)
    return lambda obj: all(test(obj) for test in tests)


def _matcher(resource: Resource, query: Mapping[str, str]) -> Matcher:
    labels = _label_matcher(query.get("labelSelector", ""))
    fields = _field_matcher(resource, query.get("fieldSelector", ""))
    return lambda obj: labels(obj) and fields(obj)


# -- building objects -------------------------------------------------------------------------


def secret(
    namespace: str,
    name: str,
    data: Mapping[str, bytes | str] | None = None,
    *,
    labels: Mapping[str, str] | None = None,
    type: str = "Opaque",
) -> dict[str, Any]:
    """A well-formed Secret; ``data`` values are bytes or text, base64-encoded here."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = dict(labels)
    encoded = {key: base64.b64encode(value.encode() if isinstance(value, str) else value).decode("ascii") for key, value in (data or {}).items()}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": metadata, "type": type, "data": encoded}


def cluster_profile(
    namespace: str,
    name: str,
    access_providers: Iterable[Mapping[str, Any]] = (),
    *,
    version: str = "v1alpha1",
    labels: Mapping[str, str] | None = None,
    cluster_manager: str = "fleet-manager",
) -> dict[str, Any]:
    """A well-formed ClusterProfile in ``version`` with ``status.accessProviders``."""
    if version not in CLUSTER_PROFILE_VERSIONS:
        raise ValueError(f"ClusterProfile versions: {CLUSTER_PROFILE_VERSIONS}")
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = dict(labels)
    return {
        "apiVersion": f"{GROUP}/{version}",
        "kind": "ClusterProfile",
        "metadata": metadata,
        "spec": {"displayName": name, "clusterManager": {"name": cluster_manager}},
        "status": {"accessProviders": [dict(provider) for provider in access_providers]},
    }


def lease(
    namespace: str,
    name: str,
    holder: str,
    *,
    renew_time: str | None = None,
    duration: int = 15,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A well-formed Lease held by ``holder``, renewed at ``renew_time`` (MicroTime text; now
    when None), for :meth:`HubServer.create` (a departed replica's Lease, say)."""
    now = renew_time or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = dict(annotations)
    spec = {"holderIdentity": holder, "leaseDurationSeconds": duration, "acquireTime": now, "renewTime": now}
    return {"apiVersion": f"{COORDINATION_GROUP}/v1", "kind": "Lease", "metadata": metadata, "spec": spec}


# -- Leases as kube-apiserver serves them ------------------------------------------------------
#
# coordination.k8s.io/v1 Leases are the one resource the hub lets clients write: POST creates
# (201; 409 AlreadyExists), PUT replaces with a resourceVersion check (409 Conflict worded as
# kube-apiserver words it; 422 without a resourceVersion, as Leases do not allow unconditional
# updates; 404 when absent), DELETE deletes (200 Success Status; DeleteOptions.preconditions on
# resourceVersion and uid, 409 when they do not hold). acquireTime and renewTime are MicroTimes:
# exactly six fractional digits and a zone (Go's "2006-01-02T15:04:05.000000Z07:00"), anything
# else a 400 as the API server's decoder answers it; leaseDurationSeconds must be positive (422).

_LEASE_WRITES = "writes "  # prefix of a stall key: never a URL path, which starts with "/"
_MICRO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(?:Z|[+-]\d{2}:\d{2})")
_COORDINATION = {
    "name": COORDINATION_GROUP,
    "versions": [{"groupVersion": f"{COORDINATION_GROUP}/v1", "version": "v1"}],
    "preferredVersion": {"groupVersion": f"{COORDINATION_GROUP}/v1", "version": "v1"},
}


def _lease_path(namespace: str, name: str) -> str:
    return f"/apis/{COORDINATION_GROUP}/v1/namespaces/{namespace}/leases/{name}"


def _lease_discovery(path: str) -> dict[str, Any] | None:
    if path == f"/apis/{COORDINATION_GROUP}":
        return {"kind": "APIGroup", "apiVersion": "v1", **_COORDINATION}
    if path == f"/apis/{COORDINATION_GROUP}/v1":
        verbs = sorted(_VERBS | _WRITE_VERBS | {"deletecollection", "patch"})
        resource = {"name": "leases", "singularName": "lease", "namespaced": True, "kind": "Lease", "verbs": verbs}
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{COORDINATION_GROUP}/v1", "resources": [resource]}
    return None


def _bad_lease(body: Any, namespace: str, name: str | None) -> tuple[int, dict[str, Any]] | None:
    """The 400 or 422 kube-apiserver answers for a Lease body, or None when it is acceptable."""
    undecodable = 'Lease in version "v1" cannot be handled as a Lease: '
    if not isinstance(body, dict) or body.get("kind") not in (None, "Lease") or body.get("apiVersion") not in (None, f"{COORDINATION_GROUP}/v1"):
        return 400, status_body(400, "BadRequest", undecodable + "the body is not a coordination.k8s.io/v1 Lease")
    meta, spec = body.get("metadata"), body.get("spec")
    if not isinstance(meta, dict) or not isinstance(spec if spec is not None else {}, dict):
        return 400, status_body(400, "BadRequest", undecodable + "metadata and spec must be objects")
    for field_name in ("acquireTime", "renewTime"):
        value = (spec or {}).get(field_name)
        if value is not None and not (isinstance(value, str) and _MICRO_TIME.fullmatch(value)):
            message = f'parsing time "{value}" as "2006-01-02T15:04:05.000000Z07:00": cannot parse {json.dumps(value)} as ".000000"'
            return 400, status_body(400, "BadRequest", undecodable + message)
    if meta.get("namespace") not in (None, "", namespace):
        return 400, status_body(400, "BadRequest", "the namespace of the provided object does not match the namespace sent on the request")
    target = meta.get("name")
    if not isinstance(target, str) or not target or (name is not None and target != name):
        return 400, status_body(400, "BadRequest", "the name of the object (metadata.name) does not match the name on the URL")
    duration = (spec or {}).get("leaseDurationSeconds")
    if duration is not None and (not isinstance(duration, int) or isinstance(duration, bool) or duration <= 0):
        message = f'Lease.coordination.k8s.io "{target}" is invalid: spec.leaseDurationSeconds: Invalid value: {json.dumps(duration)}: must be greater than 0'
        return 422, status_body(422, "Invalid", message, LEASES.details(target))
    return None


def _serve_lease_write(handler: JSONHandler, hub: HubServer, path: str, raw: bytes | None, grant: Grant, record: Callable[[int], None]) -> None:
    """Answer a POST, PUT or DELETE: Leases only (405 on anything else), as described above."""

    def answer(status: int, body: dict[str, Any]) -> None:
        record(status)
        handler._send_json(status, body)

    routed = _route(path)
    if routed is None or routed[0] is not LEASES or routed[2] is None or handler.command not in ("POST", "PUT", "DELETE"):
        answer(405, status_body(405, "MethodNotAllowed", "the server does not allow this method on the requested resource"))
        return
    _, _, namespace, name = routed
    if (handler.command == "POST") != (name is None):
        answer(405, status_body(405, "MethodNotAllowed", "the server does not allow this method on the requested resource"))
        return
    verb = {"POST": "create", "PUT": "update", "DELETE": "delete"}[handler.command]
    if not grant.allows(verb, LEASES, namespace):
        answer(403, _forbidden(grant, verb, LEASES, namespace, name))
        return
    try:
        body = json.loads(raw) if raw else ({} if verb == "delete" else None)
    except ValueError:
        body = None
    if raw is None or (verb == "delete" and not isinstance(body, dict)):
        answer(400, status_body(400, "BadRequest", "the request body could not be read"))
        return
    assert namespace is not None
    target = name if name is not None else ((body or {}).get("metadata") or {}).get("name") if isinstance(body, dict) else None
    if isinstance(target, str) and (stall := hub._fault(_LEASE_WRITES + _lease_path(namespace, target), False)[0]) is not None:
        stall.wait()
    if verb != "delete" and (bad := _bad_lease(body, namespace, name)) is not None:
        answer(*bad)
        return
    with hub._lease_writes:
        if verb == "create":
            lease_name = body["metadata"]["name"]
            if hub.get(LEASES, namespace, lease_name) is not None:
                answer(409, status_body(409, "AlreadyExists", f'leases.{COORDINATION_GROUP} "{lease_name}" already exists', LEASES.details(lease_name)))
                return
            meta = {k: v for k, v in body["metadata"].items() if k not in ("resourceVersion", "uid", "creationTimestamp", "generation")}
            answer(201, _served(hub.create({**body, "apiVersion": f"{COORDINATION_GROUP}/v1", "kind": "Lease", "metadata": {**meta, "namespace": namespace}}), LEASES, "v1"))
            return
        assert name is not None
        stored = hub.get(LEASES, namespace, name)
        if stored is None:
            answer(404, status_body(404, "NotFound", f'leases.{COORDINATION_GROUP} "{name}" not found', LEASES.details(name)))
            return
        conflict = f'Operation cannot be fulfilled on leases.{COORDINATION_GROUP} "{name}": '
        if verb == "update":
            wanted = body["metadata"].get("resourceVersion")
            if not wanted:
                message = f'Lease.coordination.k8s.io "{name}" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update'
                answer(422, status_body(422, "Invalid", message, LEASES.details(name)))
                return
            if wanted != stored["metadata"]["resourceVersion"]:
                message = conflict + "the object has been modified; please apply your changes to the latest version and try again"
                answer(409, status_body(409, "Conflict", message, LEASES.details(name)))
                return
            meta = {**body["metadata"], "namespace": namespace}
            answer(200, _served(hub.update({**body, "apiVersion": f"{COORDINATION_GROUP}/v1", "kind": "Lease", "metadata": meta}), LEASES, "v1"))
            return
        preconditions = body.get("preconditions") or {}
        for field_name, key in (("resourceVersion", "ResourceVersion"), ("uid", "UID")):
            wanted, held = preconditions.get(field_name), stored["metadata"].get(field_name)
            if wanted is not None and wanted != held:
                message = conflict + f"Precondition failed: {key} in precondition: {wanted}, {key} in object meta: {held}"
                answer(409, status_body(409, "Conflict", message, LEASES.details(name)))
                return
        hub.delete(LEASES, namespace, name)
        answer(200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": {**LEASES.details(name), "uid": stored["metadata"]["uid"]}})


HubServer.handler_class = _HubHandler
