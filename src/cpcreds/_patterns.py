"""A regular expression compiled on its first use, for patterns most runs never need."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["LazyPattern"]

class LazyPattern:
    """A regular expression compiled on its first use. The redaction patterns are large and slow
    to compile, and most processes that import this module (``cpcreds get-credential`` answering)
    never redact anything. Other modules use it too for patterns only an error or a rare input
    needs."""

    __slots__ = ("_source", "_flags", "_compiled")

    def __init__(self, source: str, flags: int = 0) -> None:
        self._source, self._flags = source, flags
        self._compiled: re.Pattern[str] | None = None

    def _get(self) -> re.Pattern[str]:
        compiled = self._compiled
        if compiled is None:  # two threads may both compile: equal patterns, either will do
            compiled = self._compiled = re.compile(self._source, self._flags)
        return compiled

    def sub(self, repl: Any, string: str) -> str:
        return self._get().sub(repl, string)

    def search(self, string: str) -> re.Match[str] | None:
        return self._get().search(string)

    def match(self, string: str) -> re.Match[str] | None:
        return self._get().match(string)

    def fullmatch(self, string: str) -> re.Match[str] | None:
        return self._get().fullmatch(string)

    def finditer(self, string: str) -> Any:
        return self._get().finditer(string)
