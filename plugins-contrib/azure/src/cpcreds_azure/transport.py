"""The HTTP transport azure-identity (and the ACR exchange) use here: every call bounded by the
fetch's deadline, every answer bounded in size, throttling and server errors retried only while
time is left, and a record of what happened on the wire for error messages.

azure-identity's and msal's exceptions quote response bodies (an endpoint may echo the client
secret or the assertion), so the provider never shows them: it describes a failure from the
:class:`Exchange` records, which hold a status, an OAuth error code (and Entra's ``AADSTS`` code)
and a reason in our words, never a body.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, NoReturn
from urllib.parse import urlsplit

from azure.core.exceptions import AzureError, ServiceRequestTimeoutError, ServiceResponseTimeoutError
from azure.core.pipeline.transport import RequestsTransport

from cpcreds.sdk import BodyProblem, read_within

__all__ = ["ABSENT", "Deadline", "Exchange", "Abort", "BoundedTransport", "MAX_RESPONSE_BYTES", "shown_url", "error_detail", "safe_summary"]

#: A token answer is a few KiB; anything much larger is not one.
MAX_RESPONSE_BYTES = 1024 * 1024
#: Statuses worth another attempt (throttled, or a server error), as azure-core's retry policy has them.
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
_MAX_ATTEMPTS = 3
_FIRST_PAUSE = 0.5
_CODE = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
#: What an endpoint is, by the end of its path (msal's calls to an authority).
_PATH_LABELS = (
    ("/oauth2/v2.0/token", "Entra ID token endpoint"),
    ("/.well-known/openid-configuration", "Entra ID OpenID configuration"),
    ("/common/discovery/instance", "Entra ID instance discovery"),
    ("/oauth2/exchange", "ACR token exchange"),
    ("/metadata/identity/oauth2/token", "managed identity endpoint (IMDS)"),
)
# Long runs of token alphabet with both letters and digits: an echoed token, secret or assertion.
_RUN = re.compile(r"[A-Za-z0-9_\-.+=/]{24,}")
_AADSTS = re.compile(r"\bAADSTS[0-9]{1,8}\b")
#: :attr:`Exchange.resource` of an answer that names no resource.
ABSENT: Any = object()


class Deadline:
    """The end of one fetch, on the monotonic clock: ``seconds`` from now, less ``margin`` (so
    that the provider's error, which names the endpoint, reaches the engine before its timeout)."""

    def __init__(self, seconds: float, margin: float = 0.0) -> None:
        self.seconds = seconds
        self._at = time.monotonic() + max(0.0, seconds - margin)

    def remaining(self) -> float:
        return self._at - time.monotonic()

    def shown(self) -> str:
        return f"{self.seconds:g}s"


class Exchange:
    """One HTTP call as a message may show it: ``label`` (what the endpoint is), ``url`` (scheme,
    host and path only), and ``status`` with ``detail`` (an error code), or ``failure``;
    ``resource`` is what a successful JSON answer says its token is for (a managed identity
    endpoint's ``resource``), :data:`ABSENT` when it says nothing."""

    def __init__(self, label: str, url: str) -> None:
        self.label, self.url = label, url
        self.status: int | None = None
        self.detail: str | None = None
        self.failure: str | None = None
        self.resource: Any = ABSENT

    @property
    def ok(self) -> bool:
        return self.failure is None and self.status is not None and 200 <= self.status < 300

    def describe(self) -> str:
        where = f"{self.label} {self.url}"
        if self.failure is not None:
            return f"{where}: {self.failure}"
        text = f"{where} answered HTTP {self.status}"
        if self.status == 429:
            text += " (throttled)"
        return text + (f" ({self.detail})" if self.detail else "")


class Abort(Exception):
    """Stops azure-identity mid-fetch: the deadline passed or the endpoint cannot be used. No
    azure-core error, so no retry policy takes it for a transient failure; the reason is in the
    transport's last :class:`Exchange`."""


def shown_url(url: str) -> str:
    """``url`` without query, fragment or user info: what may appear in a message."""
    try:
        parts = urlsplit(url)
        host = f"[{parts.hostname}]" if ":" in (parts.hostname or "") else parts.hostname or ""
        if parts.port is not None:
            host = f"{host}:{parts.port}"
        return f"{parts.scheme}://{host}{parts.path}"
    except ValueError:
        return "(an invalid URL)"


def error_detail(body: bytes) -> str | None:
    """An error answer's code when it is safe to show: an OAuth error with Entra's ``AADSTS``
    code (``invalid_client AADSTS7000215``), a registry's error code (``UNAUTHORIZED``), or a
    managed identity endpoint's ``error``; else ``None``. Never any prose (it may echo a secret)."""
    try:
        document = json.loads(body.decode("utf-8")) if len(body) <= 64 * 1024 else None
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(document, dict):
        return None
    code: Any = document.get("error")
    if isinstance(code, dict):  # ARM style: {"error": {"code", "message"}}
        code = code.get("code")
    errors = document.get("errors")
    if code is None and isinstance(errors, list) and errors and isinstance(errors[0], dict):
        code = errors[0].get("code")  # the registry's {"errors": [{"code", "message"}]}
    if not isinstance(code, str) or not _CODE.fullmatch(code):
        return None
    description = document.get("error_description")
    aadsts = _AADSTS.search(description) if isinstance(description, str) else None
    return f"{code} {aadsts.group(0)}" if aadsts else code


def _answered_resource(body: bytes) -> Any:
    try:
        document = json.loads(body.decode("utf-8")) if len(body) <= 64 * 1024 else None
    except (ValueError, UnicodeDecodeError, RecursionError):
        return ABSENT
    return document.get("resource", ABSENT) if isinstance(document, dict) else ABSENT


def safe_summary(exc: BaseException, limit: int = 160) -> str:
    """An exception's message fit for a one-line error: redacted, token-like runs blanked, cut to
    ``limit`` characters; the type's name when nothing is left."""
    from cpcreds.sdk import redact_text

    def blank(match: re.Match[str]) -> str:
        run = match.group(0)
        return "[REDACTED]" if any(c.isdigit() for c in run) and any(c.isalpha() for c in run) else run

    text = _RUN.sub(blank, redact_text(" ".join(str(exc).split())))
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text or type(exc).__name__


def _timeout_text(deadline: Deadline) -> str:
    return f"did not answer within the {deadline.shown()} timeout"


def _connection_problem(exc: BaseException) -> str:
    """The kind of a connection failure in a few words, never its text (it may hold the URL's query)."""
    seen: list[BaseException] = []
    todo = [exc]
    while todo and len(seen) < 16:
        current = todo.pop(0)
        if any(current is s for s in seen):
            continue
        seen.append(current)
        name = type(current).__name__
        if isinstance(current, ConnectionRefusedError):
            return "connection refused"
        if name in ("NameResolutionError", "gaierror"):
            return "cannot resolve the host name"
        if name.startswith("SSL") or "SSLError" in name:
            return "TLS handshake failed"
        for linked in (current.__cause__, current.__context__, getattr(current, "reason", None), getattr(current, "inner_exception", None), *current.args[:1]):
            if isinstance(linked, BaseException):
                todo.append(linked)
    return "cannot connect"


class BoundedTransport(RequestsTransport):
    """An azure-core transport for one fetch at a time (the provider serialises fetches).

    :meth:`begin` sets the fetch's :class:`Deadline` and clears :attr:`exchanges`. Each call then
    waits at most until the deadline (connecting, waiting, and reading the body: a body still
    arriving at the deadline is cut off), reads at most :data:`MAX_RESPONSE_BYTES`, follows no
    redirect, retries a throttled or failed answer (honouring ``Retry-After``) only while the
    pause fits before the deadline, and appends an :class:`Exchange`. When nothing usable can
    come in time it raises :class:`Abort`. :attr:`labels` names endpoints by shown URL.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.deadline = Deadline(0.0)
        self.exchanges: list[Exchange] = []
        self.labels: dict[str, str] = {}

    def begin(self, deadline: Deadline) -> None:
        self.deadline = deadline
        self.exchanges = []

    @property
    def last(self) -> Exchange | None:
        return self.exchanges[-1] if self.exchanges else None

    def label(self, url: str) -> str:
        shown = shown_url(url)
        for known, label in self.labels.items():
            if shown == known or shown.startswith(known):
                return label
        for ending, label in _PATH_LABELS:
            if shown.endswith(ending):
                return label
        return "endpoint"

    def send(self, request: Any, **kwargs: Any) -> Any:  # noqa: ANN401 - azure-core's response types
        for attempt in range(1, _MAX_ATTEMPTS + 1):
            response, exchange = self._send_once(request, dict(kwargs))
            if exchange.status not in RETRY_STATUSES or attempt == _MAX_ATTEMPTS:
                return response
            pause = _retry_after(response.headers.get("Retry-After"))
            if pause is None:  # not "or": Retry-After: 0 means at once
                pause = _FIRST_PAUSE * 2 ** (attempt - 1)
            if pause >= self.deadline.remaining():
                return response  # no time for another attempt: this answer is the one reported
            time.sleep(pause)
        raise AssertionError("unreachable")

    def _send_once(self, request: Any, kwargs: dict[str, Any]) -> tuple[Any, Exchange]:
        shown = shown_url(str(request.url))
        exchange = Exchange(self.label(str(request.url)), shown)
        remaining = self.deadline.remaining()
        if remaining <= 0:
            exchange.failure = f"not called: the {self.deadline.shown()} timeout had passed"
            self._abort(exchange)
        kwargs.update(connection_timeout=remaining, read_timeout=remaining, stream=True)
        response = None
        try:
            response = super().send(request, **kwargs)
        except (ServiceRequestTimeoutError, ServiceResponseTimeoutError):
            exchange.failure = _timeout_text(self.deadline)
        except AzureError as exc:
            exchange.failure = "did not answer in time" if self.deadline.remaining() <= 0 else _connection_problem(exc)
        if response is None:
            self._abort(exchange)
        data = self._read(response, exchange)
        exchange.status = response.status_code
        if not 200 <= response.status_code < 300:
            exchange.detail = error_detail(data)
        else:
            exchange.resource = _answered_resource(data)
        # The body is what was read, bounded: azure-core hands it on as if it had read it itself.
        response._content = data  # noqa: SLF001 - azure.core.rest's buffered-content slot
        self.exchanges.append(exchange)
        return response, exchange

    def _abort(self, exchange: Exchange) -> NoReturn:
        self.exchanges.append(exchange)
        raise Abort(exchange.describe())

    def _read(self, response: Any, exchange: Exchange) -> bytes:
        raw = response.internal_response  # the requests.Response, streamed

        def shut() -> None:
            try:
                raw.raw.shutdown()
            except (AttributeError, ValueError, RuntimeError, OSError):
                raw.close()

        try:
            return read_within(raw.iter_content(64 * 1024), seconds=self.deadline.remaining(), shut=shut, max_bytes=MAX_RESPONSE_BYTES)
        except BodyProblem as problem:
            failure = f"did not finish its answer within the {self.deadline.shown()} timeout" if problem.late else str(problem)
        except Exception as exc:  # noqa: BLE001 - requests/urllib3 raise many kinds for a broken body
            broken = "Chunked" in type(exc).__name__ or "Protocol" in type(exc).__name__
            failure = "broke off its answer" if broken else _connection_problem(exc)
        finally:
            raw.close()
        exchange.status = response.status_code
        exchange.failure = failure
        self._abort(exchange)


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None  # an HTTP date: use the backoff instead
    return seconds if 0 <= seconds < 3600 else None
