"""Image references as the kubelet reads them before it asks a credential provider.

The kubelet parses a container's ``image`` with the Docker reference grammar
(``distribution/reference.ParseNormalizedNamed``) and hands credential providers the *repository*
only: the registry and path, without tag or digest, Docker Hub names spelled out
(``nginx:1.27`` becomes ``docker.io/library/nginx``). :func:`parse_image` does the same, so a
plugin sees what it would see on a node, and the ``Image`` and ``Registry`` cache keys are the
kubelet's.

Grammar (distribution/reference)::

    reference   := name [ ":" tag ] [ "@" digest ]
    name        := [domain "/"] path-component ["/" path-component]*
    domain      := host [":" port]       host: DNS-style components or a [IPv6] literal
    path-component := [a-z0-9]+ ([_.] | "__" | "-"+ [a-z0-9]+)*
    tag         := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
    digest      := algorithm ":" hex{32,}

The whole name is at most 255 characters. Anything else is an :class:`InvalidImageError`,
whose message quotes the image only when it is short and printable.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ..errors import InvalidImageError

__all__ = ["ImageReference", "parse_image", "DOCKER_HUB", "MAX_NAME_LENGTH"]

#: The registry of names without one (``nginx``, ``library/nginx``).
DOCKER_HUB = "docker.io"
_LEGACY_DOCKER_HUB = "index.docker.io"
_OFFICIAL_PREFIX = "library/"
#: distribution/reference's NameTotalLengthMax.
MAX_NAME_LENGTH = 255
#: Longest input looked at: a name, a 128-character tag and a long digest fit with room to spare.
_MAX_INPUT = 1024

_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])"
_DOMAIN = rf"{_HOST}(?::[0-9]+)?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_PATH = rf"{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
# ASCII only: \w in a str pattern would take any Unicode letter, Go's takes [0-9A-Za-z_].
_REFERENCE = re.compile(rf"(?:(?P<domain>{_DOMAIN})/)?(?P<path>{_PATH})(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?", re.ASCII)
# A 64-character hex string alone is an image ID, which the Docker grammar refuses as a name.
_IDENTIFIER = re.compile(r"[a-f0-9]{64}")


class ImageReference(NamedTuple):
    """A parsed image reference.

    ``repository`` is what the kubelet sends a credential provider and uses as the ``Image``
    cache key (``registry/path``); ``registry`` is ``host[:port]``, the ``Registry`` cache key;
    ``tag`` and ``digest`` are ``None`` when absent."""

    repository: str
    registry: str
    path: str
    tag: str | None
    digest: str | None


def _shown(image: str) -> str:
    return repr(image) if len(image) <= 200 and image.isprintable() else "the image"


def _split_domain(name: str) -> tuple[str, str]:
    """distribution/reference's splitDockerDomain: the first component is a registry only when it
    looks like one (has a dot or a port, is ``localhost``, or has upper case)."""
    first, slash, rest = name.partition("/")
    if not slash or ("." not in first and ":" not in first and first != "localhost" and first.lower() == first):
        domain, remainder = DOCKER_HUB, name
    else:
        domain, remainder = first, rest
    if domain == _LEGACY_DOCKER_HUB:
        domain = DOCKER_HUB
    if domain == DOCKER_HUB and "/" not in remainder:
        remainder = _OFFICIAL_PREFIX + remainder
    return domain, remainder


def parse_image(image: str) -> ImageReference:
    """Parse and normalise ``image`` as the kubelet does (``ParseNormalizedNamed``).

    >>> parse_image("nginx:1.27").repository
    'docker.io/library/nginx'
    >>> parse_image("registry.example:5000/team/app@sha256:" + "a" * 64).registry
    'registry.example:5000'

    Raises :class:`~cpcreds.errors.InvalidImageError` for anything that is not a reference.
    """
    if not isinstance(image, str):
        raise InvalidImageError(f"an image must be a string, not {type(image).__name__}")
    if not image:
        raise InvalidImageError("the image is empty")
    if len(image) > _MAX_INPUT:
        raise InvalidImageError(f"the image is longer than {_MAX_INPUT} characters")
    if _IDENTIFIER.fullmatch(image):
        raise InvalidImageError(f"invalid image {_shown(image)}: a 64-character hexadecimal string is an image ID, not a name")
    domain, remainder = _split_domain(image)
    # As Go does: everything before the first ":" must be lower case (a digest's algorithm too).
    repository_part = remainder.split(":", 1)[0]
    if repository_part.lower() != repository_part:
        raise InvalidImageError(f"invalid image {_shown(image)}: the repository name must be lowercase")
    match = _REFERENCE.fullmatch(f"{domain}/{remainder}")
    if match is None:
        raise InvalidImageError(f"invalid image {_shown(image)}: not [registry[:port]/]path[:tag][@digest]")
    registry, path = match["domain"], match["path"]
    assert registry is not None  # _split_domain always gives one
    repository = f"{registry}/{path}"
    if len(repository) > MAX_NAME_LENGTH:
        raise InvalidImageError(f"invalid image {_shown(image)}: the name is longer than {MAX_NAME_LENGTH} characters")
    return ImageReference(repository, registry, path, match["tag"], match["digest"])
