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

The console scripts' functions are defined in :mod:`cpcreds_secretreader.console` (which the
scripts import, without pluggy) and importable from here too (loaded on first use: an engine that
loads this plugin does not need the plugin runner).
"""

from __future__ import annotations

from typing import Any

from cpcreds.sdk import hookimpl

from .provider import DockerConfigSecretReaderProvider, KubeconfigSecretReaderProvider, SecretReaderProvider

__all__ = ["cpcreds_register_providers", "secretreader_main", "kubeconfig_secretreader_main", "credential_provider_main"]


@hookimpl
def cpcreds_register_providers(register: Any) -> None:
    register("secretreader", SecretReaderProvider)
    register("kubeconfig-secretreader", KubeconfigSecretReaderProvider)
    register("dockerconfig-secretreader", DockerConfigSecretReaderProvider)


def __getattr__(name: str) -> object:
    if name in ("secretreader_main", "kubeconfig_secretreader_main", "credential_provider_main"):
        from . import console

        return getattr(console, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
