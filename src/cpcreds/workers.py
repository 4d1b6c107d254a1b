"""Workers: where fetches run, how many at once, and what happens to a call nobody waits for.

- **Slots.** At most ``max_concurrent`` fetches run at once in one engine, and at most
  ``max_per_provider`` of them for one access provider, so a provider whose plugin hangs for every
  cluster holds only its own share and the other providers' clusters go on. A fetch waits for a
  slot only until its own deadline, which counts from the caller's request: time spent queued is
  time of the fetch.
- **Threads.** Fetches that must leave the caller's thread (asyncio callers, refreshes ahead of
  expiry) get a daemon thread of their own, started on demand: nothing to size, nothing that an
  interpreter exit waits for, and no shared pool in which one hung call delays another.
- **In-process calls.** Python cannot stop a running function. A synchronous in-process provider
  therefore runs in a daemon thread of its own and is waited for until the deadline; past it, the
  caller gets :class:`~cpcreds.ProviderTimeout` and the call is *abandoned*: it keeps its thread,
  not a slot. The provider is never called twice at once for one plan (the hookspecs promise): the
  next fetch of that plan waits for the abandoned call instead, and takes its answer if it comes
  in time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Any

from .credential import Credential
from .errors import CredentialError, EngineClosed, ProviderError, ProviderTimeout

__all__ = ["Workers", "DEFAULT_MAX_CONCURRENT_FETCHES", "DEFAULT_MAX_FETCHES_PER_PROVIDER"]

#: Fetches one engine runs at once (plugin processes, provider calls).
DEFAULT_MAX_CONCURRENT_FETCHES = 64
#: Of those, at most this many for one access provider.
DEFAULT_MAX_FETCHES_PER_PROVIDER = 16


class _Call:
    """One call of a synchronous in-process provider, in a daemon thread of its own."""

    __slots__ = ("started", "credential", "error", "_done")

    def __init__(self, function: Callable[[], Credential], provider: str) -> None:
        self.started = time.monotonic()
        self.credential: Credential | None = None
        self.error: CredentialError | None = None
        self._done = threading.Event()
        thread = threading.Thread(target=self._run, args=(function, provider), name=f"cpcreds-call-{provider}", daemon=True)
        thread.start()

    def _run(self, function: Callable[[], Credential], provider: str) -> None:
        # ``function`` turns every failure into a CredentialError (engine.call_provider).
        try:
            self.credential = function()
        except CredentialError as exc:
            self.error = exc
        except BaseException:  # SystemExit in a worker thread: the call is simply over
            self.error = ProviderError("the provider call ended without an answer", provider=provider)
        finally:
            self._done.set()

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float) -> bool:
        return self._done.wait(max(0.0, timeout))

    def result(self) -> Credential:
        if self.error is not None:
            raise self.error
        assert self.credential is not None
        return self.credential


class Workers:
    """Slots, threads and in-process calls for one engine (see the module docstring)."""

    def __init__(
        self,
        max_concurrent: int = DEFAULT_MAX_CONCURRENT_FETCHES,
        max_per_provider: int = DEFAULT_MAX_FETCHES_PER_PROVIDER,
    ) -> None:
        if max_concurrent < 1 or max_per_provider < 1:
            raise ValueError("max_concurrent and max_per_provider must be at least 1")
        self.max_concurrent = max_concurrent
        self.max_per_provider = max_per_provider
        self._lock = threading.Lock()
        self._freed = threading.Condition(self._lock)
        self._queued = 0  # fetches waiting for a slot: release() wakes them only when there are some
        self._running = 0
        self._per_provider: dict[str, int] = {}
        self._abandoned: dict[Hashable, _Call] = {}
        self._closed = False

    # -- slots -------------------------------------------------------------------------------

    def acquire(self, provider: str, deadline: float) -> None:
        """Take one fetch slot for ``provider``; wait for one until ``deadline`` (monotonic).
        Pair every successful call with :meth:`release`."""
        # The plain lock (the condition's own) where nothing waits: this runs on every fetch.
        with self._lock:
            while not self._closed and (self._running >= self.max_concurrent or self._per_provider.get(provider, 0) >= self.max_per_provider):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ProviderTimeout(
                        f"no fetch slot became free before the deadline ({self._running} fetches running, "
                        f"{self._per_provider.get(provider, 0)} of them for this provider; limits "
                        f"{self.max_concurrent} and {self.max_per_provider} per provider)",
                        provider=provider,
                    )
                self._queued += 1
                try:
                    self._freed.wait(remaining)
                finally:
                    self._queued -= 1
            if self._closed:
                raise EngineClosed("engine closed: this CredentialEngine was closed")
            self._running += 1
            self._per_provider[provider] = self._per_provider.get(provider, 0) + 1

    def release(self, provider: str) -> None:
        with self._lock:
            self._running -= 1
            left = self._per_provider[provider] - 1
            if left:
                self._per_provider[provider] = left
            else:
                del self._per_provider[provider]
            if self._queued:
                self._freed.notify_all()

    # -- threads -----------------------------------------------------------------------------

    @staticmethod
    def spawn(target: Callable[..., None], *args: Any, name: str) -> None:
        """Run ``target(*args)`` in a new daemon thread (an interpreter exit does not wait for it)."""
        threading.Thread(target=target, args=args, name=name, daemon=True).start()

    # -- in-process calls --------------------------------------------------------------------

    def call(self, key: Hashable, provider: str, function: Callable[[], Credential], deadline: float, timeout: float) -> Credential:
        """``function()`` (one provider call for the plan ``key``), waited for until ``deadline``.

        If an earlier call for ``key`` was abandoned and still runs, it is waited for instead of
        calling the provider again; one that has finished meanwhile is forgotten (its answer is
        old)."""
        with self._lock:
            call = self._abandoned.get(key)
            if call is not None and call.done():
                del self._abandoned[key]
                call = None
            joined = call is not None
        if call is None:
            call = _Call(function, provider)
        if call.wait(deadline - time.monotonic()):
            if joined:
                with self._lock:
                    if self._abandoned.get(key) is call:
                        del self._abandoned[key]
            return call.result()
        with self._lock:
            self._abandoned[key] = call
        if joined:
            raise ProviderTimeout(
                f"an earlier call, abandoned after its timeout, is still running "
                f"({time.monotonic() - call.started:.1f}s); the provider is not called again until it returns",
                provider=provider,
            )
        raise ProviderTimeout(f"did not answer within {timeout:g}s; the call was abandoned", provider=provider)

    def abandoned_calls(self) -> int:
        """In-process calls still running after their caller gave up on them."""
        with self._lock:
            for key in [k for k, call in self._abandoned.items() if call.done()]:
                # Finished but never collected (no fetch of that plan came since): forget it.
                del self._abandoned[key]
            return len(self._abandoned)

    def close(self) -> None:
        """Refuse new slots and wake every fetch queued for one (it fails with EngineClosed)."""
        with self._freed:
            self._closed = True
            self._freed.notify_all()
