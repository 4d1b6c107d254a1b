"""serve's HTTP endpoints, in a thread of their own so a slow scrape never delays a refresh:
``/`` (status page), ``/v1/clusters`` (JSON; ``/v1/clusters/<namespace>/<name>`` for one), ``/metrics`` (Prometheus), ``/healthz``, ``/readyz``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from .page import render_status_page
from .status import StatusBoard

__all__ = ["StatusServer"]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], board: StatusBoard, registry: CollectorRegistry, healthy: Callable[[], bool]) -> None:
        # IPv6 literals need an AF_INET6 socket.
        if ":" in address[0]:
            import socket

            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)
        self.board, self.registry, self.healthy = board, registry, healthy


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "cpcreds-serve"
    sys_version = ""

    def do_GET(self) -> None:  # noqa: N802 - http.server's spelling
        path = self.path.split("?", 1)[0]
        board = self.server.board
        if path == "/healthz":
            ok = self.server.healthy()
            self._send(200 if ok else 503, "text/plain; charset=utf-8", b"ok\n" if ok else b"unhealthy\n")
        elif path == "/readyz":
            self._send(200 if board.synced else 503, "text/plain; charset=utf-8", b"ok\n" if board.synced else b"first sync in progress\n")
        elif path == "/metrics":
            self._send(200, CONTENT_TYPE_LATEST, generate_latest(self.server.registry))
        elif path == "/v1/clusters":
            clusters, problems = board.snapshot()
            body = {"ready": board.synced, "source": board.source, "counts": board.counts(), "clusters": clusters, "problems": problems}
            self._send(200, "application/json", json.dumps(body, indent=1).encode())
        elif path.startswith("/v1/clusters/"):
            cluster = board.one(unquote(path.removeprefix("/v1/clusters/")))
            if cluster is None:
                self._send(404, "application/json", b'{"error": "no such profile"}\n')
            else:
                self._send(200, "application/json", json.dumps(cluster, indent=1).encode())
        elif path in ("/", "/index.html"):
            clusters, problems = board.snapshot()
            page = render_status_page(clusters, problems, ready=board.synced, counts=board.counts(), source=board.source)
            self._send(200, "text/html; charset=utf-8", page.encode())
        else:
            self._send(404, "text/plain; charset=utf-8", b"not found: try /, /v1/clusters, /metrics, /healthz, /readyz\n")

    def do_HEAD(self) -> None:  # noqa: N802
        self.do_GET()

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


class StatusServer:
    """The endpoints on ``host:port`` (port 0: a free one; see :attr:`address`)."""

    def __init__(self, host: str, port: int, board: StatusBoard, registry: CollectorRegistry, healthy: Callable[[], bool] = lambda: True) -> None:
        self._server = _Server((host, port), board, registry, healthy)
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
