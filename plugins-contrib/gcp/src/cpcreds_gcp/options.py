"""The ``options:`` of a ``type: gcp`` provider entry (and the flags of ``cpcreds-gcp``).

Values arrive from YAML (lists, numbers) or from command-line flags (always strings, a list of
strings when a flag is repeated), so list options also take one comma-separated string.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cpcreds.sdk import Duration, Options, option

__all__ = ["GcpOptions", "DEFAULT_SCOPES", "DEFAULT_IAM_ENDPOINT", "DEFAULT_STS_ENDPOINT", "MAX_LIFETIME_SECONDS", "check_account", "check_pool_provider"]

#: What gke-gcloud-auth-plugin asks for: cloud-platform to reach GKE, userinfo.email so that the
#: cluster sees the service account's email rather than its numeric ID.
DEFAULT_SCOPES: tuple[str, ...] = (
    "https://www.googleapis.com/auth/cloud-platform",
    "https://www.googleapis.com/auth/userinfo.email",
)
DEFAULT_IAM_ENDPOINT = "https://iamcredentials.googleapis.com"
#: Where workload identity federation exchanges a subject token (its token URL is ``/v1/token``).
DEFAULT_STS_ENDPOINT = "https://sts.googleapis.com"
#: IAM Credentials issues impersonated tokens for at most 12 hours (1 hour unless an
#: organisation policy allows longer).
MAX_LIFETIME_SECONDS = 12 * 3600
_MAX_ITEMS = 64
# A scope is an OAuth scope token (RFC 6749 section 3.3): printable ASCII, no space, no quote or
# backslash; we also refuse commas, which separate scopes in flags.
_SCOPE = re.compile(r"[\x21\x23-\x2b\x2d-\x5b\x5d-\x7e]{1,512}")
# A service account: its email, or its numeric unique ID. It goes into an IAM URL path, so
# nothing that could change the URL (/, ?, #, %, :) is allowed.
_ACCOUNT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+\-]{0,127}@[A-Za-z0-9][A-Za-z0-9.\-]{0,252}|[0-9]{1,32}")
_DELEGATE_PREFIX = "projects/-/serviceAccounts/"
# A workload identity pool provider's resource name, as STS takes it for ``audience``: pool and
# provider IDs are 4 to 32 lower-case letters, digits and hyphens (Google's rule).
_POOL_PROVIDER = re.compile(
    r"//iam\.googleapis\.com/projects/[0-9]{1,32}/locations/global/workloadIdentityPools/[a-z0-9-]{4,32}/providers/[a-z0-9-]{4,32}"
)
# A project ID: 6 to 30 lower-case letters, digits and hyphens, starting with a letter.
_PROJECT_ID = re.compile(r"[a-z][a-z0-9-]{4,28}[a-z0-9]")


def _split(value: Any, what: str) -> list[str]:
    # YAML gives a list; a flag gives "a,b" (or a list of such strings when repeated).
    items = value if isinstance(value, (list, tuple)) else [value]
    out: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise ValueError(f"must be a list of {what}s or a comma-separated string")
        out.extend(part for part in re.split(r"[,\s]+", item) if part)
    if len(out) > _MAX_ITEMS:
        raise ValueError(f"has more than {_MAX_ITEMS} {what}s")
    return out


def check_account(value: str, what: str) -> str:
    """``value`` when it is a service account email or unique ID, else ``ValueError`` naming ``what``."""
    if not _ACCOUNT.fullmatch(value):
        raise ValueError(f"{what} must be a service account email or unique ID")
    return value


def _scopes(value: Any) -> tuple[str, ...]:
    scopes = _split(value, "scope")
    if not scopes:
        raise ValueError("must name at least one scope")
    for scope in scopes:
        if not _SCOPE.fullmatch(scope):
            raise ValueError("each scope must be printable ASCII without spaces, quotes or commas, at most 512 characters")
    return tuple(dict.fromkeys(scopes))  # in order, without repeats


def _file(value: Path) -> Path:
    if not str(value).strip():
        raise ValueError("must not be empty")
    return value.expanduser()


def check_pool_provider(value: str, what: str = "the value") -> str:
    """``value`` when it is a workload identity pool provider's resource name, else ``ValueError``."""
    if not _POOL_PROVIDER.fullmatch(value):
        raise ValueError(
            f"{what} must be a workload identity pool provider: "
            "//iam.googleapis.com/projects/NUMBER/locations/global/workloadIdentityPools/POOL/providers/PROVIDER"
        )
    return value


def _project(value: str) -> str:
    if not _PROJECT_ID.fullmatch(value):
        raise ValueError("must be a project ID: 6 to 30 lower-case letters, digits and hyphens, starting with a letter")
    return value


def _url(value: str) -> str:
    # auth-provider-gcp's --identity-provider: the cluster's URL, which becomes part of the STS audience.
    parts = urlsplit(value)
    if parts.scheme not in ("https", "http") or not parts.hostname or len(value) > 512 or not value.isprintable() or " " in value:
        raise ValueError("must be an http(s) URL such as https://container.googleapis.com/v1/projects/P/locations/L/clusters/C")
    return value


def _target(value: str) -> str:
    return check_account(value, "the value")


def _delegates(value: Any) -> tuple[str, ...]:
    chain = []
    for item in _split(value, "service account"):
        # IAM wants projects/-/serviceAccounts/<email>; users write the email.
        account = item[len(_DELEGATE_PREFIX) :] if item.startswith(_DELEGATE_PREFIX) else item
        chain.append(_DELEGATE_PREFIX + check_account(account, "each delegate"))
    return tuple(chain)


def _whole_seconds(seconds: float) -> int:
    return int(-(-seconds // 1))  # IAM takes whole seconds; round up


def _endpoint(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("https", "http") or not parts.hostname or parts.query or parts.fragment or "@" in parts.netloc:
        raise ValueError("must be an http(s) URL such as https://iamcredentials.googleapis.com")
    return value.rstrip("/")


class GcpOptions(Options):
    """Google OAuth access tokens, as ``gke-gcloud-auth-plugin --use_application_default_credentials``
    gives them: from ``credentialsFile``, else application default credentials
    (GOOGLE_APPLICATION_CREDENTIALS, gcloud's well-known file, the metadata server), optionally
    impersonating a service account. Every option has a default, so ``type: gcp`` alone means
    application default credentials with gke-gcloud-auth-plugin's scopes. The flag
    ``--use_application_default_credentials`` is accepted and changes nothing. For image pulls
    with the pod's own identity (KEP-4412): workloadIdentityProvider (or auth-provider-gcp's
    identityProvider and projectId), requireServiceAccount and stsEndpoint."""

    # This docstring and each option's description are what `cpcreds-gcp --help` shows. One
    # declaration a line where it fits: the names are the config's camelCase spellings.

    scopes: tuple[str, ...] = option(DEFAULT_SCOPES, parse=_scopes, description="OAuth scopes of the access token (a flag also takes a,b).")
    credentials_file: Path | None = option(None, names=("credentialsFile",), check=_file, description=(
        "A credentials JSON file to use instead of looking for application default credentials."))
    impersonate_service_account: str | None = option(None, names=("impersonateServiceAccount",), check=_target, description=(
        "Exchange the found credentials for a token of this service account (its email or unique ID; IAM Credentials API)."))
    delegates: tuple[str, ...] = option((), parse=_delegates, description=(
        "The delegation chain from the found identity to impersonateServiceAccount (a flag also takes a,b)."))
    #: Whole seconds once read.
    lifetime: Duration | None = option(None, min=1, max=MAX_LIFETIME_SECONDS, check=_whole_seconds, description=(
        "Lifetime of an impersonated token (30m, 1h), at most 12h. Unset: 1h."))
    iam_endpoint: str = option(DEFAULT_IAM_ENDPOINT, names=("iamEndpoint",), check=_endpoint, description=(
        "Base URL of the IAM Credentials API (a private or regional endpoint)."))
    workload_identity_provider: str | None = option(None, names=("workloadIdentityProvider",), check=check_pool_provider, description=(
        "Image pulls: the workload identity pool provider that exchanges the pod's service account token "
        "(//iam.googleapis.com/projects/NUMBER/locations/global/workloadIdentityPools/POOL/providers/PROVIDER)."))
    identity_provider: str | None = option(None, names=("identityProvider",), check=_url, description=(
        "Image pulls, as auth-provider-gcp's --identity-provider: the cluster URL of GKE's identity namespace (needs projectId)."))
    project_id: str | None = option(None, names=("projectId",), check=_project, description=(
        "Image pulls, as auth-provider-gcp's --project-id: the project of the identity namespace PROJECT.svc.id.goog."))
    require_service_account: bool = option(False, names=("requireServiceAccount",), description=(
        "Image pulls: every request must carry the pod's service account token and pulls with the pod's identity "
        "(as the kubelet's tokenAttributes.requireServiceAccount: true). False: only annotated service accounts do."))
    sts_endpoint: str = option(DEFAULT_STS_ENDPOINT, names=("stsEndpoint",), check=_endpoint, description=(
        "Image pulls: base URL of the Security Token Service that exchanges the pod's token (token URL: /v1/token)."))

    def check_options(self) -> None:
        # iamEndpoint also serves the pod's identity, which an annotation may ask to impersonate.
        pod_identity = self.pool_audience() is not None or self.require_service_account or self.sts_endpoint != DEFAULT_STS_ENDPOINT
        if self.impersonate_service_account is None:
            given = [name for name, set_ in (("delegates", bool(self.delegates)), ("lifetime", self.lifetime is not None),
                                             ("iamEndpoint", self.iam_endpoint != DEFAULT_IAM_ENDPOINT and not pod_identity)) if set_]
            if given:
                verb = "applies" if len(given) == 1 else "apply"
                raise ValueError(f"{' and '.join(given) if len(given) < 3 else ', '.join(given)} {verb} only with impersonateServiceAccount")
        if self.identity_provider is not None and self.project_id is None:
            raise ValueError("identityProvider needs projectId (auth-provider-gcp's rule)")
        if self.identity_provider is not None and self.workload_identity_provider is not None:
            raise ValueError("set workloadIdentityProvider or identityProvider, not both")

    def impersonation_url(self, account: str | None = None) -> str | None:
        """The generateAccessToken URL for ``account`` (default: ``impersonateServiceAccount``), or ``None``."""
        account = account or self.impersonate_service_account
        if account is None:
            return None
        return f"{self.iam_endpoint}/v1/{_DELEGATE_PREFIX}{account}:generateAccessToken"

    def sts_token_url(self) -> str:
        """Where the pod's service account token is exchanged (google-auth's ``token_url``)."""
        return f"{self.sts_endpoint}/v1/token"

    def pool_audience(self) -> str | None:
        """The STS audience configured for the pod's identity: ``workloadIdentityProvider``, or
        auth-provider-gcp's ``identitynamespace:PROJECT.svc.id.goog:IDENTITY_PROVIDER``."""
        if self.identity_provider is not None:
            return f"identitynamespace:{self.project_id}.svc.id.goog:{self.identity_provider}"
        return self.workload_identity_provider
