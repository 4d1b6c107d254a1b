"""One bounded loader for every YAML or JSON document cpcreds reads.

Config files, ClusterProfile files and exec-plugin answers are all read through
:func:`load_document` / :func:`load_documents`. Whatever the input, they return plain data
(``dict`` with ``str`` keys, ``list``, ``str``, ``int``, ``float``, ``bool``, ``None``) or raise
:class:`DocumentError`, in time and memory bounded by the input's size:

- **Size**: more than ``max_bytes`` is refused before parsing.
- **Nesting depth**: more than ``max_depth`` levels is refused while parsing. YAML is built from
  the parser's event stream by an iterative builder (no recursion, so 25,000 levels of ``[``
  cannot overflow the C stack); JSON is pre-scanned for its bracket depth before ``json.loads``.
- **Aliases**: YAML aliases are counted (at most ``max_aliases``) and the size of what they expand
  to is counted too: at most ``max_nodes`` values in all, and at most ``max_bytes`` of text once
  written out (a document may not expand past the size it could have had without aliases). A
  "billion laughs" document fails after a few dozen events. An alias to an enclosing node (a
  recursive structure) is refused.
- **Duplicate mapping keys** are an error naming the key and its line (Go's yaml.v3 and
  sigs.k8s.io/yaml refuse them too; PyYAML and ``json`` silently keep the last one).
- **Keys are strings**: a YAML key is taken as written (``1: x`` gives the key ``"1"``, as
  sigs.k8s.io/yaml turns YAML into JSON); a sequence or mapping used as a key is an error.
- **Scalars as Go reads them**: timestamps (``2024-01-01``) and base-60 numbers (``22:22``) stay
  strings; ``!!binary`` stays its base64 text; ``!!set``/``!!omap``/``!!pairs``, Python tags and
  unknown tags are errors. Integers of more than :data:`MAX_INT_DIGITS` digits and non-finite
  floats (``.inf``, ``NaN``, ``1e999``) are errors.

:class:`DocumentError` messages never quote the document's values (a plugin answer may hold a
token); they say what is wrong and where (``line N``). A duplicate key is named only when it
looks like a field name.

This module is the API and the file reading; the bounds and the error are in :mod:`.bounds`, JSON
in :mod:`.jsonreader`, YAML in :mod:`.yamlbuilder`, data given in Python in :mod:`.plain`. Every
name listed in ``__all__`` is imported from here, as it always was.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Any, Callable, Literal

from .bounds import (
    DEFAULT_MAX_ALIASES,
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_NODES,
    MAX_INT_DIGITS,
    DocumentError,
    Limits,
    size_text,
)
from .jsonreader import NOT_READ, load_json, one_json_object
from .plain import plain_copy, thaw
from .yamlbuilder import YamlBuilder

__all__ = [
    "DocumentError",
    "Limits",
    "load_document",
    "load_or_raise",
    "read_or_raise",
    "load_documents",
    "open_regular",
    "read_bounded",
    "plain_copy",
    "thaw",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_ALIASES",
    "DEFAULT_MAX_NODES",
    "MAX_INT_DIGITS",
]

Syntax = Literal["auto", "json", "yaml"]


#: How every file named from outside is opened: O_NONBLOCK so that opening a FIFO planted at the
#: path returns at once instead of waiting for a writer (it is then refused as not regular).
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def open_regular(path: str | os.PathLike[str]) -> int:
    """A read-only descriptor on the regular file at ``path`` (a symlink to one is followed);
    the caller closes it. Nothing here can block: the open is non-blocking and only a regular
    file is kept, so a FIFO, a device (``/dev/zero``) or a socket swapped in at the path cannot
    hang the caller or feed it forever.

    A folder raises ``IsADirectoryError``; any other non-regular file :class:`DocumentError`
    (kind ``not-a-file``, "is not a regular file"); other ``OSError`` (missing, permission) is
    left to the caller, which knows how to name it.
    """
    fd = os.open(path, _OPEN_FLAGS)
    try:
        mode = os.fstat(fd).st_mode
    except BaseException:
        os.close(fd)
        raise
    if stat.S_ISREG(mode):
        return fd
    os.close(fd)
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
    raise DocumentError("is not a regular file", source=os.fspath(path), kind="not-a-file")


def read_bounded(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """The bytes of the regular file at ``path`` (opened by :func:`open_regular`, so a FIFO or a
    device is refused without blocking); :class:`DocumentError` kind ``too-large`` if it holds
    more than ``max_bytes``, which are never all read (a file growing while read stops there).

    ``OSError`` (missing file, permission, ``IsADirectoryError``) is left to the caller.
    """
    chunks: list[bytes] = []
    size = 0
    fd = open_regular(path)
    try:
        # In pieces: read(max_bytes + 1) would allocate the whole bound for a small file.
        while size <= max_bytes:
            chunk = os.read(fd, min(1024 * 1024, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > max_bytes:
        raise DocumentError(f"is larger than {size_text(max_bytes)}", source=os.fspath(path), kind="too-large")
    return b"".join(chunks)


def load_document(
    data: str | bytes,
    *,
    source: str,
    syntax: Syntax = "auto",
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_aliases: int = DEFAULT_MAX_ALIASES,
    max_nodes: int = DEFAULT_MAX_NODES,
) -> Any:
    """Parse one YAML or JSON document (``None`` for an empty one).

    ``syntax="auto"`` reads text that starts with ``{`` or ``[`` as JSON when it is valid JSON and
    as YAML otherwise (YAML flow style looks the same); ``"json"`` and ``"yaml"`` force one.
    More than one YAML document is an error (kind ``documents``).
    """
    if type(data) is bytes and data[:1] == b"{" and syntax != "yaml" and len(data) <= max_bytes:
        # The usual document, one JSON object (every plugin answer), read without the general
        # path's layers; anything else, or any problem, goes down that path.
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = ""
        if text.count("{") + text.count("[") <= max_depth:  # no deeper than that
            value = one_json_object(text)
            if value is not NOT_READ:
                return value
    documents = _load_text(_text(data, source, max_bytes), source, syntax, max_bytes, max_depth, max_aliases, max_nodes)
    if len(documents) > 1:
        raise DocumentError(f"holds {len(documents)} documents; expected one", source=source, kind="documents")
    return documents[0] if documents else None


def load_or_raise(
    data: str | bytes,
    error: Callable[[str], BaseException],
    *,
    source: str,
    syntax: Syntax = "auto",
    limits: Limits = Limits(),
    message: str = "{detail}",
    many: bool = False,
) -> Any:
    """:func:`load_document` (:func:`load_documents` with ``many=True``) within ``limits``, or
    ``error(message)`` raised when the document cannot be read: ``message`` may name
    ``{source}`` and ``{detail}`` (the :class:`DocumentError`'s reason and line, never the
    content). The error is raised outside the ``except`` block, so no parser exception is
    chained to it (a traceback shows none of the document's text)."""
    problem: DocumentError | None = None
    # Unpacked, not **limits._asdict(): a plugin's answer is read here right after the plugin
    # exits, when every step costs several times its usual.
    max_bytes, max_depth, max_aliases, max_nodes = limits
    try:
        if many:
            return load_documents(data, source=source, syntax=syntax, limits=limits)
        return load_document(
            data, source=source, syntax=syntax, max_bytes=max_bytes, max_depth=max_depth, max_aliases=max_aliases, max_nodes=max_nodes
        )
    except DocumentError as exc:
        problem = exc
    raise error(message.format(source=problem.source, detail=problem.detail))


def read_or_raise(path: str | os.PathLike[str], error: Callable[[str], BaseException], *, max_bytes: int) -> bytes:
    """:func:`read_bounded`, or ``error(reason)`` raised when the file cannot be read, ``reason``
    one of ``file not found``, ``is a directory, not a file``, ``is not a regular file``,
    ``is larger than …``, ``cannot read: <the system's reason>``. Raised outside the ``except``
    block: no ``OSError`` hangs off it."""
    reason: str
    try:
        return read_bounded(path, max_bytes)
    except FileNotFoundError:
        reason = "file not found"
    except IsADirectoryError:
        reason = "is a directory, not a file"
    except DocumentError as exc:
        reason = exc.detail
    except (OSError, ValueError) as exc:  # ValueError: a path with a NUL byte
        reason = f"cannot read: {exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__}"
    raise error(reason)


def load_documents(data: str | bytes, *, source: str, syntax: Syntax = "auto", limits: Limits = Limits()) -> list[Any]:
    """Parse every document of a YAML stream (or the one JSON document) into a list, within
    ``limits``."""
    return _load_text(_text(data, source, limits.max_bytes), source, syntax, *limits)


def _load_text(text: str, source: str, syntax: Syntax, max_bytes: int, max_depth: int, max_aliases: int, max_nodes: int) -> list[Any]:
    if syntax == "json" or (syntax == "auto" and text.lstrip()[:1] in ("{", "[")):
        try:
            return [load_json(text, source, max_depth)]
        except DocumentError as exc:
            if syntax == "json" or exc.kind != "syntax":
                raise
        # Not JSON: YAML flow style ({a: 1}) starts the same way.
    return YamlBuilder(source, max_bytes, max_depth, max_aliases, max_nodes).load(text)


def _text(data: str | bytes, source: str, max_bytes: int) -> str:
    if isinstance(data, (bytes, bytearray, memoryview)):
        raw = bytes(data)
        if len(raw) > max_bytes:
            raise DocumentError(f"is larger than {size_text(max_bytes)}", source=source, kind="too-large")
        bad_at = -1
        try:
            # The same text as utf-8-sig, through the C codec (utf-8-sig is written in Python).
            return raw.decode("utf-8").removeprefix("\ufeff")
        except UnicodeDecodeError:
            pass
        try:
            raw.decode("utf-8-sig")  # fails as well, at the position messages have always named
        except UnicodeDecodeError as exc:
            bad_at = exc.start
        # Raised outside the except block: the decode error holds the raw bytes.
        line = raw[:bad_at].count(b"\n") + 1
        raise DocumentError("is not UTF-8 text", source=source, line=line, kind="encoding")
    if not isinstance(data, str):
        raise DocumentError(f"expected text, got {type(data).__name__}", source=source, kind="encoding")
    if len(data) > max_bytes:
        raise DocumentError(f"is larger than {size_text(max_bytes)}", source=source, kind="too-large")
    return data.removeprefix("\ufeff")

