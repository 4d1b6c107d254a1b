"""Showing a value in a message or a log line without leaking it.

Error messages and logs name the value at fault when that helps ("'1d' is not a duration"), but
a value from a file, the environment or a profile may be a secret pasted in the wrong field, a
megabyte, or terminal escapes. :func:`shown` is the one rule: quote a short, printable string
(optionally of an expected shape), and say what it is otherwise.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["shown", "type_name"]


def type_name(value: Any) -> str:
    """JSON's name for ``value``'s type (``a string``, ``a number``, ``a map``…), as a message says it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "a map"
    if isinstance(value, (list, tuple)):
        return "a list"
    return f"a {type(value).__name__}"


def shown(value: Any, *, limit: int = 40, shape: re.Pattern[str] | None = None, otherwise: str | None = None) -> str:
    """``repr(value)`` when ``value`` is a string of at most ``limit`` printable characters that
    (with ``shape``) matches ``shape`` entirely; else ``otherwise`` ("the value" for a string
    and :func:`type_name` for anything else when not given). Never raises."""
    if isinstance(value, str):
        if len(value) <= limit and value.isprintable() and (shape is None or shape.fullmatch(value)):
            return repr(value)
        return "the value" if otherwise is None else otherwise
    return type_name(value) if otherwise is None else otherwise
