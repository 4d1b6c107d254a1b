"""The hub: one shared client per process, and reading a Secret.

Where the hub's credentials come from is :mod:`.hubsource`'s; the client is the ``kubernetes``
client's ``ApiClient``, loaded by its own loaders (:mod:`.hubloader`), for every source and on
every path: in-process, and the console scripts' one-shot runs (bench/README.md has the figures
that chose one transport over two).

One :class:`HubClient` (an ``ApiClient`` with its urllib3 pool) exists per :class:`HubSource` per
process, shared by every provider that uses that source and closed when the last of them closes
(:class:`HubClients`). It is thread-safe; calls from many worker threads share its keep-alive
connections.

The Secret is read with the ``ApiClient`` itself (``param_serialize`` + ``call_api``), not
``CoreV1Api``: the same request, headers and authentication, but without importing the
generated 50,000-line module and its models, and with the answer read bounded
(:data:`MAX_SECRET_BYTES`) and within the plan's timeout, which the model-deserialising path
cannot do.
"""

from __future__ import annotations

import json
import threading
import time
from typing import TYPE_CHECKING, Any

from cpcreds.sdk import BodyProblem, Cutoff, deadline, read_answer, shown_url

from .exchange import HubError, failure_message, transport_errors
from .hubsource import SERVICE_ACCOUNT_DIR, HubSource, default_namespace, resolve_hub_source

if TYPE_CHECKING:  # imported on first use: `cpcreds plugins` need not load the kubernetes client
    from kubernetes.client.api_client import ApiClient

__all__ = [
    "HubSource",
    "HubClient",
    "HubClients",
    "HubError",
    "HUB_CLIENTS",
    "SERVICE_ACCOUNT_DIR",
    "MAX_SECRET_BYTES",
    "resolve_hub_source",
    "default_namespace",
]

#: Largest Secret read from the hub: a Secret holds at most 1 MiB of data, 1.4 MiB in base64.
MAX_SECRET_BYTES = 3 * 1024 * 1024
#: Largest error answer read (only its status is used; reading it lets the connection be reused).
_MAX_ERROR_BYTES = 64 * 1024


class HubClient:
    """One hub: an ``ApiClient`` with its urllib3 connection pool (``api``), and the kubeconfig
    context's namespace (``None`` for in-cluster config or a context without one).
    ``expires_at`` (epoch seconds) is when the credential a hub exec plugin gave runs out, else
    ``None``. Thread-safe."""

    def __init__(self, api: ApiClient, source: HubSource, context_namespace: str | None, *, expires_at: float | None = None) -> None:
        self.api = api
        self.source = source
        self.context_namespace = context_namespace
        self.expires_at = expires_at
        self.url = shown_url(str(api.configuration.host))  # a server URL may carry user:password@
        self._errors = transport_errors()

    def _get(self, namespace: str, name: str, timeout: float) -> Any:
        """urllib3's response to GET the Secret, its body not read yet."""
        method, url, headers, _, _ = self.api.param_serialize(
            method="GET",
            resource_path="/api/v1/namespaces/{namespace}/secrets/{name}",
            path_params={"namespace": namespace, "name": name},
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
        )
        return self.api.call_api(method, url, header_params=headers, _request_timeout=timeout).response

    def read_secret(self, namespace: str, name: str, timeout: float) -> dict[str, Any]:
        """GET Secret ``namespace/name`` by the fetch's deadline (:func:`cpcreds.sdk.deadline`;
        outside a fetch, one for ``timeout`` seconds); the object as a dict. Raises
        :class:`HubError` for anything else than a Secret."""
        where = f"Secret {namespace}/{name}"
        until = deadline(timeout)
        timeout = until.seconds  # what messages name
        with Cutoff(until) as exchange:  # the deadline of the whole exchange, head included
            failure: BaseException | None = None
            try:
                raw = self._get(namespace, name, max(0.001, until.remaining()))
            except self._errors as exc:
                failure = exc
            if failure is not None:
                # Raised outside the except block: urllib3's exceptions repeat URLs (a proxy's may
                # hold a password) and nothing of a transport's error may chain onto ours.
                raise HubError(failure_message(failure, exchange.expired, where, self.url, timeout))
            status = raw.status
            if status == 200:
                body = self._body(raw, MAX_SECRET_BYTES, exchange, where, timeout)
                return _secret_object(body, where, self.url)
            try:
                # Read (and ignore) the error's body so that the connection can serve the next
                # fetch; one too large or too slow is dropped with its connection instead.
                self._body(raw, _MAX_ERROR_BYTES, exchange, where, timeout)
            except HubError:
                pass
        raise HubError(_status_message(status, where, namespace, self.url), status=status)

    def _body(self, raw: Any, limit: int, exchange: Cutoff, where: str, timeout: float) -> bytes:
        """The body of ``raw``, at most ``limit`` bytes, read before the exchange's deadline (a
        body cut there, by an error or a quiet end, is a timeout)."""
        failure: BaseException | None = None
        try:
            body = read_answer(raw, max_bytes=limit, deadline=exchange.deadline)
        except BodyProblem as exc:
            failure = TimeoutError() if exc.late else exc
        except self._errors as exc:
            failure = exc
        if failure is None and not exchange.expired:
            raw.release_conn()
            return body
        if isinstance(failure, BodyProblem) and not exchange.expired:
            problem = f"the hub's answer for {where} is larger than {limit // 1024} KiB"
        else:
            problem = failure_message(failure or TimeoutError(), exchange.expired, where, self.url, timeout)
        raw.close()  # the rest of a cut answer must not be read as the next response
        raw.release_conn()
        raise HubError(problem)

    def close(self) -> None:
        self.api.close()


def _secret_object(body: bytes, where: str, url: str) -> dict[str, Any]:
    obj: Any = None
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError):
        pass
    if not isinstance(obj, dict):
        raise HubError(f"the hub {url} answered for {where} with something that is not a Secret")
    return obj


def _status_message(status: int, where: str, namespace: str, url: str) -> str:
    # The hub's Status message is not quoted: only the status matters, and a hostile hub could
    # put anything there.
    if status == 404:
        return f"{where} not found on the hub {url}"
    if status == 401:
        return f"the hub {url} refused its credentials (401 Unauthorized) reading {where}: check the hub kubeconfig or service account token"
    if status == 403:
        return f"the hub credentials may not read {where} (403 Forbidden): grant get on secrets in namespace {namespace}"
    return f"the hub {url} answered HTTP {status} reading {where}"


class HubClients:
    """The process-wide hub clients: one per :class:`HubSource`, built on first use, shared by
    every provider that uses that source, closed when the last one releases it. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clients: dict[HubSource, HubClient] = {}
        self._users: dict[HubSource, set[int]] = {}

    def get(self, source: HubSource, user: object, timeout: float) -> HubClient:
        """The client for ``source``, built if needed (by the fetch's deadline,
        :func:`cpcreds.sdk.deadline`, a hub exec plugin included), and built again when the
        credential such a plugin gave is about to expire; ``user`` (a provider) holds it until
        :meth:`release`. Raises :class:`HubError` when the hub config cannot be loaded."""
        # The fetch's deadline ends before the caller's timeout: a hub exec plugin's failure, not
        # the engine's "did not answer", is what the caller sees when it hangs.
        until = deadline(timeout).at
        stale = None
        with self._lock:
            # Under the lock: concurrent first fetches build one client, not one each.
            client = self._clients.get(source)
            if client is not None and client.expires_at is not None and time.time() > client.expires_at - min(_REFRESH_AHEAD, 10 * timeout):
                stale, client = client, None
                del self._clients[source]
            if client is None:
                client = self._clients[source] = _build(source, until)
            self._users.setdefault(source, set()).add(id(user))
        if stale is not None:
            stale.close()
        return client

    def discard(self, source: HubSource, client: HubClient) -> None:
        """Forget ``client`` (after the hub refused its credentials), so that the next fetch
        loads the hub config again: a rotated kubeconfig or token is then picked up."""
        with self._lock:
            if self._clients.get(source) is client:
                del self._clients[source]
            else:
                client = None  # type: ignore[assignment]
        if client is not None:
            client.close()

    def release(self, source: HubSource, user: object) -> None:
        """``user`` no longer needs ``source``'s client; the last user's release closes it."""
        with self._lock:
            users = self._users.get(source, set())
            users.discard(id(user))
            client = None
            if not users:
                self._users.pop(source, None)
                client = self._clients.pop(source, None)
        if client is not None:
            client.close()

    def __len__(self) -> int:
        with self._lock:
            return len(self._clients)


#: The clients of this process.
HUB_CLIENTS = HubClients()
#: A hub exec plugin's credential is fetched again this long (at most) before it expires.
_REFRESH_AHEAD = 300.0

def _build(source: HubSource, deadline: float) -> HubClient:
    from .hubloader import kubernetes_api

    api, context_namespace, expires_at = kubernetes_api(source, deadline)
    return HubClient(api, source, context_namespace, expires_at=expires_at)
