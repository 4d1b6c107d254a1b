"""The peer watcher: lists the group's Leases (by label) and watches them from a thread of its
own, noting for every peer whose Lease is named for its holder (:mod:`~cpcreds.shard.rules`) when
its ``renewTime`` or holder last changed, *as seen here*. client-go's leader election does the
same: clock skew between machines never matters.

Every delivery also stamps when the watch was last heard from: every member's renewals, this
replica's own included, come through it, so a silent watch fences this replica (see
:mod:`~cpcreds.shard.seen` and the judge).
"""

from __future__ import annotations

import time
from typing import Any

from ..fleet.hub import HubProblem, backoff_delay, problem_text
from ..logs import get_logger
from . import STATUS_URL
from .connection import LeaseConnection
from .leases import LeaseAPI, events, message, shut
from .ownlease import GROUP_LABEL, STATUS_ANNOTATION
from .rules import declared_duration, lease_name
from .seen import Peer, Seen

__all__ = ["PeerWatcher"]

_log = get_logger("cpcreds.shard")

#: A watch is reopened this often even when it works (the hub's own limit is usually longer).
_WATCH_SECONDS = 300


class PeerWatcher:
    """Keeps ``seen.peers`` and ``seen.heard_at`` current for ``group``'s Leases; ``own_lease``
    (this replica's) is only heard, never a peer; ``duration_cap`` is the longest a peer may
    declare (this group's own, as written); ``request_timeout`` bounds each list and watch open."""

    def __init__(self, seen: Seen, connection: LeaseConnection, *, group: str, own_lease: str, duration_cap: float, request_timeout: float) -> None:
        self.seen, self.connection = seen, connection
        self.group, self.own_lease, self.duration_cap = group, own_lease, duration_cap
        self.request_timeout = request_timeout
        self.selector = f"{GROUP_LABEL}={group}"
        self._response: Any = None  # the open watch, to shut from another thread

    @property
    def watching(self) -> bool:
        """Whether a watch is open now."""
        return self._response is not None

    def end(self) -> None:
        """Shut the open watch's connection: a thread blocked reading it wakes at once."""
        response = self._response
        if response is not None:
            shut(response)

    def run(self) -> None:
        """The watcher thread: list, then watch from the list's version; relist after a failure
        (backing off, at most a retry interval: Leases are short)."""
        seen = self.seen
        failures = 0
        api: LeaseAPI | None = None
        while not seen.stopping.is_set():
            try:
                api = self.connection.api(api)
                version = self._relist(api)
                while not seen.stopping.is_set():
                    version = self._watch(api, version)
                    failures = 0
            except Exception as exc:  # noqa: BLE001 - report, back off, relist
                if seen.stopping.is_set():
                    return
                failures += 1
                api = None
                seen.problem = f"watching Leases in {self.connection.namespace}: {problem_text(exc)}"
                _log.warning("shard Lease watch failed; relisting", error=seen.problem)
                seen.stopping.wait(min(backoff_delay(failures), seen.timings.retry_interval))

    def _relist(self, api: LeaseAPI) -> str:
        status, body = api.list(self.selector, self.request_timeout)
        if status != 200 or not isinstance(body.get("items"), list):
            raise HubProblem(f"listing Leases: HTTP {status}: {message(body)}")
        version = str((body.get("metadata") or {}).get("resourceVersion") or "")
        if not version:
            raise HubProblem("the Lease list has no metadata.resourceVersion to watch from")
        seen = self.seen
        now = time.monotonic()
        with seen.cond:
            listed = set()
            for item in body["items"]:
                if isinstance(item, dict) and (name := _name(item)):
                    listed.add(name)
                    self._observe(item, now)
            for name in set(seen.peers) - listed:
                del seen.peers[name]
            seen.ignored &= listed
            seen.heard_at = now
            seen.cond.notify_all()
        return version

    def _watch(self, api: LeaseAPI, version: str) -> str:
        seen = self.seen
        response = api.watch(self.selector, version, _WATCH_SECONDS, self.request_timeout)
        self._response = response
        try:
            if seen.stopping.is_set():
                return version
            for kind, item in events(response):
                if kind == "ERROR":
                    raise HubProblem(f"the Lease watch failed: {message(item)}")
                now = time.monotonic()
                delivered = (item.get("metadata") or {}).get("resourceVersion")
                version = delivered if isinstance(delivered, str) and delivered else version
                with seen.cond:
                    seen.heard_at = now
                    name = _name(item)
                    if kind == "DELETED" and name:
                        seen.peers.pop(name, None)
                        seen.ignored.discard(name)
                    elif kind != "BOOKMARK" and name:
                        self._observe(item, now)
                    seen.cond.notify_all()
        finally:
            self._response = None
            if seen.stopping.is_set():
                response.close()  # its connection too: the hub sees the watch go at once
            else:
                response.release_conn()
        return version

    def _observe(self, item: dict[str, Any], now: float) -> None:
        """Note a peer's Lease (called with the condition held); this replica's own is only heard."""
        name = _name(item)
        if not name or name == self.own_lease:
            return
        seen = self.seen
        spec = item.get("spec") if isinstance(item.get("spec"), dict) else {}
        holder = spec.get("holderIdentity") if isinstance(spec.get("holderIdentity"), str) else ""
        if holder and lease_name(self.group, holder) != name:
            # Not the Lease of the member it names (a leftover, or anyone's write): it keeps
            # nobody alive, and is not ours to delete.
            seen.peers.pop(name, None)
            if name not in seen.ignored:
                seen.ignored.add(name)
                _log.warning("shard ignores a Lease whose name is not its holder's", lease=name[:100], holder=holder[:100])
            return
        seen.ignored.discard(name)
        duration = declared_duration(spec.get("leaseDurationSeconds"), self.duration_cap)
        annotations = (item.get("metadata") or {}).get("annotations") or {}
        url = annotations.get(STATUS_ANNOTATION, "") if isinstance(annotations, dict) else ""
        # A malformed URL is not announced: it would be sent to clients in a Location header.
        url = url if isinstance(url, str) and STATUS_URL.fullmatch(url) else ""
        version = str((item.get("metadata") or {}).get("resourceVersion") or "")
        known = seen.peers.get(name)
        renew = spec.get("renewTime")
        if known is None or known.holder != holder or known.renew_time != renew:
            seen.peers[name] = Peer(name, holder, renew, duration, version, str(url), now)
        else:
            known.duration, known.resource_version, known.status_url = duration, version, str(url)


def _name(item: dict[str, Any]) -> str:
    name = (item.get("metadata") or {}).get("name") if isinstance(item.get("metadata"), dict) else None
    return name if isinstance(name, str) else ""
