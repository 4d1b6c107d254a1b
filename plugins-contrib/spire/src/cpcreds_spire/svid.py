"""Checks on a JWT-SVID the agent handed us, before it becomes a bearer token.

The agent is trusted to sign, not to be well-formed: a broken or hostile agent could answer with
a string that is not a JWT, that carries a line break (which would end up in an HTTP header), that
is megabytes long, or whose ``exp`` is a string, ``NaN`` or the year 300,000. Every check here
raises :class:`UnusableToken` with a reason that never quotes the token.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone

__all__ = ["UnusableToken", "MAX_TOKEN_CHARS", "check_token", "expiry_from_exp"]

#: Largest JWT-SVID accepted. SPIRE's are well under 2 KiB; an API server's header limit is far
#: below anything larger than this.
MAX_TOKEN_CHARS = 64 * 1024

# JWS compact serialization: three base64url parts, none empty (a JWT-SVID is always signed).
_COMPACT_JWS = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")


class UnusableToken(ValueError):
    """The JWT-SVID cannot be used as a bearer token; ``str()`` says why, without the token."""


def check_token(token: object) -> str:
    """``token`` itself if it is a compact JWS of at most :data:`MAX_TOKEN_CHARS` characters."""
    if not isinstance(token, str) or not token:
        raise UnusableToken("it is empty")
    if len(token) > MAX_TOKEN_CHARS:
        raise UnusableToken(f"it is longer than {MAX_TOKEN_CHARS // 1024} KiB")
    if _COMPACT_JWS.fullmatch(token) is None:
        raise UnusableToken("it is not a compact JWT (three base64url parts, nothing else)")
    return token


def expiry_from_exp(exp: object) -> datetime:
    """The moment a token expires, from the value of its ``exp`` claim.

    RFC 7519 makes ``exp`` a NumericDate: a JSON number of seconds since the epoch. A string, a
    boolean, ``NaN``, infinity, a non-positive number or one beyond the year 9999 is refused.
    """
    if isinstance(exp, bool) or not isinstance(exp, (int, float)):
        raise UnusableToken("its exp claim is not a number")
    if isinstance(exp, float) and not math.isfinite(exp):
        raise UnusableToken("its exp claim is not a finite number")
    if exp <= 0:
        raise UnusableToken("its exp claim is not after 1970")
    moment = None
    try:
        moment = datetime.fromtimestamp(exp, timezone.utc)
    except (OverflowError, OSError, ValueError):
        pass
    if moment is None:
        raise UnusableToken("its exp claim is beyond the year 9999")
    return moment
