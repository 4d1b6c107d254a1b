"""Registers the ``azure`` provider type, and makes ``main`` for the ``cpcreds-azure`` console
script: the same provider as a KEP-541 exec plugin, a drop-in for ``kubelogin get-token`` (its
flags by the same names; ``get-token`` and ``-l`` are accepted); and ``kubelet_main`` for the
``cpcreds-azure-credential-provider`` console script: the provider as a kubelet image
credential provider plugin for Azure Container Registry (KEP-2133, see :mod:`cpcreds_azure.acr`).
"""

from __future__ import annotations

import sys
from typing import Any, NoReturn

from cpcreds.sdk import hookimpl, kubelet_plugin_main, run_provider

from .provider import AzureProvider

__all__ = ["cpcreds_register_providers", "main", "kubelet_main", "AzureProvider", "kubelogin_args"]


@hookimpl
def cpcreds_register_providers(register: Any) -> None:
    register("azure", AzureProvider)


def kubelogin_args(argv: list[str]) -> list[str]:
    """``kubelogin get-token`` arguments as option flags: the ``get-token`` subcommand dropped,
    ``-l X`` (kubelogin's short ``--login``) spelled out."""
    args = list(argv)
    if args[:1] == ["get-token"]:
        args = args[1:]
    return ["--login" if arg == "-l" else f"--login={arg[3:]}" if arg.startswith("-l=") else arg for arg in args]


def main() -> NoReturn:
    """Run the azure provider as a KEP-541 exec plugin (``cpcreds-azure get-token ...``)."""
    run_provider(AzureProvider, name="azure", argv=kubelogin_args(sys.argv[1:]))


#: Run the azure provider as a kubelet image credential provider plugin
#: (``cpcreds-azure-credential-provider``): ACR, user 00000000-0000-0000-0000-000000000000.
kubelet_main = kubelet_plugin_main("azure", AzureProvider)
