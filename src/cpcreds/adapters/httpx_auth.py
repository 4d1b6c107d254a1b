"""An ``httpx.Auth`` for a ClusterProfile (httpx, and the clients built on it: lightkube, kr8s),
and the TLS settings a client needs for the profile's cluster.

The auth sets ``Authorization: Bearer`` from the binding's credential on every request (the
engine's cache hit, or its refresh near expiry), and after a 401 invalidates exactly the
credential that was sent and retries once with the one fetched after it — never with none: a
failing provider raises a :class:`~cpcreds.CredentialError` and no request is sent. In a sync
client the fetch runs in the calling thread; in an ``httpx.AsyncClient`` it never runs in the
calling task.

A client certificate is part of the TLS handshake, not of a request, so an auth cannot send it:
build the client with ``verify=ssl_context(binding)``, which holds the CA of the profile's
cluster and, for a certificate credential, the certificate and key (loaded into the context,
the file they passed through removed at once). When the certificate rotates, build a new client.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import AsyncGenerator, Generator
from typing import Any

from ..engine.binding import Binding
from ..credential import Credential

__all__ = ["httpx_auth", "ssl_context"]


def _authorize(request: Any, credential: Credential) -> None:
    if credential.token:
        request.headers["Authorization"] = f"Bearer {credential.token}"
    else:
        request.headers.pop("Authorization", None)


def httpx_auth(binding: Binding) -> Any:
    """An ``httpx.Auth`` that authenticates with ``binding``'s credential (see the module doc)."""
    import httpx

    class BindingAuth(httpx.Auth):  # type: ignore[misc]
        def __init__(self, binding: Binding) -> None:
            self.binding = binding

        def sync_auth_flow(self, request: Any) -> Generator[Any, Any, None]:
            answer = self.binding.answer()
            _authorize(request, answer.credential)
            response = yield request
            if response.status_code != 401:
                return
            self.binding.invalidate(answer.credential)
            fresh = self.binding.answer()
            if fresh.credential is not answer.credential:  # the same one again: its 401 stands
                _authorize(request, fresh.credential)
                yield request

        async def async_auth_flow(self, request: Any) -> AsyncGenerator[Any, Any]:
            answer = await self.binding.aanswer()
            _authorize(request, answer.credential)
            response = yield request
            if response.status_code != 401:
                return
            self.binding.invalidate(answer.credential)
            fresh = await self.binding.aanswer()
            if fresh.credential is not answer.credential:
                _authorize(request, fresh.credential)
                yield request

        def __repr__(self) -> str:
            return f"BindingAuth({self.binding!r})"

    return BindingAuth(binding)


def ssl_context(binding: Binding) -> ssl.SSLContext:
    """An ``ssl.SSLContext`` for the profile's cluster: its CA (else the system's), no
    verification under ``insecure-skip-tls-verify``, and the client certificate and key of a
    certificate credential. Fetches the credential if it is not cached (may raise a
    :class:`~cpcreds.CredentialError`). ``tls-server-name`` is not part of a context: pass it per
    request as httpx's ``extensions={"sni_hostname": ...}``."""
    credential, plan = binding.answer()
    cluster = plan.cluster
    cadata = cluster.certificate_authority_data.decode("ascii", "replace") if cluster.certificate_authority_data else None
    context = ssl.create_default_context(cadata=cadata)
    if cluster.insecure_skip_tls_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if credential.client_certificate_data and credential.client_key_data:
        # ssl loads a key only from a file: one in a private 0700 folder, gone once loaded.
        with tempfile.TemporaryDirectory(prefix="cpcreds-tls-") as folder:
            path = os.path.join(folder, "client.pem")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(credential.client_certificate_data.rstrip("\n") + "\n" + credential.client_key_data)
            try:
                context.load_cert_chain(path)
            except ssl.SSLError:
                from ..errors import CredentialError

                raise CredentialError(f"the client certificate of provider {plan.provider!r} cannot be loaded") from None
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(path)
    return context
