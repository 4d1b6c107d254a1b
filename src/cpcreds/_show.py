"""Showing a value in a message or a log line without leaking it.

Error messages and logs name the value at fault when that helps ("'1d' is not a duration"), but
a value from a file, the environment or a profile may be a secret pasted in the wrong field, a
megabyte, or terminal escapes. :func:`shown` is the one rule for values: quote a short,
printable string (optionally of an expected shape), and say what it is otherwise.
:func:`quoted` is the rule for *names* a user wrote (an unknown key): always shown, escaped and
cut short. :func:`type_name` names a value's JSON type.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["shown", "quoted", "type_name"]


def type_name(value: Any) -> str:
    """How messages name what was given instead of a value: its JSON type ("a list", "null"),
    never the value itself, which may be a secret."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    return f"a {type(value).__name__}"


def shown(value: Any, *, limit: int = 40, shape: re.Pattern[str] | None = None, otherwise: str | None = None) -> str:
    """``repr(value)`` when ``value`` is a string of at most ``limit`` printable characters that
    (with ``shape``) matches ``shape`` entirely; ``otherwise`` (default ``"the value"``) for any
    other string; the :func:`type_name` of anything else. Never raises."""
    if isinstance(value, str):
        if len(value) <= limit and value.isprintable() and (shape is None or shape.fullmatch(value)):
            return repr(value)
        return "the value" if otherwise is None else otherwise
    return type_name(value)


def quoted(name: Any, limit: int = 40) -> str:
    """``repr(name)`` (ASCII-escaped when not printable), cut to ``limit`` characters with
    ``...``: for names the user wrote (an unknown key), which a message must show to be of use."""
    text = repr(name) if not isinstance(name, str) or name.isprintable() else ascii(name)
    return text if len(text) <= limit else text[: limit - 3] + "..."
