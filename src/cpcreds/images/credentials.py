"""ImageCredentials: registry credentials for an image from the node's kubelet credential providers.

::

    from cpcreds import ImageCredentials

    with ImageCredentials.from_kubelet_config("/etc/kubernetes/credential-providers.yaml",
                                              "/usr/local/bin/credential-providers") as images:
        for credential in images.get("123456789.dkr.ecr.eu-west-1.amazonaws.com/app:1.4"):
            print(credential.key, credential.username)   # the password is credential.password

The flow, as the kubelet's: the image is parsed and normalised (:mod:`.reference`); every provider
whose matchImages match it (:mod:`.match`) is asked, in config order, through the cache and its
single flight (:mod:`.cache`) and the exec runner (:mod:`.runner`); the answers' auth maps are
merged (the earlier provider wins a key) and the keys that match the image are returned, best
first. A repeated ``get`` of the same image string while every answer it used is still cached is
one dictionary lookup and one clock read.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from ..config.documents import read_or_raise
from ..errors import CredentialError, ImageCredentialError
from .cache import DEFAULT_MAX_ENTRIES, DEFAULT_PURGE_INTERVAL, CacheEntry, ImageCredentialCache
from .config import CredentialProvider, CredentialProviderConfig, load_credential_provider_config
from .match import merge_auth, parse_schemeless_url, select_auth
from .protocol import AuthConfig
from .reference import DOCKER_HUB, ImageReference, parse_image
from .runner import DEFAULT_TIMEOUT, PluginRunner

__all__ = ["ImageCredentials", "RegistryCredential", "RegistryCredentials", "docker_config_key", "MAX_TOKEN_BYTES"]

#: A projected service-account token is a JWT of a few KiB.
MAX_TOKEN_BYTES = 64 * 1024
#: How many image strings keep their answer for the fast path.
_MAX_REMEMBERED = 10_000
#: The key docker, crane and podman read Docker Hub credentials from in config.json.
_DOCKER_HUB_KEY = "https://index.docker.io/v1/"


def docker_config_key(registry: str) -> str:
    """The ``auths`` key of ``registry`` in a docker ``config.json``: ``host[:port]``, and
    ``https://index.docker.io/v1/`` for Docker Hub, as docker and crane look it up (podman and
    skopeo read that spelling too)."""
    return _DOCKER_HUB_KEY if registry == DOCKER_HUB else registry


@dataclass(frozen=True, slots=True)
class RegistryCredential:
    """One username and password for the registry key ``key`` (a matchImages-style pattern
    such as ``gcr.io``, ``*.azurecr.io`` or ``registry.io:8080/team``), from ``provider``.

    ``repr()`` never shows the password."""

    key: str
    username: str
    password: str = field(repr=False)
    provider: str = ""

    def __repr__(self) -> str:
        password = "<redacted>" if self.password else "''"
        return f"RegistryCredential(key={self.key!r}, username={self.username!r}, password={password}, provider={self.provider!r})"

    def basic_auth(self) -> str:
        """``base64(username:password)``, the ``auth`` value of config.json and of an HTTP
        ``Authorization: Basic`` header."""
        return base64.b64encode(f"{self.username}:{self.password}".encode()).decode("ascii")


class RegistryCredentials(Sequence[RegistryCredential]):
    """The credentials that apply to one image, best first (the order the kubelet tries them
    in: a longer key before the key it extends, a literal before a wildcard). Empty when no
    provider matches the image or none answered with a key that matches it.

    ``image`` is the repository asked for (``docker.io/library/nginx`` for ``nginx:1.27``),
    ``registry`` its ``host[:port]``. Immutable; ``repr()`` never shows a password.
    """

    __slots__ = ("image", "registry", "_items")

    def __init__(self, image: str, registry: str, items: Sequence[RegistryCredential] = ()) -> None:
        self.image, self.registry = image, registry
        self._items = tuple(items)

    @overload
    def __getitem__(self, index: int) -> RegistryCredential: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[RegistryCredential]: ...
    def __getitem__(self, index: int | slice) -> RegistryCredential | Sequence[RegistryCredential]:
        return self._items[index]

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[RegistryCredential]:
        return iter(self._items)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RegistryCredentials):
            return NotImplemented
        return (self.image, self.registry, self._items) == (other.image, other.registry, other._items)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"RegistryCredentials(image={self.image!r}, registry={self.registry!r}, credentials={list(self._items)!r})"

    def docker_config(self) -> dict[str, Any]:
        """A docker ``config.json`` document for the image's registry: ``{"auths": {key:
        {"auth": base64(user:pass), "username": ..., "password": ...}}}`` with the best
        credential, keyed by :func:`docker_config_key`; ``{"auths": {}}`` when there is none."""
        if not self._items:
            return {"auths": {}}
        best = self._items[0]
        entry = {"auth": best.basic_auth(), "username": best.username, "password": best.password}
        return {"auths": {docker_config_key(self.registry): entry}}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view, passwords included: ``{"image", "registry", "credentials":
        [{"key", "username", "password", "provider"}]}``."""
        return {
            "image": self.image,
            "registry": self.registry,
            "credentials": [{"key": c.key, "username": c.username, "password": c.password, "provider": c.provider} for c in self._items],
        }


class _ServiceAccount:
    """The service account a provider's ``tokenAttributes`` ask for: a token read from a file
    when a plugin runs (projected tokens are rotated), and annotations as the kubelet would read
    them from the ServiceAccount object."""

    def __init__(self, token_file: str | None, annotations: Mapping[str, str]) -> None:
        self.token_file = token_file
        self.annotations = dict(annotations)

    def read_token(self, provider: str) -> str:
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


@dataclass(frozen=True)
class _Ask:
    """What to send one provider for one lookup, and the identity its answers are kept under."""

    identity: str
    token_loader: Callable[[], str | None]
    annotations: Mapping[str, str]
    cacheable_by_image_string: bool


def _no_token() -> None:
    return None


_PLAIN = _Ask("", _no_token, {}, True)


class ImageCredentials:
    """Registry credentials for images, from kubelet credential provider plugins (KEP-2133).

    Thread-safe: any number of threads may call :meth:`get` at once; one plugin run per
    provider and cache key serves them all. :meth:`close` (or leaving a ``with`` block) kills
    the plugins still running and makes later calls fail with
    :class:`~cpcreds.ImageCredentialError`.

    ``timeout`` bounds each plugin run (seconds; the kubelet uses one minute).
    ``service_account_token_file`` is the token sent as ``serviceAccountToken`` to providers
    whose ``tokenAttributes`` ask for one (read again at every run), and
    ``service_account_annotations`` the service account's annotations, of which each such
    provider gets the ones its tokenAttributes name. ``clock`` (monotonic seconds) is for tests
    that simulate time; ``max_entries`` bounds the cache.
    """

    def __init__(
        self,
        config: CredentialProviderConfig,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        service_account_token_file: str | os.PathLike[str] | None = None,
        service_account_annotations: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        purge_interval: float = DEFAULT_PURGE_INTERVAL,
    ) -> None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
            raise ImageCredentialError("timeout must be a positive number of seconds")
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
            raise ImageCredentialError("max_entries must be a whole number of at least 1")
        if isinstance(purge_interval, bool) or not isinstance(purge_interval, (int, float)) or not 0 <= purge_interval < math.inf:
            raise ImageCredentialError("purge_interval must be a number of seconds, 0 or more")
        annotations = dict(service_account_annotations or {})
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in annotations.items()):
            raise ImageCredentialError("service_account_annotations must map strings to strings")
        self.config = config
        self._runner = PluginRunner(timeout=timeout)
        self._cache = ImageCredentialCache(clock=clock, max_entries=max_entries, purge_interval=purge_interval)
        self._clock = clock
        token_file = os.fspath(service_account_token_file) if service_account_token_file is not None else None
        self._service_account = _ServiceAccount(token_file, annotations)
        # image string -> (valid until, answer): the fast path of get().
        self._remembered: dict[str, tuple[float, RegistryCredentials]] = {}
        self._closed = False
        self._close_lock = threading.Lock()

    @classmethod
    def from_kubelet_config(
        cls,
        path: str | os.PathLike[str],
        bin_dir: str | os.PathLike[str],
        **options: Any,
    ) -> ImageCredentials:
        """Load the kubelet's ``--image-credential-provider-config`` (a file or a directory) with
        its ``--image-credential-provider-bin-dir``, validated as the kubelet validates them
        (:class:`~cpcreds.ConfigError` naming file, provider and field). ``options`` are those
        of the constructor (``timeout``, ``service_account_token_file``, …)."""
        return cls(load_credential_provider_config(path, bin_dir), **options)

    # -- lookups -----------------------------------------------------------------------------

    def get(self, image: str) -> RegistryCredentials:
        """The registry credentials that apply to ``image`` (``nginx``,
        ``gcr.io/project/app:1.0``, ``registry:5000/team/app@sha256:…``), best first.

        Raises :class:`~cpcreds.InvalidImageError` for a string that is not an image
        reference, a :class:`~cpcreds.PluginError` naming the provider when a matching plugin
        fails, times out or answers something unusable (nothing is cached then),
        :class:`~cpcreds.ImageCredentialError` when a provider requires a service-account token
        that was not given or after :meth:`close`.
        """
        remembered = self._remembered.get(image)
        if remembered is not None and self._clock() < remembered[0]:
            return remembered[1]
        return self._lookup(image)

    def providers_for(self, image: str) -> list[str]:
        """The names of the providers whose matchImages match ``image``, in config order (runs
        nothing)."""
        reference = parse_image(image)
        target = parse_schemeless_url(reference.repository)
        return [provider.name for provider in self.config.providers if provider.matches(target)]

    def _lookup(self, image: str) -> RegistryCredentials:
        if self._closed:
            raise ImageCredentialError("the ImageCredentials is closed")
        reference = parse_image(image)
        target = parse_schemeless_url(reference.repository)
        answers: list[Mapping[str, tuple[str, AuthConfig]]] = []
        valid_until = math.inf
        rememberable = True
        for provider in self.config.providers:
            if not provider.matches(target):
                continue
            ask = self._ask(provider)
            entry = self._answer(provider, reference, ask)
            valid_until = min(valid_until, entry.expires_at)
            rememberable = rememberable and ask.cacheable_by_image_string
            answers.append({key: (provider.name, auth) for key, auth in entry.auth.items()})
        chosen = select_auth(merge_auth(answers), reference.repository)
        result = RegistryCredentials(
            reference.repository,
            reference.registry,
            [RegistryCredential(key, auth.username, auth.password, name) for key, (name, auth) in chosen],
        )
        if rememberable and self._clock() < valid_until and not self._closed:
            if len(self._remembered) >= _MAX_REMEMBERED:
                self._forget_expired()
            self._remembered[image] = (valid_until, result)
        return result

    def _forget_expired(self) -> None:
        now = self._clock()
        for key, (valid_until, _) in list(self._remembered.items()):
            if not now < valid_until:
                self._remembered.pop(key, None)
        if len(self._remembered) >= _MAX_REMEMBERED:
            self._remembered.clear()

    def _ask(self, provider: CredentialProvider) -> _Ask:
        attributes = provider.token_attributes
        if attributes is None:
            return _PLAIN
        account = self._service_account
        if account.token_file is None:
            if attributes.require_service_account:
                raise ImageCredentialError(
                    f"provider {provider.name}: tokenAttributes.requireServiceAccount is true, but no service-account token "
                    "was given (service_account_token_file=, --service-account-token-file)"
                )
            return _PLAIN  # the kubelet runs it without a token for pods without a service account
        missing = [key for key in attributes.required_service_account_annotation_keys if key not in account.annotations]
        if missing:
            raise ImageCredentialError(
                f"provider {provider.name}: the service account lacks the required annotation {missing[0]} "
                "(tokenAttributes.requiredServiceAccountAnnotationKeys); the kubelet would not run this plugin"
            )
        wanted = (*attributes.required_service_account_annotation_keys, *attributes.optional_service_account_annotation_keys)
        annotations = {key: account.annotations[key] for key in wanted if key in account.annotations}
        identity = json.dumps(sorted(annotations.items()))
        if attributes.cache_type == "Token":
            # Answers belong to the token: a rotated token is a new key. The file is read now.
            token = account.read_token(provider.name)
            identity += "\x00" + hashlib.sha256(token.encode()).hexdigest()
            return _Ask(identity, lambda: token, annotations, False)
        return _Ask(identity, lambda: account.read_token(provider.name), annotations, True)

    def _answer(self, provider: CredentialProvider, reference: ImageReference, ask: _Ask) -> CacheEntry:
        cache = self._cache
        while True:
            begun = cache.begin(provider.name, reference, ask.identity)
            if isinstance(begun, CacheEntry):
                return begun
            flight, leader = begun
            if leader:
                try:
                    if self._closed:
                        raise ImageCredentialError("the ImageCredentials is closed")
                    response = self._runner.run(
                        provider,
                        reference.repository,
                        service_account_token=ask.token_loader(),
                        service_account_annotations=ask.annotations or None,
                    )
                except CredentialError as error:
                    cache.fail(flight, error)
                    raise
                except BaseException:
                    cache.abandon(flight)
                    raise
                return cache.finish(flight, reference, ask.identity, response, provider.default_cache_duration)
            flight.wait()
            flight.raise_error_for(reference)
            if flight.applies_to(reference):
                assert flight.entry is not None
                return flight.entry
            # Abandoned, failed asking about another image, or its answer is for another image:
            # look again (the cache may have it now; else this caller runs its own lookup).

    # -- life --------------------------------------------------------------------------------

    def purge(self) -> int:
        """Drop expired answers now (they are also dropped as lookups go); returns how many."""
        self._forget_expired()
        return self._cache.purge()

    def clear(self) -> None:
        """Forget every cached answer: the next lookups run the plugins again."""
        self._remembered.clear()
        self._cache.clear()

    def close(self) -> None:
        """Kill the plugins still running (their callers get an error), forget every answer,
        and refuse further lookups. Idempotent."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self._remembered.clear()
        self._runner.close()
        self._cache.clear()

    def __enter__(self) -> ImageCredentials:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        names = ", ".join(provider.name for provider in self.config.providers)
        state = ", closed" if self._closed else ""
        return f"ImageCredentials({self.config.source!r}, providers=[{names}]{state})"
