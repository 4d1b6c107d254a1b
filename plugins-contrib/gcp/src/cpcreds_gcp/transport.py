"""The HTTP transport google-auth uses here: every call bounded by the fetch's deadline, every
answer bounded in size, and a record of what happened on the wire for error messages.

HTTP is urllib3's (a ``requests`` session would cost ~50 ms of imports on every run of the
console scripts): :class:`Pools` picks the proxy and the CA bundle from the environment as
``requests`` (google-auth's usual transport) does, so a setup that worked with it still works.

google-auth's exceptions quote response bodies (an endpoint may echo the assertion or the subject
token), so the provider never shows them: it describes the failure from :class:`Exchange`
records, which hold a status, an OAuth error code and a reason in our words, never a body.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn
from urllib.parse import urlsplit

import google.auth.transport
import urllib3
from urllib3.exceptions import ConnectTimeoutError, HTTPError, NewConnectionError, ProtocolError, ReadTimeoutError

from cpcreds.sdk import BodyProblem, read_within, redact_text

__all__ = ["Deadline", "Exchange", "Abort", "Pools", "BoundedRequest", "MAX_RESPONSE_BYTES", "shown_url", "error_detail", "safe_summary"]

#: A token answer is a few KiB; anything much larger is not one.
MAX_RESPONSE_BYTES = 1024 * 1024
# google-auth's token-endpoint retry pauses 1 s, then 2 s, ... with 10 % jitter.
_FIRST_PAUSE = 1.0
_JITTER = 1.1
_ERROR_CODE = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
# Long runs of token alphabet with both letters and digits: an echoed token, assertion or key
# (a path's segments and an environment variable's name are not).
_RUN = re.compile(r"[A-Za-z0-9_\-.+=]{32,}")


def _blank_tokens(text: str) -> str:
    def blank(match: re.Match[str]) -> str:
        run = match.group(0)
        looks_random = any(c.isdigit() for c in run) and any(c.isalpha() for c in run)
        return "[REDACTED]" if looks_random else run

    return _RUN.sub(blank, text)


class Deadline:
    """The end of one fetch, on the monotonic clock: ``seconds`` from now, less ``margin``.

    ``seconds`` is what messages name (the plan's timeout); the margin lets the provider's own
    error, which names the endpoint that did not answer, reach the engine before the engine's
    timeout (which cannot name it) fires.
    """

    def __init__(self, seconds: float, margin: float = 0.0) -> None:
        self.seconds = seconds
        self._at = time.monotonic() + max(0.0, seconds - margin)

    def remaining(self) -> float:
        return self._at - time.monotonic()


@dataclass
class Exchange:
    """One HTTP call as the provider reports it: ``label`` (what the endpoint is), ``url`` (scheme,
    host and path only), and either ``status`` (with ``detail``, an OAuth/API error code and a
    short description when they are safe to show) or ``failure`` (why there is no answer)."""

    label: str
    url: str
    status: int | None = None
    detail: str | None = None
    failure: str | None = None

    def describe(self) -> str:
        where = f"{self.label} {self.url}"
        if self.failure is not None:
            return f"{where}: {self.failure}"
        return f"{where} answered HTTP {self.status}" + (f" ({self.detail})" if self.detail else "")


class Abort(Exception):
    """Stops google-auth mid-refresh: the deadline has passed, the endpoint cannot be reached, or
    its answer is unusable. It is no google-auth exception, so no retry loop swallows it; the
    reason is in the request's last :class:`Exchange`."""


def shown_url(url: str) -> str:
    """``url`` without query, fragment or user info: what may appear in a message."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if parts.port is not None:
            host = f"{host}:{parts.port}"
        if ":" in (parts.hostname or ""):
            host = f"[{parts.hostname}]" + (f":{parts.port}" if parts.port is not None else "")
        return f"{parts.scheme}://{host}{parts.path}"
    except ValueError:
        return "(an invalid URL)"


def _safe(text: Any, limit: int = 160) -> str | None:
    # Server prose is shown only when it cannot be (or hold) a secret: one short printable line,
    # no run of token characters, nothing our redaction would touch.
    if not isinstance(text, str):
        return None
    line = " ".join(text.split())
    if not line or len(line) > limit or not line.isprintable() or _blank_tokens(line) != line or redact_text(line) != line:
        return None
    return line


def safe_summary(exc: BaseException, limit: int = 200) -> str:
    """An exception's message fit for a one-line error: redacted, token-like runs blanked, cut
    to ``limit`` characters; the type's name when nothing is left."""
    text = _blank_tokens(redact_text(" ".join(str(exc).split())))
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text or type(exc).__name__


def error_detail(body: bytes) -> str | None:
    """The OAuth error (``invalid_grant: Invalid JWT Signature.``) or Google API status
    (``PERMISSION_DENIED: ...``) of an error answer, when it is safe to show; else ``None``."""
    try:
        document = json.loads(body.decode("utf-8")) if len(body) <= 64 * 1024 else None
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(document, dict):
        return None
    error = document.get("error")
    if isinstance(error, dict):  # Google API errors: {"error": {"code", "message", "status"}}
        code, description = error.get("status"), error.get("message")
    else:  # RFC 6749 section 5.2: {"error", "error_description"}
        code, description = error, document.get("error_description")
    if not isinstance(code, str) or not _ERROR_CODE.fullmatch(code):
        return None
    description = _safe(description)
    return f"{code}: {description}" if description else code


class Pools:
    """The connections of one provider: urllib3 pools, direct or through the proxy the
    environment names for a URL, reused across fetches. Thread-safe.

    As ``requests`` does (with ``trust_env``): the proxy is ``HTTPS_PROXY``/``HTTP_PROXY`` (by
    the URL's scheme) or ``ALL_PROXY``, upper or lower case, unless ``NO_PROXY`` names the host;
    the CA bundle is ``REQUESTS_CA_BUNDLE``, else ``CURL_CA_BUNDLE``, else certifi's when it is
    installed, else the system's. A direct call (the link-local metadata server) takes no proxy.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._managers: dict[str | None, urllib3.PoolManager] = {}

    def for_url(self, url: str, *, direct: bool = False) -> urllib3.PoolManager:
        proxy = None if direct else _proxy_for(url)
        with self._lock:
            manager = self._managers.get(proxy)
            if manager is None:
                options: dict[str, Any] = {"maxsize": 4, "retries": False, "ca_certs": _ca_bundle()}
                manager = urllib3.ProxyManager(proxy, **options) if proxy else urllib3.PoolManager(**options)
                self._managers[proxy] = manager
        return manager

    def close(self) -> None:
        """Close every connection; later calls open new ones."""
        with self._lock:
            managers, self._managers = list(self._managers.values()), {}
        for manager in managers:
            manager.clear()


def _proxy_for(url: str) -> str | None:
    import urllib.request  # its environment reading is requests' too (getproxies, proxy_bypass)

    proxies = urllib.request.getproxies_environment()
    parts = urlsplit(url)
    if not proxies or urllib.request.proxy_bypass_environment(parts.netloc, proxies):
        return None
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if proxy and "://" not in proxy:
        proxy = "http://" + proxy  # requests' reading of HTTPS_PROXY=host:port
    return proxy or None


def _ca_bundle() -> str | None:
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        if os.environ.get(name):
            return os.environ[name]
    try:
        import certifi
    except ImportError:
        return None  # urllib3 then uses the system's CA store
    return certifi.where()


class _Response(google.auth.transport.Response):
    def __init__(self, status: int, headers: Mapping[str, str], data: bytes) -> None:
        self._status, self._headers, self._data = status, headers, data

    @property
    def status(self) -> int:
        return self._status

    @property
    def headers(self) -> Mapping[str, str]:
        return self._headers

    @property
    def data(self) -> bytes:
        return self._data


def _seconds(value: float) -> str:
    return f"{value:g}s" if value >= 1 or value == round(value, 1) else f"{value:.3g}s"


class BoundedRequest(google.auth.transport.Request):
    """A ``google.auth.transport.Request`` for one fetch.

    Each call waits at most until ``deadline`` (connecting, waiting for headers and reading the
    body; a body still arriving at the deadline is cut off), reads at most
    :data:`MAX_RESPONSE_BYTES`, follows no redirect, and appends an :class:`Exchange` to
    :attr:`exchanges`. When no time is left for another attempt after a failed one, it raises
    :class:`Abort` instead of letting google-auth pause and retry past the deadline.

    :attr:`labels` names endpoints by shown URL (``token endpoint``, ``metadata server``; others
    are ``endpoint``). Hosts in :attr:`direct` (``host[:port]``, the metadata server) are called
    without a proxy; the others through the proxy the environment names (see :class:`Pools`).
    """

    def __init__(self, pools: Pools, deadline: Deadline) -> None:
        self._pools, self._deadline = pools, deadline
        self.labels: dict[str, str] = {}
        self.direct: set[str] = set()
        self.exchanges: list[Exchange] = []
        self._failures = 0

    @property
    def last(self) -> Exchange | None:
        return self.exchanges[-1] if self.exchanges else None

    def __call__(
        self,
        url: str,
        method: str = "GET",
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> _Response:
        shown = shown_url(url)
        exchange = Exchange(self.labels.get(shown, "endpoint"), shown)
        remaining = self._deadline.remaining()
        if remaining <= 0:
            exchange.failure = f"not called: the {_seconds(self._deadline.seconds)} timeout had passed"
            self._abort(exchange)
        wait = remaining if timeout is None else max(0.001, min(float(timeout), remaining))
        response = None
        try:
            pool = self._pools.for_url(url, direct=urlsplit(url).netloc in self.direct)
            response = pool.request(
                method,
                url,
                body=body,
                headers=dict(headers or {}),
                timeout=urllib3.Timeout(connect=wait, read=wait),
                preload_content=False,
                redirect=False,
                retries=False,
            )
        except (ConnectTimeoutError, ReadTimeoutError) as exc:
            if isinstance(exc, NewConnectionError):  # urllib3 files it under timeouts; it is not one
                exchange.failure = _connection_problem(exc)
            else:
                bounded_by_deadline = timeout is None or wait < float(timeout)
                exchange.failure = (
                    f"did not answer within the {_seconds(self._deadline.seconds)} timeout" if bounded_by_deadline else f"did not answer within {_seconds(wait)}"
                )
        except (HTTPError, OSError, ValueError) as exc:  # ValueError: urllib3's LocationValueError
            exchange.failure = _connection_problem(exc)
        if response is None:
            self._abort(exchange)
        try:
            data = self._read(response, exchange)
        except BaseException:
            response.close()  # cut off or broken: a connection is never reused half-read
            raise
        finally:
            response.release_conn()
        exchange.status = response.status
        if not 200 <= response.status < 300:
            exchange.detail = error_detail(data)
            self._failures += 1
            pause = _FIRST_PAUSE * 2 ** (self._failures - 1) * _JITTER
            if self._deadline.remaining() <= pause:
                self.exchanges.append(exchange)
                raise Abort(exchange.describe())
        self.exchanges.append(exchange)
        return _Response(response.status, response.headers, data)

    def _abort(self, exchange: Exchange) -> NoReturn:
        self.exchanges.append(exchange)
        raise Abort(exchange.describe())

    def _late(self) -> str:
        return f"did not finish its answer within the {_seconds(self._deadline.seconds)} timeout"

    def _read(self, response: urllib3.BaseHTTPResponse, exchange: Exchange) -> bytes:
        def shut() -> None:
            try:
                response.shutdown()  # type: ignore[attr-defined]  # urllib3 >= 2.3
            except (AttributeError, ValueError, RuntimeError, OSError):
                response.close()

        try:
            return read_within(response.stream(64 * 1024), seconds=self._deadline.remaining(), shut=shut, max_bytes=MAX_RESPONSE_BYTES)
        except BodyProblem as problem:
            failure = self._late() if problem.late else str(problem)
        except (HTTPError, OSError, ValueError) as exc:
            failure = _connection_problem(exc)
        exchange.status = response.status
        exchange.failure = failure
        self._abort(exchange)


def _causes(exc: BaseException) -> list[BaseException]:
    # urllib3 wraps the socket error (a proxy error wraps another): walk causes, contexts and `reason`s.
    found: list[BaseException] = []
    todo: list[BaseException] = [exc]
    while todo and len(found) < 16:
        current = todo.pop(0)
        if any(current is seen for seen in found):
            continue
        found.append(current)
        for linked in (current.__cause__, current.__context__, getattr(current, "reason", None), *current.args[:1]):
            if isinstance(linked, BaseException):
                todo.append(linked)
    return found


def _connection_problem(exc: BaseException) -> str:
    """The kind of a connection failure in a few words; never its text (which may hold the URL
    with its query, or a server's bytes)."""
    for cause in _causes(exc):
        name = type(cause).__name__
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, TimeoutError) or name in ("ConnectTimeoutError", "ReadTimeoutError"):
            return "did not answer in time"
        if name in ("NameResolutionError", "gaierror"):
            return "cannot resolve the host name"
        if name.startswith("SSL"):
            return "TLS handshake failed"
    if isinstance(exc, ProtocolError):
        return "broke off its answer"
    if type(exc).__name__ in ("LocationParseError", "LocationValueError", "URLSchemeUnknown", "ProxySchemeUnknown"):
        return "is not a valid URL"
    return "cannot connect"
