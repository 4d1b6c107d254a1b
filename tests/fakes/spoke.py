"""A fake spoke kube-apiserver: real HTTPS, real authentication, canned API objects.

Good enough for the official ``kubernetes`` client (urllib3) and ``kubernetes.aio``
(aiohttp) to talk to it unmodified, so tests exercise real TLS, real headers and
real keep-alive connection pools rather than mocks.

Authentication follows kube-apiserver's union authenticator: a client
certificate is tried first, then a bearer token; the first that succeeds wins.
Anonymous access is off (as with ``--anonymous-auth=false``), so requests
without valid credentials get the API server's 401 ``Status``.
"""

from __future__ import annotations

import json
import re
import socket
import socketserver
import ssl
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal, Self
from urllib.parse import unquote, urlsplit

from cryptography import x509
from cryptography.x509.oid import NameOID

from .pki import PKI

AuthKind = Literal["token", "client-cert", "anonymous", "rejected"]

DEFAULT_NAMESPACES: tuple[str, ...] = ("default", "kube-system", "kube-public", "kube-node-lease")

VERSION_INFO: dict[str, str] = {
    "major": "1",
    "minor": "33",
    "gitVersion": "v1.33.1",
    "gitCommit": "8adc0f041b8e7ad1d30e29cc59c6ae7a15e19828",
    "gitTreeState": "clean",
    "buildDate": "2025-05-15T08:19:08Z",
    "goVersion": "go1.24.2",
    "compiler": "gc",
    "platform": "linux/amd64",
}

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

_NAMESPACE_PATH = re.compile(r"/api/v1/namespaces/([^/]+)")


@dataclass(frozen=True)
class SeenRequest:
    """One HTTP request as the spoke saw it.

    ``token`` is the bearer token presented and ``client_cn`` the CN of the
    client certificate presented, whether or not they were accepted. ``auth``
    says which one authenticated the request: "anonymous" means no credentials
    were presented at all, "rejected" that some were but none was accepted.
    ``path`` excludes the query string.
    """

    method: str
    path: str
    auth: AuthKind
    token: str | None
    client_cn: str | None
    status: int


@dataclass(frozen=True)
class _PeerCert:
    common_name: str | None
    not_before: datetime
    not_after: datetime

    def valid_now(self) -> bool:
        # Checked per request, not per connection, like kube-apiserver: a
        # certificate can expire while its keep-alive connection is open.
        return self.not_before <= datetime.now(UTC) <= self.not_after


class SpokeServer:
    """An HTTPS fake kube-apiserver on 127.0.0.1 with an OS-assigned port.

    One-shot: ``start()`` once, ``stop()`` (idempotent) when done, or use it as
    a context manager. All methods are safe to call from any thread.
    """

    def __init__(
        self,
        pki: PKI | None = None,
        *,
        tokens: Iterable[str] = (),
        client_cns: Iterable[str] = (),
        namespaces: Iterable[str] = DEFAULT_NAMESPACES,
        require_client_cert: bool = False,
    ) -> None:
        self.pki = pki or PKI()
        self._ssl_context = self.pki.server_ssl_context(require_client_cert)
        self._namespaces = tuple(namespaces)
        self._lock = threading.Lock()
        self._tokens = set(tokens)
        self._client_cns = set(client_cns)
        self._requests: list[SeenRequest] = []
        self._connections = 0
        self._httpd: _TLSServer | None = None
        self._thread: threading.Thread | None = None
        self._stopped = False

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> Self:
        if self._httpd is not None:
            raise RuntimeError("SpokeServer is one-shot: start() was already called")
        self._httpd = _TLSServer(self, self._ssl_context)
        self._thread = threading.Thread(
            # A short poll interval: shutdown() waits up to one interval.
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.02},
            name=f"SpokeServer {self.url}",
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting, drop open connections, and join every thread."""
        httpd, thread = self._httpd, self._thread
        if httpd is None or thread is None or self._stopped:
            return
        self._stopped = True
        httpd.shutdown()  # ends serve_forever: no new connections from here on
        httpd.close_connections()  # unblocks handlers idling on keep-alive sockets
        httpd.server_close()  # closes the listener and joins handler threads
        thread.join()

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
            raise RuntimeError("SpokeServer not started")
        return self._httpd.server_port

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_pem(self) -> bytes:
        return self.pki.ca_pem

    # -- what is accepted --------------------------------------------------

    def accept_token(self, token: str) -> None:
        with self._lock:
            self._tokens.add(token)

    def revoke_token(self, token: str) -> None:
        with self._lock:
            self._tokens.discard(token)

    def accept_client_cn(self, common_name: str) -> None:
        with self._lock:
            self._client_cns.add(common_name)

    def revoke_client_cn(self, common_name: str) -> None:
        with self._lock:
            self._client_cns.discard(common_name)

    # -- what was seen -----------------------------------------------------

    @property
    def requests(self) -> list[SeenRequest]:
        with self._lock:
            return list(self._requests)

    def clear_requests(self) -> None:
        with self._lock:
            self._requests.clear()

    @property
    def connections(self) -> int:
        """TLS connections whose handshake completed, since start."""
        with self._lock:
            return self._connections

    # -- used by the request handler ---------------------------------------

    def _connection_accepted(self) -> None:
        with self._lock:
            self._connections += 1

    def _authenticate(
        self, authorization: str | None, token: str | None, cert: _PeerCert | None
    ) -> AuthKind:
        # Same order as kube-apiserver's union authenticator: x509, then token.
        with self._lock:
            if cert is not None and cert.common_name in self._client_cns and cert.valid_now():
                return "client-cert"
            if token is not None and token in self._tokens:
                return "token"
        if authorization is None and cert is None:
            return "anonymous"
        return "rejected"

    def _record(self, seen: SeenRequest) -> None:
        with self._lock:
            self._requests.append(seen)

    def _namespace(self, name: str) -> dict[str, Any] | None:
        if name not in self._namespaces:
            return None
        return {
            "kind": "Namespace",
            "apiVersion": "v1",
            "metadata": {
                "name": name,
                # Stable across runs and servers, so tests may compare them.
                "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"spoke.test/namespaces/{name}")),
                "resourceVersion": str(10 + self._namespaces.index(name)),
                "creationTimestamp": "2025-01-01T00:00:00Z",
                "labels": {"kubernetes.io/metadata.name": name},
            },
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        }

    def _respond(self, method: str, path: str) -> tuple[int, dict[str, Any]]:
        """Route an authenticated request."""
        # The generated client asks for "/version/" and "/api/"; kube-apiserver
        # serves those with or without the trailing slash.
        path = path.rstrip("/") or "/"
        if method == "GET":
            if path == "/version":
                return 200, VERSION_INFO
            if path == "/api":
                return 200, {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": f"127.0.0.1:{self.port}"}
                    ],
                }
            if path == "/apis":  # no API groups: clients fall back to the core group only
                return 200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": []}
            if path == "/api/v1":  # legacy discovery of the core group, as kubectl reads it
                return 200, {
                    "kind": "APIResourceList",
                    "groupVersion": "v1",
                    "resources": [
                        {
                            "name": "namespaces",
                            "singularName": "namespace",
                            "namespaced": False,
                            "kind": "Namespace",
                            "verbs": ["get", "list"],
                            "shortNames": ["ns"],
                        }
                    ],
                }
            if path == "/api/v1/namespaces":
                return 200, {
                    "kind": "NamespaceList",
                    "apiVersion": "v1",
                    "metadata": {"resourceVersion": "100"},
                    "items": [self._namespace(name) for name in self._namespaces],
                }
            if match := _NAMESPACE_PATH.fullmatch(path):
                name = unquote(match.group(1))
                namespace = self._namespace(name)
                if namespace is not None:
                    return 200, namespace
                return 404, _status(
                    404,
                    "NotFound",
                    f'namespaces "{name}" not found',
                    details={"name": name, "kind": "namespaces"},
                )
        return 404, _status(404, "NotFound", "the server could not find the requested resource")


def _status(
    code: int, reason: str, message: str, details: dict[str, str] | None = None
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": details or {},
        "code": code,
    }
    return status


class _TLSServer(ThreadingHTTPServer):
    """ThreadingHTTPServer doing TLS per connection, in the connection's thread.

    The listener stays plain TCP so a slow or failing handshake never blocks
    accept(). Open connections are tracked so stop() can end keep-alive ones.
    """

    # Non-daemon threads are tracked by ThreadingMixIn and joined by
    # server_close(), which is what makes stop() leak-free.
    daemon_threads = False

    def __init__(self, spoke: SpokeServer, ssl_context: ssl.SSLContext) -> None:
        self.spoke = spoke
        self._ssl_context = ssl_context
        self._open_lock = threading.Lock()
        self._open: set[ssl.SSLSocket] = set()
        self._closing = False
        super().__init__(("127.0.0.1", 0), _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind would do a reverse DNS lookup (getfqdn); skip it.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)

    def finish_request(self, request: Any, client_address: Any) -> None:
        # wrap_socket takes over the fd; the emptied `request` that
        # ThreadingMixIn closes afterwards is harmless.
        conn = self._ssl_context.wrap_socket(
            request, server_side=True, do_handshake_on_connect=False
        )
        with conn:
            with self._open_lock:
                if self._closing:
                    return
                self._open.add(conn)
            try:
                conn.do_handshake()
                self.spoke._connection_accepted()
                self.RequestHandlerClass(conn, client_address, self)
            except OSError:
                # Failed handshakes (the client sees the error), peers hanging
                # up, and close_connections() all end up here; none is a bug.
                pass
            finally:
                # Untrack before the `with` closes the socket, so that
                # close_connections() never touches a closed (reusable) fd.
                with self._open_lock:
                    self._open.discard(conn)

    def close_connections(self) -> None:
        with self._open_lock:
            self._closing = True
            for conn in self._open:
                try:
                    # The plain-socket shutdown, not SSLSocket.shutdown(): only
                    # wake the thread blocked reading, leave the SSL state alone.
                    socket.socket.shutdown(conn, socket.SHUT_RDWR)
                except OSError:
                    pass


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 so clients keep connections alive, as with a real API server.
    protocol_version = "HTTP/1.1"
    server: _TLSServer
    connection: ssl.SSLSocket

    def setup(self) -> None:
        super().setup()
        # One handler per connection, so the client certificate is read once.
        der = self.connection.getpeercert(binary_form=True)
        self._peer_cert = _parse_peer_cert(der) if der else None

    def do_GET(self) -> None:
        self._handle()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def _handle(self) -> None:
        self._discard_body()
        spoke = self.server.spoke
        path = urlsplit(self.path).path
        authorization = self.headers.get("Authorization")
        token = _bearer_token(authorization)
        auth = spoke._authenticate(authorization, token, self._peer_cert)
        if auth in ("token", "client-cert"):
            status, body = spoke._respond(self.command, path)
        else:
            status, body = 401, UNAUTHORIZED_STATUS
        # Record before answering: once the client has the response, the test
        # may look at `requests`, and it must already be there.
        spoke._record(
            SeenRequest(
                method=self.command,
                path=path,
                auth=auth,
                token=token,
                client_cn=self._peer_cert.common_name if self._peer_cert else None,
                status=status,
            )
        )
        self._send_json(status, body)

    def _discard_body(self) -> None:
        # Unread body bytes would be parsed as the next request on a keep-alive
        # connection. The clients under test send Content-Length, not chunks.
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)

    def _send_json(self, status: int, body: dict[str, Any]) -> None:
        # Compact and newline-terminated, as Go's json.Encoder writes it.
        data = json.dumps(body, separators=(",", ":")).encode() + b"\n"
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        # Silence: stderr noise in test output, and nothing here should ever
        # risk printing credentials.
        pass


def _bearer_token(authorization: str | None) -> str | None:
    # Parsed as kube-apiserver does: scheme case-insensitive, token non-empty.
    if authorization is None:
        return None
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def _parse_peer_cert(der: bytes) -> _PeerCert:
    # The handshake already checked the chain to our CA but not the validity
    # period (see PKI.server_ssl_context); that is left to _authenticate.
    cert = x509.load_der_x509_certificate(der)
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return _PeerCert(
        common_name=str(names[0].value) if names else None,
        not_before=cert.not_valid_before_utc,
        not_after=cert.not_valid_after_utc,
    )
