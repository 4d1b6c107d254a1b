"""Helpers of the secretreader providers' tests: provider entries, ClusterProfiles, a plugin
object that builds the providers with a given service-account directory."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

from cpcreds.sdk import hookimpl
from tests.fakes.builders import access_provider, cluster_profile

BIN = Path(sys.executable).parent
EXEC_EXTENSION = "client.authentication.k8s.io/exec"
#: The namespace the hub kubeconfig's context names (where the tests' Secrets live).
FLEET = "fleet-system"


class PodPlugin:
    """This package's provider types, built with ``service_account_dir`` as the pod's service
    account directory (the providers' constructor parameter for that)."""

    def __init__(self, service_account_dir: Path) -> None:
        self.service_account_dir = str(service_account_dir)

    @hookimpl
    def cpcreds_register_providers(self, register: Any) -> None:
        from cpcreds_secretreader.provider import KubeconfigSecretReaderProvider, SecretReaderProvider

        register("secretreader", functools.partial(SecretReaderProvider, service_account_dir=self.service_account_dir))
        register("kubeconfig-secretreader", functools.partial(KubeconfigSecretReaderProvider, service_account_dir=self.service_account_dir))


def entry(options: dict[str, Any] | None = None, *, name: str = "secretreader", type: str = "secretreader", **fields: Any) -> dict[str, Any]:
    """A provider config entry of an in-process type."""
    return {"name": name, "type": type, "options": options or {}, **fields}


def profile(extension: Any, *, provider: str = "secretreader", name: str = "spoke-1", version: str = "v1alpha1") -> dict[str, Any]:
    """A ClusterProfile offering ``provider`` with this exec extension (None: no extension)."""
    built = cluster_profile(name, access_provider(provider, f"https://{name}.example:6443", exec_extension=extension))
    built["apiVersion"] = f"multicluster.x-k8s.io/{version}"
    return built


def cluster(name: str, **kwargs: Any) -> dict[str, Any]:
    """A ClusterProfile whose exec extension says ``clusterName: name``."""
    return profile({"clusterName": name}, name=name, **kwargs)
