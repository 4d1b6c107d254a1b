"""The console scripts (``[project.scripts]``): the providers run once as a KEP-541 exec plugin or
a kubelet image credential provider plugin (see :mod:`cpcreds_secretreader.plugin` for what each
does).

They live here, not in :mod:`cpcreds_secretreader.plugin`: that module carries the pluggy hook
(``hookimpl``) that registers the types in-process, and a one-shot run that answers one request
does not need pluggy.
"""

from __future__ import annotations

from typing import NoReturn

from cpcreds.sdk import provider_main

from .provider import DockerConfigSecretReaderProvider, KubeconfigSecretReaderProvider, SecretReaderProvider

__all__ = ["secretreader_main", "kubeconfig_secretreader_main", "credential_provider_main"]

#: ``cpcreds-secretreader``: the drop-in for the Go ``secretreader`` plugin.
secretreader_main = provider_main("secretreader", SecretReaderProvider)
#: ``cpcreds-kubeconfig-secretreader``: the drop-in for the Go ``kubeconfig-secretreader`` plugin.
kubeconfig_secretreader_main = provider_main("kubeconfig-secretreader", KubeconfigSecretReaderProvider)


def credential_provider_main() -> NoReturn:
    """``cpcreds-secretreader-credential-provider``: a kubelet image credential provider plugin
    (KEP-2133) answering from an image pull Secret on the hub (``--secret-name``)."""
    # The kubelet runner (and the KEP-2133 wire types it loads) only for this script.
    from cpcreds.sdk import kubelet_plugin_main

    kubelet_plugin_main("dockerconfig-secretreader", DockerConfigSecretReaderProvider)()
