"""Workers: where fetches run, how many at once, and what happens to a call nobody waits for.

- **Slots.** At most ``max_concurrent`` fetches run at once in one engine, and at most
  ``max_per_provider`` of them for one access provider, so a provider whose plugin hangs for every
  cluster holds only its own share and the other providers' clusters go on. A fetch waits for a
  slot only until its own deadline, which counts from the caller's request: time spent queued is
  time of the fetch.
- **Threads.** Fetches that must leave the caller's thread (asyncio callers, refreshes ahead of
  expiry) run in a daemon thread of a :class:`ThreadPool`: an idle thread is reused, and a new one
  is started whenever none is idle, so work never queues behind a busy (or hung) thread. At most
  ``max_concurrent`` idle threads are kept, each for :data:`IDLE_SECONDS`: a fleet refreshing
  thousands of credentials starts no thread per fetch (a thread's start, and the garbage it
  leaves, would outweigh a quick fetch), and an idle engine holds none for long. An interpreter exit waits for none.
- **In-process calls.** Python cannot stop a running function. A synchronous in-process provider
  therefore runs in a pool thread other than its caller's and is waited for until the deadline;
  past it, the caller gets :class:`~cpcreds.ProviderTimeout` and the call is *abandoned*: it keeps
  its thread (which leaves the pool's idle set until the call returns), not a slot. The provider is
  never called twice at once for one plan (the hookspecs promise): the next fetch of that plan
  waits for the abandoned call instead, and takes its answer if it comes in time.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any

from ..credential import Credential
from ..errors import CredentialError, EngineClosed, ProviderError, ProviderTimeout

__all__ = ["Workers", "ThreadPool", "DEFAULT_MAX_CONCURRENT_FETCHES", "DEFAULT_MAX_FETCHES_PER_PROVIDER", "IDLE_SECONDS"]

#: Fetches one engine runs at once (plugin processes, provider calls).
DEFAULT_MAX_CONCURRENT_FETCHES = 64
#: Of those, at most this many for one access provider.
DEFAULT_MAX_FETCHES_PER_PROVIDER = 16
#: Seconds an idle pool thread waits for work before it ends.
IDLE_SECONDS = 30.0


class _Thread:
    """One pool thread: its next job, and the lock it sleeps on until it is handed one."""

    __slots__ = ("job", "wake")

    def __init__(self) -> None:
        self.job: tuple[Callable[..., None], tuple[Any, ...]] | None = None
        self.wake = threading.Lock()
        self.wake.acquire()  # held: the thread sleeps in acquire() until submit() releases it


class ThreadPool:
    """Daemon threads for jobs that must leave their caller's thread (see the module docstring).

    :meth:`submit` never waits: it hands the job to an idle thread, or starts a new one. A thread
    whose job returns goes back to the idle set unless ``keep`` threads are idle already; an idle
    thread ends after ``idle_seconds`` without work, or at :meth:`close`. Thread-safe."""

    def __init__(self, keep: int, name: str = "cpcreds-worker", idle_seconds: float = IDLE_SECONDS) -> None:
        self.keep = keep
        self.name = name
        self.idle_seconds = idle_seconds
        self._lock = threading.Lock()
        self._idle: list[_Thread] = []  # a stack: the most recently idle thread is reused first
        self._closed = False

    def submit(self, target: Callable[..., None], *args: Any) -> None:
        """Run ``target(*args)`` in a pool thread; raises what starting a thread raises."""
        with self._lock:
            worker = self._idle.pop() if self._idle else None
        if worker is not None:
            worker.job = (target, args)
            worker.wake.release()
            return
        worker = _Thread()
        worker.job = (target, args)
        threading.Thread(target=self._serve, args=(worker,), name=self.name, daemon=True).start()

    def _serve(self, worker: _Thread) -> None:
        while True:
            job, worker.job = worker.job, None
            if job is None:  # close() woke it
                return
            try:
                job[0](*job[1])
            except BaseException:  # noqa: BLE001 - a job's own failure is its business; the thread goes on
                pass
            job = None  # nothing of the job stays referenced while the thread sleeps
            with self._lock:
                if self._closed or len(self._idle) >= self.keep:
                    return
                self._idle.append(worker)
            if not worker.wake.acquire(timeout=self.idle_seconds):
                with self._lock:
                    if worker in self._idle:  # nobody handed it a job meanwhile: end
                        self._idle.remove(worker)
                        return
                worker.wake.acquire()  # submit() or close() took it just as it timed out

    def close(self) -> None:
        """End the idle threads; busy ones end when their job returns."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.wake.release()


Settle = Callable[["_Call", bool], None]


#: Guards the making of a call's event against the call finishing meanwhile (held for a few
#: instructions, never while waiting).
_EVENTS_LOCK = threading.Lock()


class _Call:
    """One call of a synchronous in-process provider, in a pool thread. ``settle(call, False)``,
    if given, is called in that thread once the call returns (see :meth:`Workers.start`)."""

    __slots__ = ("started", "credential", "error", "_finished", "_event", "settle", "settled")

    def __init__(self, function: Callable[[], Credential], provider: str, pool: ThreadPool, settle: Settle | None = None) -> None:
        self.started = time.monotonic()
        self.credential: Credential | None = None
        self.error: CredentialError | None = None
        # The event to wait on is made by the first waiter: most calls (Workers.start's) are
        # settled by their callback and never waited on, and an Event (a lock and a condition)
        # is dear to make next to a first sync's fetch.
        self._finished = False
        self._event: threading.Event | None = None
        self.settle = settle
        self.settled = False  # Workers.start's calls: their outcome was handed on (under its lock)
        pool.submit(self._run, function, provider)

    def _run(self, function: Callable[[], Credential], provider: str) -> None:
        # ``function`` turns every failure into a CredentialError (engine.call_provider).
        try:
            self.credential = function()
        except CredentialError as exc:
            self.error = exc
        except BaseException:  # SystemExit in a worker thread: the call is simply over
            self.error = ProviderError("the provider call ended without an answer", provider=provider)
        finally:
            with _EVENTS_LOCK:
                self._finished = True
                event = self._event
            if event is not None:
                event.set()
            if self.settle is not None:
                self.settle(self, False)

    def done(self) -> bool:
        return self._finished

    def wait(self, timeout: float) -> bool:
        with _EVENTS_LOCK:
            if self._finished:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(max(0.0, timeout))

    def result(self) -> Credential:
        if self.error is not None:
            raise self.error
        assert self.credential is not None
        return self.credential


def _settled(credential: Credential | None, error: CredentialError | None) -> None:
    """What a settled call's ``done`` becomes: it is called once, and then let go."""


def _timed_out(timeout: float, provider: str) -> ProviderTimeout:
    return ProviderTimeout(f"did not answer within {timeout:g}s; the call was abandoned", provider=provider)


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
        # Leaders and in-process calls share the pool: a leader waits on its call, so the pool
        # keeps up to two threads per concurrent fetch idle.
        self._pool = ThreadPool(2 * max_concurrent)
        # Workers.start's calls by deadline: (deadline, order, call); the watcher thread, if any.
        self._deadlines: list[tuple[float, int, _Call]] = []
        self._order = itertools.count()
        self._watching = threading.Condition(self._lock)
        self._watcher = False

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

    def spawn(self, target: Callable[..., None], *args: Any) -> None:
        """Run ``target(*args)`` in a pool thread (an interpreter exit does not wait for it)."""
        self._pool.submit(target, *args)

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
            call = _Call(function, provider, self._pool)
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
        raise _timed_out(timeout, provider)

    def start(
        self,
        key: Hashable,
        provider: str,
        function: Callable[[], Credential],
        deadline: float,
        timeout: float,
        done: Callable[[Credential | None, CredentialError | None], None],
    ) -> bool:
        """Start ``function()`` (one provider call for the plan ``key``) in a pool thread now, in
        a slot taken without waiting, and return True; ``done(credential, error)`` is called once:
        in that thread when the call returns, or at ``deadline`` with a ProviderTimeout (the call is
        then abandoned, as in :meth:`call`). False, having started nothing, when no slot is free
        or an abandoned call of ``key`` still runs: the caller then leads the fetch itself
        (:meth:`acquire`, :meth:`call`), which waits for either."""
        with self._lock:
            if self._closed or self._running >= self.max_concurrent or self._per_provider.get(provider, 0) >= self.max_per_provider:
                return False
            earlier = self._abandoned.get(key)
            if earlier is not None:
                if not earlier.done():
                    return False
                del self._abandoned[key]
            self._running += 1
            self._per_provider[provider] = self._per_provider.get(provider, 0) + 1

        def settle(call: _Call, timed_out: bool) -> None:
            nonlocal done
            with self._lock:
                if call.settled:
                    if not timed_out and self._abandoned.get(key) is call:
                        # An abandoned call that returned: nothing will take its late answer
                        # (a finished one is forgotten), and it must not keep a token alive.
                        del self._abandoned[key]
                        call.credential = call.error = None
                    return
                call.settled = True
                if timed_out:
                    self._abandoned[key] = call
                # The settled call waits in the deadline heap until the watcher wakes: it must
                # not keep the caller's flight (and its credential) alive meanwhile.
                finish, done = done, _settled
            self.release(provider)
            if timed_out:
                finish(None, _timed_out(timeout, provider))
            else:
                credential, error, call.credential, call.error = call.credential, call.error, None, None
                finish(credential, error)  # nothing joins a call settled in time: it keeps nothing

        try:
            call = _Call(function, provider, self._pool, settle)
        except BaseException:
            self.release(provider)
            raise
        with self._lock:
            heapq.heappush(self._deadlines, (deadline, next(self._order), call))
            if len(self._deadlines) > 4 * self.max_concurrent:
                # Settled calls wait here for the watcher's next wake-up (a deadline away): drop
                # them now and then. Unsettled ones hold a slot each, so at most max_concurrent stay.
                self._deadlines = [entry for entry in self._deadlines if not entry[2].settled]
                heapq.heapify(self._deadlines)
            if not self._watcher:
                threading.Thread(target=self._watch, name="cpcreds-deadlines", daemon=True).start()
                self._watcher = True
            elif self._deadlines[0][2] is call:  # earlier than what the watcher sleeps for
                self._watching.notify()
        return True

    def _watch(self) -> None:
        """Abandon Workers.start's calls that pass their deadline (see the module docstring)."""
        with self._lock:
            while not self._closed:
                now, expired = time.monotonic(), []
                while self._deadlines and (self._deadlines[0][2].settled or self._deadlines[0][0] <= now):
                    call = heapq.heappop(self._deadlines)[2]
                    if not call.settled:
                        expired.append(call)
                if expired:
                    self._lock.release()
                    try:
                        for call in expired:
                            assert call.settle is not None
                            call.settle(call, not call.done())
                    finally:
                        self._lock.acquire()
                    continue
                self._watching.wait(self._deadlines[0][0] - now if self._deadlines else None)
            self._watcher = False

    def abandoned_calls(self) -> int:
        """In-process calls still running after their caller gave up on them."""
        with self._lock:
            for key in [k for k, call in self._abandoned.items() if call.done()]:
                # Finished but never collected (no fetch of that plan came since): forget it.
                del self._abandoned[key]
            return len(self._abandoned)

    def close(self) -> None:
        """Refuse new slots and wake every fetch queued for one (it fails with EngineClosed); end
        the idle pool threads."""
        with self._freed:
            self._closed = True
            self._freed.notify_all()
            self._watching.notify()
        self._pool.close()
