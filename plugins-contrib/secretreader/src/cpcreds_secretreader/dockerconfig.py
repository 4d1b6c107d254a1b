"""Registry credentials out of an image pull Secret, read as the kubelet reads one.

Two Secret types hold them (the kinds ``kubectl create secret docker-registry`` and Docker
write):

- ``kubernetes.io/dockerconfigjson``: ``data[".dockerconfigjson"]`` is a ``config.json``,
  ``{"auths": {"<registry>": {...}}}``;
- ``kubernetes.io/dockercfg``: ``data[".dockercfg"]`` is the older ``~/.dockercfg``, the
  ``{"<registry>": {...}}`` map itself.

Each entry is ``{"auth": base64("user:password")}`` or ``{"username": ..., "password": ...}``
(``auth`` wins when both are there, as in the kubelet; ``email`` and unknown fields are
ignored). A registry key is turned into a KEP-2133 match key as the kubelet's keyring does: the
scheme and a ``/v1/`` or ``/v2/`` path prefix are dropped (``https://index.docker.io/v1/`` is
``index.docker.io``), and Docker Hub answers for both ``docker.io`` and ``index.docker.io``.
A key that is no registry (spaces, an empty host) is skipped, as the kubelet skips it; an entry
whose content is malformed is an error.

Everything is read bounded and checked: the Secret is written by someone else. Errors are
:class:`~cpcreds_secretreader.secret.SecretContentError` naming the Secret, the key and the
entry (by its registry when that is a plain host name, else by position), never a value.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from cpcreds.sdk import AuthConfig, DocumentError, load_document

from .secret import SecretContentError

__all__ = [
    "DOCKER_CONFIG_JSON",
    "DOCKER_CFG",
    "DATA_KEYS",
    "MAX_ENTRIES",
    "registry_auths",
    "match_key",
]

#: The Secret type and its data key: a ``config.json`` (``auths`` inside).
DOCKER_CONFIG_JSON = ("kubernetes.io/dockerconfigjson", ".dockerconfigjson")
#: The older Secret type and its data key: a ``~/.dockercfg`` (the registry map itself).
DOCKER_CFG = ("kubernetes.io/dockercfg", ".dockercfg")
#: The data key of each Secret type.
DATA_KEYS = dict((DOCKER_CONFIG_JSON, DOCKER_CFG))
#: Most registries one Secret may hold (a real one holds a handful).
MAX_ENTRIES = 1000
_DOCKER_HUB = ("docker.io", "index.docker.io")
_DOCKER_HUB_HOSTS = frozenset((*_DOCKER_HUB, "registry-1.docker.io"))
# host[:port][/path] with the globs KEP-2133 keys may hold (a '*' inside a host segment).
_KEY = re.compile(r"(?:[A-Za-z0-9*](?:[A-Za-z0-9*\-]{0,61}[A-Za-z0-9*])?)(?:\.[A-Za-z0-9*](?:[A-Za-z0-9*\-]{0,61}[A-Za-z0-9*])?)*(?::[0-9]{1,5})?(?:/[A-Za-z0-9._\-/]*)?")
_SHOWABLE = re.compile(r"[A-Za-z0-9.:/\-]{1,128}")
_MAX_FIELD_CHARS = 64 * 1024


def match_key(registry: str) -> str | None:
    """The KEP-2133 match key of a docker config registry key, or ``None`` for a key that names
    no registry. ``https://index.docker.io/v1/`` is ``index.docker.io``, ``quay.io/team/`` is
    ``quay.io/team``, ``http://localhost:5000`` is ``localhost:5000``."""
    text = registry.strip()
    for scheme in ("https://", "http://"):
        if text.lower().startswith(scheme):
            text = text[len(scheme) :]
            break
    host, slash, path = text.partition("/")
    if slash and (path.startswith("v1/") or path.startswith("v2/") or path in ("v1", "v2")):
        path = path[3:]  # the kubelet (and docker) treat /v1/ and /v2/ as the registry itself
    path = path.strip("/")
    key = f"{host.lower()}/{path}" if path else host.lower()
    if not key or len(key) > 512 or not _KEY.fullmatch(key):
        return None
    return key


def _keys_for(key: str) -> tuple[str, ...]:
    host, slash, path = key.partition("/")
    if host in _DOCKER_HUB_HOSTS:
        return tuple(f"{name}{slash}{path}" for name in _DOCKER_HUB)
    return (key,)


def _string(entry: dict[str, Any], field: str, where: str) -> str:
    value = entry.get(field)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise SecretContentError(f"{where}: {field} is not a string")
    if len(value) > _MAX_FIELD_CHARS:
        raise SecretContentError(f"{where}: {field} is longer than {_MAX_FIELD_CHARS // 1024} KiB")
    return value


def _auth(entry: Any, where: str) -> AuthConfig:
    if entry is None:
        return AuthConfig()
    if not isinstance(entry, dict):
        raise SecretContentError(f"{where} is not an object")
    username, password = _string(entry, "username", where), _string(entry, "password", where)
    encoded = _string(entry, "auth", where)
    if not encoded:
        return AuthConfig(username, password)
    decoded = None
    try:
        decoded = base64.b64decode(encoded, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        pass
    if decoded is None:
        raise SecretContentError(f"{where}: auth is not base64 of UTF-8 text")
    user, colon, secret = decoded.partition(":")
    if not colon:
        raise SecretContentError(f"{where}: auth is not base64(username:password)")
    return AuthConfig(user, secret)


def registry_auths(raw: bytes, data_key: str, where: str) -> dict[str, AuthConfig]:
    """The registry credentials in ``raw``, the decoded ``data[data_key]`` of a Secret
    (``.dockerconfigjson`` or ``.dockercfg``; ``where`` names it: ``Secret ns/name``), as KEP-2133
    match keys in the Secret's order. Raises :class:`SecretContentError` when it is not such a
    document, when an entry is malformed, or when no entry names a registry."""
    what = f"{where} data.{data_key}"
    problem = None
    document: Any = None
    try:
        document = load_document(raw, source=what, syntax="json", max_bytes=len(raw) + 1)
    except DocumentError as exc:
        problem = f"{what} is not JSON ({exc.detail})"
    if problem is not None:
        raise SecretContentError(problem)
    if not isinstance(document, dict):
        raise SecretContentError(f"{what} is not a JSON object")
    if data_key == DOCKER_CONFIG_JSON[1]:
        entries = document.get("auths")
        if not isinstance(entries, dict):
            raise SecretContentError(f"{what} has no auths object")
    else:
        entries = document
    if len(entries) > MAX_ENTRIES:
        raise SecretContentError(f"{what} holds more than {MAX_ENTRIES} registries")
    auths: dict[str, AuthConfig] = {}
    for index, (registry, entry) in enumerate(entries.items()):
        label = f"{what} registry {registry!r}" if _SHOWABLE.fullmatch(registry) else f"{what} entry {index + 1}"
        auth = _auth(entry, label)
        key = match_key(registry)
        if key is None:
            continue  # the kubelet skips a key it cannot parse
        for name in _keys_for(key):
            auths.setdefault(name, auth)  # the first of two keys that mean the same registry wins
    if not auths:
        raise SecretContentError(f"{what} names no registry")
    return auths
