"""The console scripts: ``cpcreds-azure`` (``main``), the azure provider as a KEP-541 exec
plugin, a drop-in for ``kubelogin get-token`` (its flags by the same names; ``get-token`` and
``-l`` are accepted); and ``cpcreds-azure-credential-provider`` (``kubelet_main``), the same
provider as a kubelet image credential provider plugin for Azure Container Registry (KEP-2133,
see :mod:`cpcreds_azure.acr`).

Apart from :mod:`cpcreds_azure.plugin` so that a run loads neither pluggy (the ``hookimpl`` that
registers the provider type) nor, for an exec plugin's run, the KEP-2133 runner.
"""

from __future__ import annotations

import sys
from typing import NoReturn

from .provider import AzureProvider

__all__ = ["main", "kubelet_main", "kubelogin_args", "acr_provider_args"]


def kubelogin_args(argv: list[str]) -> list[str]:
    """``kubelogin get-token`` arguments as option flags: the ``get-token`` subcommand dropped,
    ``-l X`` (kubelogin's short ``--login``) spelled out."""
    args = list(argv)
    if args[:1] == ["get-token"]:
        args = args[1:]
    return ["--login" if arg == "-l" else f"--login={arg[3:]}" if arg.startswith("-l=") else arg for arg in args]


def main() -> NoReturn:
    """Run the azure provider as a KEP-541 exec plugin (``cpcreds-azure get-token ...``)."""
    from cpcreds.sdk import run_provider

    run_provider(AzureProvider, name="azure", argv=kubelogin_args(sys.argv[1:]))


def kubelet_main() -> NoReturn:
    """Run the azure provider as a kubelet image credential provider plugin
    (``cpcreds-azure-credential-provider``): ACR, user 00000000-0000-0000-0000-000000000000."""
    from cpcreds.sdk import run_image_provider

    run_image_provider(AzureProvider, name="azure", argv=acr_provider_args(sys.argv[1:]))


def acr_provider_args(argv: list[str]) -> list[str]:
    """acr-credential-provider's short ``-r X`` (``--registry-mirror``) spelled out."""
    return ["--registry-mirror" if arg == "-r" else f"--registry-mirror={arg[3:]}" if arg.startswith("-r=") else arg for arg in argv]
