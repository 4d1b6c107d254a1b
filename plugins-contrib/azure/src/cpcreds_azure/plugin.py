"""Registers the ``azure`` provider type (the ``cpcreds`` entry point). The console scripts are
in :mod:`cpcreds_azure.scripts` (``main`` and ``kubelet_main`` are kept here too, for callers of
the old names)."""

from __future__ import annotations

from typing import Any

from cpcreds.sdk import hookimpl

from .provider import AzureProvider
from .scripts import kubelet_main, kubelogin_args, main

__all__ = ["cpcreds_register_providers", "main", "kubelet_main", "AzureProvider", "kubelogin_args"]


@hookimpl
def cpcreds_register_providers(register: Any) -> None:
    register("azure", AzureProvider)
