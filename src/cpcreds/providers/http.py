"""The HTTP helpers providers share: an exchange bounded by the fetch's deadline and a size
limit, and failures worded without a secret.

Providers that call HTTP endpoints themselves (or through their cloud's library, whose
transport they bound) need the same few things, and had each their own copy:

- **A record of each call** (:class:`Exchange`): what the endpoint is, its URL as
  :func:`cpcreds._show.shown_url` shows it, and its status with a safe error code
  (:func:`error_detail`) or why there was no answer (:func:`connection_problem`). A cloud
  library's exceptions quote answers (an endpoint may echo the assertion or the client secret),
  so a provider words its error from these records, never from the library's text; where only
  an exception is left (a local step failed), :func:`safe_summary` shows it redacted.
- **An answer read within the deadline** (:func:`read_answer`): a socket timeout bounds each
  wait, not a body trickling in a byte at a time; the connection is shut at the deadline and at
  most ``max_bytes`` are read.
- **Every socket of an exchange cut at the deadline** (:class:`Cutoff`): connecting, the TLS
  handshake, the request and the status line and headers too, for transports that hand their
  sockets over (:func:`watch`, :func:`watch_pool_manager` for urllib3's pools).

The deadline is the fetch's (:func:`cpcreds.providers.deadline.deadline`), so the provider's
error, which names the endpoint, comes before the caller's timeout, which cannot.
"""

from __future__ import annotations

import json
import os
import re
import socket
import threading
from types import TracebackType
from typing import Any

from .body import read_within
from .._show import shown_url
from .deadline import Deadline, deadline as current_deadline

__all__ = [
    "Exchange",
    "Abort",
    "shown_endpoint",
    "error_detail",
    "safe_summary",
    "connection_problem",
    "read_answer",
    "Cutoff",
    "watch",
    "watch_pool_manager",
]

_CODE = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
_AADSTS = re.compile(r"\bAADSTS[0-9]{1,8}\b")
# Long runs of token alphabet: an echoed token, assertion, key or client secret ("~" is in
# Entra's secrets). "/" is not in it, so that a path's folders are judged one by one.
_RUN = re.compile(r"[A-Za-z0-9_\-.+=~]{24,}")
_CHUNK = 64 * 1024


def shown_endpoint(url: str) -> str:
    """``url`` as a message names an endpoint: without its query and fragment (a message names
    where, not what was asked), shown by the one rule for URLs (:func:`~cpcreds._show.shown_url`:
    no userinfo)."""
    if not isinstance(url, str):
        return shown_url(url)
    cut = min((i for i in (url.find("?"), url.find("#")) if i >= 0), default=len(url))
    return shown_url(url[:cut])


class Exchange:
    """One HTTP call as a message may show it: ``label`` (what the endpoint is: ``token
    endpoint``), ``url`` (as :func:`shown_endpoint` shows it), and either ``status``
    (with ``detail``, an error code that is safe to show) or ``failure`` (why there is no usable
    answer, in words that follow the URL: ``connection refused``)."""

    def __init__(self, label: str, url: str, status: int | None = None, detail: str | None = None, failure: str | None = None) -> None:
        self.label = label
        self.url = shown_endpoint(url)
        self.status, self.detail, self.failure = status, detail, failure

    @property
    def ok(self) -> bool:
        """A 2xx answer, read whole."""
        return self.failure is None and self.status is not None and 200 <= self.status < 300

    def describe(self) -> str:
        """``token endpoint https://…/token answered HTTP 400 (invalid_grant)``, or
        ``… : connection refused``."""
        where = f"{self.label} {self.url}"
        if self.failure is not None:
            return f"{where}: {self.failure}"
        text = f"{where} answered HTTP {self.status}"
        if self.status == 429:
            text += " (throttled)"
        return text + (f" ({self.detail})" if self.detail else "")

    def __repr__(self) -> str:
        return f"Exchange({self.describe()!r})"


class Abort(Exception):
    """Stops a cloud library mid-fetch: the deadline has passed, the endpoint cannot be reached,
    or its answer is unusable. No library's exception type, so no retry loop takes it for a
    transient failure; :attr:`exchange` (and the message) says why."""

    def __init__(self, exchange: Exchange) -> None:
        super().__init__(exchange.describe())
        self.exchange = exchange


# -- wording -------------------------------------------------------------------------------------


def _blank_tokens(text: str) -> str:
    def blank(match: re.Match[str]) -> str:
        run = match.group(0)
        start, end = match.span()
        if text[start - 1 : start] == "/" and text[end : end + 1] == "/":
            return run  # a folder of a path (a temporary folder's name), not a token
        looks_random = any(c.isdigit() for c in run) and any(c.isalpha() for c in run)
        return "[REDACTED]" if looks_random else run

    return _RUN.sub(blank, text)


def _safe_line(text: Any, limit: int = 160) -> str | None:
    # Server prose is shown only when it cannot be (or hold) a secret: one short printable line,
    # no run of token characters, nothing the redaction rules would touch.
    from ..logs import redact_text

    if not isinstance(text, str):
        return None
    line = " ".join(text.split())
    if not line or len(line) > limit or not line.isprintable() or _blank_tokens(line) != line or redact_text(line) != line:
        return None
    return line


def safe_summary(exc: BaseException, limit: int = 200) -> str:
    """An exception's message fit for a one-line error: redacted (:func:`cpcreds.sdk.redact_text`),
    runs that look like tokens blanked, cut to ``limit`` characters; the type's name when
    nothing is left."""
    from ..logs import redact_text

    text = _blank_tokens(redact_text(" ".join(str(exc).split())))
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text or type(exc).__name__


def error_detail(body: bytes) -> str | None:
    """An error answer's code, when it is safe to show; else ``None``.

    The code is an OAuth error (RFC 6749 5.2 ``{"error", "error_description"}``), a Google API
    status (``{"error": {"status", "message"}}``), an ARM code (``{"error": {"code"}}``) or a
    registry's (``{"errors": [{"code"}]}``). Entra's description is replaced by its ``AADSTS``
    code (``invalid_client AADSTS7000215``: its prose carries trace IDs); an OAuth or Google
    description follows the code (``invalid_grant: Invalid JWT Signature.``) only when it is one
    short printable line that cannot hold a secret."""
    try:
        document = json.loads(body.decode("utf-8")) if len(body) <= 64 * 1024 else None
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(document, dict):
        return None
    error = document.get("error")
    description: Any = None
    if isinstance(error, dict):  # Google API: {"status", "message"}; ARM: {"code", "message"}
        code = error.get("status") if isinstance(error.get("status"), str) else error.get("code")
        description = error.get("message") if isinstance(error.get("status"), str) else None
    elif error is not None:
        code, description = error, document.get("error_description")
    else:
        errors = document.get("errors")
        first = errors[0] if isinstance(errors, list) and errors else None
        code = first.get("code") if isinstance(first, dict) else None
    if not isinstance(code, str) or not _CODE.fullmatch(code):
        return None
    aadsts = _AADSTS.search(description) if isinstance(description, str) else None
    if aadsts is not None:
        return f"{code} {aadsts.group(0)}"
    prose = _safe_line(description)
    return f"{code}: {prose}" if prose else code


def _causes(exc: BaseException) -> list[BaseException]:
    # Libraries wrap the socket error (urllib3 in requests in azure-core; a proxy's in another):
    # walk causes, contexts, ``reason`` and ``inner_exception``.
    found: list[BaseException] = []
    todo: list[BaseException] = [exc]
    while todo and len(found) < 16:
        current = todo.pop(0)
        if any(current is seen for seen in found):
            continue
        found.append(current)
        linked_ones = (current.__cause__, current.__context__, getattr(current, "reason", None), getattr(current, "inner_exception", None))
        for linked in (*linked_ones, *current.args[:1]):
            if isinstance(linked, BaseException):
                todo.append(linked)
    return found


def connection_problem(exc: BaseException) -> str:
    """What kind of failure a transport exception is, in a few words that follow the URL
    (``connection refused``, ``did not answer in time``, ``TLS handshake failed``); never its
    text, which may hold the URL's query or a server's bytes."""
    causes = _causes(exc)
    for cause in causes:
        name = type(cause).__name__
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if name in ("NameResolutionError", "gaierror"):
            return "cannot resolve the host name"
        if name.startswith("SSL") or "SSLError" in name:
            return "TLS handshake failed"
        if isinstance(cause, TimeoutError) or name in ("ConnectTimeoutError", "ReadTimeoutError"):
            return "did not answer in time"
    for cause in causes:
        name = type(cause).__name__
        if "Protocol" in name or "Chunked" in name or "IncompleteRead" in name or "RemoteDisconnected" in name:
            return "broke off its answer"
        if name in ("LocationParseError", "LocationValueError", "URLSchemeUnknown", "ProxySchemeUnknown", "InvalidURL"):
            return "is not a valid URL"
    return "cannot connect"


# -- reading an answer within the deadline -------------------------------------------------------


def read_answer(response: Any, *, max_bytes: int, deadline: Deadline | None = None, decode_content: bool = True) -> bytes:
    """The body of ``response`` (a urllib3 response, or one with its ``stream()``), read before
    ``deadline`` (default: the fetch's, :func:`~cpcreds.providers.deadline.deadline`) and at most
    ``max_bytes`` of it. At the deadline the connection is shut down (``shutdown()``, else
    ``close()``), so a body trickling in cannot hold the fetch. Raises
    :class:`~cpcreds.sdk.BodyProblem` (``late``, or too large); the stream's own errors pass
    through. Closing or releasing the response stays the caller's job."""
    until = current_deadline() if deadline is None else deadline

    def shut() -> None:
        try:
            response.shutdown()
        except Exception:  # noqa: BLE001 - a urllib3 without shutdown() (< 2.3), or a socket already gone
            try:
                response.close()
            except Exception:  # noqa: BLE001
                pass

    chunks = response.stream(_CHUNK, decode_content=decode_content)
    return read_within(chunks, seconds=until.remaining(), shut=shut, max_bytes=max_bytes)


# -- every socket of an exchange cut at the deadline ---------------------------------------------

_current = threading.local()


class Cutoff:
    """The deadline of the calling thread's exchange (``with Cutoff(deadline):``): at it, every
    socket handed over with :func:`watch` meanwhile is shut down, which ends any receive blocked
    on it at once; :attr:`expired` then says that whatever the transport raised, or an answer
    that ended early, is a timeout. A socket timeout alone bounds each receive, not an exchange:
    a server (or anything on the way) sending its status line, headers or body a byte at a time
    would hold a fetch for as long as it liked."""

    def __init__(self, deadline: Deadline | None = None) -> None:
        self.deadline = current_deadline() if deadline is None else deadline
        self.expired = False
        self._lock = threading.Lock()
        # Duplicates of the sockets' descriptors: a shutdown reaches the connection through any of
        # them, even once TLS has taken over the original socket object (it detaches it) or the
        # transport has closed it, and a descriptor number freed meanwhile is never hit.
        self._watched: dict[int, socket.socket] = {}
        self._timer = threading.Timer(max(0.0, self.deadline.remaining()), self._expire)
        self._timer.daemon = True
        self._outer: Cutoff | None = None

    def __enter__(self) -> Cutoff:
        self._outer = getattr(_current, "cutoff", None)
        _current.cutoff = self
        self._timer.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._timer.cancel()
        _current.cutoff = self._outer
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
    """Put ``sock`` (a connected socket, TLS or not) under the calling thread's :class:`Cutoff`, if any."""
    cutoff = getattr(_current, "cutoff", None)
    if cutoff is not None and isinstance(sock, socket.socket):
        cutoff.watch(sock)


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
    connection pool classes it has) hand their sockets to the calling thread's :class:`Cutoff`.
    ``pool_classes_by_scheme`` is urllib3's documented way to choose a manager's pool classes."""
    classes = getattr(manager, "pool_classes_by_scheme", None)
    if not isinstance(classes, dict):
        return
    watched = {}
    for scheme, pool in classes.items():
        connection = type(f"Watched{pool.ConnectionCls.__name__}", (_Watched, pool.ConnectionCls), {})
        watched[scheme] = type(f"Watched{pool.__name__}", (pool,), {"ConnectionCls": connection})
    manager.pool_classes_by_scheme = watched

