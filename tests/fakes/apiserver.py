"""The HTTPS plumbing shared by the fake kube-apiservers (the spoke and the hub).

:class:`FakeAPIServer` owns the life cycle (``start``/``stop``/context manager), the address,
the TLS context from a :class:`~tests.fakes.pki.PKI` and the connection counter. A fake
subclasses it and names its request handler, a subclass of :class:`JSONHandler`, in
``handler_class``. The helpers build the bodies kube-apiserver sends (:func:`status_body`,
:data:`UNAUTHORIZED_STATUS`) and read its ``Authorization`` header as it does
(:func:`bearer_token`).

The server is real: a TCP listener on 127.0.0.1 with an OS-assigned port, TLS done per
connection in that connection's thread, HTTP/1.1 keep-alive, one thread per connection. So the
official clients talk to it unmodified, with their own TLS, headers and connection pools.
"""

from __future__ import annotations

import json
import socket
import socketserver
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, ClassVar, Self

from .pki import PKI

__all__ = ["FakeAPIServer", "JSONHandler", "TLSHTTPServer", "UNAUTHORIZED_STATUS", "bearer_token", "status_body"]

# Byte-for-byte the body kube-apiserver sends for failed authentication.
UNAUTHORIZED_STATUS: dict[str, Any] = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": "Unauthorized",
    "reason": "Unauthorized",
    "code": 401,
}


def status_body(code: int, reason: str, message: str, details: dict[str, str] | None = None) -> dict[str, Any]:
    """A ``Status`` failure body as kube-apiserver writes it (``details`` always present)."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": details or {},
        "code": code,
    }


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer`` header, parsed as kube-apiserver does: scheme
    case-insensitive, token non-empty; ``None`` for anything else."""
    if authorization is None:
        return None
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


class FakeAPIServer:
    """Base of an HTTPS fake API server on 127.0.0.1 with an OS-assigned port.

    One-shot: ``start()`` once, ``stop()`` (idempotent) when done, or use it as a context
    manager. Subclasses set :attr:`handler_class` and may override :meth:`_stopping` to release
    handlers that wait on something other than their socket (a watch waiting for events).
    """

    handler_class: ClassVar[type[JSONHandler]]
    #: Thread name prefix, for debugging hung tests.
    label: ClassVar[str] = "FakeAPIServer"

    def __init__(self, pki: PKI | None = None, *, require_client_cert: bool = False) -> None:
        self.pki = pki or PKI()
        self._ssl_context = self.pki.server_ssl_context(require_client_cert)
        self._lock = threading.Lock()
        self._connections = 0
        self._httpd: TLSHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._stopped = False

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> Self:
        if self._httpd is not None:
            raise RuntimeError(f"{type(self).__name__} is one-shot: start() was already called")
        self._httpd = TLSHTTPServer(self, self._ssl_context, self.handler_class)
        self._thread = threading.Thread(
            # A short poll interval: shutdown() waits up to one interval.
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.02},
            name=f"{self.label} {self.url}",
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting, release and drop open connections, and join every thread."""
        httpd, thread = self._httpd, self._thread
        if httpd is None or thread is None or self._stopped:
            return
        self._stopped = True
        httpd.shutdown()  # ends serve_forever: no new connections from here on
        self._stopping()  # handlers waiting on events, not on their socket, return
        httpd.close_connections()  # unblocks handlers idling on keep-alive sockets
        httpd.server_close()  # closes the listener and joins handler threads
        thread.join()

    def _stopping(self) -> None:
        """Called by :meth:`stop` before connections are closed; the base has nothing to release."""

    @property
    def stopped(self) -> bool:
        return self._stopped

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- addressing --------------------------------------------------------

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError(f"{type(self).__name__} not started")
        return self._httpd.server_port

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_pem(self) -> bytes:
        return self.pki.ca_pem

    # -- connections -------------------------------------------------------

    def drop_connections(self) -> None:
        """Close every open connection (as an API server does with idle keep-alive ones), and go
        on serving new ones."""
        if self._httpd is not None:
            self._httpd.close_connections(for_good=False)

    @property
    def connections(self) -> int:
        """TLS connections whose handshake completed, since start."""
        with self._lock:
            return self._connections

    def _connection_accepted(self) -> None:
        with self._lock:
            self._connections += 1


class TLSHTTPServer(ThreadingHTTPServer):
    """ThreadingHTTPServer doing TLS per connection, in the connection's thread.

    The listener stays plain TCP so a slow or failing handshake never blocks accept(). Open
    connections are tracked so stop() can end keep-alive ones. ``owner`` is the
    :class:`FakeAPIServer`; handlers reach it as ``self.server.owner``.
    """

    # Non-daemon threads are tracked by ThreadingMixIn and joined by server_close(), which is
    # what makes stop() leak-free.
    daemon_threads = False

    def __init__(self, owner: FakeAPIServer, ssl_context: ssl.SSLContext, handler: type[JSONHandler]) -> None:
        self.owner = owner
        self._ssl_context = ssl_context
        self._open_lock = threading.Lock()
        self._open: set[ssl.SSLSocket] = set()
        self._closing = False
        super().__init__(("127.0.0.1", 0), handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind would do a reverse DNS lookup (getfqdn); skip it.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)

    def finish_request(self, request: Any, client_address: Any) -> None:
        # As Go's net/http does: without TCP_NODELAY, the body written after the headers waits
        # for the client's delayed ACK (40 ms a response on Linux).
        request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # wrap_socket takes over the fd; the emptied `request` that ThreadingMixIn closes
        # afterwards is harmless.
        conn = self._ssl_context.wrap_socket(request, server_side=True, do_handshake_on_connect=False)
        with conn:
            with self._open_lock:
                if self._closing:
                    return
                self._open.add(conn)
            try:
                conn.do_handshake()
                self.owner._connection_accepted()
                self.RequestHandlerClass(conn, client_address, self)
            except OSError:
                # Failed handshakes (the client sees the error), peers hanging up, and
                # close_connections() all end up here; none is a bug.
                pass
            finally:
                # Untrack before the `with` closes the socket, so that close_connections()
                # never touches a closed (reusable) fd.
                with self._open_lock:
                    self._open.discard(conn)

    def close_connections(self, *, for_good: bool = True) -> None:
        """End every open connection; ``for_good``: and refuse the ones still being accepted."""
        with self._open_lock:
            self._closing = self._closing or for_good
            for conn in self._open:
                try:
                    # The plain-socket shutdown, not SSLSocket.shutdown(): only wake the thread
                    # blocked reading, leave the SSL state alone.
                    socket.socket.shutdown(conn, socket.SHUT_RDWR)
                except OSError:
                    pass


class JSONHandler(BaseHTTPRequestHandler):
    """Request handler base: HTTP/1.1 keep-alive, JSON bodies as Go writes them, no logging."""

    # HTTP/1.1 so clients keep connections alive, as with a real API server.
    protocol_version = "HTTP/1.1"
    server: TLSHTTPServer
    connection: ssl.SSLSocket

    def _discard_body(self) -> None:
        # Unread body bytes would be parsed as the next request on a keep-alive connection.
        # The clients under test send Content-Length, not chunks.
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)

    def _read_body(self, limit: int = 3 * 1024 * 1024) -> bytes | None:
        """The request's body (``b""`` when it has none); ``None``, with the connection marked
        to close, when it is chunked or larger than ``limit`` (kube-apiserver's 3 MiB)."""
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            return None
        length = int(self.headers.get("Content-Length") or 0)
        if length > limit:
            self.close_connection = True
            return None
        return self.rfile.read(length) if length else b""

    def _send_json(self, status: int, body: Any) -> None:
        # Compact and newline-terminated, as Go's json.Encoder writes it.
        self._send_bytes(status, json.dumps(body, separators=(",", ":")).encode() + b"\n")

    def _send_bytes(self, status: int, data: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        # Silence: stderr noise in test output, and nothing here should ever risk printing
        # credentials.
        pass
