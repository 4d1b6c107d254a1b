"""Paging of ``/v1/clusters`` and the status page: the :class:`Query` a page asks for, the
:class:`BadQuery` it may be refused with, and the continue tokens (:class:`PageTokens`) that
name where the next page starts, as Kubernetes lists page."""

from __future__ import annotations

import base64
import binascii
import json
import os
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["BadQuery", "Query", "PageTokens"]


class BadQuery(ValueError):
    """A ``/v1/clusters`` query serve cannot answer. ``code`` is the HTTP status (400, or 410 for
    a continue token this serve did not issue, as the API server answers an expired one) and
    ``reason`` Kubernetes' ``Status.reason`` (``BadRequest``, ``Expired``)."""

    def __init__(self, message: str, *, code: int = 400, reason: str = "BadRequest") -> None:
        super().__init__(message)
        self.code, self.reason = code, reason


@dataclass(frozen=True)
class Query:
    """A page of profiles: those in ``state`` (any when None), of ``provider`` (a configured
    provider's name), whose key (``namespace/name``) starts with ``prefix``; at most ``limit``
    (all when None), after the ``continue`` token of the previous page, in ``order``: ``key``
    (as Kubernetes lists) or ``attention`` (the status page's: failing, invalid, unmatched,
    pending, then ready; each by expiry, soonest first, then key)."""

    state: str | None = None
    provider: str | None = None
    prefix: str = ""
    order: Literal["key", "attention"] = "key"
    limit: int | None = None
    continue_: str | None = None

    @property
    def filters(self) -> list[Any]:
        return [self.state, self.provider, self.prefix, self.order]


class PageTokens:
    """Continue tokens of one run of serve: a token names this run (a token of another serve,
    or of this one before a restart, is refused as expired, not misread), the query's filters
    and the last item of the page it follows."""

    def __init__(self) -> None:
        self._instance = base64.urlsafe_b64encode(os.urandom(6)).decode()

    def encode(self, query: Query, last: Any) -> str:
        """The token of the page after the one that ended with index item ``last``."""
        raw = json.dumps([1, self._instance, query.filters, last if isinstance(last, str) else list(last)], separators=(",", ":"))
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    def decode(self, query: Query) -> Any:
        """The index item ``query``'s continue token names: a key (``key`` order) or a
        (rank, expiry, key) triple (``attention`` order). Raises :class:`BadQuery` for a token
        that is not one of this run's, was issued for other filters, or is malformed."""
        token = query.continue_ or ""
        try:
            version, instance, filters, last = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
            if version != 1:
                raise ValueError
        # RecursionError: a forged token of thousands of nested arrays (the request line allows 64 KiB).
        except (ValueError, TypeError, RecursionError, binascii.Error, UnicodeDecodeError):
            raise BadQuery("the continue token is not valid: pass the one the previous page returned, or none to start over") from None
        if instance != self._instance:
            raise BadQuery(
                "the continue token was issued by another run of serve and has expired: start the list again without it",
                code=410,
                reason="Expired",
            )
        if filters != query.filters:
            raise BadQuery("the continue token was issued for other filters: pass the same state, provider, prefix and order as the first page")
        if query.order == "key":
            if not isinstance(last, str):
                raise BadQuery("the continue token is not valid: pass the one the previous page returned, or none to start over")
            return last
        if not (isinstance(last, list) and len(last) == 3 and isinstance(last[0], int) and isinstance(last[1], (int, float)) and isinstance(last[2], str)):
            raise BadQuery("the continue token is not valid: pass the one the previous page returned, or none to start over")
        return tuple(last)
