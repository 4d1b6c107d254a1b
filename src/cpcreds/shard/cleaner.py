"""The cleaner: deletes the Leases of departed peers, with a ``resourceVersion`` precondition
(so one whose replica came back in between is kept), in a thread of its own: a hub slow to
answer a delete must never hold up judging who is alive.
"""

from __future__ import annotations

import time

from ..fleet.hub import problem_text
from ..logs import get_logger
from .connection import LeaseConnection
from .leases import LeaseAPI
from .seen import Seen

__all__ = ["Cleaner"]

_log = get_logger("cpcreds.shard")


class Cleaner:
    """Deletes, every retry interval, the Leases ``seen`` holds as departed (not alive)."""

    def __init__(self, seen: Seen, connection: LeaseConnection) -> None:
        self.seen, self.connection = seen, connection
        #: Departed peers' Leases deleted by this replica.
        self.cleaned = 0
        self._api: LeaseAPI | None = None

    def run(self) -> None:
        """The cleaner thread."""
        seen = self.seen
        while not seen.stopping.is_set():
            with seen.cond:
                now = time.monotonic()
                departed = [(p.name, p.resource_version) for p in seen.peers.values() if not p.alive(now) and p.resource_version]
            for name, version in departed:
                self.clean(name, version)
            with seen.cond:
                if not seen.stopping.is_set():
                    seen.cond.wait(seen.timings.retry_interval)

    def clean(self, name: str, version: str) -> None:
        """Delete a departed peer's Lease, only if it is still the version judged departed."""
        seen = self.seen
        try:
            self._api = self.connection.api(self._api)
            status, _ = self._api.delete(name, version, seen.timings.retry_interval)
        except Exception as exc:  # noqa: BLE001 - another replica may clean it; try again later
            _log.info("shard could not delete a departed Lease", lease=name, error=problem_text(exc))
            return
        with seen.cond:
            peer = seen.peers.get(name)
            if status in (200, 404) and peer is not None and peer.resource_version == version:
                del seen.peers[name]
            elif status == 409 and peer is not None and peer.resource_version == version:
                peer.resource_version = ""  # changed since: the watch will say how
        if status == 200:
            self.cleaned += 1
