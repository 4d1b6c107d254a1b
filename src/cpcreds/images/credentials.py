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
import math
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from ..errors import CredentialError, ImageCredentialError
from .cache import DEFAULT_MAX_ENTRIES, DEFAULT_PURGE_INTERVAL, CacheEntry, ImageCredentialCache
from .config import CredentialProvider, CredentialProviderConfig, load_credential_provider_config
from .match import merge_auth, parse_schemeless_url, select_auth
from .protocol import AuthConfig
from .reference import DOCKER_HUB, ImageReference, parse_image
from .runner import DEFAULT_TIMEOUT, PluginRunner
from .serviceaccount import MAX_TOKEN_BYTES, Ask, ServiceAccount, check_answer, for_request, from_options
from .serviceaccount import ask as ask_for

__all__ = ["ImageCredentials", "RegistryCredential", "RegistryCredentials", "docker_config_key", "MAX_TOKEN_BYTES"]

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


class ImageCredentials:
    """Registry credentials for images, from kubelet credential provider plugins (KEP-2133).

    Thread-safe: any number of threads may call :meth:`get` at once; one plugin run per
    provider and cache key serves them all. :meth:`close` (or leaving a ``with`` block) kills
    the plugins still running and makes later calls fail with
    :class:`~cpcreds.ImageCredentialError`.

    ``timeout`` bounds each plugin run (seconds; the kubelet uses one minute).
    ``service_account_token_file`` is this program's own service-account token, sent as
    ``serviceAccountToken`` to providers whose ``tokenAttributes`` ask for one (read again at
    every run), and ``service_account_annotations`` that service account's annotations, of which
    each such provider gets the ones its tokenAttributes name. A lookup on a pod's behalf gives
    the pod's token and annotations to :meth:`get` instead. ``clock`` (monotonic seconds) is for
    tests that simulate time; ``max_entries`` bounds the cache.
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
        self.config = config
        self._runner = PluginRunner(timeout=timeout)
        self._cache = ImageCredentialCache(clock=clock, max_entries=max_entries, purge_interval=purge_interval)
        self._clock = clock
        self._service_account = from_options(service_account_token_file, service_account_annotations)
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

    def get(
        self,
        image: str,
        *,
        service_account_token: str | None = None,
        service_account_annotations: Mapping[str, str] | None = None,
        service_account: tuple[str, str, str] | None = None,
    ) -> RegistryCredentials:
        """The registry credentials that apply to ``image`` (``nginx``,
        ``gcr.io/project/app:1.0``, ``registry:5000/team/app@sha256:…``), best first.

        On a pod's behalf (KEP-4412), give that pod's service-account token
        (``service_account_token``, for the audience the providers' tokenAttributes name), its
        service account's annotations (``service_account_annotations``; each provider is sent
        only the keys it names) and, so that answers of a ``cacheType: ServiceAccount`` provider
        are shared by that service account's pods, its ``service_account=(namespace, name,
        uid)``; without it they are kept per token. These replace the constructor's token file
        and annotations for this lookup, and its answers never serve another token or service
        account. A provider whose required annotation is missing is not run and gives no
        credentials, as the kubelet skips it.

        Raises :class:`~cpcreds.InvalidImageError` for a string that is not an image
        reference, a :class:`~cpcreds.PluginError` naming the provider when a matching plugin
        fails, times out or answers something unusable (nothing is cached then),
        :class:`~cpcreds.ImageCredentialError` when a provider requires a service-account token
        that was not given, for a malformed token, annotations or ``service_account``, and
        after :meth:`close`.
        """
        if service_account_token is None and service_account_annotations is None and service_account is None:
            remembered = self._remembered.get(image)
            if remembered is not None and self._clock() < remembered[0]:
                return remembered[1]
            return self._lookup(image, self._service_account)
        return self._lookup(image, for_request(service_account_token, service_account_annotations, service_account))

    def providers_for(self, image: str) -> list[str]:
        """The names of the providers whose matchImages match ``image``, in config order (runs
        nothing)."""
        reference = parse_image(image)
        target = parse_schemeless_url(reference.repository)
        return [provider.name for provider in self.config.providers if provider.matches(target)]

    def _lookup(self, image: str, account: ServiceAccount | None) -> RegistryCredentials:
        if self._closed:
            raise ImageCredentialError("the ImageCredentials is closed")
        reference = parse_image(image)
        target = parse_schemeless_url(reference.repository)
        answers: list[Mapping[str, tuple[str, AuthConfig]]] = []
        valid_until = math.inf
        # Only the constructor's own service account may answer from the fast path: it is keyed by
        # the image string alone.
        rememberable = account is self._service_account
        for provider in self.config.providers:
            if not provider.matches(target):
                continue
            ask = ask_for(provider, account)
            if ask is None:
                continue  # the kubelet does not run it: a required annotation is missing
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

    def _answer(self, provider: CredentialProvider, reference: ImageReference, ask: Ask) -> CacheEntry:
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
                    token = ask.token()
                    response = self._runner.run(
                        provider, reference.repository, service_account_token=token, service_account_annotations=ask.annotations or None
                    )
                    check_answer(provider, ask, token, response.auth.values())
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
