"""Fake credentials endpoints that live next to a workload, on loopback, speaking the real protocols.

:class:`FakeAWSMetadata` is one plain-HTTP server (like the real ones) for the credentials
endpoints that live next to a workload: the EC2 instance metadata service, IMDSv2 only (a PUT
``/latest/api/token`` first, then ``/latest/meta-data/iam/security-credentials/[<role>]`` with
that token; IMDSv1 requests get 401), for ``AWS_EC2_METADATA_SERVICE_ENDPOINT`` = :attr:`url`;
and the container credentials endpoint (EKS Pod Identity, ECS) at :attr:`container_url`, which
wants the ``Authorization`` :attr:`container_authorization` when one is set. The keys both hand
out are temporary keys of :class:`FakeAWS`, so STS accepts them.

It records what it saw (:attr:`seen`) and takes faults for its next requests (:meth:`fail`,
with :class:`~tests.fakes.http.Fault`: an error status and body, an answer that never comes,
a body cut off, a body without end; and :meth:`FakeAWSMetadata.trickle`, a body that comes too
slowly to end but never slowly enough for a socket timeout). Fault endpoints: ``imds-token``,
``imds-credentials``, ``container``.

:class:`FakeAWSMetadata` also counts the bytes of every answer it wrote (:meth:`FakeAWSMetadata.sent`):
a body without end stops when the client hangs up (``hung_up``) or, so that a client that never
stops reading cannot exhaust the test machine, at :attr:`FakeAWSMetadata.stream_cap` (``capped``).
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from .aws import ACCOUNT, AwsKeys, FakeAWS
from .aws_wire import iso as _iso
from .http import Handler, LoopbackServer, Reply

__all__ = ["FakeAWSMetadata", "Sent"]


@dataclass
class Sent:
    """What the fake wrote for one answer: to which endpoint, how many bytes, and how it ended:
    the client hung up mid-answer (a write failed), or the fake gave up at its cap."""

    endpoint: str
    bytes: int = 0
    hung_up: bool = False
    capped: bool = False


class _CountingWriter:
    # Stands in for a handler's wfile: counts what the client was sent and stops at the cap.
    def __init__(self, inner: Any, record: Sent, cap: int) -> None:
        self.inner, self.record, self.cap = inner, record, cap

    def write(self, data: bytes) -> int:
        if self.record.bytes >= self.cap:
            self.record.capped = True
            raise BrokenPipeError("the fake's cap on one answer")
        try:
            written = self.inner.write(data)
        except OSError:
            self.record.hung_up = True
            raise
        self.record.bytes += len(data)
        return written

    def flush(self) -> None:
        self.inner.flush()


class FakeAWSMetadata(LoopbackServer):
    """IMDSv2 and the container credentials endpoint on one loopback HTTP server, handing out
    temporary keys of ``aws`` for ``role_arn``."""

    def __init__(self, aws: FakeAWS, role_arn: str, *, container_authorization: str | None = None, lifetime: int = 6 * 3600) -> None:
        super().__init__(token_lifetime=lifetime)
        self.aws, self.role_arn = aws, role_arn
        #: The Authorization the container endpoint wants (AWS_CONTAINER_AUTHORIZATION_TOKEN), if any.
        self.container_authorization = container_authorization
        #: Keys handed out, in order.
        self.handed_out: list[AwsKeys] = []
        #: Bytes after which one answer is given up (a body without end included).
        self.stream_cap = 64 * 1024 * 1024
        self._imds_tokens: set[str] = set()
        self._sent: list[Sent] = []
        self._trickles: dict[str, float] = {}
        self._sent_changed = threading.Condition(self._lock)

    def trickle(self, endpoint: str, *, seconds: float = 30.0) -> None:
        """Answer the next request to ``endpoint`` with a 200 whose body comes a few bytes every
        0.2 s (each wait well within any socket timeout) and ends, unfinished, after ``seconds``
        or when the client hangs up (see :meth:`sent`)."""
        with self._lock:
            self._trickles[endpoint] = seconds

    def _trickle(self, handler: Handler, seconds: float) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        handler.close_connection = True
        deadline = time.monotonic() + seconds
        try:
            handler.wfile.write(b"1\r\n{\r\n")
            while time.monotonic() < deadline and not self._release.wait(0.2):
                handler.wfile.write(b"1\r\n \r\n")
        except OSError:  # the client hung up (recorded by the counting writer)
            pass

    def sent(self, endpoint: str, *, timeout: float = 60.0) -> Sent:
        """The first finished answer to ``endpoint`` (waiting up to ``timeout`` seconds for it)."""
        with self._sent_changed:
            self._sent_changed.wait_for(lambda: any(r.endpoint == endpoint for r in self._sent), timeout)
            for record in self._sent:
                if record.endpoint == endpoint:
                    return record
        raise AssertionError(f"no answer to {endpoint} finished within {timeout}s")

    def _dispatch(self, handler: Handler, body: bytes) -> None:
        record = Sent(self._endpoint(handler.command, urlsplit(handler.path).path))
        inner = handler.wfile
        handler.wfile = _CountingWriter(inner, record, self.stream_cap)  # type: ignore[assignment]
        with self._lock:
            trickle = self._trickles.pop(record.endpoint, None)
        try:
            if trickle is None:
                super()._dispatch(handler, body)
            else:
                self._trickle(handler, trickle)
        finally:
            handler.wfile = inner
            with self._sent_changed:
                self._sent.append(record)
                self._sent_changed.notify_all()

    @property
    def container_url(self) -> str:
        """For ``AWS_CONTAINER_CREDENTIALS_FULL_URI`` (as EKS Pod Identity's agent serves it)."""
        return f"{self.url}/v1/credentials"

    def _endpoint(self, method: str, path: str) -> str:
        if path == "/latest/api/token":
            return "imds-token"
        if path.startswith("/latest/meta-data/iam/security-credentials/"):
            return "imds-credentials"
        if path == "/v1/credentials":
            return "container"
        return "unknown"

    def _keys(self) -> AwsKeys:
        keys = self.aws.issue_session(self.role_arn, "i-0123456789abcdef0", self.token_lifetime)
        with self._lock:
            self.handed_out.append(keys)
        return keys

    def _answer(self, endpoint: str, handler: Handler, path: str, query: dict[str, list[str]], body: bytes) -> Reply:
        if endpoint == "imds-token":
            ttl = handler.headers.get("X-aws-ec2-metadata-token-ttl-seconds") or ""
            if handler.command != "PUT" or not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
                return Reply(400, b"", "text/plain")
            token = "AQAEA" + secrets.token_urlsafe(32)
            with self._lock:
                self._imds_tokens.add(token)
            return Reply(200, token.encode(), "text/plain", {"X-aws-ec2-metadata-token-ttl-seconds": ttl})
        if endpoint == "imds-credentials":
            with self._lock:
                known = handler.headers.get("X-aws-ec2-metadata-token") in self._imds_tokens
            if not known:  # IMDSv2 only: no token (IMDSv1) or a wrong one
                return Reply(401, b"", "text/plain")
            role = self.role_arn.rsplit("/", 1)[-1]
            rest = path.removeprefix("/latest/meta-data/iam/security-credentials/")
            if rest == "":
                return Reply(200, role.encode(), "text/plain")
            if rest != role:
                return Reply(404, b"", "text/plain")
            keys = self._keys()
            assert keys.expires_at is not None
            document = {
                "Code": "Success",
                "LastUpdated": _iso(datetime.now(UTC)),
                "Type": "AWS-HMAC",
                "AccessKeyId": keys.access_key,
                "SecretAccessKey": keys.secret_key,
                "Token": keys.token,
                "Expiration": _iso(keys.expires_at),
            }
            return Reply(200, json.dumps(document).encode(), "text/plain")
        if endpoint == "container":
            if self.container_authorization is not None and handler.headers.get("Authorization") != self.container_authorization:
                return Reply(403, json.dumps({"code": "AccessDeniedException", "message": "Unauthorized"}).encode())
            keys = self._keys()
            assert keys.expires_at is not None
            document = {
                "AccessKeyId": keys.access_key,
                "SecretAccessKey": keys.secret_key,
                "Token": keys.token,
                "AccountId": ACCOUNT,
                "Expiration": _iso(keys.expires_at),
            }
            return Reply(200, json.dumps(document).encode())
        return Reply(404, b"", "text/plain")
