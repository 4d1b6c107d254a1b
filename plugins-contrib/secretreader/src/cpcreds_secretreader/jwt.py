"""The ``exp`` claim of a JWT: :func:`cpcreds.sdk.jwt_expiry`, kept importable here for callers of
the earlier ``cpcreds_secretreader.jwt``."""

from cpcreds.sdk import jwt_expiry

__all__ = ["jwt_expiry"]
