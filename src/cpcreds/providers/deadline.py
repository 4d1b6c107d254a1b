"""Every provider's remaining time: the deadline of the fetch that is calling it.

Whoever calls a provider bounds the call: the engine by the plan's ``timeout``, the exec and
kubelet plugin runners by theirs. When that bound fires first, the caller can only say "did not
answer within 10s"; when the provider gives up first, its own error names the endpoint that did
not answer (``token endpoint https://… did not answer within the 10s timeout``), which is what a
user needs. So the caller sets a deadline that ends :data:`DEADLINE_MARGIN` of the timeout
before its own (:func:`fetch_deadline`), and the provider, and the shared HTTP helpers of
:mod:`cpcreds.providers.http`, read it (:func:`deadline`, :func:`remaining`). The margin is a
fraction, not a fixed time, so that a short timeout on a loaded machine keeps room for the error
to travel back, and it is chosen here once for every provider.

The deadline lives in a context variable: the caller sets it in the thread or task that calls
the provider, so a provider's own threads do not see it unless it hands it on (``Deadline`` is
a plain value to pass).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["DEADLINE_MARGIN", "Deadline", "deadline", "remaining", "fetch_deadline"]

#: The share of a fetch's timeout kept, at its end, for the provider's error to reach the
#: caller before the caller's own timeout fires: a provider's deadline is the caller's less
#: this fraction of the timeout (1.6 s into a 2 s timeout, 48 s into a 60 s one).
DEADLINE_MARGIN = 0.2
#: A fetch's timeout when nobody set one (an :class:`~cpcreds.plan.AccessPlan`'s default).
_DEFAULT_TIMEOUT = 60.0


class Deadline:
    """When a provider's work must be over, on the ``time.monotonic()`` clock (:attr:`at`), and
    the timeout that messages name (:attr:`seconds`: the plan's ``timeout``, not what is left)."""

    __slots__ = ("seconds", "at")

    def __init__(self, seconds: float, at: float) -> None:
        self.seconds = float(seconds)
        self.at = float(at)

    @classmethod
    def for_timeout(cls, seconds: float, *, ends: float | None = None) -> Deadline:
        """The provider's deadline in a fetch bounded by ``seconds`` that the caller ends at
        ``ends`` (monotonic; default ``seconds`` from now): :data:`DEADLINE_MARGIN` of
        ``seconds`` before ``ends``."""
        seconds = max(0.0, float(seconds))
        end = time.monotonic() + seconds if ends is None else ends
        return cls(seconds, end - DEADLINE_MARGIN * seconds)

    def remaining(self) -> float:
        """Seconds left (negative once passed)."""
        return self.at - time.monotonic()

    @property
    def passed(self) -> bool:
        return time.monotonic() >= self.at

    def shown(self) -> str:
        """The timeout as messages say it: ``10s``, ``1.5s``."""
        value = self.seconds
        return f"{value:g}s" if value >= 1 or value == round(value, 1) else f"{value:.3g}s"

    def __repr__(self) -> str:
        return f"Deadline({self.shown()}, {self.remaining():.3f}s left)"


_current: ContextVar[Deadline | None] = ContextVar("cpcreds_fetch_deadline", default=None)


def deadline(timeout: float | None = None) -> Deadline:
    """The deadline of the fetch calling this provider (the engine, ``provider_main`` and the
    kubelet plugin runner set it). Outside such a fetch (a provider called directly), the one a
    fetch of ``timeout`` seconds (default 60) starting now would have."""
    current = _current.get()
    if current is not None:
        return current
    return Deadline.for_timeout(_DEFAULT_TIMEOUT if timeout is None else timeout)


def remaining(timeout: float | None = None) -> float:
    """Seconds left before :func:`deadline` (negative once passed)."""
    return deadline(timeout).remaining()


@contextmanager
def fetch_deadline(seconds: float, *, ends: float | None = None) -> Iterator[Deadline]:
    """Within it, :func:`deadline` is the provider's deadline of a fetch bounded by ``seconds``
    that the caller ends at ``ends`` (see :meth:`Deadline.for_timeout`). For callers of
    providers: the engine and the plugin runners."""
    token = _current.set(Deadline.for_timeout(seconds, ends=ends))
    try:
        yield _current.get()  # type: ignore[misc]
    finally:
        _current.reset(token)
