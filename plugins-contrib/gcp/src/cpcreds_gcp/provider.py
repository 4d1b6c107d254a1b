"""Google OAuth access tokens for GKE clusters, as ``gke-gcloud-auth-plugin
--use_application_default_credentials`` gives them: from the ``credentialsFile`` option, else
application default credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud's well-known file, the
metadata server at GCE_METADATA_HOST or found by probing), optionally impersonating a service
account. The options are :class:`~cpcreds_gcp.options.GcpOptions` (``cpcreds-gcp --help``
lists them).

Every cluster of a provider entry gets the same token (a Google identity is not per cluster), so
the provider keeps one google-auth credentials object and shares its token across plans. That is
not a second cache: the engine decides when to call, and a call gets the held token only if its
plan has not had it yet (a plan asks again when its credential is expiring or was refused with a
401), google-auth still calls it valid, and it is outside the engine's refresh-ahead window;
anything else refreshes it.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from cpcreds.sdk import (
    Abort,
    AccessPlan,
    Credential,
    CredentialProviderRequest,
    CredentialProviderResponse,
    ExecCluster,
    ProviderError,
    RefreshPolicy,
    deadline,
    get_logger,
    safe_summary,
)

from .adc import Source, SourceError, find_source
from .kubelet import empty_response, image_response, is_google_registry
from .metadata import MAX_TOKEN_SECONDS, UnusableAnswer
from .options import GcpOptions
from .podidentity import PodIdentityError, pod_identity, pod_source
from .transport import BoundedRequest, Pools

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cpcreds.sdk import Deadline

__all__ = ["GcpProvider"]

_log = get_logger(__name__)
# RFC 6750 b64token: what may follow "Bearer " in an Authorization header.
_BEARER_TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_MAX_TOKEN_CHARS = 16 * 1024
# The engine's default refresh-ahead window: a call inside it wants a new token.
_ENGINE_REFRESH = RefreshPolicy()
# Image requests name no cluster: the token is the same for every cluster and registry anyway.
_NO_CLUSTER = ExecCluster(server="")


@dataclass(frozen=True)
class _Held:
    credential: Credential
    refresh_at: float  # wall clock: from here on a call gets a new token
    given: set[str] = field(default_factory=set)  # keys of the plans that have this token


def _aware_utc(expiry: Any) -> datetime | None:
    # google-auth keeps expiry as a naive datetime in UTC. Calling .timestamp() on it would read
    # it as local time, off by the UTC offset; say that it is UTC instead.
    if not isinstance(expiry, datetime):
        return None
    return expiry.replace(tzinfo=timezone.utc) if expiry.tzinfo is None else expiry.astimezone(timezone.utc)


class GcpProvider:
    """Built once per config entry (no I/O); ``get_credential`` is safe to call from many threads.

    One google-auth credentials object per provider, refreshed under a lock (google-auth
    credentials are not thread-safe). Every network call is bounded by ``plan.timeout``.
    """

    kind = "gcp"
    #: What ``cpcreds-gcp --help`` lists and its flags may set.
    options_model = GcpOptions

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.options = GcpOptions.read(options)
        # Guards everything below, and the refresh itself: one refresh at a time per provider.
        self._lock = threading.Lock()
        self._source: Source | None = None
        self._held: _Held | None = None
        self._pools = Pools()

    def get_credential(self, plan: AccessPlan) -> Credential:
        # The fetch's deadline (cpcreds.sdk): it ends before the caller's timeout, so that the
        # error naming the endpoint is the one the caller sees.
        until = deadline(plan.timeout)
        if not self._lock.acquire(timeout=max(0.0, until.remaining())):
            raise ProviderError(f"gcp: another token refresh did not finish within the {until.shown()} timeout", provider=plan.provider)
        try:
            held = self._held
            if held is None or not self._reusable(held, plan):
                held = self._refresh(plan, until)
            held.given.add(plan.key)
            return held.credential
        finally:
            self._lock.release()

    def get_image_credential(self, request: CredentialProviderRequest, *, timeout: float) -> CredentialProviderResponse:
        """The token for Google's registries (KEP-2133; see :mod:`cpcreds_gcp.kubelet`); an empty
        success for an image outside them. With the pod's service account token and the pod's
        identity asked for (KEP-4412, :mod:`cpcreds_gcp.podidentity`): a token of the pod's
        identity, never held for another request. Otherwise the same credentials as
        ``get_credential``: the held token while it is outside its refresh window, else a new one."""
        if not is_google_registry(request.image):
            return empty_response()
        problem = None
        try:
            identity = pod_identity(self.options, request)
        except PodIdentityError as exc:
            problem = f"gcp: {exc}"
        if problem is not None:
            raise ProviderError(problem, provider=self.kind)
        plan = AccessPlan(provider=self.kind, kind=self.kind, cluster=_NO_CLUSTER, timeout=timeout)
        until = deadline(timeout)
        if identity is not None:
            assert request.service_account_token is not None  # pod_identity refuses a request without one
            source = pod_source(identity, request.service_account_token, self.options)
            held = self._fetch(source, plan, self._request(until))
            return image_response(held.credential.token or "", held.refresh_at - time.time())
        if not self._lock.acquire(timeout=max(0.0, until.remaining())):
            raise ProviderError(f"gcp: another token refresh did not finish within the {until.shown()} timeout", provider=self.kind)
        try:
            held = self._held
            if held is None or not self._fresh(held):
                held = self._refresh(plan, until)
            token = held.credential.token
            refresh_at = held.refresh_at
        finally:
            self._lock.release()
        assert token is not None  # _credential refuses anything but a bearer token
        return image_response(token, refresh_at - time.time())

    def close(self) -> None:
        self._pools.close()

    def _reusable(self, held: _Held, plan: AccessPlan) -> bool:
        # A plan that already has this token asks again because the engine wants a new one
        # (expiring, or refused with a 401): it must not get the same one back.
        if plan.key in held.given:
            return False
        return self._fresh(held)

    def _fresh(self, held: _Held) -> bool:
        credentials = self._source.credentials if self._source is not None else None
        return bool(credentials is not None and credentials.valid and time.time() < held.refresh_at)

    def _request(self, deadline: Deadline) -> BoundedRequest:
        return BoundedRequest(self._pools, deadline)

    def _refresh(self, plan: AccessPlan, deadline: Deadline) -> _Held:
        request = self._request(deadline)
        problem = None
        if self._source is not None and self._source.changed():
            # A rotated key (or a new federation config) is read again; the token it gave is
            # not reused either.
            self._source, self._held = None, None
        if self._source is None:
            try:
                self._source = find_source(self.options, request)
            except SourceError as exc:
                problem = str(exc)
            if problem is not None:
                raise ProviderError(f"gcp: {problem}", provider=plan.provider)
        assert self._source is not None
        self._held = self._fetch(self._source, plan, request)
        _log.debug("gcp token obtained", source=self._source.description, expires=self._held.credential.expiration_timestamp)
        return self._held

    def _fetch(self, source: Source, plan: AccessPlan, request: BoundedRequest) -> _Held:
        """A new token from ``source`` through ``request``, and when it is to be refreshed."""
        problem = None
        request.labels.update(source.endpoints)
        request.direct.update(source.direct)
        request.exchanges.clear()
        try:
            source.credentials.refresh(request)
        except Exception as exc:  # noqa: BLE001 - google-auth raises many types; all are "no token"
            problem = self._failure(source, request, exc)
        # Raised outside the except block: google-auth's exception may quote a response body.
        if problem is not None:
            raise ProviderError(problem, provider=plan.provider)
        credential = self._credential(source, request, plan.provider)
        now = time.time()
        expiry = credential.expiration_timestamp
        refresh_at = _ENGINE_REFRESH.refresh_at(now, expiry.timestamp()) if expiry is not None else now
        return _Held(credential, refresh_at)

    @staticmethod
    def _failure(source: Source, request: BoundedRequest, exc: BaseException) -> str:
        last = request.last
        if last is None:
            # Nothing went over the wire: a local step failed (signing, a subject-token file, an
            # executable). google-auth's text says which; it is redacted and cut all the same.
            return f"gcp: cannot get a token from {source.description}: {safe_summary(exc)}"
        if isinstance(exc, Abort) or last.failure is not None or last.status is None or not 200 <= last.status < 300:
            return f"gcp: {last.describe()}"
        reason = str(exc) if isinstance(exc, UnusableAnswer) else "answered without a usable token"
        return f"gcp: {last.label} {last.url} {reason}"

    @staticmethod
    def _credential(source: Source, request: BoundedRequest, provider: str) -> Credential:
        token = source.credentials.token
        last = request.last
        where = f"{last.label} {last.url}" if last is not None else source.description
        if not isinstance(token, str) or not token or len(token) > _MAX_TOKEN_CHARS or not _BEARER_TOKEN.fullmatch(token):
            raise ProviderError(f"gcp: {where} answered with a token that is not a bearer token", provider=provider)
        now = datetime.now(timezone.utc)
        expiry = _aware_utc(source.credentials.expiry)
        if expiry is not None:
            if expiry <= now:
                raise ProviderError(f"gcp: {where} answered with a token that has already expired", provider=provider)
            # Google access tokens live at most 12 hours: a longer claim is not believed.
            expiry = min(expiry, now + timedelta(seconds=MAX_TOKEN_SECONDS))
        return Credential(token=token, expiration_timestamp=expiry)
