"""The credentials of one user of a kubeconfig stored in a Secret (``kubeconfig-secretreader``).

Read statically, as the Go plugin does: the context (the one named, else ``current-context``),
its user, and that user's ``token`` and/or inline ``client-certificate-data`` +
``client-key-data``. Nothing the kubeconfig points at is used: a file path (``token-file``,
``client-certificate``, ``client-key``), an ``exec`` plugin or an ``auth-provider`` is refused
with an error that says what to use instead. Nothing is run and no file is read, whatever the
Secret says.

The document is parsed with cpcreds' bounded loader (size, depth, aliases): a kubeconfig from a
Secret is input like any other.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cpcreds.sdk import DocumentError, load_document

from .secret import SecretContentError, bearer_token

__all__ = ["KubeconfigUser", "kubeconfig_user", "MAX_KUBECONFIG_BYTES"]

#: A Secret holds at most 1 MiB.
MAX_KUBECONFIG_BYTES = 1024 * 1024

# Fields of a kubeconfig user that make it something other than static credentials, with what
# to do instead.
_FILE_FIELDS = {
    "token-file": "put the token itself in token",
    "client-certificate": "use client-certificate-data",
    "client-key": "use client-key-data",
}


@dataclass(frozen=True)
class KubeconfigUser:
    """What the chosen user holds (PEM text for the certificate and key)."""

    token: str | None = field(default=None, repr=False)
    client_certificate_data: str | None = field(default=None, repr=False)
    client_key_data: str | None = field(default=None, repr=False)


def _shown(name: str) -> str:
    # Names come from the Secret: quoted only when short and printable.
    return repr(name) if len(name) <= 64 and name.isprintable() else "(a name too long or unprintable to show)"


def _named(document: Mapping[str, Any], section: str, name: str, what: str) -> Mapping[str, Any] | None:
    entries = document.get(section)
    if entries is None:
        return None
    if not isinstance(entries, list):
        raise SecretContentError(f"{what}: {section} is not a list")
    for entry in entries:
        if isinstance(entry, Mapping) and entry.get("name") == name:
            return entry
    return None


def kubeconfig_user(data: bytes, *, context: str | None, what: str) -> KubeconfigUser:
    """The credentials of ``context``'s user (``None``: the current context) in the kubeconfig
    ``data``; ``what`` names where it came from (``Secret ns/name data.key``).
    :class:`SecretContentError` says what is wrong or unsupported."""
    document: Any = None
    problem = None
    try:
        document = load_document(data, source=what, syntax="auto", max_bytes=MAX_KUBECONFIG_BYTES)
    except DocumentError as exc:
        problem = f"{what} is not a kubeconfig: {exc.detail}"
    if problem is not None:
        raise SecretContentError(problem)
    if not isinstance(document, Mapping) or (document.get("kind") not in (None, "Config")):
        raise SecretContentError(f"{what} is not a kubeconfig")
    context_name = context if context is not None else document.get("current-context")
    if not isinstance(context_name, str) or not context_name:
        raise SecretContentError(f"{what}: no context given and the kubeconfig has no current-context")
    entry = _named(document, "contexts", context_name, what)
    if entry is None:
        raise SecretContentError(f"{what}: context {_shown(context_name)} not found in the kubeconfig")
    body = entry.get("context")
    user_name = body.get("user") if isinstance(body, Mapping) else None
    if not isinstance(user_name, str) or not user_name:
        raise SecretContentError(f"{what}: context {_shown(context_name)} names no user")
    user_entry = _named(document, "users", user_name, what)
    user = user_entry.get("user") if user_entry is not None else None
    if not isinstance(user, Mapping):
        raise SecretContentError(f"{what}: user {_shown(user_name)} not found in the kubeconfig")
    return _credentials(user, f"{what} user {_shown(user_name)}")


def _credentials(user: Mapping[str, Any], who: str) -> KubeconfigUser:
    if user.get("exec") is not None:
        raise SecretContentError(
            f"{who} runs an exec plugin, which is not supported: make that plugin an access provider of the ClusterProfile instead"
        )
    if user.get("auth-provider") is not None:
        raise SecretContentError(f"{who} uses an auth-provider, which is not supported: store a token or a client certificate")
    for name, instead in _FILE_FIELDS.items():
        if user.get(name):
            raise SecretContentError(f"{who} has {name} (a file path), which is not supported: {instead}")
    token = user.get("token")
    if token is not None and not isinstance(token, str):
        raise SecretContentError(f"{who}: token is not a string")
    cert = _pem(user, "client-certificate-data", who)
    key = _pem(user, "client-key-data", who)
    if (cert is None) != (key is None):
        have, missing = ("client-certificate-data", "client-key-data") if cert else ("client-key-data", "client-certificate-data")
        raise SecretContentError(f"{who} has {have} but no {missing}")
    if not token and cert is None:
        extra = " (username/password is not supported)" if user.get("username") or user.get("password") else ""
        raise SecretContentError(f"{who} has neither a token nor client-certificate-data and client-key-data{extra}")
    return KubeconfigUser(
        token=bearer_token(token, f"{who} token") if token else None,
        client_certificate_data=cert,
        client_key_data=key,
    )


def _pem(user: Mapping[str, Any], name: str, who: str) -> str | None:
    value = user.get(name)
    if value is None or value == "":
        return None
    decoded = None
    if isinstance(value, str):
        try:
            decoded = base64.b64decode(value, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):  # UnicodeDecodeError is a ValueError
            pass
    if not decoded:
        raise SecretContentError(f"{who}: {name} is not base64-encoded PEM")
    return decoded
