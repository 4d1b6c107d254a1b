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
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
from collections.abc import Mapping
from typing import Any, Callable, Literal, NamedTuple

from .._show import quoted, shown
from .._patterns import LazyPattern


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

Syntax = Literal["auto", "json", "yaml"]


class Limits(NamedTuple):
    """The bounds on one kind of input document, written once where that kind is read (the
    provider config's, a profile file's, a plugin's answer's) and passed whole to
    :func:`load_document`, :func:`load_documents` and :func:`load_or_raise`."""

    max_bytes: int = DEFAULT_MAX_BYTES
    max_depth: int = DEFAULT_MAX_DEPTH
    max_aliases: int = DEFAULT_MAX_ALIASES
    max_nodes: int = DEFAULT_MAX_NODES

# Patterns that only an error or an unusual document needs are compiled on first use.
_SHOWABLE_KEY = LazyPattern(r"[A-Za-z0-9_.$/@:\-]{1,64}")
_TAG = "tag:yaml.org,2002:"


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
        raise DocumentError(f"is larger than {_size(max_bytes)}", source=os.fspath(path), kind="too-large")
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
            value = _one_json_object(text)
            if value is not _NOT_READ:
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
            return load_documents(
                data, source=source, syntax=syntax, max_bytes=max_bytes, max_depth=max_depth, max_aliases=max_aliases, max_nodes=max_nodes
            )
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


def load_documents(
    data: str | bytes,
    *,
    source: str,
    syntax: Syntax = "auto",
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_aliases: int = DEFAULT_MAX_ALIASES,
    max_nodes: int = DEFAULT_MAX_NODES,
) -> list[Any]:
    """Parse every document of a YAML stream (or the one JSON document) into a list."""
    return _load_text(_text(data, source, max_bytes), source, syntax, max_bytes, max_depth, max_aliases, max_nodes)


def _load_text(text: str, source: str, syntax: Syntax, max_bytes: int, max_depth: int, max_aliases: int, max_nodes: int) -> list[Any]:
    if syntax == "json" or (syntax == "auto" and text.lstrip()[:1] in ("{", "[")):
        try:
            return [_load_json(text, source, max_depth)]
        except DocumentError as exc:
            if syntax == "json" or exc.kind != "syntax":
                raise
        # Not JSON: YAML flow style ({a: 1}) starts the same way.
    return _YamlBuilder(source, max_bytes, max_depth, max_aliases, max_nodes).load(text)


# -- input ---------------------------------------------------------------------------------------


def _size(n: int) -> str:
    if n >= 1024 * 1024 and n % (1024 * 1024) == 0:
        return f"{n // (1024 * 1024)} MiB"
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n} bytes"


def _text(data: str | bytes, source: str, max_bytes: int) -> str:
    if isinstance(data, (bytes, bytearray, memoryview)):
        raw = bytes(data)
        if len(raw) > max_bytes:
            raise DocumentError(f"is larger than {_size(max_bytes)}", source=source, kind="too-large")
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
        raise DocumentError(f"is larger than {_size(max_bytes)}", source=source, kind="too-large")
    return data.removeprefix("\ufeff")


# -- JSON ----------------------------------------------------------------------------------------

# A string, or an unterminated one up to the end: every match moves forward, so the scan is linear.
_JSON_STRING = LazyPattern(r'"(?:[^"\\]|\\.|\\\Z)*+(?:"|\Z)', re.DOTALL)
_NOT_BRACKET = LazyPattern(r"[^\[\]{}]+")


class _JsonProblem(Exception):
    def __init__(self, reason: str, kind: str, key: str | None = None) -> None:
        super().__init__(reason)
        self.reason, self.kind, self.key = reason, kind, key


def _json_depth(text: str) -> int:
    """The deepest bracket nesting outside strings (an upper bound when the text is not JSON)."""
    return _bracket_depth(_JSON_STRING.sub("", text))


def _bracket_depth(text: str) -> int:
    depth = deepest = 0
    for char in _NOT_BRACKET.sub("", text):
        if char in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
        elif depth:
            depth -= 1
    return deepest


def _json_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _JsonProblem(f"an integer has more than {MAX_INT_DIGITS} digits", "number")
    return int(text)


def _json_float(text: str) -> float:
    if len(text) > MAX_INT_DIGITS:
        raise _JsonProblem(f"a number has more than {MAX_INT_DIGITS} digits", "number")
    value = float(text)
    if not math.isfinite(value):
        raise _JsonProblem("a number is too large for a float", "number")
    return value


def _json_constant(name: str) -> Any:
    raise _JsonProblem(f"{name} is not a JSON value", "number")


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _JsonProblem("duplicate key", "duplicate-key", key)
            seen.add(key)
    return result


def _line_of_duplicate(text: str, key: str) -> int | None:
    # json reports no positions to its hooks; the second "key": in the text is almost always it.
    pattern = re.compile(re.escape(json.dumps(key)) + r"\s*:")
    matches = pattern.finditer(text)
    first = next(matches, None)
    second = next(matches, None)
    if first is None or second is None:
        return None
    return text.count("\n", 0, second.start()) + 1


_JSON_DECODER = json.JSONDecoder(
    object_pairs_hook=_json_object, parse_int=_json_int, parse_float=_json_float, parse_constant=_json_constant
)


_NOT_READ = object()


def _one_json_object(text: str) -> Any:
    """``text``, one JSON object (with JSON whitespace around it or not), read by the scanner
    alone: decode() would skip the whitespace with a regex. ``_NOT_READ`` for anything else or
    any problem; the general path then reads it and words the error (with positions in the
    whole text)."""
    document = text.strip(" \t\n\r")
    if document[:1] != "{":
        return _NOT_READ
    try:
        value, end = _JSON_DECODER.raw_decode(document)
    except Exception:
        return _NOT_READ
    return value if end == len(document) else _NOT_READ


def _load_json(text: str, source: str, max_depth: int) -> Any:
    # No deeper than its number of opening brackets: most documents need no scan for the depth.
    if text.count("{") + text.count("[") > max_depth and _json_depth(text) > max_depth:
        raise DocumentError(f"is nested more than {max_depth} levels deep", source=source, kind="too-deep")
    value = _one_json_object(text)
    if value is not _NOT_READ:
        return value
    problem: _JsonProblem | None = None
    try:
        if text.startswith("\ufeff"):
            return json.loads(text)  # which refuses it, in its own words
        # One decoder for every call: json.loads with hooks builds a new one each time.
        return _JSON_DECODER.decode(text)
    except json.JSONDecodeError as exc:
        reason, line = f"not valid JSON: {exc.msg} (column {exc.colno})", exc.lineno
    except _JsonProblem as exc:
        problem = exc
    except RecursionError:  # not reached: the pre-scan bounds the depth far below the limit
        reason, line = f"is nested more than {max_depth} levels deep", None
    if problem is None:
        raise DocumentError(reason, source=source, line=line, kind="syntax")
    # Raised here, outside the except block, so that nothing chains to the hook's exception.
    if problem.kind == "duplicate-key" and problem.key is not None:
        raise DocumentError(
            f"duplicate key {_show_key(problem.key)}",
            source=source,
            line=_line_of_duplicate(text, problem.key),
            kind="duplicate-key",
        )
    raise DocumentError(problem.reason, source=source, kind=problem.kind)


def _show_key(key: str) -> str:
    return shown(key, limit=64, shape=_SHOWABLE_KEY, otherwise="(a key that is not shown)")


# -- YAML ----------------------------------------------------------------------------------------

# Compiled by the first YAML scalar that looks like a number: a JSON document (a plugin's request or
# answer) never needs them.
_INT = LazyPattern(
    r"""[-+]?0b[0-1_]+
    |[-+]?0[0-7_]+
    |[-+]?(?:0|[1-9][0-9_]*)
    |[-+]?0x[0-9a-fA-F_]+""",
    re.X,
)
# PyYAML's YAML 1.1 patterns (so that what yaml.safe_dump writes reads back the same), without
# base 60: a float needs a dot, and an exponent needs a sign.
_FLOAT = LazyPattern(
    r"""[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
    |\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?""",
    re.X,
)
_INF = LazyPattern(r"[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)")
_NULLS = frozenset({"", "~", "null", "Null", "NULL"})
_BOOLS = {
    **dict.fromkeys(("yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True),
    **dict.fromkeys(("no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False),
}
_NUMBER_START = frozenset("-+0123456789.")


class _Problem(Exception):
    def __init__(self, reason: str, kind: str) -> None:
        super().__init__(reason)
        self.reason, self.kind = reason, kind


def _yaml_int(text: str) -> int:
    digits = text.replace("_", "")
    sign = -1 if digits[:1] == "-" else 1
    digits = digits.lstrip("+-")
    if len(digits) > MAX_INT_DIGITS:
        raise _Problem(f"an integer has more than {MAX_INT_DIGITS} digits", "number")
    if digits in ("0b", "0x"):  # "0x_": only underscores after the prefix
        raise _Problem("an integer has no digits", "number")
    if digits.startswith("0b"):
        return sign * int(digits[2:], 2)
    if digits.startswith("0x"):
        return sign * int(digits[2:], 16)
    if digits != "0" and digits.startswith("0"):
        return sign * int(digits, 8)
    return sign * int(digits)


def _yaml_float(text: str) -> float:
    if len(text) > MAX_INT_DIGITS:
        raise _Problem(f"a number has more than {MAX_INT_DIGITS} digits", "number")
    value = float(text.replace("_", ""))
    if not math.isfinite(value):
        raise _Problem("a number is too large for a float", "number")
    return value


def _plain(text: str) -> Any:
    """Resolve a plain (unquoted) scalar as YAML 1.1 does, minus timestamps and base 60."""
    if text in _NULLS:
        return None
    flag = _BOOLS.get(text)
    if flag is not None:
        return flag
    if text[:1] in _NUMBER_START:
        if _INT.fullmatch(text):
            return _yaml_int(text)
        if _FLOAT.fullmatch(text):
            return _yaml_float(text)
        if _INF.fullmatch(text):
            raise _Problem("a number that is not finite (.inf or .nan) is not allowed", "number")
    return text


def _tagged(tag: str, text: str) -> Any:
    if tag in ("!", _TAG + "str", _TAG + "binary", _TAG + "timestamp"):
        return text
    if tag == _TAG + "null":
        if text in _NULLS:
            return None
    elif tag == _TAG + "bool":
        if text.lower() in ("true", "false", "yes", "no", "on", "off"):
            return text.lower() in ("true", "yes", "on")
    elif tag == _TAG + "int":
        if _INT.fullmatch(text):
            return _yaml_int(text)
    elif tag == _TAG + "float":
        if _FLOAT.fullmatch(text) or _INT.fullmatch(text):
            return _yaml_float(text)
        if _INF.fullmatch(text):
            raise _Problem("a number that is not finite (.inf or .nan) is not allowed", "number")
    else:
        raise _Problem(f"the tag {_show_tag(tag)} is not supported", "tag")
    raise _Problem(f"a value does not match its tag {_show_tag(tag)}", "tag")


def _show_tag(tag: str) -> str:
    short = "!!" + tag[len(_TAG) :] if tag.startswith(_TAG) else tag
    return repr(short) if _SHOWABLE_KEY.fullmatch(short.lstrip("!")) else "(not shown)"


_MISSING = object()


class _Frame:
    __slots__ = ("value", "is_map", "key", "lines", "anchor", "size", "height", "merges", "line", "expanded_from")

    def __init__(self, value: Any, is_map: bool, anchor: str | None, line: int, expanded_from: int) -> None:
        self.value, self.is_map, self.anchor, self.line = value, is_map, anchor, line
        #: The stream's expanded size when this collection started (its own is the difference).
        self.expanded_from = expanded_from
        self.key: Any = _MISSING
        self.lines: dict[str, int] = {}
        self.size = 1
        self.height = 1
        self.merges: list[Any] = []


class _Anchor:
    __slots__ = ("value", "size", "height", "text", "expanded")

    def __init__(self, value: Any, size: int, height: int, text: str | None, expanded: int) -> None:
        self.value, self.size, self.height, self.text, self.expanded = value, size, height, text, expanded


class _MergeKey:
    """The plain ``<<`` key (YAML merge)."""


_MERGE = _MergeKey()


class _YamlBuilder:
    """Plain data from the parser's events, one event at a time, without recursion."""

    def __init__(self, source: str, max_bytes: int, max_depth: int, max_aliases: int, max_nodes: int) -> None:
        self.source, self.max_depth, self.max_aliases, self.max_nodes = source, max_depth, max_aliases, max_nodes
        self.max_bytes = max_bytes
        self.line: int | None = None

    def load(self, text: str) -> list[Any]:
        # PyYAML is imported by the first YAML document only: a JSON-only reader (a plugin's
        # request or answer, a Secret) starts without it.
        import yaml

        problem: DocumentError | None = None
        try:
            return self._build(text)
        except _Problem as exc:  # raised with self.line set
            problem = DocumentError(exc.reason, source=self.source, line=self.line, kind=exc.kind)
        except yaml.YAMLError as exc:
            # libyaml (0.2.5 and later) has a nesting limit of its own, and its scanner looks far
            # ahead in flow style, so "[[[[..." can trip it before the builder has seen the
            # events. Its limit (1000) is far above ours: whatever it refuses for depth is deeper
            # than ours too, and is worded as ours, not in the parser's words (they change).
            if _flow_depth(text) > self.max_depth:
                problem = DocumentError(f"is nested more than {self.max_depth} levels deep", source=self.source, kind="too-deep")
            else:
                problem = self._syntax_error(exc, text)
        except (ValueError, TypeError, OverflowError, MemoryError, RecursionError):  # a bug of ours or the parser's
            problem = DocumentError("cannot be read as YAML", source=self.source, line=self.line, kind="syntax")
        # Raised outside the except block: nothing of the parser's (it quotes the input) chains on.
        raise problem

    def _syntax_error(self, exc: Any, text: str) -> DocumentError:
        import yaml

        if isinstance(exc, yaml.reader.ReaderError):
            line = text.count("\n", 0, max(exc.position, 0)) + 1 if isinstance(exc.position, int) else None
            code = exc.character if isinstance(exc.character, int) else None
            what = f"the character #x{code:04x}" if code is not None else "a character"
            return DocumentError(f"not valid YAML: {what} is not allowed", source=self.source, line=line, kind="syntax")
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or "cannot parse"
        if mark is not None and _tab_at(text, mark.line, mark.column):
            return DocumentError(
                "not valid YAML: a tab character is used for indentation (YAML indents with spaces only)",
                source=self.source,
                line=line,
                kind="syntax",
            )
        return DocumentError(f"not valid YAML: {problem}", source=self.source, line=line, kind="syntax")

    def _build(self, text: str) -> list[Any]:
        import yaml

        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
        documents: list[Any] = []
        stack: list[_Frame] = []
        anchors: dict[str, _Anchor] = {}
        open_anchors: set[str] = set()
        aliases = nodes = 0
        # What the documents would take written out with every alias expanded (as JSON, roughly:
        # each scalar's text and a separator): an alias costs a few bytes of input but its
        # target's whole size wherever the value is written out (a packed profile, an API answer).
        expanded = 0
        root: Any = _MISSING
        max_depth, max_nodes, max_bytes = self.max_depth, self.max_nodes, self.max_bytes
        scalar_event, alias_event = yaml.ScalarEvent, yaml.AliasEvent
        seq_start, map_start = yaml.SequenceStartEvent, yaml.MappingStartEvent
        seq_end, map_end = yaml.SequenceEndEvent, yaml.MappingEndEvent
        try:
            while loader.check_event():
                event = loader.get_event()
                kind = type(event)
                if kind is scalar_event:
                    self.line = event.start_mark.line + 1
                    nodes += 1
                    tag, raw = event.tag, event.value
                    if stack and stack[-1].is_map and stack[-1].key is _MISSING:
                        # A key: taken as written (sigs.k8s.io/yaml turns 1: into "1":).
                        if raw == "<<" and tag is None and event.implicit[0]:
                            value: Any = _MERGE
                        else:
                            value = raw
                    elif tag is None or tag == "!":
                        value = _plain(raw) if event.implicit[0] and tag is None else raw
                    else:
                        value = _tagged(tag, raw)
                    expanded += len(raw) + 1
                    if event.anchor is not None:
                        anchors[event.anchor] = _Anchor(value, 1, 0, raw, len(raw) + 1)
                    root = self._attach(stack, value, 1, 0, root, raw)
                elif kind is map_start or kind is seq_start:
                    self.line = event.start_mark.line + 1
                    if len(stack) >= max_depth:
                        raise _Problem(f"is nested more than {max_depth} levels deep", "too-deep")
                    is_map = kind is map_start
                    tag = event.tag
                    if tag is not None and tag != "!" and tag != _TAG + ("map" if is_map else "seq"):
                        raise _Problem(f"the tag {_show_tag(tag)} is not supported", "tag")
                    nodes += 1
                    if stack and stack[-1].is_map and stack[-1].key is _MISSING:
                        raise _Problem("a mapping key must be a string, not a " + ("mapping" if is_map else "list"), "key")
                    frame = _Frame({} if is_map else [], is_map, event.anchor, self.line, expanded)
                    expanded += 2
                    if event.anchor is not None:
                        open_anchors.add(event.anchor)
                    stack.append(frame)
                elif kind is map_end or kind is seq_end:
                    frame = stack.pop()
                    if frame.merges:
                        self.line = frame.line
                        self._merge(frame)
                    if frame.anchor is not None:
                        open_anchors.discard(frame.anchor)
                        anchors[frame.anchor] = _Anchor(frame.value, frame.size, frame.height, None, expanded - frame.expanded_from)
                    root = self._attach(stack, frame.value, frame.size, frame.height, root, None)
                elif kind is alias_event:
                    self.line = event.start_mark.line + 1
                    name = event.anchor
                    if name in open_anchors:
                        raise _Problem("an alias refers to a node that contains it (a recursive structure)", "aliases")
                    target = anchors.get(name)
                    if target is None:
                        raise _Problem("an alias refers to an anchor that is not defined", "aliases")
                    aliases += 1
                    if aliases > self.max_aliases:
                        raise _Problem(f"has more than {self.max_aliases} aliases", "aliases")
                    nodes += target.size
                    expanded += target.expanded
                    if expanded > max_bytes:
                        raise _Problem(f"expands to more than {_size(max_bytes)} (through aliases)", "aliases")
                    if len(stack) + target.height > max_depth:
                        raise _Problem(f"is nested more than {max_depth} levels deep (through aliases)", "too-deep")
                    is_key = bool(stack) and stack[-1].is_map and stack[-1].key is _MISSING
                    if is_key and target.text is None:
                        raise _Problem("a mapping key must be a string, not a list or mapping", "key")
                    value = target.text if is_key else target.value
                    root = self._attach(stack, value, target.size, target.height, root, target.text)
                elif kind is yaml.DocumentStartEvent:
                    root, anchors, open_anchors = _MISSING, {}, set()
                    aliases = 0
                elif kind is yaml.DocumentEndEvent:
                    documents.append(None if root is _MISSING else root)
                if nodes > max_nodes:
                    raise _Problem(f"expands to more than {max_nodes} values (through aliases)", "aliases")
        finally:
            loader.dispose()
        return documents

    def _attach(self, stack: list[_Frame], value: Any, size: int, height: int, root: Any, raw: str | None) -> Any:
        if not stack:
            return value
        frame = stack[-1]
        frame.size += size
        if height + 1 > frame.height:
            frame.height = height + 1
        if not frame.is_map:
            frame.value.append(value)
            return root
        if frame.key is _MISSING:
            key = value
            if key is not _MERGE:
                if key in frame.lines:
                    raise _Problem(
                        f"duplicate key {_show_key(key)} (first at line {frame.lines[key]})", "duplicate-key"
                    )
                frame.lines[key] = self.line or 0
            frame.key = key
            return root
        key, frame.key = frame.key, _MISSING
        if key is _MERGE:
            frame.merges.append(value)
        else:
            frame.value[key] = value
        return root

    def _merge(self, frame: _Frame) -> None:
        # YAML merge keys (<<: *base, <<: [*a, *b]): explicit keys win, then earlier mappings.
        for merge in frame.merges:
            sources = merge if isinstance(merge, list) else [merge]
            for source in sources:
                if not isinstance(source, dict):
                    raise _Problem("a merge key (<<) must be given a mapping or a list of mappings", "key")
                for key, value in source.items():
                    frame.value.setdefault(key, value)


# Quoted scalars and comments, removed before counting brackets (an unterminated one runs to the end).
_YAML_QUOTED_OR_COMMENT = LazyPattern(r""""(?:[^"\\]|\\.)*+(?:"|\Z)|'(?:[^']|'')*+(?:'|\Z)|(?:^|(?<=[ \t]))#[^\n]*""", re.M | re.S)


def _flow_depth(text: str) -> int:
    """The deepest flow-bracket nesting outside quoted scalars and comments: an upper bound of a
    YAML document's flow depth (a bracket inside a plain scalar counts too)."""
    return _bracket_depth(_YAML_QUOTED_OR_COMMENT.sub("", text))


def _tab_at(text: str, line: int, column: int) -> bool:
    lines = text.split("\n", line + 1)
    if line >= len(lines):
        return False
    row = lines[line]
    indent = row[: len(row) - len(row.lstrip(" \t"))]
    return "\t" in indent or row[column : column + 1] == "\t"


# -- data given in Python ------------------------------------------------------------------------


class _ReadOnlyDict(dict):  # type: ignore[type-arg]
    """A ``dict`` that cannot be changed; ``json.dumps`` and ``==`` treat it as a dict."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("this mapping is read-only (it belongs to an AccessPlan); copy it to change it")

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _refuse  # type: ignore[assignment]

    def __copy__(self) -> dict[Any, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[Any, Any]:
        return thaw(self)

    def __reduce__(self) -> Any:
        return (dict, (dict(self),))

    def __repr__(self) -> str:
        return dict.__repr__(self)


class _ReadOnlyList(list):  # type: ignore[type-arg]
    """A ``list`` that cannot be changed; ``json.dumps`` and ``==`` treat it as a list."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("this list is read-only (it belongs to an AccessPlan); copy it to change it")

    __setitem__ = __delitem__ = __iadd__ = __imul__ = append = extend = insert = pop = remove = clear = sort = reverse = _refuse  # type: ignore[assignment]

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return thaw(self)

    def __reduce__(self) -> Any:
        return (list, (list(self),))

    def __repr__(self) -> str:
        return list.__repr__(self)


_INT_LIMIT = 10**MAX_INT_DIGITS
_INT_BITS = int(MAX_INT_DIGITS * 3.32)  # below this, an int surely has fewer digits


def thaw(value: Any) -> Any:
    """A mutable deep copy of plain data (read-only collections become ``dict``/``list``)."""
    if isinstance(value, dict):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(item) for item in value]
    return value


def plain_copy(value: Any, *, max_depth: int = DEFAULT_MAX_DEPTH, max_nodes: int = 100_000, read_only: bool = True) -> Any:
    """A deep copy of JSON-like data given in Python, checked and (by default) read-only.

    Accepts mappings with string keys, lists and tuples, strings, integers (at most
    :data:`MAX_INT_DIGITS` digits), finite floats, booleans and ``None``. Anything else, a cycle,
    more than ``max_depth`` levels or ``max_nodes`` values raises ``ValueError`` whose message
    names the path (``a.b[2]``) and the type found, never the value. Mappings become read-only
    ``dict`` subclasses and lists read-only ``list`` subclasses (``json.dumps`` and ``==`` see
    plain dicts and lists); with ``read_only=False``, plain ``dict`` and ``list``.
    """
    make_dict = _ReadOnlyDict if read_only else dict
    make_list = _ReadOnlyList if read_only else list
    count = 0

    def copy(item: Any, path: str, depth: int) -> Any:
        nonlocal count
        count += 1
        if count > max_nodes:
            raise ValueError(f"holds more than {max_nodes} values")
        if item is None or isinstance(item, (bool, str)):
            return item
        if isinstance(item, int):
            if item.bit_length() > _INT_BITS and abs(item) >= _INT_LIMIT:
                raise ValueError(f"{_at(path)}an integer has more than {MAX_INT_DIGITS} digits")
            return int(item)
        if isinstance(item, float):
            if not math.isfinite(item):
                raise ValueError(f"{_at(path)}a number that is not finite is not allowed")
            return item
        if depth >= max_depth:
            raise ValueError(f"is nested more than {max_depth} levels deep (or refers to itself)")
        if isinstance(item, Mapping):
            out = {}
            for key, sub in item.items():
                if not isinstance(key, str):
                    raise ValueError(f"{_at(path)}a key is {_kind(key)}, not a string")
                shown = key if 0 < len(key) <= 64 and key.isprintable() and "." not in key else _quoted(key)
                out[key] = copy(sub, f"{path}.{shown}" if path else shown, depth + 1)
            return make_dict(out)
        if isinstance(item, (list, tuple)):
            return make_list(copy(sub, f"{path}[{index}]", depth + 1) for index, sub in enumerate(item))
        raise ValueError(f"{path or 'the value'} is {_kind(item)}, which JSON cannot hold")

    return copy(value, "", 0)


def _quoted(key: str) -> str:
    return quoted(key, 40)


def _at(path: str) -> str:
    return f"at {path}: " if path else ""


def _kind(value: Any) -> str:
    name = type(value).__name__
    return f"an {name}" if name[:1] in "aeiou" else f"a {name}"
