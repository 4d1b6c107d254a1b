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

__all__ = ["GcpOptions", "DEFAULT_SCOPES", "DEFAULT_IAM_ENDPOINT", "MAX_LIFETIME_SECONDS"]

#: What gke-gcloud-auth-plugin asks for: cloud-platform to reach GKE, userinfo.email so that the
#: cluster sees the service account's email rather than its numeric ID.
DEFAULT_SCOPES: tuple[str, ...] = (
    "https://www.googleapis.com/auth/cloud-platform",
    "https://www.googleapis.com/auth/userinfo.email",
)
DEFAULT_IAM_ENDPOINT = "https://iamcredentials.googleapis.com"
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


def _check_account(value: str, what: str) -> str:
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


def _target(value: str) -> str:
    return _check_account(value, "the value")


def _delegates(value: Any) -> tuple[str, ...]:
    chain = []
    for item in _split(value, "service account"):
        # IAM wants projects/-/serviceAccounts/<email>; users write the email.
        account = item[len(_DELEGATE_PREFIX) :] if item.startswith(_DELEGATE_PREFIX) else item
        chain.append(_DELEGATE_PREFIX + _check_account(account, "each delegate"))
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
    ``--use_application_default_credentials`` is accepted and changes nothing."""

    # This docstring and each option's description are what `cpcreds-gcp --help` shows.

    scopes: tuple[str, ...] = option(DEFAULT_SCOPES, parse=_scopes, description="OAuth scopes of the access token (a flag also takes a,b).")
    credentials_file: Path | None = option(
        None,
        names=("credentialsFile",),
        check=_file,
        description="A credentials JSON file to use instead of looking for application default credentials.",
    )
    impersonate_service_account: str | None = option(
        None,
        names=("impersonateServiceAccount",),
        check=_target,
        description="Exchange the found credentials for a token of this service account (its email or unique ID; IAM Credentials API).",
    )
    delegates: tuple[str, ...] = option(
        (), parse=_delegates, description="The delegation chain from the found identity to impersonateServiceAccount (a flag also takes a,b)."
    )
    #: Whole seconds once read.
    lifetime: Duration | None = option(
        None,
        min=1,
        max=MAX_LIFETIME_SECONDS,
        check=_whole_seconds,
        description="Lifetime of an impersonated token (30m, 1h), at most 12h. Unset: 1h.",
    )
    iam_endpoint: str = option(
        DEFAULT_IAM_ENDPOINT,
        names=("iamEndpoint",),
        check=_endpoint,
        description="Base URL of the IAM Credentials API (a private or regional endpoint).",
    )

    def check_options(self) -> None:
        if self.impersonate_service_account is None:
            given = [name for name, set_ in (("delegates", bool(self.delegates)), ("lifetime", self.lifetime is not None),
                                             ("iamEndpoint", self.iam_endpoint != DEFAULT_IAM_ENDPOINT)) if set_]
            if given:
                verb = "applies" if len(given) == 1 else "apply"
                raise ValueError(f"{' and '.join(given) if len(given) < 3 else ', '.join(given)} {verb} only with impersonateServiceAccount")

    def impersonation_url(self) -> str | None:
        """The generateAccessToken URL for ``impersonateServiceAccount``, or ``None``."""
        if self.impersonate_service_account is None:
            return None
        return f"{self.iam_endpoint}/v1/{_DELEGATE_PREFIX}{self.impersonate_service_account}:generateAccessToken"
