"""Adapters to the official ``kubernetes`` client (sync) and ``kubernetes.aio``.

Each adapter ties one ClusterProfile's plan to client ``Configuration`` objects:

- endpoint and TLS from the profile: host, the CA (in memory as ``ca_cert_data`` for the REST
  clients, and as a file, ``ssl_ca_cert``, because ``kubernetes.stream``'s websockets read only
  that), tls-server-name, insecure-skip-tls-verify, proxy-url (when the profile names none, the
  client's own HTTPS_PROXY/NO_PROXY handling applies);
- a bearer token through ``refresh_api_key_hook``, seeded so the client calls the hook on every
  request; the hook is the engine's cache hit (microseconds) or, near expiry, its refresh. The hook
  refreshes the configuration it is handed, so ``copy.deepcopy(conf)`` and
  ``Configuration.set_default(conf)`` give configurations that stay fresh too;
- client certificates through a file in a private 0700 directory (0600, certificate and key in one
  file replaced atomically on rotation), because both clients only take certificate paths; on
  rotation the REST client (its connection pool, and for ``kubernetes.aio`` its SSL context and
  session) is rebuilt so new connections present the new certificate;
- ``api_client()`` retries a request once after a 401, with a credential fetched after
  :meth:`Binding.invalidate <cpcreds.engine.binding.Binding.invalidate>` — never with no credential: a failing provider raises a
  :class:`~cpcreds.CredentialError` and no request is sent. The sync and the aio client follow one
  request policy (:func:`request_flow`); each only drives it with its own I/O.
- with failover (``failover: true``), the credential comes from whichever provider answers
  (:meth:`Binding.answer <cpcreds.engine.binding.Binding.answer>`); a 401 invalidates exactly the credential that was sent,
  in the plan that answered it. Providers of one profile may name different endpoints (a gateway
  and the cluster itself): the configuration follows the answering provider's server, CA,
  tls-server-name and proxy, and ``api_client()`` renews its connections when they change.

The adapters reach the engine only through ``engine.bind(profile)`` (a
:class:`~cpcreds.engine.binding.Binding`), and this module never imports the engine: imports flow one way.
The private directories are removed on ``close()`` (the client's, or the engine's: each client
binding registers with :meth:`Binding.on_close <cpcreds.engine.binding.Binding.on_close>`), when the binding is garbage-collected, and at
interpreter exit, only ever by the process that created them (a forked child's exit leaves its
parent's files alone). Python's default SIGTERM action skips exit handlers: a service calls
:func:`remove_certificate_files` from its signal handler (or raises ``SystemExit`` there).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import os
import shutil
import tempfile
import threading
import weakref
from collections.abc import Generator, Mapping
from typing import TYPE_CHECKING, Any

from ..engine.binding import Binder, Binding
from ..credential import Credential
from ..engine.failover import Answer
from ..plan import AccessPlan

if TYPE_CHECKING:
    from ..kep import ExecCluster

__all__ = ["build_config", "api_client", "abuild_config", "aapi_client", "CredentialBinding", "remove_certificate_files"]

# Private directories made by this process: path -> pid of the process that made it.
_live_dirs: dict[str, int] = {}
# Reentrant: remove_certificate_files runs in signal handlers and _remove_dir in the garbage
# collector's finalizers, both in whatever thread is running then, possibly the one that holds it.
_live_dirs_lock = threading.RLock()


def remove_certificate_files() -> None:
    """Remove every private certificate directory this process made (and still holds).

    Runs at interpreter exit by itself; call it from a SIGTERM/SIGHUP handler, which Python does
    not turn into an exit by default. Clients still open lose their certificate file: call it only
    when the process is about to end."""
    pid = os.getpid()
    with _live_dirs_lock:
        # A copy: a finalizer may take its directory off the dict while this looks through it.
        mine = [path for path, owner in _live_dirs.copy().items() if owner == pid]
        for path in mine:
            _live_dirs.pop(path, None)
    for path in mine:
        shutil.rmtree(path, ignore_errors=True)


atexit.register(remove_certificate_files)


def _forget_parent_dirs() -> None:
    # In a forked child: the directories are the parent's, to remove when *it* is done.
    global _live_dirs_lock
    _live_dirs_lock = threading.RLock()  # the parent's lock may have been held at fork time
    _live_dirs.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_parent_dirs)


def _remove_dir(path: str, owner: int) -> None:
    if os.getpid() != owner:
        return
    shutil.rmtree(path, ignore_errors=True)
    with _live_dirs_lock:
        _live_dirs.pop(path, None)


def _write_private(directory: str, name: str, data: str) -> str:
    path = os.path.join(directory, name)
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(data)
        os.replace(tmp, path)  # readers see the old file or the new one, never half of one
    except BaseException:
        # A leftover would make every later O_EXCL open of this name fail.
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def _with_auth(headers: Mapping[str, Any] | None, credential: Credential) -> dict[str, Any]:
    """``headers`` carrying exactly ``credential``'s bearer token (none for a certificate).

    The generated clients name the header ``authorization``; adding ``Authorization`` next to it
    would send both, and the server reads the first - the rejected one.
    """
    fresh = {key: value for key, value in (headers or {}).items() if key.lower() != "authorization"}
    if credential.token:
        fresh["authorization"] = f"Bearer {credential.token}"
    return fresh


def _endpoint(cluster: ExecCluster) -> tuple[Any, ...]:
    """What a client connects with: two plans with equal endpoints can share connections."""
    return (cluster.server, cluster.tls_server_name, cluster.insecure_skip_tls_verify, cluster.certificate_authority_data, cluster.proxy_url)


class CredentialBinding:
    """Keeps client ``Configuration`` objects in step with the engine's credential for one
    profile (one plan; with failover, the plan that answered).

    Shared, not copied, by ``copy.deepcopy`` of a configuration: a copy refreshes through the
    same binding and reads the same certificate file."""

    def __init__(self, binding: Binding) -> None:
        #: The profile's handle on the engine.
        self.binding = binding
        #: The profile's preferred plan; with failover, :attr:`answered` may be another one.
        self.plan: AccessPlan = binding.plan
        #: The plan whose credential was applied last.
        self.answered: AccessPlan = self.plan
        self.current: Credential | None = None
        #: Bumped on every certificate or endpoint change; clients compare it and renew connections.
        self.connection_serial = 0
        self.endpoint = _endpoint(self.plan.cluster)
        self.cert_file: str | None = None
        self._dir: str | None = None
        self._lock = threading.Lock()
        self._finalizer: weakref.finalize | None = None
        self._unregister = binding.on_close(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> CredentialBinding:
        return self

    def __copy__(self) -> CredentialBinding:
        return self

    def apply(self, conf: Any, answer: Answer) -> None:
        """Point ``conf`` at ``answer``: its plan's endpoint, its credential (token header,
        certificate file)."""
        credential, plan = answer
        if plan is not self.answered:
            self._follow(plan)
        cluster = plan.cluster
        if getattr(conf, "cpcreds_cluster", None) is not cluster:  # the usual case costs one identity check
            if getattr(conf, "cpcreds_endpoint", None) != _endpoint(cluster):
                _point(conf, self, cluster)
            conf.cpcreds_cluster = cluster
        if credential is not self.current:
            self._adopt(credential)
        if credential.token:
            conf.api_key["authorization"] = f"Bearer {credential.token}"
        else:
            conf.api_key.pop("authorization", None)
        conf.cert_file, conf.key_file = self.cert_file, None

    def _adopt(self, credential: Credential) -> None:
        with self._lock:
            previous, self.current = self.current, credential
            if (previous.client_certificate_data if previous else None) == credential.client_certificate_data:
                return
            if credential.client_certificate_data and credential.client_key_data:
                # Certificate and key in one file (ssl's load_cert_chain reads the key from it
                # when keyfile is None), so one rename swaps the pair: a connection opened
                # mid-rotation never loads the new certificate with the old key.
                pem = credential.client_certificate_data.rstrip("\n") + "\n" + credential.client_key_data
                self.cert_file = _write_private(self.private_dir(), "client.pem", pem)
            else:
                self.cert_file = None
            self.connection_serial += 1

    def _follow(self, plan: AccessPlan) -> None:
        with self._lock:
            self.answered = plan
            endpoint = _endpoint(plan.cluster)
            if endpoint != self.endpoint:
                self.endpoint = endpoint
                self.connection_serial += 1

    def private_dir(self) -> str:
        """This binding's 0700 directory, made on first use."""
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="cpcreds-cert-")  # mode 0700
            owner = os.getpid()
            with _live_dirs_lock:
                _live_dirs[self._dir] = owner
            self._finalizer = weakref.finalize(self, _remove_dir, self._dir, owner)
        return self._dir

    def ensure(self, conf: Any) -> Answer:
        """The current credential (the engine's cache hit) and its plan, applied to ``conf``."""
        answer = self.binding.answer()
        self.apply(conf, answer)
        return answer

    async def aensure(self, conf: Any) -> Answer:
        answer = await self.binding.aanswer()
        self.apply(conf, answer)
        return answer

    def close(self) -> None:
        self._unregister()
        if self._finalizer is not None:
            self._finalizer()


def configure_credentials(conf: Any, binding: CredentialBinding) -> None:
    """Point ``conf`` (a ``Configuration`` of the official client or of ``kubernetes_asyncio``)
    at ``binding``'s cluster and make it carry the binding's credential (every adapter's set-up)."""
    _point(conf, binding, binding.plan.cluster)
    conf.cpcreds_binding = binding


def _point(conf: Any, binding: CredentialBinding, cluster: ExecCluster) -> None:
    """Set ``conf``'s endpoint (server, CA, tls-server-name, TLS verification, proxy) to
    ``cluster``'s. What the cluster leaves unset keeps the configuration's own value (the
    client's HTTPS_PROXY handling, say), also after a move from a cluster that set it."""
    conf.host = cluster.server.rstrip("/")
    defaults = getattr(conf, "cpcreds_defaults", None)
    if defaults is None:  # after host: the client picks its environment proxy by the host's scheme
        names = ("ca_cert_data", "ssl_ca_cert", "tls_server_name", "proxy")
        defaults = conf.cpcreds_defaults = {name: getattr(conf, name, None) for name in names}
    if cluster.certificate_authority_data:
        # The REST clients hand this to ssl's cadata, which takes PEM only as str (bytes mean DER).
        pem = cluster.certificate_authority_data.decode("ascii", "replace")
        conf.ca_cert_data = pem
        # kubernetes.stream (exec, attach, port-forward) builds its websocket's TLS from the file;
        # one file per CA, so a configuration still on another endpoint keeps its own.
        name = f"ca-{hashlib.sha256(cluster.certificate_authority_data).hexdigest()[:16]}.crt"
        conf.ssl_ca_cert = _write_private(binding.private_dir(), name, pem)
    else:
        conf.ca_cert_data, conf.ssl_ca_cert = defaults["ca_cert_data"], defaults["ssl_ca_cert"]
    conf.tls_server_name = cluster.tls_server_name or defaults["tls_server_name"]
    conf.verify_ssl = not cluster.insecure_skip_tls_verify
    # Only ever set when some cluster named a proxy: setting it turns the client's own
    # environment (HTTPS_PROXY, NO_PROXY) handling off.
    if cluster.proxy_url:
        conf.proxy = cluster.proxy_url
    elif conf.proxy != defaults["proxy"] and getattr(conf, "cpcreds_endpoint", None) is not None:
        conf.proxy = defaults["proxy"]
    conf.cpcreds_endpoint = _endpoint(cluster)


def _sync_hook(binding: CredentialBinding) -> Any:
    def refresh_api_key_hook(conf: Any) -> None:
        binding.ensure(conf)

    return refresh_api_key_hook


def async_refresh_hook(binding: CredentialBinding) -> Any:
    """A ``refresh_api_key_hook`` for asyncio clients: a fresh credential before each request."""
    async def refresh_api_key_hook(conf: Any) -> None:
        await binding.aensure(conf)

    return refresh_api_key_hook


def build_config(engine: Binder, profile: ClusterProfileLike) -> Any:
    """A ``kubernetes.client.Configuration`` for the profile that stays fresh (see module doc).
    ``engine`` is a :class:`~cpcreds.CredentialEngine` (anything with ``bind(profile)``)."""
    from kubernetes import client

    conf = client.Configuration()
    binding = CredentialBinding(engine.bind(profile))
    configure_credentials(conf, binding)
    binding.ensure(conf)  # fail now, and seed api_key so the client calls the hook on every request
    conf.refresh_api_key_hook = _sync_hook(binding)
    return conf


async def abuild_config(engine: Binder, profile: ClusterProfileLike) -> Any:
    """A ``kubernetes.aio.client.Configuration`` for the profile that stays fresh."""
    from kubernetes.aio import client

    return await aconfigure(client.Configuration(), engine, profile)


async def aconfigure(conf: Any, engine: Binder, profile: ClusterProfileLike) -> Any:
    """Make an asyncio client's new ``Configuration`` stay fresh for the profile (as
    :func:`abuild_config`), fetching the first credential now; returns ``conf``."""
    binding = CredentialBinding(engine.bind(profile))
    configure_credentials(conf, binding)
    await binding.aensure(conf)  # fail now, and seed api_key so the hook runs on every request
    conf.refresh_api_key_hook = async_refresh_hook(binding)
    return conf


# -- one request, for both clients ---------------------------------------------------------------

# What a client must do for the flow; it sends back the result.
ENSURE = "ensure"  # -> the Answer to send (renewing the REST client if the certificate or endpoint changed)
SEND = "send"  # (headers) -> the response
DRAIN = "drain"  # (response) -> None: read the body so the connection goes back to the pool
REFRESH = "refresh"  # (rejected Answer) -> the Answer fetched after invalidating its credential


def request_flow(header_params: Mapping[str, Any] | None) -> Generator[tuple[str, Any], Any, Any]:
    """The request policy of both clients: send with the current credential; after a 401, refresh
    once and resend, unless the refresh gave back the very credential that was rejected."""
    answer = yield ENSURE, None
    # The header was filled by the hook during serialisation; send the credential that a 401
    # will invalidate, even if a refresh landed in between.
    response = yield SEND, _with_auth(header_params, answer.credential)
    if response.status != 401:
        return response
    # Drain the 401 first so its connection is reused even when the refresh below raises.
    yield DRAIN, response
    fresh = yield REFRESH, answer
    if fresh.credential is answer.credential:
        return response
    return (yield SEND, _with_auth(header_params, fresh.credential))


def api_client(engine: Binder, profile: ClusterProfileLike) -> Any:
    """A ``kubernetes.client.ApiClient`` for the profile: fresh credentials, 401 -> refresh and
    retry once, connection pool renewed when the client certificate rotates."""
    conf = build_config(engine, profile)
    return _sync_client_class()(conf, conf.cpcreds_binding)


# The client classes are made on first use (the kubernetes packages are imported only then) and
# once per process: a class statement per client cost a fleet of 10,000 clusters seconds.
@functools.cache
def _sync_client_class() -> type:
    from kubernetes import client
    from kubernetes.client import rest

    class CredentialedApiClient(client.ApiClient):
        def __init__(self, configuration: Any, binding: CredentialBinding) -> None:
            super().__init__(configuration)
            self._binding = binding
            self._serial = binding.connection_serial
            self._rotation_lock = threading.Lock()

        def _credential(self, rejected: Answer | None) -> Answer:
            binding = self._binding
            if rejected is not None:
                binding.binding.invalidate(rejected.credential)
            answer = binding.ensure(self.configuration)
            # A new REST client, not just pool_manager.clear(): the PoolManager captured cert_file
            # (None if the first credential was a token-only one), the CA and the proxy when it
            # was built.
            if binding.connection_serial != self._serial:
                with self._rotation_lock:
                    if binding.connection_serial != self._serial:
                        self._serial = binding.connection_serial
                        old, self.rest_client = self.rest_client, rest.RESTClientObject(self.configuration)
                        old.close()  # idle keep-alive connections still present the old certificate
            return answer

        def call_api(self, method: str, url: str, header_params: Any = None, *args: Any, **kwargs: Any) -> Any:
            flow = request_flow(header_params)
            step, value = next(flow)
            while True:
                if step == SEND:
                    result = super().call_api(method, url, value, *args, **kwargs)
                elif step == DRAIN:
                    result = value.read()
                else:
                    result = self._credential(value)
                try:
                    step, value = flow.send(result)
                except StopIteration as done:
                    return done.value

        def close(self) -> None:
            try:
                super().close()
            finally:
                self._binding.close()

    return CredentialedApiClient


async def aapi_client(engine: Binder, profile: ClusterProfileLike) -> Any:
    """A ``kubernetes.aio.client.ApiClient``: as :func:`api_client`, for asyncio."""
    conf = await abuild_config(engine, profile)
    return _async_client_class()(conf, conf.cpcreds_binding)


class AsyncCredentialedClient:
    """What an asyncio ``ApiClient`` subclass needs to follow :func:`request_flow`; put it first
    among the bases (``class C(AsyncCredentialedClient, client.ApiClient)``) and set
    ``rest_client_class`` to the package's ``RESTClientObject``. The subclass overrides the
    method its package sends through and hands the sending to :meth:`_drive`; ``close()`` closes
    the binding too (its private certificate files)."""

    rest_client_class: Any  # the client package's RESTClientObject, rebuilt on rotation
    configuration: Any
    rest_client: Any

    def __init__(self, configuration: Any, binding: CredentialBinding) -> None:
        super().__init__(configuration)  # type: ignore[call-arg]  # the ApiClient after this mixin
        self._binding = binding
        self._serial = binding.connection_serial

    async def _credential(self, rejected: Answer | None) -> Answer:
        binding = self._binding
        if rejected is not None:
            binding.binding.invalidate(rejected.credential)
        answer = await binding.aensure(self.configuration)
        # The asyncio clients load the certificate (and the CA) into their SSL context once, when
        # the REST client is built; a new certificate or endpoint needs a new REST client.
        if binding.connection_serial != self._serial:
            self._serial = binding.connection_serial  # before the await: one task renews
            old, self.rest_client = self.rest_client, self.rest_client_class(self.configuration)
            # Closing drops the old certificate's connections, open ones included, as
            # client-go does on rotation; watches on them end and their callers re-establish them.
            await old.close()
        return answer

    async def _drive(self, header_params: Any, send: Any, drain: Any) -> Any:
        """Run :func:`request_flow` for one request: ``await send(headers)`` sends it and
        ``await drain(response)`` reads a 401's body; returns what the flow returns."""
        flow = request_flow(header_params)
        step, value = next(flow)
        while True:
            if step == SEND:
                result = await send(value)
            elif step == DRAIN:
                result = await drain(value)
            else:  # ENSURE (value None) or REFRESH (value: the rejected answer)
                result = await self._credential(value)
            try:
                step, value = flow.send(result)
            except StopIteration as done:
                return done.value

    async def close(self) -> None:
        try:
            await super().close()  # type: ignore[misc]  # the ApiClient after this mixin
        finally:
            self._binding.close()


@functools.cache
def _async_client_class() -> type:
    from kubernetes.aio import client
    from kubernetes.aio.client import rest

    class CredentialedApiClient(AsyncCredentialedClient, client.ApiClient):
        rest_client_class = rest.RESTClientObject

        async def call_api(self, method: str, url: str, header_params: Any = None, *args: Any, **kwargs: Any) -> Any:
            call = super().call_api

            async def send(headers: Any) -> Any:
                return await call(method, url, headers, *args, **kwargs)

            async def drain(response: Any) -> Any:
                return await response.read()

            return await self._drive(header_params, send, drain)

    return CredentialedApiClient


ClusterProfileLike = Mapping[str, Any] | Any
