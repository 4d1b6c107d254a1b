"""The loopback HTTP(S) server scaffolding shared by the cloud fakes (Google, AWS, Entra).

:class:`LoopbackServer` owns a fake's life cycle (``start``/``stop``/context manager), its address,
its request log (:attr:`~LoopbackServer.seen`) and its fault queue (:meth:`~LoopbackServer.fail`);
a fake subclasses it and says which endpoint a request is for (``_endpoint``) and what it answers
(``_answer``, a :class:`Reply`). ``ssl_context`` makes it HTTPS (TLS done per connection, in that
connection's thread). :func:`send_fault` writes a :class:`Fault` on any
:class:`~http.server.BaseHTTPRequestHandler` (the fakes on :class:`~tests.fakes.apiserver.FakeAPIServer`
use it too), so every fake fails the same ways: an error status and body, an answer that never
comes (held until ``stop()``, so a test of a timeout needs no sleep), a body cut off midway, a
body without end, or an error that echoes the request's secrets; :func:`trickle_head` sends a
status line and headers that never end, a byte at a time.
"""

from __future__ import annotations

import itertools
import json
import socket
import socketserver
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal, Self
from urllib.parse import parse_qs, unquote, urlsplit

__all__ = ["Fault", "Handler", "LoopbackHTTPServer", "LoopbackServer", "Reply", "SeenCall", "send_fault", "trickle_head"]


@dataclass(frozen=True)
class SeenCall:
    """One request: which endpoint, the method, path, query, and the headers that matter
    (``host`` is the Host header: a real Google name when the request came through a proxy)."""

    endpoint: str
    method: str
    path: str
    query: dict[str, list[str]]
    metadata_flavor: str | None
    authorization: str | None
    host: str | None = None


@dataclass(frozen=True)
class Fault:
    """What to answer instead of the real thing.

    ``status`` with ``body`` (JSON-encoded when not bytes); ``hang="headers"`` never answers,
    ``hang="body"`` sends headers and part of the body then nothing (both held until ``stop()``);
    ``endless=True`` streams a body without end until the client hangs up; ``echo=True`` answers
    an OAuth error whose description quotes the whole request (the assertion, the subject token,
    the bearer token), as a careless or hostile server might.
    """

    status: int = 500
    body: Any = None
    hang: Literal["headers", "body"] | None = None
    endless: bool = False
    echo: bool = False
    headers: tuple[tuple[str, str], ...] = ()


@dataclass
class Reply:
    """A fake's answer: status, body, its content type, and more headers."""

    status: int
    body: bytes
    content_type: str = "application/json; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)


def send_fault(
    handler: BaseHTTPRequestHandler,
    fault: Fault,
    request_body: bytes,
    release: threading.Event,
    *,
    headers: tuple[tuple[str, str], ...] = (),
    echo_header: str = "Authorization",
    default_error: str = "internal_failure",
) -> None:
    """Answer ``fault`` on ``handler``. A hang and an endless body last until ``release`` is set
    (the fake's ``stop()``); ``headers`` go before the fault's own; an echo quotes the request
    line, the ``echo_header`` and the body; a fault without a body answers ``{"error": default_error}``."""
    if fault.hang == "headers":
        release.wait()
        handler.close_connection = True
        return
    if fault.echo:
        echoed = f"{handler.requestline} {handler.headers.get(echo_header)} {request_body.decode('utf-8', 'replace')}"
        body = json.dumps({"error": "invalid_request", "error_description": f"cannot use {echoed}"}).encode()
    elif isinstance(fault.body, bytes):
        body = fault.body
    else:
        body = json.dumps(fault.body if fault.body is not None else {"error": default_error}).encode()
    handler.send_response(fault.status)
    for name, value in (*headers, *fault.headers):
        handler.send_header(name, value)
    handler.send_header("Content-Type", "application/json")
    if fault.endless:
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        chunk = b"x" * 65536
        frame = b"%x\r\n%s\r\n" % (len(chunk), chunk)
        try:
            while not release.is_set():
                handler.wfile.write(frame)
        except OSError:  # the client hung up: what it was meant to do
            pass
        handler.close_connection = True
        return
    # A cut-off body declares more than it sends, then waits.
    handler.send_header("Content-Length", str(len(body) + (1000 if fault.hang == "body" else 0)))
    handler.end_headers()
    handler.wfile.write(body)
    if fault.hang == "body":
        handler.wfile.flush()
        release.wait()
        handler.close_connection = True


def trickle_head(handler: BaseHTTPRequestHandler, pause: Callable[[float], bool], interval: float = 0.01) -> bool:
    """Send a status line, then one header line without end, a byte at a time ``interval`` apart:
    every receive of the client is quick, its answer never starts (a header line reaches
    http.client's 64 KiB limit only after ~11 minutes at the default pace). ``pause(seconds)``
    waits and says whether the fake is stopping. True when the client hung up, False at a stop."""
    head = itertools.chain(b"HTTP/1.1 200 OK\r\nX-Trickle: ", itertools.repeat(b"a"[0]))
    handler.close_connection = True
    try:
        for byte in head:
            handler.wfile.write(bytes((byte,)))
            handler.wfile.flush()
            if pause(interval):
                return False
    except OSError:
        return True
    return False


class LoopbackHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server on 127.0.0.1 (OS-assigned port) whose open connections
    :meth:`close_connections` can end; with ``ssl_context``, each connection is TLS."""

    # Handler threads are joined by server_close(); stop() first shuts every open connection so
    # that none of them is left waiting on a keep-alive socket.
    daemon_threads = False

    def __init__(self, owner: LoopbackServer, ssl_context: ssl.SSLContext | None = None) -> None:
        self.owner = owner
        self._context = ssl_context
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), Handler)

    def server_bind(self) -> None:
        socketserver.TCPServer.server_bind(self)  # no reverse DNS lookup (HTTPServer's getfqdn)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        if self._context is not None:
            # The handshake in the connection's thread, so a slow one never blocks accept().
            try:
                request = self._context.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError):
                self.shutdown_request(request)
                return
        self.track(request)
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.untrack(request)

    def track(self, conn: socket.socket) -> None:
        with self._open_lock:
            self._open.add(conn)

    def untrack(self, conn: socket.socket) -> None:
        with self._open_lock:
            self._open.discard(conn)

    def close_connections(self) -> None:
        with self._open_lock:
            for conn in list(self._open):
                try:
                    socket.socket.shutdown(conn, socket.SHUT_RDWR)  # wake the reader; leave any TLS state alone
                except OSError:
                    pass


class Handler(BaseHTTPRequestHandler):
    """Reads the body and hands the request to the owner's ``_dispatch``; CONNECT to ``_connect``."""

    protocol_version = "HTTP/1.1"  # keep-alive, as the real endpoints
    server: LoopbackHTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.owner._dispatch(self, body)

    do_GET = do_POST = do_PUT = do_DELETE = _handle

    def do_CONNECT(self) -> None:
        self.server.owner._connect(self)

    def send_reply(self, reply: Reply, extra_headers: dict[str, str]) -> None:
        self.send_response(reply.status)
        for name, value in {**extra_headers, **reply.headers}.items():
            self.send_header(name, value)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        self.wfile.write(reply.body)


class LoopbackServer:
    """Life cycle, fault queue and request log of a fake; HTTPS when ``ssl_context`` is given.

    Subclasses implement ``_endpoint(method, path)`` (the fault and log name of a request) and
    ``_answer(...)``; ``_response_headers`` go on every answer (faults included)."""

    _response_headers: dict[str, str] = {}

    def __init__(self, *, token_lifetime: int, ssl_context: ssl.SSLContext | None = None) -> None:
        #: Lifetime, in seconds, of the tokens issued from now on.
        self.token_lifetime = token_lifetime
        self._ssl_context = ssl_context
        self._lock = threading.Lock()
        self._faults: dict[str, list[Fault]] = {}
        self._seen: list[SeenCall] = []
        self._release = threading.Event()
        self._httpd: LoopbackHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> Self:
        if self._httpd is not None:
            raise RuntimeError(f"{type(self).__name__} is one-shot: start() was already called")
        self._httpd = LoopbackHTTPServer(self, self._ssl_context)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name=f"{type(self).__name__} {self.port}"
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Release held answers, stop accepting, drop open connections, join every thread."""
        httpd, thread = self._httpd, self._thread
        if httpd is None or thread is None or self._release.is_set():
            return
        self._release.set()
        httpd.shutdown()
        httpd.close_connections()
        httpd.server_close()
        thread.join()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("not started")
        return self._httpd.server_port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (``https://`` with an ``ssl_context``)."""
        scheme = "http" if self._ssl_context is None else "https"
        return f"{scheme}://127.0.0.1:{self.port}"

    # -- faults and records --------------------------------------------------

    def fail(self, endpoint: str, fault: Fault | None = None, *, times: int = 1, **kwargs: Any) -> None:
        """Answer the next ``times`` requests to ``endpoint`` with ``fault`` (or ``Fault(**kwargs)``)."""
        with self._lock:
            self._faults.setdefault(endpoint, []).extend([fault or Fault(**kwargs)] * times)

    @property
    def seen(self) -> list[SeenCall]:
        with self._lock:
            return list(self._seen)

    def calls(self, endpoint: str) -> list[SeenCall]:
        return [call for call in self.seen if call.endpoint == endpoint]

    # -- request handling ---------------------------------------------------

    def _endpoint(self, method: str, path: str) -> str:
        raise NotImplementedError

    def _connect(self, handler: Handler) -> None:
        handler.send_error(405, "not a proxy")

    def _answer(self, endpoint: str, handler: Handler, path: str, query: dict[str, list[str]], body: bytes) -> Reply:
        raise NotImplementedError

    def _dispatch(self, handler: Handler, body: bytes) -> None:
        parts = urlsplit(handler.path)
        path, query = unquote(parts.path), parse_qs(parts.query)
        endpoint = self._endpoint(handler.command, path)
        with self._lock:
            self._seen.append(
                SeenCall(
                    endpoint,
                    handler.command,
                    path,
                    query,
                    handler.headers.get("Metadata-Flavor"),
                    handler.headers.get("Authorization"),
                    handler.headers.get("Host"),
                )
            )
            queue = self._faults.get(endpoint)
            fault = queue.pop(0) if queue else None
        if fault is None:
            handler.send_reply(self._answer(endpoint, handler, path, query, body), self._response_headers)
        else:
            send_fault(handler, fault, body, self._release, headers=tuple(self._response_headers.items()))
