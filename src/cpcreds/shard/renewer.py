"""The renewer: writes this replica's Lease every ``retry_interval`` from a thread of its own
(creating it when absent, re-reading it and retrying on 409, never taking it from another live
holder: :mod:`~cpcreds.shard.ownlease` is the Lease lock), and stamps when the last renewal that
succeeded *started*. It renews only while the watch of the peers is heard from: a replica blind
to its peers must let them take its keys, not keep telling them it is alive.

A thread of its own, never the caller's event loop: a busy loop must not make a healthy replica
look dead.
"""

from __future__ import annotations

import math
import time

from ..fleet.hub import problem_text
from ..logs import get_logger
from .connection import LeaseConnection
from .leases import LeaseAPI
from .ownlease import LeaseHeld, OwnLease
from .seen import Seen

__all__ = ["Renewer"]

_log = get_logger("cpcreds.shard")


class Renewer:
    """Renews ``own`` through ``connection`` while ``seen`` says the watch is heard from;
    ``release_within`` bounds the release at stop (the hub's request timeout)."""

    def __init__(self, own: OwnLease, seen: Seen, connection: LeaseConnection, *, release_within: float) -> None:
        self.own, self.seen, self.connection = own, seen, connection
        self.release_within = release_within
        self._withholding = False  # renewals withheld: the peers' Leases not heard from

    @property
    def where(self) -> str:
        return f"{self.own.namespace}/{self.own.name}"

    def run(self) -> None:
        """The renewer thread: one renewal per ``retry_interval`` until the shard stops."""
        interval = self.seen.timings.retry_interval
        api: LeaseAPI | None = None
        while not self.seen.stopping.is_set():
            tick = time.monotonic()
            if self._heard_recently(tick + interval):
                api = self.renew_once(api)
            self.seen.stopping.wait(max(0.0, tick + interval - time.monotonic()))

    def _heard_recently(self, until: float) -> bool:
        """Whether the watch of the peers was heard from within ``renew_deadline`` (waiting for it
        until ``until``, monotonic). A replica that cannot see its peers is fenced, and must not
        renew either: its renewals would tell the peers it is alive, and they would leave its keys
        to it for as long as it cannot watch. Not renewing, its share moves to them within
        ``renew_deadline`` + ``lease_duration``; once the watch is heard again it renews, and
        claims one interval later, as any replica fresh again after a gap."""
        seen = self.seen
        with seen.cond:
            while not seen.stopping.is_set():
                now = time.monotonic()
                if seen.heard(now):
                    if self._withholding:
                        self._withholding = False
                        _log.warning("shard Lease renewed again: the peers' Leases are watched again", lease=self.own.name)
                    return True
                if now >= until:
                    break
                seen.cond.wait(until - now)
            withheld = not self._withholding and seen.heard_at > -math.inf and not seen.stopping.is_set()
            self._withholding = self._withholding or withheld
        if withheld:
            _log.warning(
                "shard Lease not renewed: the peers' Leases were not heard from for the renew deadline; this replica's profiles move to the peers",
                lease=self.own.name,
                error=seen.problem,
            )
        return False

    def renew_once(self, api: LeaseAPI | None) -> LeaseAPI | None:
        """One renewal (or creation, or take-over of a free Lease); the API to use next time."""
        seen, timings = self.seen, self.seen.timings
        started = time.monotonic()
        try:
            api = self.connection.api(api)
            self.own.renew(api, started + timings.renew_deadline)
            seen.problem = ""
            with seen.cond:
                done = time.monotonic()
                if done - seen.renewed_at >= timings.renew_deadline:
                    # Fresh again after a gap (or for the first time): peers may hold this
                    # replica's keys until they see the renewal, so claim one interval later.
                    seen.settled_at = done + timings.retry_interval
                seen.renewed_at = started
                seen.cond.notify_all()
        except LeaseHeld as exc:  # another live holder: not fresh, said in problem, /readyz, metrics
            self.own.counts["contended"] += 1
            seen.problem = str(exc)
        except Exception as exc:  # noqa: BLE001 - a hub failure: counted, shown, retried next tick
            if seen.stopping.is_set():
                return api
            seen.problem = f"renewing Lease {self.where}: {problem_text(exc)}"
            self.own.counts["failed"] += 1
            _log.warning("shard Lease renewal failed", lease=self.own.name, error=seen.problem)
            api = None if isinstance(exc, OSError) else api
        return api

    def release(self) -> None:
        """Empty the holder if the Lease is still ours, so peers take over at once (one attempt,
        bounded by the renew deadline and the hub's request timeout)."""
        deadline = time.monotonic() + min(self.seen.timings.renew_deadline, self.release_within)
        try:
            self.own.release(self.connection.api(), deadline)
        except Exception as exc:  # noqa: BLE001 - peers then take over after the lease duration
            self.seen.problem = f"releasing Lease {self.where}: {problem_text(exc)}"
            _log.warning("shard Lease release failed", lease=self.own.name, error=self.seen.problem)

