"""Go durations (``time.ParseDuration`` and ``Duration.String``), written once.

Every duration cpcreds reads — a provider entry's ``timeout``, ``CPCREDS_DEFAULT_TIMEOUT``, a
file provider's ``refreshInterval``, KEP-2133's ``cacheDuration`` — is Go's syntax, because the
same values are written for (and by) Go programs. This module only parses and formats; each
caller checks the range it allows (a ``timeout`` must be longer than zero, a ``cacheDuration`` of
``0`` means "do not cache") and words that error itself.
"""

from __future__ import annotations

import math
import re
from typing import Final

from .._show import shown

__all__ = ["MAX_NANOSECONDS", "duration_ns", "parse_duration", "duration_or_none", "format_duration"]

_NANOSECONDS: Final = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,  # micro sign
    "\u03bcs": 1_000,  # Greek small letter mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
#: Go's time.Duration is an int64 of nanoseconds.
MAX_NANOSECONDS: Final = (1 << 63) - 1
_PART = re.compile(r"([0-9]*)(?:\.([0-9]*))?([^0-9.]*)")
#: Longer than any valid duration ("-2562047h47m16.854775807s" is 25 characters) by a margin.
_MAX_CHARS = 64


def duration_ns(text: str) -> int:
    """Nanoseconds in a Go duration string: an optional sign, then one or more decimal numbers
    each with a unit (``ns``, ``us``/``µs``, ``ms``, ``s``, ``m``, ``h``), or ``"0"``. Raises
    ``ValueError`` (quoting ``text`` only when it is short and printable) for anything else,
    including values beyond Go's ±292 years."""
    if not isinstance(text, str) or not text or len(text) > _MAX_CHARS:
        raise ValueError(f"{shown(text)} is not a duration such as 30s, 2m or 1h30m")
    rest, sign = text, 1
    if rest[0] in "+-":
        sign, rest = (-1 if rest[0] == "-" else 1), rest[1:]
    if rest == "0":
        return 0
    total = 0
    position = 0
    while position < len(rest) or not rest:
        match = _PART.match(rest, position)
        assert match is not None  # every group may be empty
        whole, fraction, unit = match.group(1), match.group(2) or "", match.group(3)
        if not whole and not fraction or unit not in _NANOSECONDS or match.end() == position:
            raise ValueError(f"{shown(text)} is not a duration such as 30s, 2m or 1h30m")
        scale = _NANOSECONDS[unit]
        # Exact integer arithmetic; Go's float rounding of the fraction is below a nanosecond.
        total += int(whole or "0") * scale
        if fraction:
            total += int(fraction) * scale // 10 ** len(fraction)
        if total > MAX_NANOSECONDS + (1 if sign < 0 else 0):
            raise ValueError(f"{shown(text)} is longer than a Go duration can be")
        position = match.end()
    return sign * total


def parse_duration(text: str) -> float:
    """Seconds in a Go duration string (``"1h0m0s"`` is 3600.0, ``"1.5s"`` 1.5, ``"-1m"`` -60.0,
    ``"0"`` 0.0); the syntax and errors are :func:`duration_ns`'s. The caller checks the range."""
    return duration_ns(text) / 1e9


def duration_or_none(value: object) -> float | None:
    """Seconds in ``value`` when it is a Go duration string, else ``None``: for messages worded by
    the caller (:func:`parse_duration`'s ``ValueError`` shows the value; a setting may be a secret)."""
    if not isinstance(value, str):
        return None
    seconds: float | None = None
    try:
        seconds = parse_duration(value)
    except ValueError:
        seconds = None
    return seconds


def _fraction(value: int, digits: int) -> tuple[str, int]:
    """(".fraction" without trailing zeros or "", the integer part) of value / 10**digits."""
    whole, rest = divmod(value, 10**digits)
    text = f"{rest:0{digits}d}".rstrip("0")
    return (f".{text}" if text else ""), whole


def format_duration(seconds: float) -> str:
    """A duration as Go's ``Duration.String()`` writes it: ``3600`` is ``"1h0m0s"``, ``1.5`` is
    ``"1.5s"``, ``0.002`` is ``"2ms"``, ``0`` is ``"0s"``. Rounded to the nanosecond;
    :func:`parse_duration` reads it back. Raises ``ValueError`` outside Go's range."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds):
        raise ValueError("a duration must be a finite number of seconds")
    nanoseconds = round(seconds * 1_000_000_000) if isinstance(seconds, float) else seconds * 1_000_000_000
    limit = MAX_NANOSECONDS + (1 if nanoseconds < 0 else 0)
    if abs(nanoseconds) > limit:
        # A float of seconds cannot hold Go's extremes exactly: within its precision, clamp.
        if abs(nanoseconds) > limit * (1 + 1e-12):
            raise ValueError("a duration must be within Go's ±292 years")
        nanoseconds = limit if nanoseconds > 0 else -limit
    sign, value = ("-" if nanoseconds < 0 else ""), abs(nanoseconds)
    if value == 0:
        return "0s"
    if value < 1_000:
        return f"{sign}{value}ns"
    if value < 1_000_000:
        fraction, whole = _fraction(value, 3)
        return f"{sign}{whole}{fraction}\u00b5s"
    if value < 1_000_000_000:
        fraction, whole = _fraction(value, 6)
        return f"{sign}{whole}{fraction}ms"
    fraction, whole_seconds = _fraction(value, 9)
    text = f"{whole_seconds % 60}{fraction}s"
    minutes = whole_seconds // 60
    if minutes:
        text = f"{minutes % 60}m{text}"
        hours = minutes // 60
        if hours:
            text = f"{hours}h{text}"
    return sign + text
