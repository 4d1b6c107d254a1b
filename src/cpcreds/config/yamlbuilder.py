"""YAML documents for the loader (:mod:`.documents`): PyYAML's parser (its C loader where present)
gives the events, and :class:`YamlBuilder` turns them into plain data one event at a time, without
recursion, counting depth, aliases and what they expand to as it goes. Scalars are resolved as Go's
YAML readers do (timestamps and base 60 stay strings; unknown tags are errors)."""

from __future__ import annotations

import math
import re
from typing import Any

from .._patterns import LazyPattern
from .bounds import MAX_INT_DIGITS, SHOWABLE_KEY, DocumentError, bracket_depth, show_key, size_text

__all__ = ["YamlBuilder"]

_TAG = "tag:yaml.org,2002:"

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
    return repr(short) if SHOWABLE_KEY.fullmatch(short.lstrip("!")) else "(not shown)"


_MISSING = object()


def _new_anchor(name: str, anchors: dict[str, Any], open_anchors: set[str]) -> None:
    # PyYAML's composer refuses an anchor defined twice in one document (YAML 1.2 would let the
    # second win); what PyYAML refuses, cpcreds refuses.
    if name in anchors or name in open_anchors:
        raise _Problem("an anchor is defined twice", "aliases")


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


class YamlBuilder:
    """Plain data from the parser's events, one event at a time, without recursion.

    ``YamlBuilder(source, max_bytes, max_depth, max_aliases, max_nodes).load(text)`` gives every
    document of the stream, or raises :class:`~.bounds.DocumentError` with nothing of the parser's
    chained to it."""

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
                        _new_anchor(event.anchor, anchors, open_anchors)
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
                        _new_anchor(event.anchor, anchors, open_anchors)
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
                        raise _Problem(f"expands to more than {size_text(max_bytes)} (through aliases)", "aliases")
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
                        f"duplicate key {show_key(key)} (first at line {frame.lines[key]})", "duplicate-key"
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
    return bracket_depth(_YAML_QUOTED_OR_COMMENT.sub("", text))


def _tab_at(text: str, line: int, column: int) -> bool:
    lines = text.split("\n", line + 1)
    if line >= len(lines):
        return False
    row = lines[line]
    indent = row[: len(row) - len(row.lstrip(" \t"))]
    return "\t" in indent or row[column : column + 1] == "\t"

