"""The credential entries: per plan, the cached credential, the fetch in flight and the backoff.

One :class:`CredentialStore` per engine, one :class:`Entry` per plan (``plan.key``). Everything is
written under the store's lock; the cache hit (:meth:`CredentialStore.hit`) takes none: a dict
read and one tuple read are atomic in CPython, and it is the hottest path there is.

What the store decides, under its lock, for each caller (:meth:`CredentialStore.claim`): the
cached credential (starting one background refresh inside the refresh window), or the
:class:`~cpcreds.engine.flight.Flight` to wait on and whether this caller leads it, or the last error
while the plan backs off. Running the fetch is :mod:`cpcreds.fetching`'s job; it hands the
outcome back through :meth:`CredentialStore.publish`.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..credential import Credential
from ..errors import CredentialError, EngineClosed, ProviderError
from .flight import Flight
from .holds import PlanHolds
from .lookups import LookupCounts
from ..metrics import Metrics
from ..plan import AccessPlan
from .policies import BackoffPolicy, RefreshPolicy

if TYPE_CHECKING:
    from ..config.access import Candidate

__all__ = ["CredentialStore", "Entry", "fresh_copy", "closed_error", "evicted"]


def closed_error() -> EngineClosed:
    return EngineClosed("engine closed: this CredentialEngine was closed")


def fresh_copy(error: CredentialError) -> CredentialError:
    """A copy of a stored error for one caller: many callers are handed one stored error; each
    gets its own instance, without the original's traceback and chained exceptions (which may
    hold a plugin's output)."""
    try:
        clone = copy.copy(error)
    except Exception:  # an exception type that cannot be rebuilt from its args
        clone = CredentialError(str(error))
    clone.__cause__ = clone.__context__ = None
    return clone.with_traceback(None)


class Entry:
    """Everything known about one plan. Written under the store's lock."""

    __slots__ = ("plan", "fresh", "expires_at", "flight", "error", "failures", "retry_at", "hits", "used")

    def __init__(self, plan: AccessPlan) -> None:
        self.plan = plan
        #: (credential, refresh_at) replaced as one value, so the lock-free hit path never sees
        #: a credential with another one's refresh time.
        self.fresh: tuple[Credential | None, float] = (None, 0.0)
        self.expires_at = 0.0  # wall-clock seconds; inf when the credential has no expiry
        self.flight: Flight | None = None
        self.error: CredentialError | None = None
        self.failures = 0
        self.retry_at = 0.0  # monotonic seconds
        self.hits = 0  # a plain int: a Prometheus inc() costs more than the whole hit
        self.used = 0.0

    @property
    def credential(self) -> Credential | None:
        return self.fresh[0]


def evicted(entries: dict[str, Entry], max_entries: int, now: float) -> list[Entry]:
    """The entries to drop when ``entries`` is full: those without a credential valid at ``now``,
    and, if that frees too little, the least recently used tenth; never one in flight."""
    idle = [e for e in entries.values() if e.flight is None]
    victims = [e for e in idle if e.credential is None or e.expires_at <= now]
    if len(entries) - len(victims) >= max_entries:
        idle.sort(key=lambda e: e.used)
        victims += idle[: max(1, len(entries) // 10)]
    return victims


#: What :meth:`CredentialStore.claim` answers: a credential, or the flight to wait on and (when
#: the caller leads it) its deadline; ``(None, None, None)`` when told not to wait.
Claim = tuple["Credential | None", "Flight | None", "float | None"]


class CredentialStore:
    """The entries of one engine (see the module docstring).

    ``refresh(plan, flight)`` is called, outside the lock, for a fetch that runs in the
    background (refresh ahead of expiry, or one nobody waits for); the engine sets it to its
    fetch runner's. ``clock`` is wall-clock seconds, compared with ``expirationTimestamp``.
    """

    def __init__(
        self,
        *,
        refresh_policy: RefreshPolicy,
        backoff_policy: BackoffPolicy,
        max_entries: int,
        metrics: Metrics,
        clock: Callable[[], float],
    ) -> None:
        self.refresh_policy = refresh_policy
        self.backoff_policy = backoff_policy
        self.max_entries = max_entries
        self.metrics = metrics
        self.clock = clock
        self.refresh: Callable[[AccessPlan, Flight], None] = lambda plan, flight: None
        self.entries: dict[str, Entry] = {}  # plan.key -> entry
        self.holds = PlanHolds()
        self.lock = threading.Lock()
        self.closed = False
        self.lookups = LookupCounts()

    # -- reading -----------------------------------------------------------------------------

    def hit(self, plan: AccessPlan) -> Credential | None:
        """The cached credential while it needs no refresh, else None. Takes no lock."""
        entry = self.entries.get(plan.key)
        if entry is not None:
            credential, refresh_at = entry.fresh
            if credential is not None:
                now = self.clock()
                if now < refresh_at:
                    entry.used = now
                    entry.hits += 1
                    return credential
        return None

    def claim(self, plan: AccessPlan, wait: bool = True) -> Claim:
        """Under the lock: a usable cached credential, or the flight to wait on and, when the
        caller must lead it, its deadline. Starts a background refresh inside the window.
        Raises the last error (a copy) while the plan backs off, :class:`EngineClosed` once closed.

        With ``wait`` False (failover, while a later provider holds a valid credential), a caller
        that would wait gets ``(None, None, None)`` instead: a fetch already running is left to
        run, and one that is due is started in the background."""
        now = self.clock()
        background: Flight | None = None
        with self.lock:
            if self.closed:
                raise closed_error()
            entry = self.entries.get(plan.key)
            if entry is None:
                entry = self._new_entry(plan)
            entry.used = now
            credential, refresh_at = entry.fresh
            in_backoff = entry.error is not None and time.monotonic() < entry.retry_at
            if credential is not None and now < entry.expires_at:
                if now >= refresh_at and entry.flight is None and not in_backoff:
                    background = entry.flight = Flight()
                entry.hits += 1
                result: Claim = (credential, None, None)
            elif entry.flight is not None:
                if wait:
                    self.lookups.count(plan.provider, "miss")
                result = (None, entry.flight if wait else None, None)
            elif in_backoff:
                self.lookups.count(plan.provider, "backoff")
                error = entry.error
                assert error is not None
                raise fresh_copy(error)
            elif wait:
                self.lookups.count(plan.provider, "miss")
                entry.flight = Flight()
                result = (None, entry.flight, time.monotonic() + plan.timeout)
            else:
                background = entry.flight = Flight()
                result = (None, None, None)
        if background is not None:
            self.refresh(plan, background)
        return result

    def last_error(self, plan: AccessPlan) -> CredentialError:
        """A copy of the plan's last error, or one saying a fetch is under way."""
        with self.lock:
            entry = self.entries.get(plan.key)
            error = entry.error if entry is not None else None
        if error is not None:
            return fresh_copy(error)
        return ProviderError("has no credential yet (a fetch is under way)", provider=plan.provider)

    # -- for the failover walk (lock-free reads) -----------------------------------------------

    def valid(self, plan: AccessPlan, now: float) -> bool:
        """Whether the plan holds a credential valid at ``now``."""
        entry = self.entries.get(plan.key)
        return entry is not None and entry.fresh[0] is not None and now < entry.expires_at

    def unavailable(self, plan: AccessPlan, now: float, mono: float) -> bool:
        """No valid credential, and either a fetch is running or the plan is backing off."""
        entry = self.entries.get(plan.key)
        if entry is None:
            return False
        credential, _ = entry.fresh
        if credential is not None and now < entry.expires_at:
            return False
        return entry.flight is not None or (entry.error is not None and mono < entry.retry_at)

    def backing_off_until(self, candidates: tuple[Candidate, ...]) -> float:
        """Until when (monotonic) every candidate is backing off without a valid credential; 0.0
        when one of them is being fetched or may answer (a candidate without a plan never does)."""
        until, now = float("inf"), self.clock()
        for candidate in candidates:
            if candidate.plan is None:
                continue
            entry = self.entries.get(candidate.plan.key)
            if entry is None or entry.flight is not None or entry.error is None:
                return 0.0
            if entry.fresh[0] is not None and now < entry.expires_at:
                return 0.0
            until = min(until, entry.retry_at)
        return until

    # -- writing -----------------------------------------------------------------------------

    def publish(self, plan: AccessPlan, flight: Flight, credential: Credential | None, error: CredentialError | None) -> tuple[bool, Credential | None, int] | None:
        """Store the outcome of ``flight``'s fetch: ``(cached, the credential it replaces,
        failures in a row)``; None once the store is closed (its waiters were released then).
        Not cached (``cached`` False) when the plan left the cache while the fetch ran: its
        last holder was released, and a removed profile's answer goes to the callers waiting
        for it, never back into the cache. The flight itself is ended by the caller."""
        with self.lock:
            if self.closed:  # close() has released the waiters; store and count nothing
                return None
            entry = self.entries.get(plan.key)
            if entry is None:  # dropped meanwhile (purging never takes an entry in flight)
                return False, None, 0
            if entry.flight is flight:
                entry.flight = None
            old = None
            if credential is not None:
                old = entry.credential
                expiry = credential.expiration_timestamp
                if expiry is None:
                    entry.expires_at = refresh_at = float("inf")
                else:
                    entry.expires_at = expiry.timestamp()
                    refresh_at = self.refresh_policy.refresh_at(self.clock(), entry.expires_at)
                entry.fresh = (credential, refresh_at)
                entry.error, entry.failures, entry.retry_at = None, 0, 0.0
            else:
                assert error is not None
                entry.error = error
                entry.failures += 1
                entry.retry_at = time.monotonic() + self.backoff_policy.delay(entry.failures)
            return True, old, entry.failures

    def abandon(self, plan: AccessPlan, flight: Flight) -> None:
        """The fetch stopped without an answer (nobody's failure): waiters start over."""
        with self.lock:
            entry = self.entries.get(plan.key)
            if entry is not None and entry.flight is flight:
                entry.flight = None
        flight.abandon()

    def invalidate(self, plans: list[AccessPlan], credential: Credential) -> bool:
        """Drop ``credential`` if it is still the cached one of one of ``plans`` (True then)."""
        with self.lock:
            for plan in plans:
                entry = self.entries.get(plan.key)
                if entry is None or entry.credential is not credential or entry.expires_at == 0.0:
                    continue
                # Kept (as expired) rather than dropped: the next fetch compares certificates with it.
                entry.expires_at = 0.0
                entry.fresh = (credential, 0.0)
                return True
            return False

    def _new_entry(self, plan: AccessPlan) -> Entry:
        # Lock held.
        if len(self.entries) >= self.max_entries:
            self._purge()
        entry = self.entries[plan.key] = Entry(plan)
        return entry

    def _purge(self) -> None:
        # Lock held.
        for entry in evicted(self.entries, self.max_entries, self.clock()):
            if self.entries.pop(entry.plan.key, None) is not None:
                self._forget(entry)

    def _forget(self, entry: Entry) -> None:
        # Lock held; ``entry`` was just taken out of ``entries``.
        self.lookups.retire(entry.plan.provider, entry.hits)
        self.metrics.track_certificate(id(self), entry.plan.key, None)

    # -- holders: what a removal drops -------------------------------------------------------

    def add_holds(self, keys: list[str]) -> None:
        """Lock held: one more holder for each of ``keys`` (plan keys)."""
        self.holds.add(keys)

    def drop_holds(self, keys: list[str]) -> None:
        """Lock held: one holder less for each of ``keys``; a plan left without holders leaves
        the cache, credential, backoff and all. A fetch of it still in flight answers its
        waiters and caches nothing (:meth:`publish`). Nothing to do once closed."""
        if self.closed:
            return
        for key in self.holds.drop(keys):
            entry = self.entries.pop(key, None)
            if entry is not None:
                self._forget(entry)

    # -- counts and the end ------------------------------------------------------------------

    def lookup_counts(self) -> dict[tuple[str, str], int]:
        """(provider, result) -> cache lookups so far."""
        with self.lock:
            return self.lookups.totals((entry.plan.provider, entry.hits) for entry in self.entries.values())

    def close(self) -> list[Flight] | None:
        """Refuse every later claim and drop every entry: the flights still in the air (for the
        caller to fail), or None if the store was already closed."""
        with self.lock:
            if self.closed:
                return None
            self.closed = True
            flights = [entry.flight for entry in self.entries.values() if entry.flight is not None]
            for entry in self.entries.values():
                self.lookups.retire(entry.plan.provider, entry.hits)
            self.entries.clear()
            self.holds.clear()
        self.metrics.forget_owner(id(self))
        return flights
