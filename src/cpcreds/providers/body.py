"""Reading an HTTP answer's body within a deadline and a size limit, whatever the HTTP library.

A socket timeout bounds each wait, not the whole body: an answer trickling in a byte at a time
outlasts any timeout. :func:`read_within` arms a timer that shuts the connection at the deadline
(the caller says how, since each library exposes its socket differently) and stops reading at
``max_bytes``, so a provider's HTTPS call can neither hang past its timeout nor eat unbounded memory.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

__all__ = ["BodyProblem", "read_within"]


class BodyProblem(Exception):
    """The body was not read: ``late`` is true when the deadline cut it off, false when it was larger
    than allowed. The message says which in words a provider can put after "the server ..."; it
    never holds any of the body."""

    def __init__(self, message: str, *, late: bool) -> None:
        super().__init__(message)
        self.late = late


def read_within(chunks: Iterable[bytes], *, seconds: float, shut: Callable[[], None], max_bytes: int) -> bytes:
    """The body ``chunks`` yields (iterated here, so pass a lazy stream), read within ``seconds``.

    At the deadline a timer thread calls ``shut()``, which must make a blocked read return or raise
    (shut the socket down; close the response when it cannot) and must not raise itself. Raises
    :class:`BodyProblem` when the deadline passed (``late``; whatever the interrupted read raised is
    dropped) or the body passed ``max_bytes`` (reading stops there). Any other exception of the
    stream propagates unchanged for the caller to word; closing the response stays the caller's job."""
    cut = threading.Event()

    def at_deadline() -> None:
        cut.set()
        shut()

    timer = threading.Timer(max(0.0, seconds), at_deadline)
    timer.daemon = True
    timer.start()
    body: list[bytes] = []
    size = 0
    try:
        for chunk in chunks:
            size += len(chunk)
            if size > max_bytes:
                raise BodyProblem(f"answered with more than {max_bytes // 1024} KiB", late=False)
            body.append(chunk)
    except BodyProblem:
        raise
    except Exception:
        if cut.is_set():
            raise BodyProblem("did not finish its answer in time", late=True) from None
        raise
    finally:
        timer.cancel()
    if cut.is_set():  # the stream ended quietly after the shutdown: what was read is cut short
        raise BodyProblem("did not finish its answer in time", late=True)
    return b"".join(body)
