"""The console scripts (``[project.scripts]``): ``cpcreds-gcp``, the gcp provider as a KEP-541 exec
plugin, a drop-in for ``gke-gcloud-auth-plugin --use_application_default_credentials`` (its flag
is accepted); and ``cpcreds-gcp-credential-provider``, the same provider as a kubelet image
credential provider plugin for Google's registries (KEP-2133, see :mod:`cpcreds_gcp.kubelet`).
Options are flags (``--scopes=a,b``); see :mod:`cpcreds_gcp.provider`.

They live here, not in :mod:`cpcreds_gcp.plugin`: that module carries the pluggy hook that
registers the type in-process, and a one-shot run does not need pluggy.
"""

from __future__ import annotations

import sys
from typing import NoReturn

from cpcreds.sdk import run_provider

from .provider import GcpProvider

__all__ = ["main", "kubelet_main", "ADC_FLAGS"]

#: gke-gcloud-auth-plugin's flag. This plugin always uses application default credentials, so
#: the flag is accepted (a kubeconfig's args carry over unchanged) and means nothing more.
ADC_FLAGS = frozenset(
    f"{dashes}use_application_default_credentials{value}" for dashes in ("-", "--") for value in ("", "=true", "=True", "=1")
)


def main() -> NoReturn:
    """Run the gcp provider as a KEP-541 exec plugin (``cpcreds-gcp``)."""
    run_provider(GcpProvider, name="gcp", argv=[arg for arg in sys.argv[1:] if arg not in ADC_FLAGS])


def kubelet_main() -> NoReturn:
    """Run the gcp provider as a kubelet image credential provider plugin
    (``cpcreds-gcp-credential-provider``): Google's registries, user ``oauth2accesstoken``."""
    # The kubelet runner (and the KEP-2133 wire types it loads) only for this script.
    from cpcreds.sdk import kubelet_plugin_main

    kubelet_plugin_main("gcp", GcpProvider)()
