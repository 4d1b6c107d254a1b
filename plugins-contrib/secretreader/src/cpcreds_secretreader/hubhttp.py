"""HTTPS to a plain hub with the standard library: ``http.client`` over an ``ssl`` context that
verifies the hub's certificate (its CA from the kubeconfig or the service account) and may carry
a client certificate, keep-alive connections pooled for many threads.

Why not urllib3 (which the ``kubernetes`` client uses, and this module used before): a console
script run reads one Secret and exits, and importing urllib3 was a large part of such a run
(figures in bench/README.md, ``bench_console_scripts.py``). What a plain hub needs of it is small: a GET
with a bearer token, a server name other than the host (``tls-server-name``), keep-alive reuse,
and a timeout per request. Anything else a hub kubeconfig can ask for (a proxy, an exec or
auth-provider user, basic auth) goes to the ``kubernetes`` client's loader instead
(:mod:`cpcreds_secretreader.hubloader`), which brings urllib3 with it.

Imported only when a plain hub is built: loading the plugin (``cpcreds plugins``) does not pay
for ``http.client``.
"""

from __future__ import annotations

import http.client
import select
import ssl
import threading
from typing import Any
from urllib.parse import urlsplit

from cpcreds.sdk import read_bounded, watch

__all__ = ["PlainHub", "ConnectFailed", "TRANSPORT_ERRORS"]

#: Idle keep-alive connections kept per hub (as urllib3's pool kept 10).
_MAX_IDLE = 10
#: Largest token file read (a projected service-account token is 1-2 KiB).
_MAX_TOKEN_FILE_BYTES = 64 * 1024


class ConnectFailed(OSError):
    """No TCP connection to the hub (refused, unreachable, no such host); a timeout stays a
    ``TimeoutError`` and a TLS failure an ``ssl.SSLError``."""


#: What a request or a read through :class:`PlainHub` raises when the hub cannot be reached or
#: answers badly (``ssl.SSLError`` and ``TimeoutError`` are ``OSError``).
TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (OSError, http.client.HTTPException)


class _Connection(http.client.HTTPSConnection):
    """An HTTPS connection whose certificate is checked for ``server_hostname`` (the
    kubeconfig's ``tls-server-name``) rather than the host it dials, and whose TCP failures are
    :class:`ConnectFailed`."""

    def __init__(self, host: str, port: int | None, *, timeout: float, context: ssl.SSLContext, server_hostname: str | None) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._server_hostname = server_hostname or host

    def connect(self) -> None:
        try:
            http.client.HTTPConnection.connect(self)  # TCP only; TLS below, with our server name
        except (TimeoutError, ssl.SSLError):
            raise
        except OSError as exc:
            raise ConnectFailed(exc.errno, "cannot connect") from None
        watch(self.sock)  # before the handshake: the exchange's deadline bounds it too
        self.sock = self._context.wrap_socket(self.sock, server_hostname=self._server_hostname)


class _Answer:
    """A response as :func:`cpcreds_secretreader.exchange.read_bounded` reads it (urllib3's
    names): ``status``, ``headers``, ``read1``, the ``connection``, ``close()`` (drop the
    connection: the rest of the body must not be read as the next answer) and ``release_conn()``
    (back to the pool when the answer was read whole)."""

    def __init__(self, hub: PlainHub, connection: _Connection, response: http.client.HTTPResponse) -> None:
        self._hub, self.connection, self._response = hub, connection, response
        self.status = response.status
        self.headers = response.headers

    def read1(self, size: int) -> bytes:
        return self._response.read1(size)

    def close(self) -> None:
        self._response.close()
        connection, self.connection = self.connection, None  # type: ignore[assignment]
        if connection is not None:
            connection.close()

    def release_conn(self) -> None:
        connection, self.connection = self.connection, None  # type: ignore[assignment]
        if connection is None:
            return
        response = self._response
        # Read whole: closed (a chunked body's end), or nothing left of its Content-Length
        # (Python 3.11's read1 does not close the response then).
        whole = response.isclosed() or response.length == 0
        response.close()  # the response's file only; the connection keeps its socket
        if whole and not response.will_close:
            self._hub._put_back(connection)
        else:
            connection.close()


class PlainHub:
    """A hub reached with ``http.client``: GETs to ``url`` (an ``https://`` server, perhaps with
    a path prefix), the certificate checked by ``context`` for ``server_hostname`` (default: the
    URL's host), the bearer token ``token`` or the content of ``token_file``, re-read for every
    request as a projected token rotates. Thread-safe: each request has a connection of its own,
    idle ones are reused."""

    def __init__(self, url: str, context: ssl.SSLContext, server_hostname: str | None, token: str | None, token_file: str | None) -> None:
        parts = urlsplit(url)
        if parts.scheme != "https" or not parts.hostname or parts.username is not None or parts.query or parts.fragment:
            raise ValueError("not a plain https server URL")
        self.url = url.rstrip("/")
        self._host, self._port = parts.hostname, parts.port  # ValueError: a port that is not a number
        self._prefix = parts.path.rstrip("/")
        self._context, self._server_hostname = context, server_hostname
        self._token, self._token_file = token, token_file
        self._lock = threading.Lock()
        self._idle: list[_Connection] = []

    def get(self, path: str, timeout: float) -> _Answer:
        """Send ``GET path`` and read the status and headers, each receive within ``timeout``
        seconds and the whole under the calling thread's :class:`~cpcreds.sdk.Cutoff`;
        the body is the caller's to read. Raises what :data:`TRANSPORT_ERRORS` lists."""
        headers = {"Accept": "application/json", "User-Agent": "cpcreds-secretreader"}
        token = self._token
        if self._token_file:
            token = read_bounded(self._token_file, _MAX_TOKEN_FILE_BYTES).decode("utf-8", "replace").strip()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        connection = self._take(timeout)
        try:
            connection.request("GET", self._prefix + path, headers=headers)
            response = connection.getresponse()
        except BaseException:
            connection.close()
            raise
        return _Answer(self, connection, response)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    def _take(self, timeout: float) -> _Connection:
        while True:
            with self._lock:
                connection = self._idle.pop() if self._idle else None
            if connection is None:
                return _Connection(self._host, self._port, timeout=timeout, context=self._context, server_hostname=self._server_hostname)
            if _usable(connection):
                connection.timeout = timeout
                connection.sock.settimeout(timeout)
                watch(connection.sock)
                return connection
            connection.close()

    def _put_back(self, connection: _Connection) -> None:
        with self._lock:
            if len(self._idle) < _MAX_IDLE:
                self._idle.append(connection)
                return
        connection.close()


def _usable(connection: _Connection) -> bool:
    """Whether an idle keep-alive connection can carry a request: an idle connection the hub
    closed (or wrote to unasked) reads as readable; sending on it would fail (urllib3's check)."""
    sock = connection.sock
    if sock is None:
        return False
    try:
        poller = select.poll()  # not select.select: no limit on the descriptor's number
        poller.register(sock, select.POLLIN)
        return not poller.poll(0)
    except (OSError, ValueError):
        return False


def ssl_context(ca: bytes | None, cert: bytes | None, key: bytes | None) -> Any:
    """A client context verifying the hub's certificate against ``ca`` (PEM; None: the system's
    CAs), presenting the client certificate ``cert`` with ``key`` (PEM) when given."""
    context = ssl.create_default_context(cadata=ca.decode("ascii") if ca else None)
    if cert is not None and key is not None:
        import os
        import tempfile

        # ssl loads a client certificate from files only: a private file, removed at once.
        with tempfile.TemporaryDirectory(prefix="cpcreds-hub-") as directory:
            pem = os.path.join(directory, "client.pem")
            descriptor = os.open(pem, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(cert.rstrip(b"\n") + b"\n" + key)
            context.load_cert_chain(pem)
    return context
