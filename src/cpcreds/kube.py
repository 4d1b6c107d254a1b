"""Adapters to the official ``kubernetes`` client (sync) and ``kubernetes.aio``.

Each adapter ties one ClusterProfile to a client ``Configuration``:

- endpoint and TLS from the profile: host, ``ca_cert_data`` (in memory, no temp CA file),
  tls-server-name, insecure-skip-tls-verify, proxy-url (when the profile names none, the client's
  own HTTPS_PROXY/NO_PROXY handling applies);
- a bearer token through ``refresh_api_key_hook``, seeded so the client calls the hook on every
  request; the hook is the engine's cache hit (microseconds) or, near expiry, its refresh;
- client certificates through a file in a private 0700 directory (0600, certificate and key in one
  file replaced atomically on rotation, removed on close and at exit), because both clients only
  take certificate paths; on rotation the REST client (its connection pool, and for
  ``kubernetes.aio`` its SSL context and session) is rebuilt so new connections present the new
  certificate;
- ``api_client()`` retries a request once after a 401, with a credential fetched after
  :meth:`CredentialEngine.invalidate` — never with no credential: a failing provider raises a
  :class:`~cpcreds.CredentialError` and no request is sent.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
import threading
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .access import AccessPlan
from .credential import Credential

if TYPE_CHECKING:
    from .engine import CredentialEngine

__all__ = ["build_config", "api_client", "abuild_config", "aapi_client", "CredentialBinding"]

_live_dirs: set[str] = set()
_live_dirs_lock = threading.Lock()


@atexit.register
def _remove_leftover_cert_dirs() -> None:
    with _live_dirs_lock:
        for path in list(_live_dirs):
            shutil.rmtree(path, ignore_errors=True)
        _live_dirs.clear()


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


class CredentialBinding:
    """Keeps one client ``Configuration`` in step with the engine's credential for a profile."""

    def __init__(self, engine: CredentialEngine, profile: Any, configuration: Any) -> None:
        self.engine = engine
        self.profile = profile
        self.configuration = configuration
        self.plan: AccessPlan = engine.resolve(profile)
        self.current: Credential | None = None
        self.cert_serial = 0  # bumped on every certificate change; clients compare it
        self._dir: str | None = None
        self._lock = threading.Lock()
        self._finalizer: weakref.finalize | None = None
        engine._register_adapter(self)

    def apply(self, credential: Credential) -> bool:
        """Point the configuration at ``credential``; True when the client certificate changed."""
        with self._lock:
            if credential is self.current:
                return False
            previous, self.current = self.current, credential
            conf = self.configuration
            if credential.token:
                conf.api_key["authorization"] = f"Bearer {credential.token}"
            else:
                conf.api_key.pop("authorization", None)
            cert_changed = (previous.client_certificate_data if previous else None) != credential.client_certificate_data
            if cert_changed:
                if credential.client_certificate_data and credential.client_key_data:
                    # Certificate and key in one file (ssl's load_cert_chain reads the key from it
                    # when keyfile is None), so one rename swaps the pair: a connection opened
                    # mid-rotation never loads the new certificate with the old key.
                    pem = credential.client_certificate_data.rstrip("\n") + "\n" + credential.client_key_data
                    conf.cert_file = _write_private(self._private_dir(), "client.pem", pem)
                    conf.key_file = None
                else:
                    conf.cert_file = conf.key_file = None
                self.cert_serial += 1
            return cert_changed

    def _private_dir(self) -> str:
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="cpcreds-cert-")  # mode 0700
            with _live_dirs_lock:
                _live_dirs.add(self._dir)
            self._finalizer = weakref.finalize(self, _remove_dir, self._dir)
        return self._dir

    def ensure(self) -> Credential:
        """The current credential (the engine's cache hit), applied to the configuration."""
        credential = self.engine.get_credential(self.profile)
        self.apply(credential)
        return credential

    async def aensure(self) -> Credential:
        credential = await self.engine.aget_credential(self.profile)
        self.apply(credential)
        return credential

    def refresh_after_401(self, rejected: Credential) -> Credential:
        self.engine.invalidate(self.plan, rejected)
        return self.ensure()

    async def arefresh_after_401(self, rejected: Credential) -> Credential:
        self.engine.invalidate(self.plan, rejected)
        return await self.aensure()

    def close(self) -> None:
        self.engine._unregister_adapter(self)
        if self._finalizer is not None:
            self._finalizer()
        conf = self.configuration
        conf.cert_file = conf.key_file = None


def _remove_dir(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)
    with _live_dirs_lock:
        _live_dirs.discard(path)


def _configure_endpoint(conf: Any, plan: AccessPlan) -> None:
    cluster = plan.cluster
    conf.host = cluster.server.rstrip("/")
    if cluster.certificate_authority_data:
        # The clients hand this to ssl's cadata, which takes PEM only as str (bytes mean DER).
        conf.ca_cert_data = cluster.certificate_authority_data.decode("ascii", "replace")
    if cluster.tls_server_name:
        conf.tls_server_name = cluster.tls_server_name
    conf.verify_ssl = not cluster.insecure_skip_tls_verify
    if cluster.proxy_url:
        conf.proxy = cluster.proxy_url


def _hook(binding: CredentialBinding) -> Any:
    def refresh_api_key_hook(_conf: Any) -> None:
        binding.ensure()

    return refresh_api_key_hook


def _ahook(binding: CredentialBinding) -> Any:
    async def refresh_api_key_hook(_conf: Any) -> None:
        await binding.aensure()

    return refresh_api_key_hook


def _new_sync_config(engine: CredentialEngine, profile: Any) -> tuple[Any, CredentialBinding]:
    from kubernetes import client

    conf = client.Configuration()
    binding = CredentialBinding(engine, profile, conf)
    _configure_endpoint(conf, binding.plan)
    binding.ensure()  # fail now, and seed api_key so the client calls the hook on every request
    conf.refresh_api_key_hook = _hook(binding)
    return conf, binding


def build_config(engine: CredentialEngine, profile: ClusterProfileLike) -> Any:
    """A ``kubernetes.client.Configuration`` for the profile that stays fresh (see module doc)."""
    conf, binding = _new_sync_config(engine, profile)
    conf.cpcreds_binding = binding
    return conf


def api_client(engine: CredentialEngine, profile: ClusterProfileLike) -> Any:
    """A ``kubernetes.client.ApiClient`` for the profile: fresh credentials, 401 -> refresh and
    retry once, connection pool renewed when the client certificate rotates."""
    from kubernetes import client
    from kubernetes.client import rest

    class CredentialedApiClient(client.ApiClient):
        def __init__(self, configuration: Any, binding: CredentialBinding) -> None:
            super().__init__(configuration)
            self._binding = binding
            self._cert_serial = binding.cert_serial
            self._rotation_lock = threading.Lock()

        def _renew_pool_if_rotated(self) -> None:
            # A new REST client, not just pool_manager.clear(): the PoolManager captured cert_file
            # when it was built (None if the first credential was a token-only one).
            if self._binding.cert_serial == self._cert_serial:
                return
            with self._rotation_lock:
                if self._binding.cert_serial == self._cert_serial:
                    return
                self._cert_serial = self._binding.cert_serial
                old, self.rest_client = self.rest_client, rest.RESTClientObject(self.configuration)
            old.close()  # idle keep-alive connections still present the old certificate

        def call_api(self, method: str, url: str, header_params: Any = None, *args: Any, **kwargs: Any) -> Any:
            credential = self._binding.ensure()
            self._renew_pool_if_rotated()
            # The header was filled by the hook during serialisation; send the credential that a
            # 401 will invalidate, even if a refresh landed in between.
            response = super().call_api(method, url, _with_auth(header_params, credential), *args, **kwargs)
            if response.status != 401:
                return response
            # Drain the 401 first (read() keeps the body for the caller) so its connection goes
            # back to the pool even when the refresh below raises.
            response.read()
            fresh = self._binding.refresh_after_401(credential)
            if fresh is credential:
                return response
            self._renew_pool_if_rotated()
            return super().call_api(method, url, _with_auth(header_params, fresh), *args, **kwargs)

        def close(self) -> None:
            try:
                super().close()
            finally:
                self._binding.close()

    conf, binding = _new_sync_config(engine, profile)
    return CredentialedApiClient(conf, binding)


async def _new_async_config(engine: CredentialEngine, profile: Any) -> tuple[Any, CredentialBinding]:
    from kubernetes.aio import client

    conf = client.Configuration()
    binding = CredentialBinding(engine, profile, conf)
    _configure_endpoint(conf, binding.plan)
    await binding.aensure()
    conf.refresh_api_key_hook = _ahook(binding)
    return conf, binding


async def abuild_config(engine: CredentialEngine, profile: ClusterProfileLike) -> Any:
    """A ``kubernetes.aio.client.Configuration`` for the profile that stays fresh."""
    conf, binding = await _new_async_config(engine, profile)
    conf.cpcreds_binding = binding
    return conf


async def aapi_client(engine: CredentialEngine, profile: ClusterProfileLike) -> Any:
    """A ``kubernetes.aio.client.ApiClient``: as :func:`api_client`, for asyncio."""
    from kubernetes.aio import client
    from kubernetes.aio.client import rest

    class CredentialedApiClient(client.ApiClient):
        def __init__(self, configuration: Any, binding: CredentialBinding) -> None:
            super().__init__(configuration)
            self._binding = binding
            self._cert_serial = binding.cert_serial

        async def _renew_session_if_rotated(self) -> None:
            # kubernetes.aio loads the certificate into its SSL context once, when the REST client
            # is built; a new certificate needs a new REST client (context, session, retry client).
            if self._binding.cert_serial == self._cert_serial:
                return
            self._cert_serial = self._binding.cert_serial  # before the await: one task renews
            old, self.rest_client = self.rest_client, rest.RESTClientObject(self.configuration)
            # Closing drops the old certificate's connections, open ones included, as client-go
            # does on rotation; watches on them end and are re-established by their callers.
            await old.close()

        async def call_api(self, method: str, url: str, header_params: Any = None, *args: Any, **kwargs: Any) -> Any:
            credential = await self._binding.aensure()
            await self._renew_session_if_rotated()
            response = await super().call_api(method, url, _with_auth(header_params, credential), *args, **kwargs)
            if response.status != 401:
                return response
            await response.read()  # release the 401's connection, even if the refresh raises
            fresh = await self._binding.arefresh_after_401(credential)
            if fresh is credential:
                return response
            await self._renew_session_if_rotated()
            return await super().call_api(method, url, _with_auth(header_params, fresh), *args, **kwargs)

        async def close(self) -> None:
            try:
                await super().close()
            finally:
                self._binding.close()

    conf, binding = await _new_async_config(engine, profile)
    return CredentialedApiClient(conf, binding)


ClusterProfileLike = Mapping[str, Any] | Any
