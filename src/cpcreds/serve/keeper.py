"""Keep every profile's credential warm: fetch it once, refresh it ahead of expiry (with jitter),
retry failures with backoff, forget profiles that go away.

One asyncio task per profile, sleeping between fetches; a semaphore bounds how many fetches run
at once, so 10,000 profiles never start 10,000 plugins together. All fetching goes through the
engine (its cache, single-flight, timeouts, plugin kills and failover); the keeper only decides
*when*, and records which provider answered (``answeredBy`` in ``/v1/clusters``).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any


from ..access import AccessPlan
from ..binding import Binding
from ..credential import Credential
from ..engine import CredentialEngine
from ..errors import CredentialError, NoMatchingProvider
from ..logs import get_logger
from ..policies import BackoffPolicy
from ..fleet.inventory import Change
from .status import ClusterStatus, ProbeResult, StatusBoard, control_plane_healthy

__all__ = ["Keeper"]

# Through logging (stderr, redacted), never structlog's default printer (stdout, unredacted).
_log = get_logger("cpcreds.serve")

#: How soon to look again when the engine answered from cache while its own background refresh
#: runs (the keeper then picks up the new credential).
_RECHECK_SECONDS = 1.0

Probe = Callable[[Mapping[str, Any]], Awaitable[ProbeResult]]
Listener = Callable[[str, "AccessPlan | None", Mapping[str, Any] | None], None]


class _Tracked:
    __slots__ = ("profile", "plan", "binding", "status", "task", "credential", "answered", "first_done")

    def __init__(self, profile: dict[str, Any], status: ClusterStatus) -> None:
        self.profile = profile
        self.plan: AccessPlan | None = None
        #: The profile's handle on the engine (its failover state included), kept for its life.
        self.binding: Binding | None = None
        #: The plan whose credential is held (the preferred one, or the one failed over to).
        self.answered: AccessPlan | None = None
        self.status = status
        self.task: asyncio.Task[None] | None = None
        self.credential: Credential | None = None
        self.first_done = False


class Keeper:
    """Tracks the inventory's profiles and keeps their credentials fresh through ``engine``.

    ``on_plan(key, plan, profile)`` is called when a profile's plan is set or changes (``plan`` and
    ``profile`` None when the profile is gone or unusable): the kubeconfig writer listens there.
    """

    def __init__(
        self,
        engine: CredentialEngine,
        board: StatusBoard,
        *,
        concurrency: int = 32,
        jitter: float = 0.1,
        backoff: BackoffPolicy | None = None,
        probe: Probe | None = None,
        probe_interval: float = 60.0,
        on_plan: Listener | None = None,
        may_fetch: Callable[[str], bool] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.engine = engine
        self.board = board
        self.jitter = jitter
        self.backoff = backoff or BackoffPolicy(initial=1.0, maximum=300.0)
        self.probe = probe
        self.probe_interval = probe_interval
        self.on_plan = on_plan
        #: Asked before every fetch (``cpcreds serve --shard``: this replica still owns the key).
        self.may_fetch = may_fetch
        self.clock = clock
        self._slots = asyncio.Semaphore(concurrency)
        self._tracked: dict[str, _Tracked] = {}
        self._waiting_first = 0
        self._first_round = asyncio.Event()
        self._inventory_loaded = False

    # -- inventory ---------------------------------------------------------------------------

    def apply(self, change: Change) -> None:
        """Take a change from an inventory source: start, restart or stop profiles' tasks."""
        for origin, problem in change.problems.items():
            self.board.set_problem(origin, problem)
            if problem:
                _log.warning("inventory problem", origin=origin, problem=problem)
        for key in change.deletes:
            self._forget(key)
        for key, (profile, origin) in change.upserts.items():
            tracked = self._tracked.get(key)
            if tracked is not None and tracked.profile == profile:
                tracked.status.origin = origin
                continue
            self._track(key, profile, origin)

    def inventory_loaded(self) -> None:
        """The source has delivered its first full listing: readiness now waits only on fetches."""
        self._inventory_loaded = True
        self._check_first_round()

    @property
    def ready(self) -> bool:
        """True once the inventory is loaded and every profile has had its first fetch."""
        return self._first_round.is_set()

    async def wait_ready(self) -> None:
        await self._first_round.wait()

    @property
    def keys(self) -> list[str]:
        return list(self._tracked)

    def _track(self, key: str, profile: dict[str, Any], origin: str) -> None:
        previous = self._tracked.pop(key, None)
        if previous is not None:
            self._stop(previous)
        status = ClusterStatus(key=key, origin=origin, control_plane_healthy=control_plane_healthy(profile))
        tracked = _Tracked(profile, status)
        if previous is not None:  # a changed profile keeps its history until the new plan fetches
            status.last_success, status.probe = previous.status.last_success, previous.status.probe
        self._tracked[key] = tracked
        self._waiting_first += 1
        try:
            # The inventory's profiles are parsed by cpcreds and never changed once delivered.
            tracked.binding = self.engine.bind(profile, owned=True)
        except NoMatchingProvider as exc:
            self._unusable(tracked, "unmatched", str(exc))
            return
        except CredentialError as exc:
            self._unusable(tracked, "invalid", str(exc))
            return
        tracked.plan = tracked.binding.plan
        status.provider = tracked.plan.provider
        status.server = tracked.plan.cluster.server
        self.board.put(status)
        if self.on_plan is not None:
            self.on_plan(key, tracked.plan, profile)
        tracked.task = asyncio.get_running_loop().create_task(self._keep(key, tracked), name=f"cpcreds-keep:{key}")

    def _unusable(self, tracked: _Tracked, state: str, message: str) -> None:
        tracked.status.state, tracked.status.last_error = state, message
        self.board.put(tracked.status)
        if self.on_plan is not None:
            self.on_plan(tracked.status.key, None, None)
        _log.warning("profile not usable", profile=tracked.status.key, state=state, error=message)
        self._first_fetch_done(tracked)

    def _forget(self, key: str) -> None:
        tracked = self._tracked.pop(key, None)
        if tracked is None:
            return
        self._stop(tracked)
        if tracked.answered is not None and tracked.credential is not None:
            self.engine.invalidate(tracked.answered, tracked.credential)  # a deleted cluster's credential goes
        self.board.drop(key)
        if self.on_plan is not None:
            self.on_plan(key, None, None)

    def _stop(self, tracked: _Tracked) -> None:
        if tracked.task is not None:
            tracked.task.cancel()
        self._first_fetch_done(tracked)

    def _first_fetch_done(self, tracked: _Tracked) -> None:
        if not tracked.first_done:
            tracked.first_done = True
            self._waiting_first -= 1
            self._check_first_round()

    def _check_first_round(self) -> None:
        if self._inventory_loaded and self._waiting_first <= 0 and not self._first_round.is_set():
            self._first_round.set()
            self.board.synced = True

    async def close(self) -> None:
        """Cancel every task and wait for them (their fetches are the engine's to end)."""
        tasks = [t.task for t in self._tracked.values() if t.task is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    @property
    def progress(self) -> tuple[int, int]:
        """(profiles whose first fetch is done, profiles tracked)."""
        return len(self._tracked) - max(self._waiting_first, 0), len(self._tracked)

    # -- one profile -------------------------------------------------------------------------

    async def _keep(self, key: str, tracked: _Tracked) -> None:
        binding, status = tracked.binding, tracked.status
        assert binding is not None
        plan = binding.plan
        next_probe = 0.0
        while True:
            if self.may_fetch is not None and not self.may_fetch(key):
                # Fenced: whoever decided this stops or restarts the task soon.
                await asyncio.sleep(_RECHECK_SECONDS)
                continue
            async with self._slots:
                try:
                    answer = await binding.aanswer()
                except CredentialError as exc:
                    answer, error = None, exc
            now = self.clock()
            credential = answer.credential if answer is not None else None
            if answer is not None:
                tracked.answered = answer.plan
                status.answered_by = answer.plan.provider
                delay = self._succeeded(tracked, answer.credential, now)
                if answer.plan is not plan:
                    # Failed over: look again at the engine's backoff pace, so the profile goes
                    # back to its preferred provider soon after that answers again.
                    delay = min(delay, self.engine.backoff_policy.maximum) if delay is not None else self.engine.backoff_policy.maximum
            else:
                delay = self._failed(tracked, error, now)
            self._first_fetch_done(tracked)
            if credential is not None and self.probe is not None and now >= next_probe:
                status.probe = await self.probe(tracked.profile)
                next_probe = now + self.probe_interval
                if delay is None or delay > self.probe_interval:
                    delay = self.probe_interval
            if delay is None:  # no expiry: the credential is good until the profile changes
                await asyncio.Event().wait()
            await asyncio.sleep(delay)

    def _succeeded(self, tracked: _Tracked, credential: Credential, now: float) -> float | None:
        status = tracked.status
        renewed = credential is not tracked.credential
        tracked.credential = credential
        status.state, status.failures, status.last_error = "ready", 0, None
        if renewed:
            status.last_success = now
        expiry = credential.expiration_timestamp
        if expiry is None:
            status.expires_at = status.next_refresh = None
            return None
        status.expires_at = expiry.timestamp()
        refresh_at = self.engine.refresh_policy.refresh_at(now, status.expires_at)
        if refresh_at <= now:
            # The engine answered from its cache and is refreshing in the background.
            status.next_refresh = now + _RECHECK_SECONDS
            return _RECHECK_SECONDS
        # Jitter pulls the refresh earlier, never later, so spreading load never risks expiry.
        delay = (refresh_at - now) * (1.0 - random.uniform(0.0, self.jitter))
        status.next_refresh = now + delay
        return delay

    def _failed(self, tracked: _Tracked, error: CredentialError, now: float) -> float:
        status = tracked.status
        status.failures += 1
        status.last_error = str(error)
        still_valid = status.expires_at is not None and status.expires_at > now
        status.state = "failing"
        delay = self.backoff.delay(status.failures)
        if still_valid:
            assert status.expires_at is not None
            delay = min(delay, max(_RECHECK_SECONDS, (status.expires_at - now) / 2))
        status.next_refresh = now + delay
        if status.failures == 1 or status.failures % 10 == 0:
            _log.warning("credential fetch failed", profile=status.key, provider=status.provider, error=str(error), failures=status.failures)
        return delay
