"""The HTTP transport azure-identity (and the ACR exchange) use here: every call bounded by the
fetch's deadline, every answer bounded in size, throttling and server errors retried only while
time is left, and a record of what happened on the wire for error messages.

azure-identity's and msal's exceptions quote response bodies (an endpoint may echo the client
secret or the assertion), so the provider never shows them: it describes a failure from the SDK's
:class:`~cpcreds.sdk.Exchange` records, which hold a status, an OAuth error code (and Entra's
``AADSTS`` code) and a reason in our words, never a body. The deadline, the records and their
wording are the SDK's, shared with the other providers (docs/sdk.md).
"""

from __future__ import annotations

import json
import time
from typing import Any, NoReturn

from azure.core.exceptions import AzureError, ServiceRequestTimeoutError, ServiceResponseTimeoutError
from azure.core.pipeline.transport import RequestsTransport

from cpcreds.sdk import Abort, BodyProblem, Cutoff, Deadline, Exchange, connection_problem, error_detail, read_answer, shown_endpoint, watch_pool_manager

__all__ = ["ABSENT", "AzureExchange", "BoundedTransport", "MAX_RESPONSE_BYTES"]

#: A token answer is a few KiB; anything much larger is not one.
MAX_RESPONSE_BYTES = 1024 * 1024
#: Statuses worth another attempt (throttled, or a server error), as azure-core's retry policy has them.
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
_MAX_ATTEMPTS = 3
_FIRST_PAUSE = 0.5
#: What an endpoint is, by the end of its path (msal's calls to an authority).
_PATH_LABELS = (
    ("/oauth2/v2.0/token", "Entra ID token endpoint"),
    ("/.well-known/openid-configuration", "Entra ID OpenID configuration"),
    ("/common/discovery/instance", "Entra ID instance discovery"),
    ("/oauth2/exchange", "ACR token exchange"),
    ("/metadata/identity/oauth2/token", "managed identity endpoint (IMDS)"),
)
#: :attr:`Exchange.resource` of an answer that names no resource.
ABSENT: Any = object()


class AzureExchange(Exchange):
    """An :class:`~cpcreds.sdk.Exchange` that also holds what a successful JSON answer says its
    token is for (``resource``, a managed identity endpoint's), :data:`ABSENT` when it says nothing."""

    def __init__(self, label: str, url: str) -> None:
        super().__init__(label, url)
        self.resource: Any = ABSENT


def _answered_resource(body: bytes) -> Any:
    try:
        document = json.loads(body.decode("utf-8")) if len(body) <= 64 * 1024 else None
    except (ValueError, UnicodeDecodeError, RecursionError):
        return ABSENT
    return document.get("resource", ABSENT) if isinstance(document, dict) else ABSENT


class BoundedTransport(RequestsTransport):
    """An azure-core transport for one fetch at a time (the provider serialises fetches).

    :meth:`begin` sets the fetch's :class:`~cpcreds.sdk.Deadline` and clears :attr:`exchanges`.
    Each call then ends by the deadline (connecting, waiting for the head and reading the body
    alike: the sockets are shut then, :class:`~cpcreds.sdk.Cutoff`), reads at most
    :data:`MAX_RESPONSE_BYTES`, follows no redirect, retries a throttled or failed answer
    (honouring ``Retry-After``) only while the pause fits before the deadline, and appends an
    :class:`AzureExchange`. When nothing usable can come in time it raises
    :class:`~cpcreds.sdk.Abort`. :attr:`labels` names endpoints by
    :func:`~cpcreds.sdk.shown_endpoint`.
    """

    def __init__(self, **kwargs: Any) -> None:
        if "session" not in kwargs:
            import requests  # azure-core's RequestsTransport is built on it

            session = requests.Session()
            for adapter in session.adapters.values():
                # Direct connections' sockets go under each call's Cutoff. (A proxy's pools are
                # made by requests when first used, out of reach: the read timeouts bound those.)
                watch_pool_manager(getattr(adapter, "poolmanager", None))
            kwargs.update(session=session, session_owner=True)
        super().__init__(**kwargs)
        self.deadline = Deadline(0.0, time.monotonic())
        self.exchanges: list[AzureExchange] = []
        self.labels: dict[str, str] = {}

    def begin(self, deadline: Deadline) -> None:
        self.deadline = deadline
        self.exchanges = []

    @property
    def last(self) -> AzureExchange | None:
        return self.exchanges[-1] if self.exchanges else None

    def label(self, url: str) -> str:
        shown = shown_endpoint(url)
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

    def _send_once(self, request: Any, kwargs: dict[str, Any]) -> tuple[Any, AzureExchange]:
        url = str(request.url)
        exchange = AzureExchange(self.label(url), url)
        deadline = self.deadline
        remaining = deadline.remaining()
        if remaining <= 0:
            exchange.failure = f"not called: the {deadline.shown()} timeout had passed"
            self._abort(exchange)
        late = f"did not answer within the {deadline.shown()} timeout"
        kwargs.update(connection_timeout=remaining, read_timeout=remaining, stream=True)
        with Cutoff(deadline) as cutoff:
            response = None
            try:
                response = super().send(request, **kwargs)
            except (ServiceRequestTimeoutError, ServiceResponseTimeoutError):
                exchange.failure = late
            except AzureError as exc:
                exchange.failure = late if cutoff.expired or deadline.passed else connection_problem(exc)
            if response is None:
                self._abort(exchange)
            data = self._read(response, exchange, cutoff)
        exchange.status = response.status_code
        if not 200 <= response.status_code < 300:
            exchange.detail = error_detail(data)
        else:
            exchange.resource = _answered_resource(data)
        # The body is what was read, bounded: azure-core hands it on as if it had read it itself.
        # azure.core.rest has no public way to give a response a body read elsewhere.
        response._content = data  # noqa: SLF001 - azure.core.rest's buffered-content slot
        self.exchanges.append(exchange)
        return response, exchange

    def _abort(self, exchange: AzureExchange) -> NoReturn:
        self.exchanges.append(exchange)
        raise Abort(exchange)

    def _read(self, response: Any, exchange: AzureExchange, cutoff: Cutoff) -> bytes:
        raw = response.internal_response  # the requests.Response, streamed; .raw is urllib3's
        late = f"did not finish its answer within the {self.deadline.shown()} timeout"
        try:
            return read_answer(raw.raw, max_bytes=MAX_RESPONSE_BYTES, deadline=self.deadline)
        except BodyProblem as problem:
            failure = late if problem.late else str(problem)
        except Exception as exc:  # noqa: BLE001 - requests/urllib3 raise many kinds for a broken body
            failure = late if cutoff.expired else connection_problem(exc)
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
