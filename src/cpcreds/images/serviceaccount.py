"""The pod's identity for providers with ``tokenAttributes`` (KEP-4412), decided as the kubelet's
``pluginProvider.provide`` decides it (pkg/credentialprovider/plugin/plugin.go):

- no service account: a provider with ``requireServiceAccount: true`` is not run (cpcreds raises
  :class:`~cpcreds.ImageCredentialError` naming what is missing, since here the caller forgot
  it); with ``false`` it is run without a token, its answers kept as if it had no tokenAttributes;
- a required annotation missing: the plugin is not run and this provider gives no credentials
  (the kubelet logs it at verbosity 5 and pulls with the other providers' credentials);
- otherwise the token and the annotations the provider names, required then optional, those
  present only, are sent; nothing else of the service account is;
- answers are kept per service account (namespace, name, uid and the annotations sent) for
  ``cacheType: ServiceAccount``, and per token as well for ``cacheType: Token``;
- with ``cacheType: ServiceAccount`` an answer whose password is the token itself is refused
  (credentials tied to one token must not be shared by the service account's other tokens).

Two sources of that identity: a token file and annotations fixed for one
:class:`~cpcreds.ImageCredentials` (its own service account: the answers are kept per
annotations, as one instance is one service account), or a token, annotations and the service
account's coordinates given with one lookup (:func:`for_request`; a program pulling on a pod's
behalf). Without coordinates, answers of a ``ServiceAccount`` provider are kept per token:
cpcreds cannot tell whose token it is, and one pod's credentials must never serve another.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._show import type_name
from ..config.documents import read_or_raise
from ..errors import ImageCredentialError, PluginOutputError
from ..logs import get_logger
from .config import CredentialProvider, TokenAttributes

__all__ = [
    "MAX_TOKEN_BYTES",
    "MAX_ANNOTATION_BYTES",
    "Ask",
    "ServiceAccount",
    "PLAIN",
    "for_request",
    "from_options",
    "ask",
    "missing_annotation",
    "check_answer",
    "scrub",
]

#: A projected service-account token is a JWT of a few KiB.
MAX_TOKEN_BYTES = 64 * 1024
#: Kubernetes' bound on all the annotations of one object (TotalAnnotationSizeLimitB).
MAX_ANNOTATION_BYTES = 256 * 1024
#: Shorter tokens are not looked for in error messages: they would match ordinary words.
_SCRUB_FROM = 8

_log = get_logger("cpcreds.images")


@dataclass(frozen=True, slots=True)
class Ask:
    """What to send one provider for one lookup, and the identity its answers are kept under.
    ``token`` gives the token when the plugin runs (a file is read then); ``repr()`` shows
    neither the token nor a way to it."""

    identity: str
    token: Callable[[], str | None] = field(repr=False)
    annotations: Mapping[str, str]
    #: May get() answer this image string again from its fast path (no per-token key)?
    cacheable_by_image_string: bool
    #: cacheType Token: the answer may be the token itself.
    token_may_be_the_password: bool = True


def _no_token() -> None:
    return None


#: A provider without tokenAttributes, or one run without a service account.
PLAIN = Ask("", _no_token, {}, True)


class ServiceAccount:
    """The service account of a lookup: its token (given, or read from ``token_file`` at every
    run, as projected tokens rotate), its annotations, and, when the caller says, its
    ``(namespace, name, uid)``. ``repr()`` never shows the token."""

    __slots__ = ("_token", "token_file", "annotations", "coordinates")

    def __init__(
        self,
        *,
        token: str | None = None,
        token_file: str | None = None,
        annotations: Mapping[str, str],
        coordinates: tuple[str, str, str] | None = None,
    ) -> None:
        self._token, self.token_file = token, token_file
        self.annotations = dict(annotations)
        self.coordinates = coordinates

    def __repr__(self) -> str:
        source = f"token_file={self.token_file!r}" if self.token_file is not None else "token=<redacted>"
        return f"ServiceAccount({source}, annotations={self.annotations!r}, coordinates={self.coordinates!r})"

    @property
    def per_request(self) -> bool:
        return self._token is not None

    def read_token(self, provider: str) -> str:
        if self._token is not None:
            return self._token

        def refused(problem: str) -> ImageCredentialError:
            return ImageCredentialError(f"provider {provider}: service-account token file {self.token_file}: {problem}")

        # Regular files only, bounded: a FIFO or a device is refused, not read.
        data = read_or_raise(self.token_file or "", refused, max_bytes=MAX_TOKEN_BYTES)
        try:
            token = data.decode("utf-8").strip()
        except UnicodeDecodeError:
            token = None  # raised below, outside the except block: a decode error carries the file's bytes
        if token is None:
            raise refused("is not UTF-8 text")
        if not token:
            raise refused("is empty")
        return token


def _annotations(value: Any, option: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ImageCredentialError(f"{option} must map strings to strings, not {type_name(value)}")
    annotations = dict(value)
    size = 0
    for key, text in annotations.items():
        if not isinstance(key, str) or not isinstance(text, str):
            raise ImageCredentialError(f"{option} must map strings to strings (found {type_name(key)}: {type_name(text)})")
        size += len(key.encode("utf-8", "surrogatepass")) + len(text.encode("utf-8", "surrogatepass"))
        if size > MAX_ANNOTATION_BYTES:
            raise ImageCredentialError(f"{option} are larger than {MAX_ANNOTATION_BYTES} bytes, Kubernetes' bound on an object's annotations")
    return annotations


def from_options(token_file: str | os.PathLike[str] | None, annotations: Mapping[str, str] | None) -> ServiceAccount | None:
    """The service account of an ImageCredentials' ``service_account_token_file`` and
    ``service_account_annotations``: ``None`` without a token file."""
    checked = _annotations(annotations, "service_account_annotations")
    return None if token_file is None else ServiceAccount(token_file=os.fspath(token_file), annotations=checked)


def for_request(token: Any, annotations: Any, coordinates: Any) -> ServiceAccount:
    """The service account given with one lookup (``service_account_token=``,
    ``service_account_annotations=``, ``service_account=``), checked. The token is sent as
    given (a kubelet sends the TokenRequest's token verbatim); it is never quoted."""
    if token is None:
        raise ImageCredentialError(
            "service_account_annotations= and service_account= describe the service account of service_account_token=, which was not given"
        )
    if not isinstance(token, str):
        raise ImageCredentialError(f"service_account_token must be a string, not {type_name(token)}")
    if not token:
        raise ImageCredentialError("service_account_token is empty")
    if len(token.encode("utf-8", "surrogatepass")) > MAX_TOKEN_BYTES:
        raise ImageCredentialError(f"service_account_token is larger than {MAX_TOKEN_BYTES} bytes")
    where: tuple[str, str, str] | None = None
    if coordinates is not None:
        if (
            not isinstance(coordinates, (tuple, list))
            or len(coordinates) != 3
            or not all(isinstance(part, str) for part in coordinates)
            or not coordinates[0]
            or not coordinates[1]
        ):
            raise ImageCredentialError("service_account must be (namespace, name, uid): three strings, namespace and name not empty")
        where = (coordinates[0], coordinates[1], coordinates[2])
    return ServiceAccount(token=token, annotations=_annotations(annotations, "service_account_annotations"), coordinates=where)


def missing_annotation(attributes: TokenAttributes, annotations: Mapping[str, str]) -> str | None:
    """The first required annotation key ``annotations`` lack, if any."""
    return next((key for key in attributes.required_service_account_annotation_keys if key not in annotations), None)


def _key(*parts: Any) -> str:
    # JSON: unambiguous however the parts are spelled, as the kubelet's length-prefixed key is.
    return json.dumps(parts, ensure_ascii=False, separators=(",", ":"))


def _digest(token: str) -> str:
    return "sha256:" + hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def ask(provider: CredentialProvider, account: ServiceAccount | None) -> Ask | None:
    """What to send ``provider`` for a lookup with ``account`` (``None``: no service account),
    or ``None`` when the kubelet would not run it (a required annotation is missing). Raises
    :class:`~cpcreds.ImageCredentialError` when the provider requires a service account and
    there is no token."""
    attributes = provider.token_attributes
    if attributes is None:
        return PLAIN
    if account is None:
        if attributes.require_service_account:
            raise ImageCredentialError(
                f"provider {provider.name}: tokenAttributes.requireServiceAccount is true, but no service-account token was given "
                "(service_account_token= with get(), service_account_token_file=, --service-account-token-file)"
            )
        return PLAIN  # the kubelet runs it without a token for pods without a service account
    missing = missing_annotation(attributes, account.annotations)
    if missing is not None:
        _log.debug("provider not run: the service account lacks a required annotation", provider=provider.name, annotation=missing)
        return None
    wanted = (*attributes.required_service_account_annotation_keys, *attributes.optional_service_account_annotation_keys)
    annotations = {key: account.annotations[key] for key in wanted if key in account.annotations}
    per_token = attributes.cache_type == "Token"
    if account.per_request:
        token = account.read_token(provider.name)
        if per_token or account.coordinates is None:
            identity = _key("pod", account.coordinates, annotations, "token", _digest(token))
        else:
            identity = _key("pod", account.coordinates, annotations)
        return Ask(identity, lambda: token, annotations, False, per_token)
    if per_token:
        # Answers belong to the token: a rotated token is a new key. The file is read now.
        token = account.read_token(provider.name)
        return Ask(_key("own", annotations, "token", _digest(token)), lambda: token, annotations, False, True)
    own = account
    return Ask(_key("own", annotations), lambda: own.read_token(provider.name), annotations, True, False)


def check_answer(provider: CredentialProvider, request: Ask, token: str | None, passwords: Any) -> None:
    """Refuse an answer whose password is the token itself unless ``cacheType`` is Token, as the
    kubelet does (credentials of one token would otherwise serve the service account's others)."""
    if token and not request.token_may_be_the_password and any(auth.password == token for auth in passwords):
        raise PluginOutputError(
            f"{provider.executable}: the response is not used: a password is the service-account token itself, "
            "which only tokenAttributes.cacheType Token allows",
            provider=provider.name,
        )


def scrub(message: str, token: str | None) -> str:
    """``message`` without ``token`` in it (a plugin may echo its request on stderr): as sent,
    as the JSON request spells it, and with its whitespace folded as a stderr tail is."""
    if not token or len(token) < _SCRUB_FROM:
        return message
    from ..logs import REDACTED

    for form in (token, json.dumps(token, ensure_ascii=False)[1:-1], " ".join(token.split())):
        if len(form) >= _SCRUB_FROM:
            message = message.replace(form, REDACTED)
    return message
