"""The Lease wire: ``coordination.k8s.io/v1`` Leases through the official ``kubernetes``
client's ``ApiClient``, with bodies cpcreds writes itself.

Not ``CoordinationV1Api``'s typed methods: they turn a body into a ``V1Lease`` whose times are
``datetime``\\ s, written back with ``isoformat()``, which drops the fraction when microseconds
are zero (``2026-11-25T10:00:00+00:00``) — and the API server refuses any MicroTime without
exactly six fractional digits. Not ``kubernetes.leaderelection`` either: one lock, a ``run()``
that never releases, ``sys.exit`` on configuration errors, a ``LeaseLock`` ignoring the client it
is given. Here every body is JSON we built, every time is :func:`micro_time`, and every answer is
read with a bound and parsed as JSON.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from ..providers.body import BodyProblem, read_within
from ..fleet.hub import HubProblem, read_bounded_answer, watch_events

__all__ = ["LeaseAPI", "micro_time", "shut", "COORDINATION", "LeaseAnswer"]

COORDINATION = "coordination.k8s.io/v1"
#: A Lease is a few hundred bytes; a list of a group's Leases (one per replica) a few hundred KiB.
_MAX_ANSWER = 8 * 1024 * 1024
_CHUNK = 64 * 1024

LeaseAnswer = tuple[int, dict[str, Any]]


def micro_time(epoch: float) -> str:
    """``epoch`` as a Kubernetes MicroTime: RFC 3339 in UTC with exactly six fractional digits
    (``2026-11-25T10:00:00.000000Z``), what the API server's ``time.Parse`` layout demands."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseAPI:
    """Requests on the Leases of one namespace through an ``ApiClient`` (one caller at a time
    per instance; the client's connection pool is thread-safe, so several instances may share one)."""

    def __init__(self, api_client: Any, namespace: str) -> None:
        self.api_client = api_client
        self.namespace = namespace
        self.collection = f"/apis/{COORDINATION}/namespaces/{namespace}/leases"

    def get(self, name: str, timeout: float) -> LeaseAnswer:
        return self._call("GET", f"{self.collection}/{name}", timeout)

    def create(self, body: dict[str, Any], timeout: float) -> LeaseAnswer:
        return self._call("POST", self.collection, timeout, body=body)

    def replace(self, name: str, body: dict[str, Any], timeout: float) -> LeaseAnswer:
        """PUT ``body``; it must carry ``metadata.resourceVersion`` (409 when it is not the latest)."""
        return self._call("PUT", f"{self.collection}/{name}", timeout, body=body)

    def delete(self, name: str, resource_version: str, timeout: float) -> LeaseAnswer:
        """DELETE only if the Lease is still at ``resource_version`` (409 when it changed since)."""
        options = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"resourceVersion": resource_version}}
        return self._call("DELETE", f"{self.collection}/{name}", timeout, body=options)

    def list(self, selector: str, timeout: float) -> LeaseAnswer:
        return self._call("GET", self.collection, timeout, query=[("labelSelector", selector)])

    def watch(self, selector: str, resource_version: str, seconds: int, timeout: float) -> Any:
        """Open a watch from ``resource_version``; the raw response, to read with :func:`events`
        and close (or ``shutdown()``) when done. A non-2xx answer is a :class:`HubProblem`."""
        query = [
            ("labelSelector", selector),
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(seconds)),
        ]
        response = self._send("GET", self.collection, (timeout, seconds + timeout), query=query).response
        if not 200 <= response.status <= 299:
            status = response.status
            body = _parsed(read_bounded_answer(response, 64 * 1024, "an error answer", cut=True))
            response.release_conn()
            raise HubProblem(f"the Lease watch failed: HTTP {status}: {_message(body)}")
        return response

    def _call(self, method: str, path: str, timeout: float, *, body: dict[str, Any] | None = None, query: Sequence[tuple[str, str]] = ()) -> LeaseAnswer:
        """(status, parsed body), the whole exchange within ``timeout`` seconds: a socket timeout
        bounds each read only, and a hub trickling its answer must not hold a renewal past its
        deadline (the renewer would stop renewing while it reads)."""
        started = time.monotonic()
        response = self._send(method, path, timeout, body=body, query=query).response
        try:
            chunks = response.stream(_CHUNK, decode_content=True)
            data = read_within(chunks, seconds=timeout - (time.monotonic() - started), shut=lambda: shut(response), max_bytes=_MAX_ANSWER)
        except BodyProblem as exc:
            response.close()  # shut down, or cut short: not a connection to use again
            raise HubProblem(f"the hub {exc}") from None
        finally:
            response.release_conn()
        return response.status, _parsed(data)

    def _send(self, method: str, path: str, timeout: Any, *, body: dict[str, Any] | None = None, query: Sequence[tuple[str, str]] = ()) -> Any:
        request = self.api_client.param_serialize(
            method,
            path,
            query_params=list(query),
            header_params={"Accept": "application/json", "Content-Type": "application/json"},
            body=body,
            auth_settings=["BearerToken"],
        )
        # call_api: the REST layer without the generated models; non-2xx answers come back too.
        return self.api_client.call_api(*request, _request_timeout=timeout)


def shut(response: Any) -> None:
    """Make a read blocked on ``response`` (a urllib3 response) return at once: ``shutdown()``
    where urllib3 has it (2.3 and later), else ``close()``. Never raises: a connection already
    gone is what the caller wants."""
    try:
        shutdown = getattr(response, "shutdown", None)
        shutdown() if shutdown is not None else response.close()
    except Exception:  # noqa: BLE001
        pass


def events(response: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """The watch stream's events as (type, object); a malformed one is a :class:`HubProblem`."""
    return watch_events(response)


def message(body: dict[str, Any]) -> str:
    """What a ``Status`` answer says, in one short line."""
    return _message(body)


def _parsed(data: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(data) if data else {}
    except ValueError:
        raise HubProblem("the hub answered a Lease request with something that is not JSON") from None
    if not isinstance(parsed, dict):
        raise HubProblem("the hub answered a Lease request with JSON that is not an object")
    return parsed


def _message(body: dict[str, Any]) -> str:
    from ..logs import redact_text

    text = body.get("message") or body.get("reason") or "no message"
    return redact_text(" ".join(str(text).split()), strict=True)[:300]
