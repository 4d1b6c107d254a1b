"""Registers the ``spire`` provider type (entry point ``spire`` of the ``cpcreds`` group): a JWT-SVID
from the SPIFFE Workload API, see :mod:`cpcreds_spire.provider`. The ``cpcreds-spire`` console
script's ``main`` is defined in :mod:`cpcreds_spire.console` (imported without pluggy) and is
importable from here too (loaded on first use).
"""

from __future__ import annotations

from typing import Any

from cpcreds.sdk import hookimpl

from .provider import AUDIENCE_ENV, SOCKET_ENV, SpireProvider

__all__ = ["SpireProvider", "SOCKET_ENV", "AUDIENCE_ENV", "cpcreds_register_providers", "main"]


@hookimpl
def cpcreds_register_providers(register: Any) -> None:
    register("spire", SpireProvider)


def __getattr__(name: str) -> object:
    if name == "main":
        from .console import main

        return main
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
