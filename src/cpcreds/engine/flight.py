"""Flight: one in-flight piece of shared work (a plan's fetch, a kubelet plugin run), and the
release of everyone waiting for it. The one single-flight primitive of the package: the engine
uses it as it is, :mod:`cpcreds.images.cache` extends it with what an image lookup needs.

A fetch is shared work; waiting for it is each caller's own business. So a waiter never touches
the work: a thread waits on an event, an asyncio task on a future of its own that nobody else
holds. Cancelling a task (``asyncio.wait_for``, a TaskGroup abort) cancels that future only; the
fetch, and every other waiter, goes on (``DoChan`` in Go's singleflight, a shielded view of the
work in anyio's terms).

A flight ends in one of three ways, whichever comes first and only once:

- :meth:`Flight.succeed` with a credential,
- :meth:`Flight.fail` with a :class:`~cpcreds.CredentialError` (also what ``close()`` does),
- :meth:`Flight.abandon`: the work stopped without an answer that belongs to anyone (Ctrl-C in the
  thread running it, its event loop shut down). Waiters are told to try again; one of them then
  starts a new fetch. Nothing is cached and no backoff starts: it was nobody's failure.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from ..credential import Credential
from ..errors import CredentialError

if TYPE_CHECKING:  # asyncio is loaded only where a coroutine runs
    import asyncio

__all__ = ["Flight"]


def _settle(future: asyncio.Future[None]) -> None:  # only ever called on a running loop
    if not future.done():  # its waiter may have been cancelled meanwhile
        future.set_result(None)


class Flight:
    """The outcome of one piece of work, once it is known: ``value`` (for the engine's fetches,
    also readable as ``credential``), ``error`` or ``abandoned``. Thread-safe; waiters may be
    threads or tasks on any event loop. Subclasses add slots of their own."""

    __slots__ = ("value", "error", "abandoned", "_ended", "_event", "_lock", "_loop_waiters")

    def __init__(self) -> None:
        self.value: Any = None
        self.error: CredentialError | None = None
        #: True when the work stopped without an outcome; waiters should start over.
        self.abandoned = False
        self._ended = False
        # Made by the first thread that has to block: most flights are waited for only by the
        # thread that ran the fetch, after it ended, and need none.
        self._event: threading.Event | None = None
        self._lock = threading.Lock()
        self._loop_waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    @property
    def credential(self) -> Credential | None:
        """The credential a successful fetch ended with (the engine's name for ``value``)."""
        return self.value

    def done(self) -> bool:
        return self._ended

    # -- ending it (once) --------------------------------------------------------------------

    def succeed(self, value: Any) -> bool:
        return self._end(value=value)

    def fail(self, error: CredentialError) -> bool:
        return self._end(error=error)

    def abandon(self) -> bool:
        return self._end(abandoned=True)

    def _end(self, *, value: Any = None, error: CredentialError | None = None, abandoned: bool = False) -> bool:
        """Record the outcome and wake every waiter; False if the flight had already ended."""
        with self._lock:
            if self._ended:
                return False
            self.value, self.error, self.abandoned = value, error, abandoned
            self._ended = True
            event = self._event
            waiters, self._loop_waiters = self._loop_waiters, []
        if event is not None:
            event.set()
        for loop, future in waiters:
            try:
                loop.call_soon_threadsafe(_settle, future)
            except RuntimeError:  # that loop is closed: its waiter is gone with it
                pass
        return True

    # -- waiting -----------------------------------------------------------------------------

    def wait(self, timeout: float | None = None) -> bool:
        """Block this thread until the flight ends (True) or ``timeout`` passes (False).

        Interruptible: Ctrl-C reaches the waiting thread as ``KeyboardInterrupt``."""
        if self._ended:
            return True
        with self._lock:
            if self._ended:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)

    async def wait_async(self) -> None:
        """Wait on the running loop until the flight ends. Cancelling the awaiting task cancels
        only its own wait."""
        if self._ended:
            return
        import asyncio  # loaded already (a coroutine is running); a sync-only process never loads it

        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if self._ended:
                return
            self._loop_waiters.append((loop, future))
        try:
            await future
        finally:
            if not future.done() or future.cancelled():
                with self._lock:
                    entry: Any = (loop, future)
                    if entry in self._loop_waiters:
                        self._loop_waiters.remove(entry)
