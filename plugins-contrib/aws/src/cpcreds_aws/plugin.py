"""Registers the ``aws`` provider type (the ``cpcreds`` entry point). The console scripts are in
:mod:`cpcreds_aws.scripts` (``main`` and ``kubelet_main`` are kept here too, for callers of
the old names)."""

from __future__ import annotations

from typing import Any

from cpcreds.sdk import hookimpl

from .provider import AwsProvider
from .scripts import exec_arguments, kubelet_main, main

__all__ = ["cpcreds_register_providers", "main", "kubelet_main", "AwsProvider", "exec_arguments"]


@hookimpl
def cpcreds_register_providers(register: Any) -> None:
    register("aws", AwsProvider)
