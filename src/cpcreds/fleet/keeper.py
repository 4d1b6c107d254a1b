"""The keeping of each cluster's credential in a :class:`~cpcreds.Fleet`: fetch it when due (one
:class:`~cpcreds.fleet.scheduler.FetchScheduler` for every cluster), record the answer or the
failure, and plan the next fetch: ahead of the engine's refresh point with jitter, again soon
while the engine refreshes in the background or the held credential is still valid after a
failure, at the engine's backoff pace after a failover (to go back to the preferred provider),
and with the program's probe (``FleetHooks.probe``) after a success.

A cluster's first answer on a binding is passed to the gate; a cluster engaged on an older
binding gets its :class:`~cpcreds.fleet.cluster.Updated` (or, if the new binding fails, its
:class:`~cpcreds.fleet.cluster.Disengaged`) here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..engine.policies import jittered
from ..errors import CredentialError
from ..logs import get_logger, redact_text
from .cluster import FleetCluster, Updated, retire
from .scheduler import FetchScheduler

if TYPE_CHECKING:
    from ..engine.binding import Binding
    from ..engine import CredentialEngine
    from ..engine.policies import BackoffPolicy
    from .parts import FleetParts

__all__ = ["Keeper", "RECHECK_SECONDS"]

_log = get_logger("cpcreds.fleet")

#: How soon to look again when the engine answered from its cache while its own background
#: refresh runs (the fleet then picks up the new credential), and the shortest wait after a
#: failure while the held credential is still valid.
RECHECK_SECONDS = 1.0


class Keeper:
    """Keeps the credential of every cluster of ``parts.clusters`` fresh through ``engine``
    (replaceable: :attr:`engine`); on the fleet's loop only.

    ``fenced(key)`` says how soon to look again when this replica may not fetch for ``key``
    now (a shard's self-fencing), else None; no ``fenced``: never."""

    def __init__(
        self,
        engine: CredentialEngine,
        parts: FleetParts,
        *,
        concurrency: int,
        backoff: BackoffPolicy,
        jitter: float,
        fenced: Callable[[str], float | None] | None = None,
    ) -> None:
        self.engine, self.parts = engine, parts
        self.backoff, self.jitter = backoff, jitter
        self.scheduler = FetchScheduler(concurrency, self.fetch, self.current, fenced)

    def keep(self, cluster: FleetCluster, binding: Binding) -> None:
        """Fetch through ``cluster``'s new ``binding`` now and keep it fresh from then on (the
        old binding's fetch, if one runs, is ignored when it ends)."""
        self.scheduler.schedule(cluster, binding, 0.0)

    def current(self, cluster: FleetCluster, binding: Any) -> bool:
        """Whether ``binding`` is still ``cluster``'s and the cluster still the fleet's."""
        return cluster.binding is binding and self.parts.clusters.get(cluster.key) is cluster

    async def fetch(self, cluster: FleetCluster, binding: Any) -> None:
        """One fetch of ``cluster``'s credential; then its gate, hooks, probe and next fetch.
        A cluster that was engaged on an older binding (``replacing``) gets an update for its
        first answer here (or, if that fails, a disengage)."""
        if not self.current(cluster, binding):
            return  # removed or rebound since it was due: its released plan is fetched no more
        try:
            answer = await binding.aanswer()
            error = None
        except CredentialError as exc:
            answer, error = None, exc
        if not self.current(cluster, binding):
            return
        parts = self.parts
        hooks, gate, events = parts.hooks, parts.gate, parts.events
        now = time.time()
        if answer is not None:
            delay = self.succeeded(cluster, answer, now)
            first = not cluster.credentialed
            cluster.credentialed = True
            if first:
                if cluster.replacing and cluster.engaged:
                    cluster.replacing = False
                    if gate.decide(cluster) == "stay":
                        events.emit(cluster, Updated(cluster, True), close="stale")
                else:
                    gate.decide(cluster)
                retire(cluster)  # the old binding's clients were closed with the update
                parts.progress.first_done(cluster.key)
        else:
            assert error is not None
            delay = self.failed(cluster, error, now)
            if not cluster.credentialed:
                if cluster.replacing and cluster.engaged:
                    cluster.replacing = False
                    events.disengage(cluster, "credential")
                retire(cluster)
                parts.progress.first_done(cluster.key)
        hooks.changed(cluster)
        if answer is not None and hooks.probe_interval > 0 and now >= cluster.next_probe_at:
            self.scheduler.release()  # a probe holds no fetch slot
            cluster.probe = await hooks.probe(cluster)
            cluster.next_probe_at = now + hooks.probe_interval
            if delay is None or delay > hooks.probe_interval:
                delay = hooks.probe_interval
            if not self.current(cluster, binding):
                return
            hooks.changed(cluster)
        self.scheduler.schedule(cluster, binding, delay)

    def succeeded(self, cluster: FleetCluster, answer: Any, now: float) -> float | None:
        """Record an answer; returns how long until the next fetch (None: not before the
        profile changes, the credential does not expire)."""
        credential = answer.credential
        renewed = credential is not cluster.held_credential
        cluster.answered_plan, cluster.held_credential, cluster.answered_by = answer.plan, credential, answer.plan.provider
        cluster.failures, cluster.last_error = 0, None
        cluster.state = "ready" if self.parts.gate.passes_health(cluster) else "unhealthy"
        if renewed:
            cluster.last_success = now
        expiry = credential.expiration_timestamp
        delay: float | None
        if expiry is None:
            cluster.expires_at = delay = None
        else:
            cluster.expires_at = expiry.timestamp()
            refresh_at = self.engine.refresh_policy.refresh_at(now, cluster.expires_at)
            if refresh_at <= now:
                delay = RECHECK_SECONDS  # answered from the cache while the engine refreshes
            else:
                # Jitter pulls the refresh earlier, never later, so spreading load never risks expiry.
                delay = jittered(refresh_at - now, self.jitter)
        if cluster.binding is not None and answer.plan is not cluster.binding.plan:
            # Failed over: look again at the engine's backoff pace, so the cluster goes back
            # to its preferred provider soon after that answers again.
            maximum = self.engine.backoff_policy.maximum
            delay = maximum if delay is None else min(delay, maximum)
        cluster.next_refresh = now + delay if delay is not None else None
        return delay

    def failed(self, cluster: FleetCluster, error: CredentialError, now: float) -> float:
        """Record a failed fetch; returns the backoff until the next one (shorter while the
        held credential is still valid, so it is renewed before it expires if it can be)."""
        cluster.failures += 1
        cluster.last_error = redact_text(str(error))
        cluster.state = "failing"
        delay = self.backoff.delay(cluster.failures)
        if cluster.expires_at is not None and cluster.expires_at > now:
            delay = min(delay, max(RECHECK_SECONDS, (cluster.expires_at - now) / 2))
        cluster.next_refresh = now + delay
        if cluster.failures == 1 or cluster.failures % 10 == 0:
            _log.warning("credential fetch failed", profile=cluster.key, provider=cluster.provider, error=cluster.last_error, failures=cluster.failures)
        return delay
