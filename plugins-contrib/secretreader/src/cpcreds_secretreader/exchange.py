"""One exchange with the hub: its failures worded.

A socket timeout bounds each receive, not an exchange: a hub (or anything on the way) that sends
its status line, its headers or its body a byte at a time, each byte within the timeout, would
hold a fetch for as long as it liked. The engine abandons such a call at the plan's timeout, but
cannot stop it (nothing stops a thread), and every later fetch of that plan waits on it. So
:meth:`~cpcreds_secretreader.hub.HubClient.read_secret` runs inside the SDK's
:class:`~cpcreds.sdk.Cutoff`, at the fetch's deadline (:func:`cpcreds.sdk.deadline`): a timer then
shuts down every socket of the exchange (the ``kubernetes`` client's urllib3 connections hand
theirs over through :func:`cpcreds.sdk.watch_pool_manager`), which ends any receive blocked on
it at once; the body is read with :func:`cpcreds.sdk.read_answer`, bounded in size and time.
What went wrong is told in the SDK's words (:func:`cpcreds.sdk.connection_problem`), never in the
transport's, which repeat URLs and a server's bytes.
"""

from __future__ import annotations

from cpcreds.sdk import connection_problem

__all__ = ["HubError", "failure_message", "transport_errors"]


class HubError(Exception):
    """The hub could not give the Secret. ``status`` is the HTTP status when there was one.
    The message names the Secret and the hub, never a credential."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def transport_errors() -> tuple[type[BaseException], ...]:
    """What the ``kubernetes`` client raises when the hub cannot be reached or answers badly:
    urllib3's errors, ``OSError``, and its ``ApiException`` (``status=0`` is how it reports a
    TLS failure, the urllib3 error as its context)."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    return (HTTPError, OSError, ApiException)


def failure_message(exc: BaseException, expired: bool, where: str, url: str, timeout: float) -> str:
    """The message for a failed exchange: a timeout when the exchange's deadline ``expired`` or
    the transport says so, else why it could not be read."""
    reason = "did not answer in time" if expired else connection_problem(exc)
    if reason == "did not answer in time":
        return f"the hub {url} did not answer within {timeout:g}s reading {where}"
    if reason == "TLS handshake failed":
        reason = "TLS handshake failed (check the hub's CA)"
    elif reason == "connection refused":
        reason = "cannot connect"
    return f"cannot read {where} from the hub {url}: {reason}"
