"""Reading what the hub answers, for the hub inventory source and the shard's Leases alike:
bounded bodies, checked list pages and watch events, and a failure in one line for an operator.

The hub is not trusted to answer well: a list that is not a list, a watch event that is not JSON,
has no object or an unknown type, or an answer larger than its bound is a :class:`HubProblem`
worded here, never an empty inventory and never our memory.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ..logs import redact_text
from .hubclient import HubAuthError

__all__ = [
    "GROUP",
    "PLURAL",
    "VERSIONS",
    "Gone",
    "HubProblem",
    "HubAnswer",
    "backoff_delay",
    "checked_page",
    "read_bounded_answer",
    "status_message",
    "watch_events",
    "problem_text",
]

GROUP = "multicluster.x-k8s.io"
PLURAL = "clusterprofiles"
#: The ClusterProfile versions cpcreds reads, preferred first when discovery says nothing.
VERSIONS = ("v1alpha2", "v1alpha1")
#: Backoff after a failure: 1 s, doubling, at most 1 min.
_FIRST_DELAY, _MAX_DELAY = 1.0, 60.0
_MAX_EVENT_BYTES = 4 * 1024 * 1024
_CHUNK = 64 * 1024
_EVENT_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"})


class Gone(Exception):
    """The resourceVersion we hold is too old: relist."""


class HubProblem(Exception):
    """The hub answered something unusable; the message says what, in our words."""


def backoff_delay(failures: int) -> float:
    """Seconds to wait after ``failures`` failures in a row (1 s doubling to 1 min)."""
    return min(_MAX_DELAY, _FIRST_DELAY * 2.0 ** (max(failures, 1) - 1))


class HubAnswer:
    """What ``ApiException(http_resp=...)`` reads of an answer (status, reason, headers, body)."""

    def __init__(self, response: Any) -> None:
        self.status, self.reason = response.status, response.reason
        self.data = read_bounded_answer(response, 64 * 1024, "an error answer", cut=True)

    def getheaders(self) -> Any:
        return {}


def read_bounded_answer(response: Any, limit: int, what: str, *, cut: bool = False) -> bytes:
    """The body of ``response``, at most ``limit`` bytes (more is an error, or cut with ``cut``)."""
    data = bytearray()
    for chunk in response.stream(_CHUNK, decode_content=True):
        data += chunk
        if len(data) > limit:
            if cut:
                return bytes(data[:limit])
            raise HubProblem(f"the hub sent {what} larger than {limit // (1024 * 1024)} MiB")
    return bytes(data)


def watch_events(response: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """The watch stream's events as (type, object), each checked; a malformed one is a HubProblem."""
    buffer = bytearray()
    for chunk in response.stream(_CHUNK, decode_content=True):
        buffer += chunk
        while (end := buffer.find(b"\n")) != -1:
            line, buffer = bytes(buffer[:end]), buffer[end + 1 :]
            if line.strip():
                yield _event(line)
        if len(buffer) > _MAX_EVENT_BYTES:
            raise HubProblem(f"the hub sent a watch event larger than {_MAX_EVENT_BYTES // (1024 * 1024)} MiB")
    if buffer.strip():
        yield _event(bytes(buffer))


def _event(line: bytes) -> tuple[str, dict[str, Any]]:
    try:
        event = json.loads(line)
    except ValueError:
        raise HubProblem("the hub sent a watch event that is not JSON") from None
    if not isinstance(event, dict):
        raise HubProblem(f"the hub sent a watch event that is a JSON {type(event).__name__}, not an object")
    kind, item = event.get("type"), event.get("object")
    if kind not in _EVENT_TYPES:
        shown = repr(kind)[:40] if isinstance(kind, str) else "no type"
        raise HubProblem(f"the hub sent a watch event of unknown type {shown}")
    if not isinstance(item, dict):
        raise HubProblem(f"the hub sent a watch event ({kind}) without an object")
    return kind, item


def checked_page(page: Any) -> dict[str, Any]:
    """``page`` if it is a list answer (``items`` a list, ``metadata`` a mapping), else a HubProblem."""
    if isinstance(page, dict) and page.get("kind") == "Status":
        raise HubProblem(f"the hub answered the ClusterProfile list with a Status, not a list: {status_message(page)}")
    if not isinstance(page, dict) or not isinstance(page.get("items"), list):
        raise HubProblem("the hub answered the ClusterProfile list with something that is not a list (no items)")
    if not isinstance(page.get("metadata"), dict):
        raise HubProblem("the hub's ClusterProfile list has no metadata")
    return page


def status_message(item: Any) -> str:
    if isinstance(item, dict):
        return redact_text(" ".join(str(item.get("message") or item.get("reason") or "unknown error").split()), strict=True)[:300]
    return "unknown error"


def problem_text(exc: BaseException, url: str = "") -> str:
    """``exc`` in one line for an operator: a hub answer's status and message, or the exception's
    type and text; redacted (no secret) and bounded."""
    from kubernetes.client.exceptions import ApiException

    if isinstance(exc, (HubProblem, HubAuthError)):
        return redact_text(" ".join(str(exc).split()))[:500]
    if isinstance(exc, ApiException):
        detail = exc.reason or ""
        try:
            body = json.loads(exc.body) if exc.body else {}
            detail = body.get("message") or detail if isinstance(body, dict) else detail
        except (TypeError, ValueError):
            pass
        text = f"HTTP {exc.status}: {' '.join(str(detail).split())}"
        if exc.status == 404 and url:
            text = (
                f"HTTP 404 from {url}: the hub has no ClusterProfiles there; is the ClusterProfile CRD "
                f"(clusterprofiles.{GROUP}) installed, and does every namespace of --namespaces exist? ({' '.join(str(detail).split())})"
            )
        return redact_text(text)[:500]
    return redact_text(f"{type(exc).__name__}: {' '.join(str(exc).split())}")[:300]
