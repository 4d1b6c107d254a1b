"""One exchange with the hub: its deadline, its answer read bounded, its failures worded.

A socket timeout bounds each receive, not an exchange: a hub (or anything on the way) that sends
its status line, its headers or its body a byte at a time, each byte within the timeout, would
hold a fetch for as long as it liked. The engine abandons such a call at the plan's timeout, but
cannot stop it (nothing stops a thread), and every later fetch of that plan waits on it. So a
read runs inside an :class:`Exchange`: at its deadline a timer shuts down every socket the
exchange connected or reused (connecting, the TLS handshake, the request, the head and the body
alike), which ends any receive blocked on it at once; the read then fails as a timeout.

The transports hand their sockets to the calling thread's exchange with :func:`watch`: the plain
hub's connections (:mod:`cpcreds_secretreader.hubhttp`) themselves, the kubernetes client's
urllib3 connections through the classes :func:`watch_pool_manager` gives its pool manager.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from types import TracebackType
from typing import Any

__all__ = ["HubError", "Exchange", "watch", "watch_pool_manager", "failure_kind", "failure_message", "read_bounded"]

_CHUNK = 64 * 1024
_current = threading.local()


class HubError(Exception):
    """The hub could not give the Secret. ``status`` is the HTTP status when there was one.
    The message names the Secret and the hub, never a credential."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class Exchange:
    """The deadline of the calling thread's exchange with the hub, ``seconds`` from ``with``.
    :attr:`expired` says whether it passed (then whatever the transport raised, or an answer
    that ended early, is a timeout)."""

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._lock = threading.Lock()
        # Duplicates of the sockets' descriptors: a shutdown reaches the connection through any of
        # them, even once TLS has taken over the original socket object (it detaches it) or the
        # transport has closed it, and a descriptor number freed meanwhile is never hit.
        self._watched: dict[int, socket.socket] = {}
        self._timer = threading.Timer(max(0.0, seconds), self._expire)
        self._timer.daemon = True
        self._outer: Exchange | None = None

    def __enter__(self) -> Exchange:
        self._outer = getattr(_current, "exchange", None)
        _current.exchange = self
        self._timer.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._timer.cancel()
        _current.exchange = self._outer
        # Under the lock: a descriptor is never closed while the timer may be shutting it down.
        with self._lock:
            for copy in self._watched.values():
                copy.close()
            self._watched = {}

    def watch(self, sock: socket.socket) -> None:
        try:
            number = sock.fileno()
            copy = socket.socket(fileno=os.dup(number)) if number >= 0 else None
        except OSError:
            return
        if copy is None:
            return
        with self._lock:
            late = self.expired
            if not late and number not in self._watched:
                self._watched[number], copy = copy, None
        if copy is not None:
            if late:
                _shut(copy)
            copy.close()

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for copy in self._watched.values():
                _shut(copy)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def watch(sock: Any) -> None:
    """Put ``sock`` (a connected socket, TLS or not) under the calling thread's exchange, if any."""
    exchange = getattr(_current, "exchange", None)
    if exchange is not None and isinstance(sock, socket.socket):
        exchange.watch(sock)


class _Watched:
    """Mixed into a urllib3 connection class: each new or reused socket is watched."""

    def _new_conn(self) -> Any:
        sock = super()._new_conn()  # type: ignore[misc]
        watch(sock)
        return sock

    def request(self, *args: Any, **kwargs: Any) -> Any:
        watch(getattr(self, "sock", None))  # a kept-alive connection, or the one just made
        return super().request(*args, **kwargs)  # type: ignore[misc]


def watch_pool_manager(manager: Any) -> None:
    """Make the connections of a urllib3 pool manager (plain, proxy or SOCKS: whichever
    connection pool classes it has) hand their sockets to the calling thread's exchange."""
    classes = getattr(manager, "pool_classes_by_scheme", None)
    if not isinstance(classes, dict):
        return
    watched = {}
    for scheme, pool in classes.items():
        connection = type(f"Watched{pool.ConnectionCls.__name__}", (_Watched, pool.ConnectionCls), {})
        watched[scheme] = type(f"Watched{pool.__name__}", (pool,), {"ConnectionCls": connection})
    manager.pool_classes_by_scheme = watched


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
    raw: Any, limit: int, exchange: Exchange, where: str, url: str, timeout: float, errors: tuple[type[BaseException], ...]
) -> bytes:
    """The body of ``raw``, at most ``limit`` bytes, read before ``exchange``'s deadline (a body
    cut there, by an error or a quiet end, is a timeout). ``errors`` are the transport's exceptions."""
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
