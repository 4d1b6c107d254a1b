"""JSON documents for the loader (:mod:`.documents`): ``json``'s own decoder with hooks that hold
the loader's rules (no duplicate keys, integers of at most :data:`~.bounds.MAX_INT_DIGITS`
digits, finite numbers only), after a bracket scan that bounds the depth before ``json`` recurses."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from .._patterns import LazyPattern
from .bounds import MAX_INT_DIGITS, DocumentError, bracket_depth, show_key

__all__ = ["NOT_READ", "json_depth", "line_of_duplicate", "load_json", "one_json_object"]

# A string, or an unterminated one up to the end: every match moves forward, so the scan is linear.
_JSON_STRING = LazyPattern(r'"(?:[^"\\]|\\.|\\\Z)*+(?:"|\Z)', re.DOTALL)


class _JsonProblem(Exception):
    def __init__(self, reason: str, kind: str, key: str | None = None) -> None:
        super().__init__(reason)
        self.reason, self.kind, self.key = reason, kind, key


def json_depth(text: str) -> int:
    """The deepest bracket nesting outside strings (an upper bound when the text is not JSON)."""
    return bracket_depth(_JSON_STRING.sub("", text))


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


def line_of_duplicate(text: str, key: str) -> int | None:
    """The line of ``key``'s second occurrence as a JSON key in ``text``, if there is one."""
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


#: What :func:`one_json_object` returns for text it leaves to :func:`load_json`.
NOT_READ = object()


def one_json_object(text: str) -> Any:
    """``text``, one JSON object (with JSON whitespace around it or not), read by the scanner
    alone: decode() would skip the whitespace with a regex. :data:`NOT_READ` for anything else or
    any problem; the general path then reads it and words the error (with positions in the
    whole text)."""
    document = text.strip(" \t\n\r")
    if document[:1] != "{":
        return NOT_READ
    try:
        value, end = _JSON_DECODER.raw_decode(document)
    except Exception:
        return NOT_READ
    return value if end == len(document) else NOT_READ


def load_json(text: str, source: str, max_depth: int) -> Any:
    """The JSON document ``text`` as plain data, or :class:`DocumentError` (never chained to the
    decoder's exception, which may quote the text)."""
    # No deeper than its number of opening brackets: most documents need no scan for the depth.
    if text.count("{") + text.count("[") > max_depth and json_depth(text) > max_depth:
        raise DocumentError(f"is nested more than {max_depth} levels deep", source=source, kind="too-deep")
    value = one_json_object(text)
    if value is not NOT_READ:
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
            f"duplicate key {show_key(problem.key)}",
            source=source,
            line=line_of_duplicate(text, problem.key),
            kind="duplicate-key",
        )
    raise DocumentError(problem.reason, source=source, kind=problem.kind)
