"""The HTTP transport google-auth uses here: every call bounded by the fetch's deadline, every
answer bounded in size, and a record of what happened on the wire for error messages.

HTTP is urllib3's (a ``requests`` session would cost tens of milliseconds of imports on every
run of the console scripts): :class:`Pools` picks the proxy and the CA bundle from the
environment as ``requests`` (google-auth's usual transport) does, so a setup that worked with it
still works.

google-auth's exceptions quote response bodies (an endpoint may echo the assertion or the subject
token), so the provider never shows them: it describes the failure from the SDK's
:class:`~cpcreds.sdk.Exchange` records, which hold a status, an OAuth error code and a reason in
our words, never a body. The deadline, the records and their wording are the SDK's, shared with
the other providers (docs/sdk.md).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Any, NoReturn
from urllib.parse import urlsplit

import google.auth.transport
import urllib3
from urllib3.exceptions import ConnectTimeoutError, HTTPError, NewConnectionError, ReadTimeoutError

from cpcreds.sdk import Abort, BodyProblem, Cutoff, Deadline, Exchange, connection_problem, error_detail, read_answer, shown_endpoint, watch_pool_manager

__all__ = ["Pools", "BoundedRequest", "MAX_RESPONSE_BYTES"]

#: A token answer is a few KiB; anything much larger is not one.
MAX_RESPONSE_BYTES = 1024 * 1024
# google-auth's token-endpoint retry pauses 1 s, then 2 s, ... with 10 % jitter.
_FIRST_PAUSE = 1.0
_JITTER = 1.1


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
                watch_pool_manager(manager)  # its sockets shut at each call's deadline (Cutoff)
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


class BoundedRequest(google.auth.transport.Request):
    """A ``google.auth.transport.Request`` for one fetch.

    Each call ends by ``deadline`` (the fetch's, :func:`cpcreds.sdk.deadline`): connecting,
    waiting for the status line and headers and reading the body alike (the sockets are shut
    then: :class:`~cpcreds.sdk.Cutoff`), reads at most :data:`MAX_RESPONSE_BYTES`, follows no
    redirect, and appends an :class:`~cpcreds.sdk.Exchange` to :attr:`exchanges`. When no time
    is left for another attempt after a failed one, it raises :class:`~cpcreds.sdk.Abort`
    instead of letting google-auth pause and retry past the deadline.

    :attr:`labels` names endpoints by :func:`~cpcreds.sdk.shown_endpoint` (``token endpoint``,
    ``metadata server``; others are ``endpoint``). Hosts in :attr:`direct` (``host[:port]``, the
    metadata server) are called without a proxy; the others through the proxy the environment
    names (see :class:`Pools`).
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
        exchange = Exchange(self.labels.get(shown_endpoint(url), "endpoint"), url)
        deadline = self._deadline
        remaining = deadline.remaining()
        if remaining <= 0:
            exchange.failure = f"not called: the {deadline.shown()} timeout had passed"
            self._abort(exchange)
        # google-auth's own timeout for a call (the metadata server's few seconds) is kept when shorter.
        own = timeout is not None and float(timeout) < remaining
        wait = max(0.001, float(timeout)) if own else remaining
        late = f"did not answer within {wait:g}s" if own else f"did not answer within the {deadline.shown()} timeout"
        with Cutoff(deadline) as cutoff:
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
                # urllib3 files a refused connection under timeouts; it is not one
                exchange.failure = connection_problem(exc) if isinstance(exc, NewConnectionError) else late
            except (HTTPError, OSError, ValueError) as exc:  # ValueError: urllib3's LocationValueError
                exchange.failure = late if cutoff.expired else connection_problem(exc)
            if response is None:
                self._abort(exchange)
            try:
                data = self._read(response, exchange, cutoff)
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
            if deadline.remaining() <= pause:
                self._abort(exchange)
        self.exchanges.append(exchange)
        return _Response(response.status, response.headers, data)

    def _abort(self, exchange: Exchange) -> NoReturn:
        self.exchanges.append(exchange)
        raise Abort(exchange)

    def _read(self, response: urllib3.BaseHTTPResponse, exchange: Exchange, cutoff: Cutoff) -> bytes:
        late = f"did not finish its answer within the {self._deadline.shown()} timeout"
        try:
            return read_answer(response, max_bytes=MAX_RESPONSE_BYTES, deadline=self._deadline)
        except BodyProblem as problem:
            failure = late if problem.late else str(problem)
        except (HTTPError, OSError, ValueError) as exc:
            failure = late if cutoff.expired else connection_problem(exc)
        exchange.status = response.status
        exchange.failure = failure
        self._abort(exchange)
