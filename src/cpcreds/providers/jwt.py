"""The ``exp`` claim of a JWT, read without verifying it, whatever the token holds.

Only to bound how long a token is cached (the server verifies the signature, not us). A
service-account token (what Open Cluster Management's managed-serviceaccount and ``kubectl
create token`` put in Secrets) is a JWT with ``exp``; a static token is not, and has no expiry.
Used by the ``file`` provider and by providers through :mod:`cpcreds.sdk`.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from datetime import datetime, timezone
from typing import Any, NoReturn

__all__ = ["jwt_expiry", "MAX_JWT_CHARS"]

#: Longer tokens are not parsed (no real JWT is near this; a Secret value may be up to 1 MiB).
MAX_JWT_CHARS = 64 * 1024
_SEGMENT = re.compile(r"[A-Za-z0-9_-]+={0,2}")


def _no_constants(name: str) -> NoReturn:
    # json.loads accepts NaN and Infinity by default; a JWT's JSON cannot hold them.
    raise ValueError(f"{name} is not JSON")


def jwt_expiry(token: str) -> datetime | None:
    """The ``exp`` of ``token`` as an aware UTC datetime, or ``None`` when the token is not a
    JWT (three base64url segments, a JSON object in the middle one) or has no usable ``exp``
    (absent, not a finite number, a boolean, outside the years 1 to 9999). Never raises."""
    if not isinstance(token, str) or len(token) > MAX_JWT_CHARS or token.count(".") != 2:
        return None
    payload = token.split(".")[1]
    if not _SEGMENT.fullmatch(payload):
        return None
    try:
        claims: Any = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)), parse_constant=_no_constants)
    except (ValueError, binascii.Error, RecursionError):  # UnicodeDecodeError is a ValueError
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    if type(exp) not in (int, float) or not math.isfinite(exp):
        return None
    try:
        return datetime.fromtimestamp(exp, timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None
