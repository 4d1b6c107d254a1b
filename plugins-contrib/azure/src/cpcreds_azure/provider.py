"""Entra ID access tokens for AKS clusters, as ``kubelogin get-token`` gets them for a service,
and ACR refresh tokens for the kubelet. The options are :class:`~cpcreds_azure.options.AzureOptions`
(``cpcreds-azure --help`` lists them); the login modes are in :mod:`cpcreds_azure.identity`.

Every cluster of a provider entry gets the same token (the identity and the server ID are the
entry's), so the provider holds one token per scope and shares it across plans. That is not a
second cache: a plan gets the held token only if it has not had it yet (a plan asks again when
its credential is expiring or was refused with a 401) and the token is outside the engine's
refresh-ahead window; anything else fetches a new one.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from cpcreds.sdk import Abort, Credential, Deadline, ImageCredentialError, ProviderError, RefreshPolicy, deadline, get_logger, jwt_expiry, safe_summary

from .audience import audience_of, is_for, resource_of, shown
from .identity import IdentityError, PodIdentity, build_credential, describe, pod_credential, pod_identity, tenant
from .options import AzureOptions
from .transport import ABSENT, BoundedTransport

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: an exec plugin's run loads no KEP-2133 types
    from cpcreds.sdk import AccessPlan, CredentialProviderRequest, CredentialProviderResponse

__all__ = ["AzureProvider", "MAX_TOKEN_SECONDS"]

_log = get_logger(__name__)
# RFC 6750 b64token: what may follow "Bearer " in an Authorization header.
_BEARER_TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_MAX_TOKEN_CHARS = 16 * 1024
#: Entra ID access tokens live at most a day: a longer claim is not believed.
MAX_TOKEN_SECONDS = 24 * 3600
#: The ARM audience of kubelogin's --environment clouds, for acrAudience arm and a registry of no known cloud.
_ARM_BY_ENVIRONMENT = {
    "AzurePublicCloud": "https://management.azure.com",
    "AzureChinaCloud": "https://management.chinacloudapi.cn",
    "AzureUSGovernmentCloud": "https://management.usgovcloudapi.net",
}
# The engine's default refresh-ahead window: a call inside it wants a new token.
_ENGINE_REFRESH = RefreshPolicy()


@dataclass(frozen=True)
class _Held:
    credential: Credential
    refresh_at: float  # wall clock: from here on a call gets a new token
    given: set[str] = field(default_factory=set)  # keys of the plans that have this token


class AzureProvider:
    """Built once per config entry (no I/O); ``get_credential`` is safe to call from many threads.

    Fetches are serialised (one at a time per provider), each bounded by ``plan.timeout``
    (the Azure CLI's process too).
    """

    kind = "azure"
    #: What ``cpcreds-azure --help`` lists and its flags may set.
    options_model = AzureOptions

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.options = AzureOptions.read(options)
        self._lock = threading.Lock()
        self._held: dict[str, _Held] = {}
        self._transport: BoundedTransport | None = None
        self._credential: Any = None

    # -- the provider protocol ---------------------------------------------------------------

    def get_credential(self, plan: AccessPlan) -> Credential:
        scope = self.options.scope
        # The fetch's deadline (cpcreds.sdk): it ends before the caller's timeout, so that the
        # error naming the endpoint is the one the caller sees.
        until = deadline(plan.timeout)
        with self._locked(until, plan.provider):
            held = self._held.get(scope)
            if held is None or plan.key in held.given or time.time() >= held.refresh_at:
                held = self._fetch(scope, until, plan.provider)
            held.given.add(plan.key)
            return held.credential

    def get_image_credential(self, request: CredentialProviderRequest, *, timeout: float) -> CredentialProviderResponse:
        """An ACR refresh token for the image's registry (see :mod:`cpcreds_azure.acr`): an Entra
        token for ``acrAudience``, exchanged at ``https://<registry>/oauth2/exchange``. An image
        that is not ACR's gets no credentials. With the pod's service-account token (KEP-4412) and
        a client-id annotation, the pod's own identity gets the Entra token (see
        :func:`~cpcreds_azure.identity.pod_identity`), fetched for this request alone."""
        from . import acr

        options = self.options
        target = acr.target_of(request.image, options.acr_suffixes, options.registries, options.registry_mirror)
        registry = target.login_server
        if not registry:
            return acr.no_credentials()
        audience = options.acr_audience
        if audience == "arm":
            public = acr.ACR_SUFFIXES[".azurecr.io"]
            audience = acr.arm_audience(registry, acr.ACR_SUFFIXES, _ARM_BY_ENVIRONMENT.get(options.environment or "", public))
        scope = f"{audience}/.default"
        pod = None
        if not target.source:  # a mirror serves the node, as acr-credential-provider has it
            try:
                pod = pod_identity(request.service_account_token, request.service_account_annotations, options)
            except IdentityError as exc:
                raise ImageCredentialError(f"azure: {exc}") from None
        until = deadline(timeout)
        with self._locked(until, self.kind):
            if pod is not None:
                entra = self._fetch(scope, until, self.kind, pod=pod)
                held = self._exchange(registry, entra.credential.token or "", until, pod.tenant_id)
            else:
                key = f"acr:{registry}"
                held = self._held.get(key)
                if held is None or time.time() >= held.refresh_at:
                    entra = self._held.get(scope)
                    if entra is None or time.time() >= entra.refresh_at:
                        entra = self._fetch(scope, until, self.kind)
                    held = self._exchange(registry, entra.credential.token or "", until, tenant(options, os.environ))
                    self._held[key] = held
            token, refresh_at = held.credential.token, held.refresh_at
        assert token is not None
        return acr.image_response(target, token, refresh_at - time.time())

    def close(self) -> None:
        with self._lock:
            credential, self._credential = self._credential, None
            transport, self._transport = self._transport, None
        for thing in (credential, transport):
            close = getattr(thing, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:  # noqa: BLE001 - closing is best effort
                    pass

    # -- fetching ------------------------------------------------------------------------------

    @contextmanager
    def _locked(self, until: Deadline, provider: str) -> Iterator[None]:
        """Holds the provider's lock: one fetch at a time, waiting at most until ``until`` for it."""
        if not self._lock.acquire(timeout=max(0.0, until.remaining())):
            raise ProviderError(f"azure: another token fetch did not finish within the {until.shown()} timeout", provider=provider)
        try:
            yield
        finally:
            self._lock.release()

    def _fetch(self, scope: str, until: Deadline, provider: str, pod: PodIdentity | None = None) -> _Held:
        """A token for ``scope`` by the provider's identity (held for the next call), or by ``pod``'s
        (a credential of its own, neither kept nor held)."""
        if self._transport is None:
            self._transport = BoundedTransport()
        transport = self._transport
        transport.begin(until)
        problem = None
        credential = self._credential
        try:
            if pod is not None:
                credential = pod_credential(pod, self.options, transport)
            elif credential is None or self.options.login in ("azurecli", "default"):
                # The CLI's process timeout is fixed when the credential is built: build it per fetch.
                credential = build_credential(self.options, transport, max(0.0, until.remaining()))
                if self.options.login not in ("azurecli", "default"):
                    self._credential = credential
        except IdentityError as exc:
            problem = f"azure: {exc}"
        if problem is not None:
            raise ProviderError(problem, provider=provider)
        access = None
        try:
            access = credential.get_token(scope)
        except Exception as exc:  # noqa: BLE001 - azure-identity and msal raise many types; all are "no token"
            problem = self._failure(transport, exc, "the pod's workload identity" if pod is not None else describe(self.options))
        # The pod's credential (and msal's cache of its token) is dropped, not closed: closing it
        # would close the shared transport.
        # Raised outside the except block: azure-identity's exception may quote a response body.
        if problem is not None:
            raise ProviderError(problem, provider=provider)
        held = self._held_for(access, transport, provider, scope)
        if pod is None:
            self._held[scope] = held
        _log.debug("azure token obtained", login="pod" if pod else self.options.login, scope=scope, expires=held.credential.expiration_timestamp)
        return held

    def _failure(self, transport: BoundedTransport, exc: BaseException, how: str) -> str:
        last = transport.last
        if last is None:
            # Nothing went over the wire: a local step failed (a token file, a certificate, the
            # az process). Its text says which; it is redacted and cut all the same.
            return f"azure: cannot get a token by {how}: {safe_summary(exc)}"
        if isinstance(exc, Abort) or not last.ok:
            return f"azure: {last.describe()}"
        return f"azure: {last.label} {last.url} answered without a usable token"

    def _held_for(self, access: Any, transport: BoundedTransport, provider: str, scope: str) -> _Held:
        token = getattr(access, "token", None)
        last = transport.last
        where = f"{last.label} {last.url}" if last is not None else describe(self.options)
        if not isinstance(token, str) or not token or len(token) > _MAX_TOKEN_CHARS or not _BEARER_TOKEN.fullmatch(token):
            raise ProviderError(f"azure: {where} answered with a token that is not a bearer token", provider=provider)
        # The token goes to whoever serves the cluster or registry: one for another audience would
        # let that server use it elsewhere (see cpcreds_azure.audience).
        audience = audience_of(token)
        if not is_for(scope, audience):
            raise ProviderError(
                f"azure: {where} answered with a token for another audience ({shown(audience)}) than the one asked, {resource_of(scope)}",
                provider=provider,
            )
        answered = last.resource if last is not None else ABSENT
        if answered is not ABSENT and not is_for(scope, answered):
            raise ProviderError(
                f"azure: {where} answered with a token for another audience (resource {shown(answered)}) than the one asked, {resource_of(scope)}",
                provider=provider,
            )
        now = datetime.now(timezone.utc)
        expires_on = getattr(access, "expires_on", None)
        expiry = None
        if isinstance(expires_on, (int, float)) and expires_on > 0:
            expiry = datetime.fromtimestamp(min(float(expires_on), 253402300799.0), timezone.utc)
        claimed = jwt_expiry(token)
        if claimed is not None:
            expiry = claimed if expiry is None else min(expiry, claimed)
        if expiry is not None:
            if expiry <= now:
                raise ProviderError(f"azure: {where} answered with a token that has already expired", provider=provider)
            expiry = min(expiry, now + timedelta(seconds=MAX_TOKEN_SECONDS))
        credential = Credential(token=token, expiration_timestamp=expiry)
        at = time.time()
        refresh_at = _ENGINE_REFRESH.refresh_at(at, expiry.timestamp()) if expiry is not None else at
        return _Held(credential, refresh_at)

    def _exchange(self, registry: str, access_token: str, until: Deadline, tenant_id: str | None) -> _Held:
        from azure.core.rest import HttpRequest

        from . import acr

        assert self._transport is not None
        transport = self._transport
        transport.begin(until)  # the Entra token may have been held: this fetch's deadline, not its
        form = {"grant_type": "access_token", "service": registry.lower(), "access_token": access_token}
        if tenant_id:
            form["tenant"] = tenant_id
        request = HttpRequest("POST", f"https://{registry.lower()}/oauth2/exchange", data=form)
        problem = None
        response = None
        try:
            response = transport.send(request)
        except Abort:
            problem = f"azure: {transport.last.describe() if transport.last else 'ACR token exchange failed'}"
        if problem is not None:
            raise ImageCredentialError(problem)
        last = transport.last
        assert response is not None and last is not None
        if not last.ok:
            raise ImageCredentialError(f"azure: {last.describe()}")
        token = acr.parse_refresh_token(response.content)
        if token is None:
            raise ImageCredentialError(f"azure: {last.label} {last.url} answered without a usable refresh token")
        expiry = jwt_expiry(token)
        now = time.time()
        refresh_at = _ENGINE_REFRESH.refresh_at(now, expiry.timestamp()) if expiry is not None and expiry.timestamp() > now else now
        return _Held(Credential(token=token, expiration_timestamp=expiry), refresh_at)
