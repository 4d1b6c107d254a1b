"""The KEP-2133 wire protocol: CredentialProviderRequest on a plugin's stdin, CredentialProviderResponse on its stdout.

Both sides use this module: cpcreds running a kubelet plugin (:func:`encode_request`,
:func:`parse_response`) and a plugin written with cpcreds (:func:`parse_request`,
:func:`encode_response`). The types are plain frozen dataclasses; the JSON field names are the
kubelet's (``cacheKeyType``, ``serviceAccountToken``), the Python names are snake_case.

What a caller may rely on:

- Parsing is bounded (size, depth: :func:`cpcreds.config.documents.load_document`) and raises only
  :class:`ProtocolError`, a :class:`~cpcreds.CredentialError`, with a one-line message that names
  the field and never quotes a password, a token or the document.
- :func:`parse_response` accepts exactly what the kubelet uses: ``kind``
  CredentialProviderResponse, ``apiVersion`` equal to the request's, ``cacheKeyType`` one of
  Image, Registry, Global, ``cacheDuration`` a Go duration or absent/null, ``auth`` a map of
  string keys to ``{username, password}`` (strings; missing or null is ``""``, as Go decodes it).
- ``repr()`` of :class:`AuthConfig`, of a request and of a response never shows a password or a
  service-account token.
- Durations are Go's :func:`time.ParseDuration` syntax (``1h0m0s``, ``90s``, ``1.5h``, ``0``);
  :func:`format_duration` writes what Go's ``Duration.String()`` writes.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from ..config.durations import format_duration, parse_duration
from ..config.documents import Limits, load_or_raise
from dataclasses import dataclass, field
from .._show import shown, type_name
from ..errors import CredentialError

__all__ = [
    "API_GROUP",
    "API_VERSION_V1",
    "API_VERSION_V1BETA1",
    "API_VERSION_V1ALPHA1",
    "SUPPORTED_API_VERSIONS",
    "REQUEST_KIND",
    "RESPONSE_KIND",
    "CACHE_KEY_IMAGE",
    "CACHE_KEY_REGISTRY",
    "CACHE_KEY_GLOBAL",
    "CACHE_KEY_TYPES",
    "MAX_REQUEST_BYTES",
    "MAX_RESPONSE_BYTES",
    "ProtocolError",
    "AuthConfig",
    "CredentialProviderRequest",
    "CredentialProviderResponse",
    "encode_request",
    "parse_request",
    "encode_response",
    "parse_response",
    "format_duration",
]

API_GROUP: Final = "credentialprovider.kubelet.k8s.io"
API_VERSION_V1: Final = "credentialprovider.kubelet.k8s.io/v1"
API_VERSION_V1BETA1: Final = "credentialprovider.kubelet.k8s.io/v1beta1"
API_VERSION_V1ALPHA1: Final = "credentialprovider.kubelet.k8s.io/v1alpha1"
#: The request apiVersions a CredentialProviderConfig may name, newest first.
SUPPORTED_API_VERSIONS: Final = (API_VERSION_V1, API_VERSION_V1BETA1, API_VERSION_V1ALPHA1)

REQUEST_KIND: Final = "CredentialProviderRequest"
RESPONSE_KIND: Final = "CredentialProviderResponse"

#: Cache per image: registry, port and path, without tag or digest.
CACHE_KEY_IMAGE: Final = "Image"
#: Cache per registry: host and port.
CACHE_KEY_REGISTRY: Final = "Registry"
#: Cache once for every image the plugin handles.
CACHE_KEY_GLOBAL: Final = "Global"
CACHE_KEY_TYPES: Final = (CACHE_KEY_IMAGE, CACHE_KEY_REGISTRY, CACHE_KEY_GLOBAL)

#: A request is an image name and perhaps a service-account token: a few KiB at most.
MAX_REQUEST_BYTES: Final = 1024 * 1024
#: A response holds a few registry keys; anything near this is not one.
MAX_RESPONSE_BYTES: Final = 1024 * 1024

_SHOWABLE = re.compile(r"[A-Za-z0-9_.:/*\-]{1,128}")
# group/version, as apiVersions are spelled (credentialprovider.kubelet.k8s.io/v2): safe to quote.
_API_VERSION_SHAPE = re.compile(r"[a-z0-9.\-]{1,63}/v[0-9]{1,3}(?:(?:alpha|beta)[0-9]{1,3})?")
_KINDS = ("CredentialProviderRequest", "CredentialProviderResponse", "CredentialProviderConfig", "ExecCredential")


class ProtocolError(CredentialError, ValueError):
    """A CredentialProviderRequest or CredentialProviderResponse (or a duration in one) is not valid.

    ``field`` is the JSON field at fault (``cacheKeyType``, ``auth``, …) or ``None`` for the
    document as a whole. The message is one line and never quotes a secret.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(message)


def _shown(value: Any) -> str:
    """A value quoted in a message only when it is short and shaped like a name, never otherwise."""
    return shown(value, limit=128, shape=_SHOWABLE, otherwise="a string")


def _named(value: Any, known: tuple[str, ...]) -> str:
    """A field value from a peer quoted only when it is one of the ``known`` names (in any case);
    anything else is described, never quoted: a broken plugin may put a password anywhere."""
    if isinstance(value, str) and value.lower() in {name.lower() for name in known}:
        return repr(value)
    if isinstance(value, str) and _API_VERSION_SHAPE.fullmatch(value):
        return repr(value)
    if value is None:
        return "missing"
    if isinstance(value, str):
        return f"an unknown {len(value)}-character string" if value else "empty"
    return type_name(value)


# -- types ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AuthConfig:
    """Credentials for one registry key: a username and a password (both may be empty).

    ``repr()`` and ``str()`` show the username and whether a password is set, never the password.
    """

    username: str = ""
    password: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.username, str) or not isinstance(self.password, str):
            raise TypeError("AuthConfig username and password must be strings")

    def __repr__(self) -> str:
        password = "<redacted>" if self.password else "''"
        return f"AuthConfig(username={self.username!r}, password={password})"

    __str__ = __repr__


_NO_ANNOTATIONS: Mapping[str, str] = MappingProxyType({})
_NO_AUTH: Mapping[str, AuthConfig] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class CredentialProviderRequest:
    """What the kubelet asks a plugin: credentials for ``image``.

    ``service_account_token`` and ``service_account_annotations`` are set only when the provider's
    config has ``tokenAttributes`` (credentialprovider.kubelet.k8s.io/v1 only): the token of the
    pod's service account, for registries that accept a workload identity. ``api_version`` is the
    version the request was written in; the answer must use it too. The token is never in
    ``repr()``.
    """

    image: str
    service_account_token: str | None = field(default=None, repr=False)
    service_account_annotations: Mapping[str, str] = field(default_factory=lambda: _NO_ANNOTATIONS, hash=False)
    api_version: str = API_VERSION_V1

    def __post_init__(self) -> None:
        if not isinstance(self.image, str):
            raise TypeError("CredentialProviderRequest image must be a string")
        if self.api_version not in SUPPORTED_API_VERSIONS:
            raise ValueError(f"apiVersion {_shown(self.api_version)} is not one of {', '.join(SUPPORTED_API_VERSIONS)}")
        if self.service_account_token is not None and not isinstance(self.service_account_token, str):
            raise TypeError("CredentialProviderRequest service_account_token must be a string")
        annotations = self.service_account_annotations
        if not isinstance(annotations, MappingProxyType):
            if not all(isinstance(k, str) and isinstance(v, str) for k, v in dict(annotations).items()):
                raise TypeError("CredentialProviderRequest service_account_annotations must map strings to strings")
            object.__setattr__(self, "service_account_annotations", MappingProxyType(dict(annotations)) if annotations else _NO_ANNOTATIONS)
        if (self.service_account_token is not None or self.service_account_annotations) and self.api_version != API_VERSION_V1:
            raise ValueError(f"a service-account token is only sent in {API_VERSION_V1} requests")

    def __repr__(self) -> str:
        token = ", service_account_token=<redacted>" if self.service_account_token else ""
        annotations = f", service_account_annotations={dict(self.service_account_annotations)!r}" if self.service_account_annotations else ""
        return f"CredentialProviderRequest(image={self.image!r}{token}{annotations}, api_version={self.api_version!r})"


@dataclass(frozen=True, slots=True)
class CredentialProviderResponse:
    """A plugin's answer, without its apiVersion (which is always the request's).

    ``cache_key_type`` is one of :data:`CACHE_KEY_TYPES`; ``cache_duration`` is in seconds, or
    ``None`` for "use the config's defaultCacheDuration" (0 means do not cache); ``auth`` maps a
    registry match key (``gcr.io``, ``*.pkg.dev``, ``registry.io:8080/path``) to its
    :class:`AuthConfig`, in the order the plugin wrote them; empty means no credentials.
    Constructing one validates all of it (``ValueError``/``TypeError``).
    """

    cache_key_type: str
    auth: Mapping[str, AuthConfig] = field(default_factory=lambda: _NO_AUTH, hash=False)
    cache_duration: float | None = None

    def __post_init__(self) -> None:
        if self.cache_key_type not in CACHE_KEY_TYPES:
            raise ValueError(f"cacheKeyType {_named(self.cache_key_type, CACHE_KEY_TYPES)} is not one of {', '.join(CACHE_KEY_TYPES)}")
        duration = self.cache_duration
        if duration is not None:
            if isinstance(duration, bool) or not isinstance(duration, (int, float)) or not math.isfinite(duration):
                raise ValueError("cacheDuration must be a finite number of seconds or None")
            object.__setattr__(self, "cache_duration", float(duration))
        auth = self.auth
        if not isinstance(auth, MappingProxyType):
            items = dict(auth or {})
            for key, value in items.items():
                if not isinstance(key, str):
                    raise TypeError("auth keys must be strings")
                if not isinstance(value, AuthConfig):
                    raise TypeError(f"auth[{_shown(key)}] must be an AuthConfig")
            object.__setattr__(self, "auth", MappingProxyType(items) if items else _NO_AUTH)




# -- requests ---------------------------------------------------------------------------------


def encode_request(
    image: str,
    api_version: str = API_VERSION_V1,
    *,
    service_account_token: str | None = None,
    service_account_annotations: Mapping[str, str] | None = None,
) -> bytes:
    """The request the kubelet writes on a plugin's stdin (one JSON line, UTF-8).

    The token fields are written only when given, and only in
    credentialprovider.kubelet.k8s.io/v1 (``ValueError`` otherwise, as the kubelet's config
    validation allows ``tokenAttributes`` only there).
    """
    request = CredentialProviderRequest(
        image=image,
        service_account_token=service_account_token,
        service_account_annotations=service_account_annotations or _NO_ANNOTATIONS,
        api_version=api_version,
    )
    return request_document(request)


def request_document(request: CredentialProviderRequest) -> bytes:
    """:func:`encode_request` for a request object."""
    document: dict[str, Any] = {"apiVersion": request.api_version, "kind": REQUEST_KIND, "image": request.image}
    if request.service_account_token is not None:
        document["serviceAccountToken"] = request.service_account_token
    if request.service_account_annotations:
        document["serviceAccountAnnotations"] = dict(request.service_account_annotations)
    return (json.dumps(document, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def _load(data: bytes | str, source: str, max_bytes: int) -> dict[str, Any]:
    document = load_or_raise(
        data, ProtocolError, source=source, syntax="json", limits=Limits(max_bytes=max_bytes), message="{source} is not a JSON document ({detail})"
    )
    if not isinstance(document, dict):
        raise ProtocolError(f"{source} is {type_name(document)}, not a JSON object")
    return document


def _type_meta(document: dict[str, Any], source: str, kind: str) -> str:
    found_kind = document.get("kind")
    if found_kind != kind:
        raise ProtocolError(f"{source}: kind is {_named(found_kind, _KINDS)}, expected {kind}", field="kind")
    api_version = document.get("apiVersion")
    if not isinstance(api_version, str):
        raise ProtocolError(f"{source}: apiVersion is {_named(api_version, SUPPORTED_API_VERSIONS)}, expected one of {', '.join(SUPPORTED_API_VERSIONS)}", field="apiVersion")
    return api_version


def parse_request(data: bytes | str, *, max_bytes: int = MAX_REQUEST_BYTES) -> CredentialProviderRequest:
    """Read a CredentialProviderRequest (what a plugin gets on stdin).

    Requires ``kind: CredentialProviderRequest``, an ``apiVersion`` of
    :data:`SUPPORTED_API_VERSIONS` and a non-empty string ``image``. In v1,
    ``serviceAccountToken`` (string) and ``serviceAccountAnnotations`` (string to string) are read
    too; other fields are ignored, as a newer kubelet may send more. Raises :class:`ProtocolError`.
    """
    source = "CredentialProviderRequest"
    document = _load(data, source, max_bytes)
    api_version = _type_meta(document, source, REQUEST_KIND)
    if api_version not in SUPPORTED_API_VERSIONS:
        raise ProtocolError(f"{source}: apiVersion {_named(api_version, SUPPORTED_API_VERSIONS)} is not one of {', '.join(SUPPORTED_API_VERSIONS)}", field="apiVersion")
    image = document.get("image")
    if not isinstance(image, str) or not image:
        got = "empty" if image == "" else type_name(image)
        raise ProtocolError(f"{source}: image must be a non-empty string, not {got}", field="image")
    token: str | None = None
    annotations: dict[str, str] = {}
    if api_version == API_VERSION_V1:
        raw_token = document.get("serviceAccountToken")
        if raw_token is not None and not isinstance(raw_token, str):
            # Never shown: whatever it is, it was meant to be a token.
            raise ProtocolError(f"{source}: serviceAccountToken must be a string, not {type_name(raw_token)}", field="serviceAccountToken")
        token = raw_token or None
        raw_annotations = document.get("serviceAccountAnnotations")
        if raw_annotations is not None:
            if not isinstance(raw_annotations, dict) or not all(isinstance(v, str) for v in raw_annotations.values()):
                raise ProtocolError(f"{source}: serviceAccountAnnotations must map strings to strings", field="serviceAccountAnnotations")
            annotations = raw_annotations
    return CredentialProviderRequest(
        image=image,
        service_account_token=token,
        service_account_annotations=MappingProxyType(annotations) if annotations else _NO_ANNOTATIONS,
        api_version=api_version,
    )


# -- responses --------------------------------------------------------------------------------


def encode_response(response: CredentialProviderResponse, api_version: str) -> bytes:
    """The response a plugin writes on stdout, in ``api_version`` (the request's): one JSON line.

    ``cacheDuration`` is written only when set (in Go's format), ``auth`` only when not empty,
    as the kubelet's own types omit them.
    """
    if api_version not in SUPPORTED_API_VERSIONS:
        raise ValueError(f"apiVersion {_shown(api_version)} is not one of {', '.join(SUPPORTED_API_VERSIONS)}")
    if not isinstance(response, CredentialProviderResponse):
        raise TypeError(f"expected a CredentialProviderResponse, not {type(response).__name__}")
    document: dict[str, Any] = {"apiVersion": api_version, "kind": RESPONSE_KIND, "cacheKeyType": response.cache_key_type}
    if response.cache_duration is not None:
        document["cacheDuration"] = format_duration(response.cache_duration)
    if response.auth:
        document["auth"] = {key: {"username": auth.username, "password": auth.password} for key, auth in response.auth.items()}
    return (json.dumps(document, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def parse_response(
    data: bytes | str, expected_api_version: str, *, max_bytes: int = MAX_RESPONSE_BYTES
) -> CredentialProviderResponse:
    """Read a plugin's CredentialProviderResponse and check it as the kubelet does.

    The ``apiVersion`` must equal ``expected_api_version`` (the request's), ``kind`` must be
    CredentialProviderResponse, ``cacheKeyType`` one of Image, Registry, Global (the kubelet does
    not use a response with any other), ``cacheDuration`` a Go duration string or absent/null,
    ``auth`` absent/null or an object of ``{username, password}`` objects whose values are strings
    (absent or null meaning ``""``; a null entry meaning both empty). Unknown fields are ignored.
    Raises :class:`ProtocolError` naming the field; a password is never quoted.
    """
    source = "CredentialProviderResponse"
    document = _load(data, source, max_bytes)
    api_version = _type_meta(document, source, RESPONSE_KIND)
    if api_version != expected_api_version:
        raise ProtocolError(
            f"{source}: apiVersion {_named(api_version, SUPPORTED_API_VERSIONS)} does not match the request's {expected_api_version}", field="apiVersion"
        )
    cache_key_type = document.get("cacheKeyType")
    if cache_key_type not in CACHE_KEY_TYPES:
        raise ProtocolError(f"{source}: cacheKeyType is {_named(cache_key_type, CACHE_KEY_TYPES)}, expected one of {', '.join(CACHE_KEY_TYPES)}", field="cacheKeyType")
    raw_duration = document.get("cacheDuration")
    duration: float | None = None
    if raw_duration is not None:
        if not isinstance(raw_duration, str):
            raise ProtocolError(f"{source}: cacheDuration must be a duration string (e.g. 1h0m0s), not {type_name(raw_duration)}", field="cacheDuration")
        problem = None
        try:
            duration = parse_duration(raw_duration)
        except ValueError:
            # Not quoted: a broken plugin may have put anything there.
            problem = f"{source}: cacheDuration is not a Go duration (e.g. 1h0m0s, 90s, 0) within ±292 years"
        if problem is not None:
            raise ProtocolError(problem, field="cacheDuration")
    return CredentialProviderResponse(cache_key_type=cache_key_type, auth=_auth(document.get("auth"), source), cache_duration=duration)


def _auth(raw: Any, source: str) -> Mapping[str, AuthConfig]:
    if raw is None:
        return _NO_AUTH
    if not isinstance(raw, dict):
        raise ProtocolError(f"{source}: auth must be an object of registry keys, not {type_name(raw)}", field="auth")
    entries: dict[str, AuthConfig] = {}
    for index, (key, value) in enumerate(raw.items()):
        where = f"auth[{_shown(key)}]" if _SHOWABLE.fullmatch(key) else f"auth entry {index + 1}"
        if value is None:
            entries[key] = AuthConfig()
            continue
        if not isinstance(value, dict):
            raise ProtocolError(f"{source}: {where} must be an object with username and password, not {type_name(value)}", field="auth")
        username, password = value.get("username"), value.get("password")
        if username is not None and not isinstance(username, str):
            raise ProtocolError(f"{source}: {where}.username must be a string, not {type_name(username)}", field="auth")
        if password is not None and not isinstance(password, str):
            # The type only: a password that is a number is still a password.
            raise ProtocolError(f"{source}: {where}.password must be a string, not {type_name(password)}", field="auth")
        entries[key] = AuthConfig(username=username or "", password=password or "")
    return MappingProxyType(entries) if entries else _NO_AUTH
