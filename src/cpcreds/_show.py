"""Showing a value in a message or a log line without leaking it.

Error messages and logs name the value at fault when that helps ("'1d' is not a duration"), but
a value from a file, the environment or a profile may be a secret pasted in the wrong field, a
megabyte, or terminal escapes. :func:`shown` is the one rule for values: quote a short,
printable string (optionally of an expected shape), and say what it is otherwise.
:func:`quoted` is the rule for *names* a user wrote (an unknown key): always shown, escaped and
cut short. :func:`type_name` names a value's JSON type. :func:`shown_url` is the rule for a URL
(a profile's server, the hub's address): what reaches it is shown, its credentials are not.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["shown", "quoted", "type_name", "shown_url", "URL_MASK"]

#: What stands in a shown URL for its userinfo and for a credential-like query value.
URL_MASK = "***"


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


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")


def _secret_key(key: str) -> bool:
    from .logs import is_secret_name  # lazily: only a URL with a query or fragment needs it

    return is_secret_name(_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), key.replace("+", " ")))


def _params_shown(text: str) -> str:
    """``a=1&access_token=x`` as ``a=1&access_token=***``: the value of each parameter whose
    name (percent-decoded) is secret-looking by the one rule for names (cpcreds.logs)."""
    parts = text.split("&")
    for index, part in enumerate(parts):
        # Some servers also split at ";", others keep it in the value: from a secret name on,
        # the rest of the parameter is masked either way.
        pieces = part.split(";")
        for at, piece in enumerate(pieces):
            key, equals, value = piece.partition("=")
            if equals and value and _secret_key(key):
                parts[index] = ";".join([*pieces[:at], f"{key}={URL_MASK}"])
                break
    return "&".join(parts)


def shown_url(url: str) -> str:
    """``url`` as it may be shown (an API answer, a page, a log line, an error): its userinfo
    (``user:password@``, or a token as the user) becomes ``***@``, and the value of each query or
    fragment parameter whose name looks like a credential (``access_token``, ``sig``,
    ``X-Amz-Signature``: the rule :mod:`cpcreds.logs` applies to names) becomes ``***``. A URL
    with neither is returned unchanged; never raises.

    The userinfo ends at the last ``@`` before the first ``/`` after the scheme, not at a ``?``
    or ``#``: people paste passwords holding those unescaped, and a client that reads the URL
    differently must still not show them (``https://host?q=a@b``, without a path, is shown as a
    userinfo too). Text without ``scheme://`` is read as an authority first (``user:pass@proxy``).
    """
    if not isinstance(url, str):
        return type_name(url)
    scheme = _SCHEME.match(url)
    start = scheme.end() if scheme else 0
    rest = url[start:]
    slash = rest.find("/")
    at = (rest if slash < 0 else rest[:slash]).rfind("@")
    if at >= 0:
        rest = f"{URL_MASK}@{rest[at + 1:]}"
    cut = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=-1)
    if cut < 0:
        return url[:start] + rest
    before, tail = rest[:cut], rest[cut:]
    query, hash_, fragment = tail.partition("#")
    shown = before + ("?" + _params_shown(query[1:]) if query else "")
    if hash_:
        shown += "#" + _params_shown(fragment)
    return url[:start] + shown
