"""The image-credential cache: plugin answers kept by cacheKeyType, and one plugin run per key.

What the KEP asks, and how it is kept here:

- **Keys** (per provider): ``Image`` answers are kept under the repository (``registry/path``,
  no tag or digest), ``Registry`` answers under ``host[:port]``, ``Global`` answers under one
  key. A lookup tries them in the kubelet's order: image, registry, global. When a provider has
  ``tokenAttributes``, the service-account identity is part of every key.
- **Duration**: the answer's ``cacheDuration`` when it has one, else the provider's
  ``defaultCacheDuration``; zero (or less) means the answer is used once and not kept.
- **Single flight** (the KEP's beta item): at most one plugin run per provider and key at a time.
  The key a run will be filed under is only known from its answer, so runs are grouped by the
  key type the provider answered with last (``Registry`` until it has answered): 1,000 callers
  asking for 50 images of 5 registries from a ``Registry`` plugin cause 5 runs. A caller that
  waited uses the run's answer when it applies to its own image (same registry for ``Registry``,
  same repository for ``Image``), else looks again. A failed run is not kept; who waited for it
  with the same repository gets its error, anyone else looks again and runs their own. A run stopped by an interrupt (Ctrl-C in the thread running it) is
  nobody's failure: waiters start over and one of them runs the plugin again.
- **Stale entries** (the KEP's other beta item): expired entries are dropped at most every
  ``purge_interval`` seconds on a write or a miss, and the cache never holds more than
  ``max_entries`` (the oldest are dropped first), so memory stays bounded however many images
  are asked for.
"""

from __future__ import annotations

import copy
import math
import threading
from collections.abc import Callable, Mapping
from typing import NamedTuple

from ..engine import flight as _flight
from ..errors import CredentialError
from .protocol import CACHE_KEY_GLOBAL, CACHE_KEY_IMAGE, CACHE_KEY_REGISTRY, AuthConfig, CredentialProviderResponse
from .reference import ImageReference

__all__ = ["CacheEntry", "Flight", "ImageCredentialCache", "DEFAULT_MAX_ENTRIES", "DEFAULT_PURGE_INTERVAL", "cache_key"]

#: Most answers kept at once (per ImageCredentials); a node pulls from far fewer repositories.
DEFAULT_MAX_ENTRIES = 10_000
#: How often expired entries are looked for (seconds); the kubelet does it every 15 minutes.
DEFAULT_PURGE_INTERVAL = 60.0
#: How long an answer that is not cached is valid: not at all, for anyone but its own callers.
NOT_CACHED = -math.inf


class CacheEntry(NamedTuple):
    """One provider's answer for a key: its auth map and when it stops being valid
    (clock seconds; :data:`NOT_CACHED` for an answer that was not kept)."""

    auth: Mapping[str, AuthConfig]
    expires_at: float


def cache_key(key_type: str, image: ImageReference) -> str:
    """The kubelet's cache key of ``image`` for an answer of ``key_type``."""
    if key_type == CACHE_KEY_IMAGE:
        return image.repository
    if key_type == CACHE_KEY_REGISTRY:
        return image.registry
    return ""


class Flight(_flight.Flight):
    """One plugin run and the callers waiting for it (:class:`cpcreds.engine.flight.Flight`, whose
    ``value`` is the :class:`CacheEntry`). Ends once: with an entry (and the key type and key it
    was filed under), an error, or abandoned. ``asked`` is the repository the run asks the
    plugin about."""

    __slots__ = ("key", "asked", "key_type", "filed_under")

    def __init__(self, key: tuple[str, str, str, str], asked: str = "") -> None:
        super().__init__()
        self.key = key
        self.asked = asked
        self.key_type = ""
        self.filed_under = ""

    @property
    def entry(self) -> CacheEntry | None:
        """The run's answer, once it succeeded."""
        return self.value  # type: ignore[no-any-return]

    def applies_to(self, image: ImageReference) -> bool:
        """Does this run's answer hold for ``image`` too (same key under its key type)?"""
        return self.value is not None and cache_key(self.key_type, image) == self.filed_under

    def raise_error_for(self, image: ImageReference) -> None:
        """Raise the run's error for a waiter asking about ``image``, when the run asked about
        the same repository (the plugin was sent the very request this waiter would send): a
        copy, so that waiters in different threads do not write their tracebacks into one
        exception object. A failure for another image is not this waiter's: no error then, and
        :meth:`applies_to` is False (the waiter looks again and runs its own lookup)."""
        if self.error is not None and self.asked == image.repository:
            error = copy.copy(self.error)
            raise error from None


class ImageCredentialCache:
    """Answers of every provider of one :class:`~cpcreds.ImageCredentials`, and its flights.

    One lock guards both, so that "not cached and nobody running it" and "filed it and finished
    the run" cannot interleave (that would start a second run for a key just filed). The lock is
    never held while a plugin runs.
    """

    def __init__(
        self,
        *,
        clock: Callable[[], float],
        max_entries: int = DEFAULT_MAX_ENTRIES,
        purge_interval: float = DEFAULT_PURGE_INTERVAL,
    ) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._clock = clock
        self.max_entries = max_entries
        self.purge_interval = purge_interval
        self._entries: dict[tuple[str, str, str, str], CacheEntry] = {}
        self._flights: dict[tuple[str, str, str, str], Flight] = {}
        # The key type each provider answered with last: how its runs are grouped.
        self._learned: dict[str, str] = {}
        self._lock = threading.Lock()
        self._next_purge = clock() + purge_interval

    def __len__(self) -> int:
        return len(self._entries)

    # -- lookups -----------------------------------------------------------------------------

    def _find(self, provider: str, image: ImageReference, identity: str, now: float) -> CacheEntry | None:
        entries = self._entries
        for key in (
            (provider, CACHE_KEY_IMAGE, image.repository, identity),
            (provider, CACHE_KEY_REGISTRY, image.registry, identity),
            (provider, CACHE_KEY_GLOBAL, "", identity),
        ):
            entry = entries.get(key)
            if entry is not None:
                if now < entry.expires_at:
                    return entry
                del entries[key]  # expired: the kubelet's expiration store drops it when it is read
        return None

    def begin(self, provider: str, image: ImageReference, identity: str) -> CacheEntry | tuple[Flight, bool]:
        """The cached entry for ``image``, or the flight to wait for: ``(flight, True)`` when
        the caller is to run the plugin and end the flight with :meth:`finish`, :meth:`fail` or
        :meth:`abandon`; ``(flight, False)`` when another caller is running it."""
        with self._lock:
            now = self._clock()
            entry = self._find(provider, image, identity, now)
            if entry is not None:
                return entry
            self._maybe_purge(now)
            key_type = self._learned.get(provider, CACHE_KEY_REGISTRY)
            flight_key = (provider, key_type, cache_key(key_type, image), identity)
            flight = self._flights.get(flight_key)
            if flight is not None:
                return flight, False
            flight = self._flights[flight_key] = Flight(flight_key, image.repository)
            return flight, True

    def get(self, provider: str, image: ImageReference, identity: str) -> CacheEntry | None:
        """The cached entry for ``image``, if any (no flight is started)."""
        with self._lock:
            return self._find(provider, image, identity, self._clock())

    # -- ending a flight ---------------------------------------------------------------------

    def finish(
        self, flight: Flight, image: ImageReference, identity: str, response: CredentialProviderResponse, default_duration: float
    ) -> CacheEntry:
        """File ``response`` (unless its duration is zero) and release the waiters; returns the
        entry the caller uses."""
        provider = flight.key[0]
        duration = response.cache_duration if response.cache_duration is not None else default_duration
        key_type = response.cache_key_type
        filed_under = cache_key(key_type, image)
        with self._lock:
            now = self._clock()
            entry = CacheEntry(response.auth, now + duration if duration > 0 else NOT_CACHED)
            if duration > 0:
                key = (provider, key_type, filed_under, identity)
                self._entries.pop(key, None)  # re-inserted last: the newest, evicted last
                self._entries[key] = entry
                if len(self._entries) > self.max_entries:
                    self._evict(now)
            self._learned[provider] = key_type
            self._flights.pop(flight.key, None)
        flight.key_type, flight.filed_under = key_type, filed_under  # before waiters wake
        flight.succeed(entry)
        return entry

    def fail(self, flight: Flight, error: CredentialError) -> None:
        """End ``flight`` with ``error``: nothing is kept; every waiter for the repository it
        asked about raises a copy of it, the others look again."""
        with self._lock:
            self._flights.pop(flight.key, None)
        flight.fail(error)

    def abandon(self, flight: Flight) -> None:
        """End ``flight`` without an outcome: waiters look again and one of them runs the plugin."""
        with self._lock:
            self._flights.pop(flight.key, None)
        flight.abandon()

    # -- housekeeping ------------------------------------------------------------------------

    def _maybe_purge(self, now: float) -> None:
        if now >= self._next_purge:
            self._purge(now)

    def _purge(self, now: float) -> int:
        expired = [key for key, entry in self._entries.items() if not now < entry.expires_at]
        for key in expired:
            del self._entries[key]
        self._next_purge = now + self.purge_interval
        return len(expired)

    def _evict(self, now: float) -> None:
        self._purge(now)
        excess = len(self._entries) - self.max_entries
        if excess > 0:
            for key in list(self._entries)[:excess]:  # insertion order: the oldest first
                del self._entries[key]

    def purge(self) -> int:
        """Drop every expired entry now; returns how many were dropped."""
        with self._lock:
            return self._purge(self._clock())

    def clear(self) -> None:
        """Forget every entry (flights in progress end as they would)."""
        with self._lock:
            self._entries.clear()
            self._learned.clear()
