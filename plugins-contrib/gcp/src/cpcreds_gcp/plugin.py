"""Registers the ``gcp`` provider type, and makes ``main`` for the ``cpcreds-gcp`` console script:
the same provider as a KEP-541 exec plugin, a drop-in for ``gke-gcloud-auth-plugin
--use_application_default_credentials`` (its flag is accepted); and ``kubelet_main`` for the
``cpcreds-gcp-credential-provider`` console script: the same provider as a kubelet image
credential provider plugin for Google's registries (KEP-2133, see :mod:`cpcreds_gcp.kubelet`).
Options are flags (``--scopes=a,b``); see :mod:`cpcreds_gcp.provider`.
"""

from __future__ import annotations

import sys
from typing import Any, NoReturn

from cpcreds.sdk import hookimpl, kubelet_plugin_main, run_provider

from .provider import GcpProvider

__all__ = ["cpcreds_register_providers", "main", "kubelet_main", "GcpProvider", "ADC_FLAGS"]

#: gke-gcloud-auth-plugin's flag. This plugin always uses application default credentials, so
#: the flag is accepted (a kubeconfig's args carry over unchanged) and means nothing more.
ADC_FLAGS = frozenset(
    f"{dashes}use_application_default_credentials{value}" for dashes in ("-", "--") for value in ("", "=true", "=True", "=1")
)


@hookimpl
def cpcreds_register_providers(register: Any) -> None:
    register("gcp", GcpProvider)


def main() -> NoReturn:
    """Run the gcp provider as a KEP-541 exec plugin (``cpcreds-gcp``)."""
    run_provider(GcpProvider, name="gcp", argv=[arg for arg in sys.argv[1:] if arg not in ADC_FLAGS])


#: Run the gcp provider as a kubelet image credential provider plugin
#: (``cpcreds-gcp-credential-provider``): Google's registries, user ``oauth2accesstoken``.
kubelet_main = kubelet_plugin_main("gcp", GcpProvider)
