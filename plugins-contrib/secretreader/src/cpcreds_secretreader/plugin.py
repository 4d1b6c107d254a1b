"""Registers the provider types ``secretreader`` and ``kubeconfig-secretreader`` (entry point
``secretreader`` of the ``cpcreds`` group) and makes them the console scripts
``cpcreds-secretreader`` and ``cpcreds-kubeconfig-secretreader``: KEP-541 exec plugins that
read KUBERNETES_EXEC_INFO (v1 or v1beta1, with ``provideClusterInfo: true``) and answer as the
Go plugins of kubernetes-sigs/cluster-inventory-api do. Flags set options: ``--namespace``,
``--kubeconfig``, ``--context``, and for ``cpcreds-secretreader`` ``--key`` and
``--secret-name`` (``{clusterName}`` is the profile's clusterName).

``dockerconfig-secretreader`` (console script ``cpcreds-secretreader-credential-provider``) is
the kubelet side (KEP-2133): registry credentials from an image pull Secret on the hub
(``--secret-name``, ``--namespace``, ``--cache-duration``), as a kubelet image credential
provider plugin or in-process for :class:`cpcreds.ImageCredentials`.
"""

from __future__ import annotations

from typing import Any

from cpcreds.sdk import hookimpl, kubelet_plugin_main, provider_main

from .provider import DockerConfigSecretReaderProvider, KubeconfigSecretReaderProvider, SecretReaderProvider

__all__ = ["cpcreds_register_providers", "secretreader_main", "kubeconfig_secretreader_main", "credential_provider_main"]


@hookimpl
def cpcreds_register_providers(register: Any) -> None:
    register("secretreader", SecretReaderProvider)
    register("kubeconfig-secretreader", KubeconfigSecretReaderProvider)
    register("dockerconfig-secretreader", DockerConfigSecretReaderProvider)


#: ``cpcreds-secretreader``: the drop-in for the Go ``secretreader`` plugin.
secretreader_main = provider_main("secretreader", SecretReaderProvider)
#: ``cpcreds-kubeconfig-secretreader``: the drop-in for the Go ``kubeconfig-secretreader`` plugin.
kubeconfig_secretreader_main = provider_main("kubeconfig-secretreader", KubeconfigSecretReaderProvider)
#: ``cpcreds-secretreader-credential-provider``: a kubelet image credential provider plugin
#: (KEP-2133) answering from an image pull Secret on the hub (``--secret-name``).
credential_provider_main = kubelet_plugin_main("dockerconfig-secretreader", DockerConfigSecretReaderProvider)
