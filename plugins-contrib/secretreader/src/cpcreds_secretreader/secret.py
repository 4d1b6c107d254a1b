"""Reading a value out of a Secret as the hub sent it, whatever it holds.

A Secret's ``data`` maps keys to base64 text. Everything here is checked, because the Secret is
written by someone else (a cluster manager, Open Cluster Management, a person with kubectl):
wrong types, bad base64, an empty value, a token with a line break or spaces. Errors are
:class:`SecretContentError` with one-line messages that name the Secret and the key, never a
value.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from cpcreds.sdk import jwt_expiry
from .options import is_data_key

__all__ = ["SecretContentError", "data_value", "bearer_token", "token_expiry", "MAX_TOKEN_CHARS"]

#: Longest token accepted: it travels in an HTTP header (kube-apiserver takes at most 1 MiB of
#: headers; a service-account JWT is 1-2 KiB).
MAX_TOKEN_CHARS = 64 * 1024
# RFC 7230 visible characters: what an Authorization header's token can carry. A space would end
# the token (kube-apiserver splits on it) and a control character is refused by HTTP clients.
_TOKEN = re.compile(r"[\x21-\x7e]+")
_SHOWN_KEYS = 10


class SecretContentError(ValueError):
    """The Secret is there but does not hold a usable value."""


def data_value(secret: Mapping[str, Any], key: str, where: str) -> bytes:
    """The decoded ``data.<key>`` of ``secret`` (``where`` names it: ``Secret ns/name``);
    :class:`SecretContentError` when it is absent, empty, not a string or not base64."""
    data = secret.get("data")
    if data is not None and not isinstance(data, dict):
        raise SecretContentError(f"{where} has a malformed data field (not a map)")
    value = (data or {}).get(key)
    if value is None or value == "":
        raise SecretContentError(f"{where} has no data.{key}{_other_keys(data or {}, key)}")
    if not isinstance(value, str):
        raise SecretContentError(f"{where} data.{key} is not base64 text")
    decoded = None
    try:
        decoded = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        pass
    if decoded is None:
        raise SecretContentError(f"{where} data.{key} is not valid base64")
    if not decoded:
        raise SecretContentError(f"{where} has no data.{key} (it is empty)")
    return decoded


def _other_keys(data: Mapping[str, Any], key: str) -> str:
    # Key names are not secret and say what was probably meant (a `key` option, a typo).
    others = sorted(k for k in data if k != key and is_data_key(k))
    if not others:
        return ""
    shown = ", ".join(others[:_SHOWN_KEYS]) + (", …" if len(others) > _SHOWN_KEYS else "")
    return f" (its keys: {shown})"


def bearer_token(value: bytes | str, what: str) -> str:
    """``value`` as a bearer token: UTF-8, surrounding whitespace removed (``kubectl create
    secret --from-file`` keeps the file's final newline), one line of visible ASCII characters."""
    text = None
    if isinstance(value, bytes):
        try:
            text = value.decode("utf-8")
        except UnicodeDecodeError:
            pass
    else:
        text = value
    if text is None:
        raise SecretContentError(f"{what} is not UTF-8 text")
    token = text.strip()
    if not token:
        raise SecretContentError(f"{what} is empty")
    if len(token) > MAX_TOKEN_CHARS:
        raise SecretContentError(f"{what} is longer than {MAX_TOKEN_CHARS // 1024} KiB; not a bearer token")
    if "\n" in token or "\r" in token:
        raise SecretContentError(f"{what} holds more than one line; a token is one line")
    if not _TOKEN.fullmatch(token):
        raise SecretContentError(f"{what} is not a bearer token (only visible ASCII characters, no spaces)")
    return token


def token_expiry(token: str, what: str, now: datetime | None = None) -> datetime | None:
    """The expiry of ``token``: its ``exp`` when it is a JWT, else ``None`` (no expiry).
    :class:`SecretContentError` when that moment has passed: the Secret holds a dead token."""
    expiry = jwt_expiry(token)
    if expiry is not None and expiry <= (now or datetime.now(timezone.utc)):
        raise SecretContentError(f"{what} holds a token that expired at {expiry.strftime('%Y-%m-%dT%H:%M:%SZ')}")
    return expiry
