"""One exchange with the hub: its answer read bounded, its failures worded.

A socket timeout bounds each receive, not an exchange: a hub (or anything on the way) that sends
its status line, its headers or its body a byte at a time, each byte within the timeout, would
hold a fetch for as long as it liked. The engine abandons such a call at the plan's timeout, but
cannot stop it (nothing stops a thread), and every later fetch of that plan waits on it. So a
read runs inside the SDK's :class:`~cpcreds.sdk.Cutoff`, at the fetch's deadline
(:func:`cpcreds.sdk.deadline`): a timer then shuts down every socket the exchange connected or
reused (connecting, the TLS handshake, the request, the head and the body alike), which ends any
receive blocked on it at once; the read then fails as a timeout.

Both hub transports hand their sockets to the calling thread's cutoff with
:func:`cpcreds.sdk.watch`: the plain hub's connections (:mod:`cpcreds_secretreader.hubhttp`)
themselves, the kubernetes client's urllib3 connections through
:func:`cpcreds.sdk.watch_pool_manager`.
"""

from __future__ import annotations

import sys
from typing import Any

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cpcreds.sdk import Cutoff

__all__ = ["HubError", "failure_kind", "failure_message", "read_bounded"]

_CHUNK = 64 * 1024


class HubError(Exception):
    """The hub could not give the Secret. ``status`` is the HTTP status when there was one.
    The message names the Secret and the hub, never a credential."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def failure_kind(exc: BaseException) -> str:
    """What kind of failure a transport exception is: ``connect``, ``timeout``, ``tls`` or its type."""
    import ssl

    urllib3_errors = sys.modules.get("urllib3.exceptions")  # only the kubernetes client's path loads it
    if urllib3_errors is not None:
        if isinstance(exc, urllib3_errors.NewConnectionError):  # before timeouts: it subclasses ConnectTimeoutError
            return "connect"
        if isinstance(exc, urllib3_errors.TimeoutError):
            return "timeout"
        if isinstance(exc, urllib3_errors.SSLError) or str(getattr(exc, "reason", "")).startswith("SSLError"):
            return "tls"
    plain = sys.modules.get("cpcreds_secretreader.hubhttp")
    if plain is not None and isinstance(exc, plain.ConnectFailed):
        return "connect"
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, ssl.SSLError):
        return "tls"
    return type(exc).__name__


def failure_message(failure: str, where: str, url: str, timeout: float) -> str:
    if failure == "timeout":
        return f"the hub {url} did not answer within {timeout:g}s reading {where}"
    reason = {"connect": "cannot connect", "tls": "TLS handshake failed (check the hub's CA)"}.get(failure, failure)
    return f"cannot read {where} from the hub {url}: {reason}"


def read_bounded(
    raw: Any, limit: int, exchange: Cutoff, where: str, url: str, timeout: float, errors: tuple[type[BaseException], ...]
) -> bytes:
    """The body of ``raw``, at most ``limit`` bytes, read before ``exchange``'s deadline (a body
    cut there, by an error or a quiet end, is a timeout). ``errors`` are the transport's exceptions;
    ``timeout`` is what messages name."""
    too_large = f"the hub's answer for {where} is larger than {limit // 1024} KiB"
    declared = raw.headers.get("Content-Length")
    problem = too_large if declared is not None and declared.isdigit() and int(declared) > limit else None
    chunks: list[bytes] = []
    size = 0
    failure = None
    try:
        while problem is None:
            chunk = raw.read1(min(_CHUNK, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                problem = too_large
    except errors as exc:
        failure = "timeout" if exchange.expired else failure_kind(exc)
    if failure is None and problem is None and exchange.expired:
        failure = "timeout"
    if failure is not None:
        problem = failure_message(failure, where, url, timeout)
    if problem is not None:
        raw.close()  # the rest of a cut answer must not be read as the next response
        raw.release_conn()
        raise HubError(problem)
    raw.release_conn()
    return b"".join(chunks)
