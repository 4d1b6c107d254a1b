"""Credentials JSON files: read bounded, checked field by field, then handed to google-auth's
loader for their ``type``.

The file holds a private key or a refresh token, so no message here quotes a value: problems name
the field and what is wrong with it. Only the credential types an application default
credentials file may hold are accepted, each through google-auth's type-specific loader (Google
advises against the generic one, which accepts any type).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import google.auth.credentials
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from cpcreds.sdk import DocumentError, load_document, read_credential_file, safe_summary, shown_endpoint

from .options import DEFAULT_IAM_ENDPOINT

__all__ = ["CredentialsFileError", "LoadedCredentials", "read_credentials_file", "load_credentials_info", "SUPPORTED_TYPES"]

SUPPORTED_TYPES = (
    "service_account",
    "authorized_user",
    "external_account",
    "external_account_authorized_user",
    "impersonated_service_account",
)
#: A credentials file is a few KiB (an X.509-free service account key is about 2.3 KiB).
MAX_FILE_BYTES = 256 * 1024
GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"
STS_TOKEN_URL = "https://sts.googleapis.com/v1/token"
_AWS_SUBJECT_TOKEN_TYPE = "urn:ietf:params:aws:token-type:aws4_request"
_SHOWN_TYPE = re.compile(r"[a-z_]{1,40}")


class CredentialsFileError(ValueError):
    """The file cannot be used; the message says why, naming fields, never quoting values."""


@dataclass(frozen=True)
class LoadedCredentials:
    """google-auth credentials and what the endpoints they call are (URL -> label, for messages)."""

    credentials: google.auth.credentials.Credentials
    kind: str
    endpoints: dict[str, str] = field(default_factory=dict)


def read_credentials_file(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; ``FileNotFoundError`` if it does not exist, else
    :class:`CredentialsFileError` for anything unreadable (a FIFO, too large, not JSON, ...)."""
    problem = None
    try:
        text = read_credential_file(path, MAX_FILE_BYTES)
    except FileNotFoundError:
        raise
    except OSError as exc:
        problem = f"cannot be read: {exc.strerror or type(exc).__name__}"
    except ValueError as exc:  # read_credential_file's reasons name no content
        problem = str(exc)
    if problem is not None:
        raise CredentialsFileError(problem)
    if not text.strip():
        raise CredentialsFileError("is empty")
    document = None
    try:
        document = load_document(text, source=str(path), syntax="json", max_depth=32)
    except DocumentError as exc:
        problem = f"is not JSON ({exc.detail})"
    if problem is not None:
        raise CredentialsFileError(problem)
    if not isinstance(document, dict):
        raise CredentialsFileError("is not a JSON object")
    return document


def _string(info: dict[str, Any], name: str, where: str, *, required: bool = True) -> str | None:
    value = info.get(name)
    if value is None and not required:
        return None
    if value is None:
        raise CredentialsFileError(f"has no {where}{name}")
    if not isinstance(value, str) or not value.strip():
        raise CredentialsFileError(f"field {where}{name} is not a non-empty string")
    return value


def _url(info: dict[str, Any], name: str, where: str, *, required: bool = False) -> str | None:
    value = _string(info, name, where, required=required)
    if value is None:
        return None
    try:
        parts = urlsplit(value)
        valid = parts.scheme in ("https", "http") and bool(parts.hostname) and not any(c.isspace() for c in value)
    except ValueError:
        valid = False
    if not valid:
        raise CredentialsFileError(f"field {where}{name} is not an http(s) URL")
    return value


def _private_key(info: dict[str, Any], where: str) -> None:
    pem = _string(info, "private_key", where)
    key = None
    try:
        # The validity check of RSA keys is google-auth's to pay for; this only asks "is it one?".
        key = serialization.load_pem_private_key(pem.encode("utf-8", "replace"), None, unsafe_skip_rsa_key_validation=True)  # type: ignore[union-attr]
    except (ValueError, TypeError):
        pass
    if not isinstance(key, rsa.RSAPrivateKey):
        raise CredentialsFileError(f"field {where}private_key is not an unencrypted PEM RSA private key")


def _check_service_account(info: dict[str, Any], where: str, endpoints: dict[str, str]) -> None:
    _string(info, "client_email", where)
    _private_key(info, where)
    _string(info, "private_key_id", where, required=False)
    endpoints[_url(info, "token_uri", where, required=True)] = "token endpoint"  # type: ignore[index]


def _check_authorized_user(info: dict[str, Any], where: str, endpoints: dict[str, str]) -> None:
    for name in ("client_id", "client_secret", "refresh_token"):
        _string(info, name, where)
    # google-auth always redeems a user's refresh token at Google's endpoint, whatever the file's
    # token_uri says (so that a doctored file cannot send it elsewhere).
    endpoints[GOOGLE_TOKEN_URI] = "token endpoint"


def _check_external_authorized_user(info: dict[str, Any], where: str, endpoints: dict[str, str]) -> None:
    for name in ("client_id", "client_secret", "refresh_token", "audience"):
        _string(info, name, where)
    endpoints[_url(info, "token_url", where, required=True)] = "token endpoint"  # type: ignore[index]


def _check_external_account(info: dict[str, Any], endpoints: dict[str, str]) -> None:
    _string(info, "audience", "")
    subject_token_type = _string(info, "subject_token_type", "")
    endpoints[_url(info, "token_url", "") or STS_TOKEN_URL] = "STS token endpoint"
    impersonation = _url(info, "service_account_impersonation_url", "")
    if impersonation is not None:
        endpoints[impersonation] = "IAM Credentials endpoint"
    source = info.get("credential_source")
    if not isinstance(source, dict):
        raise CredentialsFileError("has no credential_source object")
    if "certificate" in source:
        raise CredentialsFileError("uses X.509 workload identity federation (credential_source.certificate), which is not supported")
    if subject_token_type == _AWS_SUBJECT_TOKEN_TYPE:
        for name in ("url", "region_url", "imdsv2_session_token_url"):
            url = _url(source, name, "credential_source.")
            if url is not None:
                endpoints[url] = "AWS metadata endpoint"
        return
    kinds = [name for name in ("file", "url", "executable") if name in source]
    if len(kinds) != 1:
        raise CredentialsFileError("field credential_source needs exactly one of file, url and executable")
    if kinds == ["url"]:
        endpoints[_url(source, "url", "credential_source.", required=True)] = "subject token URL"  # type: ignore[index]
    elif kinds == ["file"]:
        _string(source, "file", "credential_source.")
    elif not isinstance(source.get("executable"), dict):
        raise CredentialsFileError("field credential_source.executable is not an object")


def _check_impersonated(info: dict[str, Any], endpoints: dict[str, str]) -> None:
    url = _url(info, "service_account_impersonation_url", "", required=True)
    if ":generateAccessToken" not in url:  # type: ignore[operator]
        raise CredentialsFileError("field service_account_impersonation_url is not a generateAccessToken URL")
    # google-auth takes only the account from this URL and calls the IAM Credentials API of the
    # credentials' universe (googleapis.com): label that URL.
    target = url.rpartition("/")[2].partition(":generateAccessToken")[0]  # type: ignore[union-attr]
    endpoints[f"{DEFAULT_IAM_ENDPOINT}/v1/projects/-/serviceAccounts/{target}:generateAccessToken"] = "IAM Credentials endpoint"
    delegates = info.get("delegates")
    if delegates is not None and (not isinstance(delegates, list) or not all(isinstance(d, str) for d in delegates)):
        raise CredentialsFileError("field delegates is not a list of strings")
    source = info.get("source_credentials")
    if not isinstance(source, dict):
        raise CredentialsFileError("has no source_credentials object")
    kind = source.get("type")
    checks: dict[str, Callable[[dict[str, Any], str, dict[str, str]], None]] = {
        "service_account": _check_service_account,
        "authorized_user": _check_authorized_user,
        "external_account_authorized_user": _check_external_authorized_user,
    }
    if kind not in checks:
        raise CredentialsFileError(
            f"field source_credentials.type is {_shown_type(kind)}; supported: {', '.join(checks)}"
        )
    checks[kind](source, "source_credentials.", endpoints)


def _service_account(info: dict[str, Any], scopes: Sequence[str]) -> google.auth.credentials.Credentials:
    """What ``service_account.Credentials.from_service_account_info`` builds, with the key loaded
    without cryptography's RSA validity check: that check is slow, would run on every run of the
    console scripts, and a key that would fail it signs assertions the token endpoint refuses
    (``invalid_grant``), which is the error the user then sees. The file was checked by
    :func:`load_credentials_info` (client_email, an RSA private_key, token_uri)."""
    from google.auth.crypt import RSASigner
    from google.oauth2 import service_account

    key = serialization.load_pem_private_key(info["private_key"].encode("utf-8", "replace"), None, unsafe_skip_rsa_key_validation=True)
    extra = {"trust_boundary": info["trust_boundary"]} if "trust_boundary" in info else {}
    return service_account.Credentials(
        RSASigner(key, key_id=info.get("private_key_id")),
        service_account_email=info["client_email"],
        token_uri=info["token_uri"],
        project_id=info.get("project_id"),
        universe_domain=info.get("universe_domain", google.auth.credentials.DEFAULT_UNIVERSE_DOMAIN),
        scopes=list(scopes),
        **extra,
    )


def _shown_type(kind: Any) -> str:
    if kind is None:
        return "missing"
    if isinstance(kind, str) and _SHOWN_TYPE.fullmatch(kind):
        return repr(kind)
    return "not one of them"


def _build(info: dict[str, Any], kind: str, scopes: Sequence[str]) -> google.auth.credentials.Credentials:
    # Imported per type: a service account never loads the workload identity machinery.
    if kind == "service_account":
        return _service_account(info, scopes)
    if kind == "authorized_user":
        from google.oauth2 import credentials

        # As google.auth.default() does: a user's refresh token keeps the scopes it was granted.
        return credentials.Credentials.from_authorized_user_info(info)
    if kind == "external_account_authorized_user":
        from google.auth import external_account_authorized_user

        return external_account_authorized_user.Credentials.from_info(info)
    if kind == "impersonated_service_account":
        from google.auth import impersonated_credentials

        return impersonated_credentials.Credentials.from_impersonated_service_account_info(info, scopes=list(scopes))
    source = info["credential_source"]
    if info.get("subject_token_type") == _AWS_SUBJECT_TOKEN_TYPE:
        from google.auth import aws

        return aws.Credentials.from_info(info, scopes=list(scopes))
    if "executable" in source:
        from google.auth import pluggable

        return pluggable.Credentials.from_info(info, scopes=list(scopes))
    from google.auth import identity_pool

    return identity_pool.Credentials.from_info(info, scopes=list(scopes))


def load_credentials_info(info: dict[str, Any], scopes: Sequence[str]) -> LoadedCredentials:
    """google-auth credentials for a parsed credentials file, scoped with ``scopes`` where the type
    takes scopes. :class:`CredentialsFileError` names the first problem found."""
    kind = info.get("type")
    if kind not in SUPPORTED_TYPES:
        raise CredentialsFileError(f"has type {_shown_type(kind)}; supported: {', '.join(SUPPORTED_TYPES)}")
    endpoints: dict[str, str] = {}
    if kind == "service_account":
        _check_service_account(info, "", endpoints)
    elif kind == "authorized_user":
        _check_authorized_user(info, "", endpoints)
    elif kind == "external_account_authorized_user":
        _check_external_authorized_user(info, "", endpoints)
    elif kind == "external_account":
        _check_external_account(info, endpoints)
    else:
        _check_impersonated(info, endpoints)
    problem = None
    try:
        credentials = _build(info, kind, scopes)
    except Exception as exc:  # noqa: BLE001 - google-auth's loaders raise many types; all mean "unusable"
        problem = f"is not usable {kind} credentials ({type(exc).__name__}: {safe_summary(exc)})"
    if problem is not None:
        raise CredentialsFileError(problem)
    return LoadedCredentials(credentials, kind, {shown_endpoint(url): label for url, label in endpoints.items()})
