"""The HTTP session of botocore's instance metadata (IMDS) and container credentials fetchers.

botocore's own session reads an answer whole before the fetcher sees it (``URLLib3Session.send``
reads the body of every request not marked ``stream_output``), and its timeouts bound each wait
on the socket, not the answer: an endpoint streaming a body without end grows memory until the
process dies, and a fetch the engine abandoned at its timeout reads on. :class:`MetadataHTTP`
asks botocore's session for the answer unread and reads it with the SDK's ``read_answer``: at
most :data:`MAX_ANSWER_BYTES`, and the connection shut at the fetch's deadline, so an abandoned
fetch stops. It also notes the expiry each credentials answer gives its keys, as the endpoint
said it: botocore moves an IMDS answer's expiry forward when it is near or past ("static
stability"), and a token must not be said to outlive the keys that signed it.

botocore has no public way to hand these fetchers an HTTP session once its credential chain is
built (``IMDSFetcher`` makes its own; ``ContainerProvider`` keeps its fetcher to itself), so
:func:`bound_metadata_fetchers` sets three private attributes, checked first: a botocore that
moved them fails here, loudly, rather than reading unbounded.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from datetime import datetime, timezone
from typing import Any

from cpcreds.sdk import BodyProblem, Deadline, read_answer

from .failures import Unusable

__all__ = ["MAX_ANSWER_BYTES", "MetadataHTTP", "bound_metadata_fetchers"]

#: A credentials document is about 1.5 KiB, a role name or an IMDS token less; far more is not one.
MAX_ANSWER_BYTES = 64 * 1024
# Expiries kept, by access key id: the keys in use and a few before them.
_KEPT_EXPIRIES = 16


class _Read:
    # What botocore's AWSResponse reads a body from (its ``raw.stream()``), holding a read body.
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, *args: Any, **kwargs: Any) -> Any:
        yield self._body


class MetadataHTTP:
    """One endpoint's bounded session, for one fetch at a time (:class:`~cpcreds_aws.login.Login`
    serialises them); ``label`` names the endpoint in errors; ``timeout`` is each wait's bound."""

    def __init__(self, label: str, timeout: float, proxies: dict[str, str] | None = None) -> None:
        from botocore.httpsession import URLLib3Session

        self.label = label
        self._inner = URLLib3Session(timeout=timeout, proxies=proxies)
        self._deadline = Deadline(60.0, time.monotonic() + 60.0)
        self._lock = threading.Lock()
        self._expiries: OrderedDict[str, datetime] = OrderedDict()

    def begin(self, seconds: float) -> None:
        """The calls from now on end within ``seconds`` in all."""
        self._deadline = Deadline(seconds, time.monotonic() + max(0.0, seconds))

    def remaining(self) -> float:
        return self._deadline.remaining()

    def sleep(self, seconds: float) -> None:
        """botocore's pause between attempts, cut short by the deadline."""
        time.sleep(max(0.0, min(seconds, self.remaining())))

    def expiry_of(self, access_key: str) -> datetime | None:
        """When the endpoint said the keys of ``access_key`` expire, if it handed them out."""
        with self._lock:
            return self._expiries.get(access_key)

    def send(self, request: Any) -> Any:
        """botocore's ``URLLib3Session.send``, with the answer read within the deadline and size limit."""
        from botocore.awsrequest import AWSResponse
        from botocore.exceptions import ConnectionClosedError, ReadTimeoutError
        from urllib3.exceptions import HTTPError

        if self.remaining() <= 0:  # the fetch's time is up: botocore takes this as "no answer"
            raise ReadTimeoutError(endpoint_url=request.url, error="the fetch's deadline had passed")
        request.stream_output = True  # botocore's session then leaves the body unread
        response = self._inner.send(request)
        raw = response.raw
        kept = False
        try:
            body = read_answer(raw, max_bytes=MAX_ANSWER_BYTES, deadline=self._deadline, decode_content=False)
            kept = True
        except BodyProblem as problem:
            if problem.late:
                raise ReadTimeoutError(endpoint_url=request.url, error="the answer did not end in time") from None
            raise Unusable(f"{self.label} answered with more than {MAX_ANSWER_BYTES // 1024} KiB") from None
        except HTTPError:  # urllib3's: the body broke off, or a wait on it timed out
            raise ConnectionClosedError(endpoint_url=request.url, request=request, error="the answer broke off") from None
        finally:
            if kept:
                raw.release_conn()
            else:
                raw.close()  # never back to the pool: what is left of the answer is not read
        if response.status_code == 200:
            self._note_expiry(body)
        return AWSResponse(request.url, response.status_code, response.headers, _Read(body))

    def _note_expiry(self, body: bytes) -> None:
        # A credentials document (IMDS's and the container endpoint's share these two fields).
        try:
            document = json.loads(body) if body.startswith(b"{") else None
        except (ValueError, RecursionError):
            return
        if not isinstance(document, dict):
            return
        access_key, expiration = document.get("AccessKeyId"), document.get("Expiration")
        if not isinstance(access_key, str) or not isinstance(expiration, str):
            return
        try:
            expires_at = datetime.fromisoformat(expiration.replace("Z", "+00:00"))
        except ValueError:
            return
        expires_at = expires_at if expires_at.tzinfo else expires_at.replace(tzinfo=timezone.utc)
        with self._lock:
            self._expiries[access_key] = expires_at
            self._expiries.move_to_end(access_key)
            while len(self._expiries) > _KEPT_EXPIRIES:
                self._expiries.popitem(last=False)


def bound_metadata_fetchers(session: Any) -> tuple[MetadataHTTP, MetadataHTTP]:
    """Give the IMDS and container credentials fetchers of ``session``'s credential chain
    (botocore's, built here if it was not) bounded sessions; returns them (IMDS's, the container's)."""
    from botocore.utils import ContainerMetadataFetcher, get_environ_proxies

    resolver = session.get_component("credential_provider")
    instance, container = resolver.get_provider("iam-role"), resolver.get_provider("container-role")
    # Private: the fetcher botocore configured from the session (endpoint, mode, attempts), its
    # HTTP session, and the container provider's fetcher. The providers are changed in place
    # because the same objects also serve a profile's credential_source (Ec2InstanceMetadata,
    # EcsContainer).
    fetcher = getattr(instance, "_role_fetcher", None)
    if fetcher is None or not hasattr(fetcher, "_session") or not hasattr(container, "_fetcher"):
        raise Unusable("this botocore keeps its metadata fetchers where cpcreds-aws cannot bound them; install a botocore it supports")
    timeout = float(session.get_config_variable("metadata_service_timeout") or 1)
    imds = MetadataHTTP("the instance metadata service", timeout, get_environ_proxies(fetcher.get_base_url()))
    fetcher._session = imds  # noqa: SLF001 - see above
    task = MetadataHTTP("the container credentials endpoint", ContainerMetadataFetcher.TIMEOUT_SECONDS)
    container._fetcher = ContainerMetadataFetcher(session=task, sleep=task.sleep)  # noqa: SLF001 - see above
    return imds, task
