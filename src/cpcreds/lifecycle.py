"""The sync and async context manager of what a program starts and must end: a ``Fleet``, a
``Shard``.

Entering ``with`` or ``async with`` starts it and binds what ``start()`` returns; leaving ends
it. Ending joins threads, so the async exit ends it in a thread of its own: the caller's event
loop goes on meanwhile.
"""

from __future__ import annotations

import asyncio
from typing import Any, Self

__all__ = ["StartedInContext"]


class StartedInContext:
    """A base for a class with a ``start()`` (returning what ``with ... as`` binds) and an
    ending method, named at the class: ``class Shard(StartedInContext, end="stop")``."""

    _end_name = ""

    def __init_subclass__(cls, *, end: str, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._end_name = end

    def start(self) -> Self:
        raise NotImplementedError

    def _end(self) -> None:
        getattr(self, self._end_name)()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self._end()

    async def __aenter__(self) -> Self:
        return self.start()

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self._end)
