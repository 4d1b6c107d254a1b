"""serve's HTTP endpoints, in a thread of their own so a slow scrape never delays a refresh:
``/`` (status page), ``/v1/clusters`` (JSON; ``/v1/clusters/<namespace>/<name>`` for one), ``/metrics`` (Prometheus), ``/healthz``, ``/readyz``.

Clients are not trusted to behave. A connection must send its request line and headers within
the header timeout (from its first byte, or from the accept), and one idle between requests is
closed after the idle timeout. At most ``max_connections`` are open at once, and never more than
half the process's descriptor limit: at the cap, the connection idle (or slowest to send its
headers) the longest is closed to make room, so silent sockets cannot starve ``/healthz``. When
``accept`` fails for lack of descriptors (``EMFILE``), the accept loop closes such a connection
and pauses (10 ms doubling to 1 s) instead of spinning on the listening socket.
"""

from __future__ import annotations

import errno
import json
import resource
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from .page import PAGE_SIZE, render_status_page
from .paging import BadQuery, Query
from .status import STATES, StatusBoard

__all__ = ["StatusServer", "ConnectionLimits"]

#: accept() errors that mean "no descriptor or buffer for a new connection now".
_RESOURCE_ERRORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_FIRST_PAUSE, _LAST_PAUSE = 0.01, 1.0
#: The largest page of /v1/clusters (without ``limit``, the whole list comes at once).
_MAX_LIMIT = 100_000
#: A connection's phase: waiting (idle) for a request, reading its headers, or being answered.
_IDLE, _HEADERS, _BUSY = 0, 1, 2


@dataclass(frozen=True)
class ConnectionLimits:
    """Timeouts (seconds) and the cap on open connections (see the module docstring)."""

    idle_timeout: float = 60.0
    header_timeout: float = 10.0
    max_connections: int = 512

    def cap(self) -> int:
        """``max_connections``, at most half the soft ``RLIMIT_NOFILE`` (the rest is for plugins,
        the hub, the profiles folder), at least 1."""
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        limit = self.max_connections if soft == resource.RLIM_INFINITY else min(self.max_connections, soft // 2)
        return max(1, limit)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # socketserver's default backlog of 5 drops the SYNs of a burst of clients (each then waits
    # a 1 s retransmit); the kernel caps this at net.core.somaxconn.
    request_queue_size = 128

    def __init__(
        self, address: tuple[str, int], board: StatusBoard, registry: CollectorRegistry, healthy: Callable[[], bool], limits: ConnectionLimits
    ) -> None:
        # IPv6 literals need an AF_INET6 socket.
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.limits, self.cap = limits, limits.cap()
        # socket -> (phase, since): when it went idle, or the deadline of its headers.
        self._connections: dict[socket.socket, tuple[int, float]] = {}
        self._connections_lock = threading.Lock()
        self._pause = 0.0
        super().__init__(address, _Handler)
        self.board, self.registry, self.healthy = board, registry, healthy

    # -- connection bookkeeping (handler threads and the accept loop) ---------------------------

    def phase(self, connection: socket.socket, phase: int, at: float) -> None:
        with self._connections_lock:
            if connection in self._connections:
                self._connections[connection] = (phase, at)

    def get_request(self) -> tuple[socket.socket, Any]:
        try:
            request = super().get_request()
        except OSError as exc:
            if exc.errno in _RESOURCE_ERRORS:
                # The listening socket stays readable: without a pause this loop spins at 100%.
                with self._connections_lock:
                    self._shed_one()
                self._pause = min(_LAST_PAUSE, max(_FIRST_PAUSE, self._pause * 2))
                time.sleep(self._pause)
            raise
        self._pause = 0.0
        return request

    def verify_request(self, request: Any, client_address: Any) -> bool:
        with self._connections_lock:
            if len(self._connections) >= self.cap and not self._shed_one():
                return False  # every connection is being answered: this one is closed at once
            self._connections[request] = (_HEADERS, time.monotonic() + self.limits.header_timeout)
        return True

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.pop(request, None)
        super().shutdown_request(request)

    def service_actions(self) -> None:
        """Between accepts (every poll interval): cut connections past their header deadline."""
        now = time.monotonic()
        with self._connections_lock:
            late = [c for c, (phase, at) in self._connections.items() if phase == _HEADERS and at <= now]
            for connection in late:
                self._cut(connection)

    def _shed_one(self) -> bool:
        """Cut the connection idle the longest, else the one slowest with its headers (lock held)."""
        idle = [(at, c) for c, (phase, at) in self._connections.items() if phase == _IDLE]
        reading = [(at, c) for c, (phase, at) in self._connections.items() if phase == _HEADERS]
        pool = idle or reading
        if not pool:
            return False
        self._cut(min(pool, key=lambda item: item[0])[1])
        return True

    def _cut(self, connection: socket.socket) -> None:
        # Lock held. shutdown(), not close(): the handler thread blocked on it wakes up (EOF) and
        # closes it itself, so the descriptor cannot be reused under its feet.
        self._connections.pop(connection, None)
        try:
            connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "cpcreds-serve"
    sys_version = ""
    _served = 0

    def setup(self) -> None:
        self.timeout = self.server.limits.header_timeout  # socket timeout for the first request
        super().setup()

    def handle_one_request(self) -> None:
        server, connection = self.server, self.connection
        if self._served:
            # Keep-alive: wait for the next request's first byte at most the idle timeout, then
            # give its headers the header timeout.
            server.phase(connection, _IDLE, time.monotonic())
            connection.settimeout(server.limits.idle_timeout)
            try:
                waiting = self.rfile.peek(1)
            except OSError:  # timed out, reset, or cut to make room
                waiting = b""
            if not waiting:
                self.close_connection = True
                return
            server.phase(connection, _HEADERS, time.monotonic() + server.limits.header_timeout)
            connection.settimeout(server.limits.header_timeout)
        self._served += 1
        super().handle_one_request()

    def do_GET(self) -> None:  # noqa: N802 - http.server's spelling
        self.server.phase(self.connection, _BUSY, time.monotonic())
        path = self.path.split("?", 1)[0]
        board = self.server.board
        if path == "/healthz":
            ok = self.server.healthy()
            self._send(200 if ok else 503, "text/plain; charset=utf-8", b"ok\n" if ok else b"unhealthy\n")
        elif path == "/readyz":
            reason = board.readiness()
            self._send(200 if reason is None else 503, "text/plain; charset=utf-8", f"{reason or 'ok'}\n".encode())
        elif path == "/metrics":
            self._send(200, CONTENT_TYPE_LATEST, generate_latest(self.server.registry))
        elif path == "/v1/clusters":
            self._list(board)
        elif path.startswith("/v1/clusters/"):
            key = unquote(path.removeprefix("/v1/clusters/"))
            cluster = board.one(key)
            elsewhere = board.shard.elsewhere(key) if cluster is None and board.shard is not None else None
            if elsewhere is not None:
                self._redirect(key, *elsewhere)
            elif cluster is None:
                self._status(404, "NotFound", "no such profile: the path is /v1/clusters/<namespace>/<name>")
            else:
                self._send(200, "application/json", json.dumps(cluster, indent=1).encode())
        elif path in ("/", "/index.html"):
            try:
                query = _query(self.path, order="attention", limit=PAGE_SIZE)
                clusters, token = board.select(query)
            except BadQuery:
                # A stale link or bookmark: the first page of the same filters, not an error page.
                try:
                    query = _query(self.path, order="attention", limit=PAGE_SIZE, drop_continue=True)
                    clusters, token = board.select(query)
                except BadQuery as exc:  # a filter itself is wrong (limit=0, state=bogus)
                    self._send(exc.code, "text/plain; charset=utf-8", f"{exc}\n".encode())
                    return
            self._send(200, "text/html; charset=utf-8", render_status_page(board, query, clusters, token).encode())
        else:
            self._send(404, "text/plain; charset=utf-8", b"not found: try /, /v1/clusters, /metrics, /healthz, /readyz\n")

    def do_HEAD(self) -> None:  # noqa: N802
        self.do_GET()

    def _list(self, board: StatusBoard) -> None:
        try:
            query = _query(self.path)
            clusters, token = board.select(query)
        except BadQuery as exc:
            self._status(exc.code, exc.reason, str(exc))
            return
        reason = board.readiness()
        body = {
            "kind": "ClusterStatusList",
            "metadata": {"continue": token or ""},
            "ready": reason is None,
            "notReady": reason,
            "source": board.source,
            "counts": board.counts(),
            "countsByProvider": board.counts_by_provider(),
            "configError": board.config_error,
            "clusters": clusters,
            "problems": board.problems(),
        }
        if board.shard is not None:
            body["shard"] = board.shard.section(len(board))
        # Compact when paged (a page is read by programs); indented when whole, as before.
        text = json.dumps(body, indent=None if query.limit else 1, separators=(",", ":") if query.limit else None)
        self._send(200, "application/json", text.encode())

    def _redirect(self, key: str, owner: str, url: str) -> None:
        """A profile another shard member owns: 307 to that member's status URL, saying who."""
        if not url:
            self._status(503, "ServiceUnavailable", f"profile {key} is served by shard member {owner}, which announces no status URL")
            return
        location = f"{url}/v1/clusters/{quote(key)}"
        body = (json.dumps({"servedBy": owner, "location": location}) + "\n").encode()
        self.send_response(307)
        self.send_header("Location", location)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _status(self, code: int, reason: str, message: str) -> None:
        """An error as the Kubernetes API server words one: a ``Status`` object."""
        body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code}
        self._send(code, "application/json", (json.dumps(body) + "\n").encode())

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # requests are not logged: scrapes every few seconds would drown the log


def _query(target: str, *, order: str = "key", limit: int | None = None, drop_continue: bool = False) -> Query:
    """The :class:`Query` of a request's query string: ``state``, ``provider``, ``prefix``,
    ``limit``, ``continue`` (and ``order`` on ``/v1/clusters``). Empty values count as absent;
    raises :class:`BadQuery` for a value serve cannot use."""
    raw = target.split("?", 1)[1] if "?" in target else ""
    try:
        params = {name: values[-1] for name, values in parse_qs(raw, keep_blank_values=False, strict_parsing=False, max_num_fields=32).items()}
    except ValueError:
        raise BadQuery("too many query parameters") from None
    state = params.get("state")
    if state is not None and state not in STATES:
        raise BadQuery(f"state must be one of {', '.join(STATES)}")
    order = params.get("order", order)
    if order not in ("key", "attention"):
        raise BadQuery("order must be key or attention")
    if "limit" in params:
        # ASCII digits only (str.isdigit() takes '²', which int() refuses), and leading zeros
        # dropped before int(), which refuses more than 4,300 digits.
        digits = params["limit"].lstrip("0")
        if not params["limit"].isascii() or not params["limit"].isdigit() or len(digits) > len(str(_MAX_LIMIT)) or not 0 < int(digits or "0") <= _MAX_LIMIT:
            raise BadQuery(f"limit must be a whole number from 1 to {_MAX_LIMIT}")
        limit = int(digits)
    return Query(
        state=state,
        provider=params.get("provider"),
        prefix=params.get("prefix", ""),
        order=order,  # type: ignore[arg-type]
        limit=limit,
        continue_=None if drop_continue else params.get("continue"),
    )


class StatusServer:
    """The endpoints on ``host:port`` (port 0: a free one; see :attr:`address`)."""

    def __init__(
        self,
        host: str,
        port: int,
        board: StatusBoard,
        registry: CollectorRegistry,
        healthy: Callable[[], bool] = lambda: True,
        limits: ConnectionLimits = ConnectionLimits(),
    ) -> None:
        self._server = _Server((host, port), board, registry, healthy, limits)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2}, name="cpcreds-serve-http", daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
