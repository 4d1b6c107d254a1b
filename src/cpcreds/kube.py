"""Adapters to the official ``kubernetes`` client (sync) and ``kubernetes.aio``.

Each adapter ties one ClusterProfile to a client ``Configuration``:

- endpoint and TLS from the profile: host, ``ca_cert_data`` (in memory, no temp CA file),
  tls-server-name, insecure-skip-tls-verify, proxy-url (when the profile names none, the client's
  own HTTPS_PROXY/NO_PROXY handling applies);
- a bearer token through ``refresh_api_key_hook``, seeded so the client calls the hook on every
  request; the hook is the engine's cache hit (microseconds) or, near expiry, its refresh;
- client certificates through files in a private 0700 directory (0600 files, replaced atomically
  on rotation, removed on close and at exit), because both clients only take certificate paths;
  on rotation the connection pool is dropped so new connections present the new certificate;
- ``api_client()`` retries a request once after a 401, with a credential fetched after
  :meth:`CredentialEngine.invalidate` — never with no credential: a failing provider raises a
  :class:`~cpcreds.CredentialError` and no request is sent.
"""

from __future__ import annotations

import atexit
import os
import shutil
import ssl
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
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(data)
    os.replace(tmp, path)  # readers see the old file or the new one, never half of one
    return path


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

    # The engine tells adapters about new credentials; bindings pick them up on the next request.
    def credential_changed(self, plan: AccessPlan, credential: Credential) -> None:
        return None

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
                    directory = self._private_dir()
                    conf.cert_file = _write_private(directory, "client.crt", credential.client_certificate_data)
                    conf.key_file = _write_private(directory, "client.key", credential.client_key_data)
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

    class CredentialedApiClient(client.ApiClient):
        def __init__(self, configuration: Any, binding: CredentialBinding) -> None:
            super().__init__(configuration)
            self._binding = binding
            self._cert_serial = binding.cert_serial

        def _renew_pool_if_rotated(self) -> None:
            if self._binding.cert_serial != self._cert_serial:
                self._cert_serial = self._binding.cert_serial
                self.rest_client.pool_manager.clear()  # new connections load the new files

        def call_api(self, method: str, url: str, header_params: Any = None, *args: Any, **kwargs: Any) -> Any:
            credential = self._binding.ensure()
            self._renew_pool_if_rotated()
            response = super().call_api(method, url, header_params, *args, **kwargs)
            if response.status != 401:
                return response
            fresh = self._binding.refresh_after_401(credential)
            if fresh is credential:
                return response
            self._renew_pool_if_rotated()
            headers = dict(header_params or {})
            if fresh.token:
                headers["Authorization"] = f"Bearer {fresh.token}"
            return super().call_api(method, url, headers, *args, **kwargs)

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

    class CredentialedApiClient(client.ApiClient):
        def __init__(self, configuration: Any, binding: CredentialBinding) -> None:
            super().__init__(configuration)
            self._binding = binding
            self._cert_serial = binding.cert_serial

        async def _renew_session_if_rotated(self) -> None:
            # kubernetes.aio builds its SSL context once; a new certificate needs a new context
            # and a new session, which the REST client creates lazily on the next request.
            if self._binding.cert_serial == self._cert_serial:
                return
            self._cert_serial = self._binding.cert_serial
            rest = self.rest_client
            conf = self.configuration
            context = ssl.create_default_context(cafile=conf.ssl_ca_cert, cadata=conf.ca_cert_data)
            if conf.cert_file:
                context.load_cert_chain(conf.cert_file, keyfile=conf.key_file)
            if not conf.verify_ssl:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            old_session, old_retry = rest.pool_manager, rest.retry_client
            rest.ssl_context, rest.pool_manager, rest.retry_client = context, None, None
            if old_retry is not None:
                await old_retry.close()
            if old_session is not None:
                await old_session.close()

        async def call_api(self, method: str, url: str, header_params: Any = None, *args: Any, **kwargs: Any) -> Any:
            credential = await self._binding.aensure()
            await self._renew_session_if_rotated()
            response = await super().call_api(method, url, header_params, *args, **kwargs)
            if response.status != 401:
                return response
            fresh = await self._binding.arefresh_after_401(credential)
            if fresh is credential:
                return response
            await self._renew_session_if_rotated()
            headers = dict(header_params or {})
            if fresh.token:
                headers["Authorization"] = f"Bearer {fresh.token}"
            return await super().call_api(method, url, headers, *args, **kwargs)

        async def close(self) -> None:
            try:
                await super().close()
            finally:
                self._binding.close()

    conf, binding = await _new_async_config(engine, profile)
    return CredentialedApiClient(conf, binding)


ClusterProfileLike = Mapping[str, Any] | Any
