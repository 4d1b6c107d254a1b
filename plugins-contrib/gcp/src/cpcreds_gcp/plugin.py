"""Registers the ``gcp`` provider type (entry point ``gcp`` of the ``cpcreds`` group). The console
scripts ``cpcreds-gcp`` (``main``) and ``cpcreds-gcp-credential-provider`` (``kubelet_main``) are
defined in :mod:`cpcreds_gcp.console`, which they import without pluggy, and are importable from
here too (loaded on first use). Options are flags (``--scopes=a,b``); see
:mod:`cpcreds_gcp.provider`.
"""

from __future__ import annotations

from typing import Any

from cpcreds.sdk import hookimpl

from .provider import GcpProvider

__all__ = ["cpcreds_register_providers", "main", "kubelet_main", "GcpProvider", "ADC_FLAGS"]


@hookimpl
def cpcreds_register_providers(register: Any) -> None:
    register("gcp", GcpProvider)


def __getattr__(name: str) -> object:
    if name in ("main", "kubelet_main", "ADC_FLAGS"):
        from . import console

        return getattr(console, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
