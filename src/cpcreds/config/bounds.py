"""The bounds every document is read within, and the one error for a document that passes them
or is not well formed: shared by the loader (:mod:`.documents`), its JSON reader
(:mod:`.jsonreader`), its YAML builder (:mod:`.yamlbuilder`) and :func:`.plain.plain_copy`."""

from __future__ import annotations

from typing import NamedTuple

from .._patterns import LazyPattern
from .._show import shown

__all__ = [
    "DocumentError",
    "Limits",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_ALIASES",
    "DEFAULT_MAX_NODES",
    "MAX_INT_DIGITS",
    "SHOWABLE_KEY",
    "bracket_depth",
    "show_key",
    "size_text",
]

#: Default bound on one input (bytes).
DEFAULT_MAX_BYTES = 4 * 1024 * 1024
#: Default bound on nesting (a Kubernetes object is rarely deeper than 20).
DEFAULT_MAX_DEPTH = 100
#: Default bound on the number of YAML aliases in one stream.
DEFAULT_MAX_ALIASES = 1000
#: Default bound on the number of values (scalars and collections, aliases expanded) in a stream.
DEFAULT_MAX_NODES = 2_000_000
#: Longest integer accepted (CPython refuses to convert longer decimal strings).
MAX_INT_DIGITS = 4300


class Limits(NamedTuple):
    """The bounds on one kind of input document, written once where that kind is read (the
    provider config's, a profile file's, a plugin's answer's) and passed whole to
    :func:`~cpcreds.config.documents.load_document`, ``load_documents`` and ``load_or_raise``."""

    max_bytes: int = DEFAULT_MAX_BYTES
    max_depth: int = DEFAULT_MAX_DEPTH
    max_aliases: int = DEFAULT_MAX_ALIASES
    max_nodes: int = DEFAULT_MAX_NODES


class DocumentError(ValueError):
    """A document cannot be read. ``reason`` says what is wrong without quoting the content;
    ``line`` is 1-based when known; ``source`` names the input (a path, ``<stdin>``, …);
    ``kind`` is a short machine-readable class (``too-large``, ``syntax``, ``too-deep``,
    ``aliases``, ``duplicate-key``, ``key``, ``number``, ``tag``, ``encoding``, ``documents``).
    ``str()`` is ``"<source>: <reason> at line N"``."""

    def __init__(self, reason: str, *, source: str, line: int | None = None, kind: str = "syntax") -> None:
        self.reason, self.source, self.line, self.kind = reason, source, line, kind
        super().__init__(f"{source}: {self.detail}")

    @property
    def detail(self) -> str:
        """The message without the source: ``"<reason> at line N"``."""
        return f"{self.reason} at line {self.line}" if self.line is not None else self.reason


# Only an error or an unusual document needs it: compiled on first use.
#: What a key or tag may look like to be named in a message (a field name, not a value).
SHOWABLE_KEY = LazyPattern(r"[A-Za-z0-9_.$/@:\-]{1,64}")
_NOT_BRACKET = LazyPattern(r"[^\[\]{}]+")


def size_text(n: int) -> str:
    """``n`` bytes as a message says it (``4 MiB``, ``64 KiB``, ``100 bytes``)."""
    if n >= 1024 * 1024 and n % (1024 * 1024) == 0:
        return f"{n // (1024 * 1024)} MiB"
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n} bytes"


def show_key(key: str) -> str:
    """A mapping key as a message may name it: quoted when it looks like a field name, else a
    placeholder (a key may be a value, a token among them)."""
    return shown(key, limit=64, shape=SHOWABLE_KEY, otherwise="(a key that is not shown)")


def bracket_depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` in ``text`` (whose strings the caller has removed)."""
    depth = deepest = 0
    for char in _NOT_BRACKET.sub("", text):
        if char in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
        elif depth:
            depth -= 1
    return deepest
