"""The usual shape of a hand-written YAML file, read without PyYAML.

Importing PyYAML costs ~12 ms (its pure-Python reader compiles a large Unicode pattern even when
its C parser is what runs), about a tenth of a ``cpcreds get-credential`` run. The provider config
and ClusterProfile files people write use a small part of YAML: block mappings and sequences,
one-line plain or quoted scalars, one-line flow lists and mappings, comments. :func:`read` reads
exactly that part and **declines** (returns :data:`DECLINED`) on anything else — tabs, anchors,
tags, block scalars, multi-line scalars, escapes, document markers, a duplicate key, any
irregular indentation, any error — so the caller then reads the text with the full parser, which
gives the same value or the error in its usual words. What it accepts it reads as that parser
does: plain scalars are resolved by the caller's ``plain`` function (the one the full path uses),
quoted scalars and keys stay the text written. tests/test_parse_yaml_subset.py checks, over
generated documents and arbitrary text, that whatever this accepts reads the same through PyYAML.
"""

from __future__ import annotations

import re
from typing import Any, Callable

__all__ = ["DECLINED", "read"]

#: What :func:`read` returns for text outside the part of YAML it reads.
DECLINED: Any = object()

# Anything but printable ASCII and newlines (PyYAML refuses some of it, and the rest is rare enough
# to leave to it). The text is checked once, so the scanners below need not.
_UNUSUAL = re.compile(r"[^\n\x20-\x7e]")
# Characters that cannot start a plain scalar (YAML's indicators; '-' is checked on its own).
_NOT_PLAIN_START = frozenset("?:,[]{}#&*!|>'\"%@`")
_FLOW_STOP = re.compile(r"[,\[\]{}:#'\"]")


class _Decline(Exception):
    pass


class _Reader:
    def __init__(self, lines: list[tuple[int, str]], plain: Callable[[str], Any], max_depth: int, max_nodes: int) -> None:
        self.lines, self.plain, self.max_depth, self.max_nodes = lines, plain, max_depth, max_nodes
        self.nodes = 0

    def count(self, depth: int) -> None:
        self.nodes += 1
        if self.nodes >= self.max_nodes or depth >= self.max_depth:
            raise _Decline

    # -- block context: one (indent, content) pair per line, comments and blank lines gone --

    def block(self, i: int, indent: int, depth: int) -> tuple[Any, int]:
        content = self.lines[i][1]
        if content == "-" or content.startswith("- "):
            return self.sequence(i, indent, depth)
        return self.mapping(i, indent, depth, content)

    def sequence(self, i: int, indent: int, depth: int) -> tuple[list[Any], int]:
        self.count(depth)
        items: list[Any] = []
        lines = self.lines
        while i < len(lines) and lines[i][0] == indent:
            content = lines[i][1]
            if not (content == "-" or content.startswith("- ")):
                break  # the parent mapping's next key, when this list is at that key's indent
            rest = content[1:].lstrip(" ")
            if not rest or rest[0] == "#":
                value, i = self.nested(i + 1, indent, depth + 1, same_indent_list=False)
            elif rest == "-" or rest.startswith("- "):
                raise _Decline  # a list in a list on one line
            elif _key_end(rest) is not None:
                # "- key: value": a mapping whose keys line up after the dash.
                value, i = self.mapping(i, indent + len(content) - len(rest), depth + 1, rest)
            else:
                value = self.inline(rest, depth + 1)
                i = self.after_inline(i, indent)
            items.append(value)
        return items, i

    def mapping(self, i: int, indent: int, depth: int, content: str) -> tuple[dict[str, Any], int]:
        self.count(depth)
        result: dict[str, Any] = {}
        lines = self.lines
        while True:
            end = _key_end(content)
            if end is None:
                raise _Decline
            key = _key(content[:end])
            if key in result or key == "<<":
                raise _Decline  # the full parser words a duplicate; a merge key is rare
            self.count(depth + 1)
            rest = content[end + 1 :].lstrip(" ")
            if not rest or rest[0] == "#":
                result[key], i = self.nested(i + 1, indent, depth + 1, same_indent_list=True)
            else:
                result[key] = self.inline(rest, depth + 1)
                i = self.after_inline(i, indent)
            if i >= len(lines) or lines[i][0] != indent:
                return result, i
            content = lines[i][1]

    def nested(self, i: int, indent: int, depth: int, *, same_indent_list: bool) -> tuple[Any, int]:
        """The value under a key or dash with nothing after it on its line: a deeper block, a
        list at the key's own indent, or null."""
        lines = self.lines
        if i < len(lines):
            below, content = lines[i]
            if below > indent:
                return self.block(i, below, depth)
            if same_indent_list and below == indent and (content == "-" or content.startswith("- ")):
                return self.sequence(i, indent, depth)
        self.nodes += 1
        return self.plain(""), i

    def after_inline(self, i: int, indent: int) -> int:
        # A deeper line after a value on the key's line continues that value (a multi-line
        # scalar) or is an error: either way, the full parser's to read.
        if i + 1 < len(self.lines) and self.lines[i + 1][0] > indent:
            raise _Decline
        return i + 1

    # -- a value on the rest of a line --

    def inline(self, text: str, depth: int) -> Any:
        first = text[0]
        if first == "[" or first == "{":
            value, end = self.flow(text, 0, depth)
        elif first == '"' or first == "'":
            value, end = _quoted(text, 0)
        else:
            cut = text.find(" #")
            scalar = text if cut < 0 else text[:cut].rstrip(" ")
            if ": " in scalar or scalar.endswith(":") or not _plain_start(scalar):
                raise _Decline
            self.count(depth)
            return self.plain(scalar)
        self.count(depth)
        tail = text[end:].lstrip(" ")
        if tail and not (tail[0] == "#" and end < len(text) and text[end] == " "):
            raise _Decline
        return value

    def flow(self, text: str, pos: int, depth: int) -> tuple[Any, int]:
        """A flow list or mapping starting at ``text[pos]`` and closed on the same line."""
        if depth >= self.max_depth:
            raise _Decline
        is_map = text[pos] == "{"
        close = "}" if is_map else "]"
        result: Any = {} if is_map else []
        pos = _skip(text, pos + 1)
        if text[pos : pos + 1] == close:
            return result, pos + 1
        while True:
            if is_map:
                key, pos = self.flow_scalar(text, pos, key=True)
                if text[pos : pos + 2] != ": " or key in result or key == "<<":
                    raise _Decline
                self.count(depth + 1)
                result[key], pos = self.flow_node(text, _skip(text, pos + 2), depth + 1)
            else:
                value, pos = self.flow_node(text, pos, depth + 1)
                result.append(value)
            pos = _skip(text, pos)
            sep = text[pos : pos + 1]
            if sep == close:
                return result, pos + 1
            if sep != ",":
                raise _Decline
            pos = _skip(text, pos + 1)
            if text[pos : pos + 1] in (close, ""):
                raise _Decline  # a trailing comma

    def flow_node(self, text: str, pos: int, depth: int) -> tuple[Any, int]:
        self.count(depth)
        if text[pos : pos + 1] in ("[", "{"):
            return self.flow(text, pos, depth)
        return self.flow_scalar(text, pos, key=False)

    def flow_scalar(self, text: str, pos: int, *, key: bool) -> tuple[Any, int]:
        if text[pos : pos + 1] in ('"', "'"):
            return _quoted(text, pos)
        stop = _FLOW_STOP.search(text, pos)
        end = len(text) if stop is None else stop.start()
        if stop is not None and stop.group() not in ",]}:":
            raise _Decline  # a comment, a quote or a bracket inside a flow scalar
        if stop is not None and stop.group() == ":" and not (key and text[end + 1 : end + 2] == " "):
            raise _Decline
        scalar = text[pos:end].rstrip(" ")
        if not _plain_start(scalar):
            raise _Decline
        return (scalar if key else self.plain(scalar)), end


def _skip(text: str, pos: int) -> int:
    while text[pos : pos + 1] == " ":
        pos += 1
    return pos


def _plain_start(scalar: str) -> bool:
    if not scalar or scalar[0] in _NOT_PLAIN_START or " #" in scalar:
        return False
    return scalar[0] != "-" or scalar[1:2] not in ("", " ")


def _quoted(text: str, pos: int) -> tuple[str, int]:
    """A one-line quoted scalar without escapes at ``text[pos]``: its text and where it ends."""
    quote = text[pos]
    end = text.find(quote, pos + 1)
    if end < 0 or text[end + 1 : end + 2] == quote:
        raise _Decline  # unterminated on this line, or '' (an escaped quote)
    value = text[pos + 1 : end]
    if quote == '"' and "\\" in value:
        raise _Decline
    return value, end + 1


def _key_end(content: str) -> int | None:
    """Where the ``:`` after a mapping key on this line is, or None if the line is no key."""
    if content[0] in ('"', "'"):
        try:
            _, end = _quoted(content, 0)
        except _Decline:
            return None
        return end if content[end : end + 2] == ": " or content[end:] == ":" else None
    end = content.find(": ")
    if end < 0:
        end = len(content) - 1 if content.endswith(":") else -1
    if end <= 0:
        return None
    key = content[:end]
    if key[-1] == " " or not _plain_start(key) or any(char in key for char in ",[]{}"):
        return None
    return end


def _key(text: str) -> str:
    return text[1:-1] if text[0] in ('"', "'") else text


def read(text: str, plain: Callable[[str], Any], *, max_depth: int, max_nodes: int) -> Any:
    """The one document in ``text`` if it is a block mapping or list in the part of YAML this
    module reads, with plain scalars resolved by ``plain`` (keys and quoted scalars are kept as
    written); :data:`DECLINED` otherwise, including for anything the full parser would refuse,
    for more than ``max_depth`` levels or ``max_nodes`` values, and when ``plain`` raises."""
    if "\t" in text or "\r" in text or _UNUSUAL.search(text):
        return DECLINED
    lines: list[tuple[int, str]] = []
    started = False  # a "---" was read
    for line in text.split("\n"):
        content = line.lstrip(" ")
        if not content or content[0] == "#":
            continue
        indent = len(line) - len(content)
        if indent == 0 and content.rstrip(" ") == "---" and not lines and not started:
            started = True  # the document's start marker, as templating tools write it
            continue
        if indent == 0 and content[:3] in ("---", "...") or content[0] == "%":
            return DECLINED  # other document markers and directives
        lines.append((indent, content.rstrip(" ")))
    if not lines or lines[0][0] != 0:
        return DECLINED
    reader = _Reader(lines, plain, max_depth, max_nodes)
    try:
        value, end = reader.block(0, 0, 0)
    except Exception:  # _Decline, or whatever plain raised: the full parser words it
        return DECLINED
    return value if end == len(lines) else DECLINED
