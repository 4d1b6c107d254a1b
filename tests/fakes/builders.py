"""Builders for the objects tests feed cpcreds: provider entries, ClusterProfiles, configs."""

from __future__ import annotations

import base64
import sys
from pathlib import Path
from typing import Any

from cpcreds import API_VERSION_V1, ProviderConfig

#: The fake KEP-541 plugin (a real executable run with this interpreter).
FAKE_PLUGIN = Path(__file__).with_name("exec_plugin.py")


def exec_config(*plugin_args: str, api_version: str = API_VERSION_V1, **fields: Any) -> dict[str, Any]:
    """An execConfig running the fake plugin with ``plugin_args``; ``fields`` add camelCase keys."""
    return {"apiVersion": api_version, "command": sys.executable, "args": [str(FAKE_PLUGIN), *plugin_args], **fields}


def exec_entry(name: str, *plugin_args: str, timeout: str | None = None, **fields: Any) -> dict[str, Any]:
    """A provider entry for the fake plugin. Keys of ``fields`` that are entry fields (policies)
    go to the entry; the rest go to its execConfig."""
    entry_keys = {"profileSourcedCLIArgsPolicy", "profileSourcedEnvVarsPolicy"}
    entry = {k: fields.pop(k) for k in list(fields) if k in entry_keys}
    entry.update(name=name, execConfig=exec_config(*plugin_args, **fields))
    if timeout is not None:
        entry["timeout"] = timeout
    return entry


def config_of(*entries: dict[str, Any]) -> ProviderConfig:
    return ProviderConfig.from_dict({"providers": list(entries)}, source="test-config.yaml")


def access_provider(
    name: str,
    server: str = "https://spoke.test:6443",
    *,
    ca_pem: bytes | None = None,
    exec_extension: Any = None,
    additional_args: Any = None,
    additional_envs: Any = None,
    **cluster_fields: Any,
) -> dict[str, Any]:
    """One ``status.accessProviders`` entry, with the reserved extensions when given."""
    cluster: dict[str, Any] = {"server": server, **cluster_fields}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    extensions = []
    if exec_extension is not None:
        extensions.append({"name": "client.authentication.k8s.io/exec", "extension": exec_extension})
    if additional_args is not None:
        extensions.append({"name": "clusterprofiles.multicluster.x-k8s.io/exec/additional-args", "extension": additional_args})
    if additional_envs is not None:
        extensions.append({"name": "clusterprofiles.multicluster.x-k8s.io/exec/additional-envs", "extension": additional_envs})
    if extensions:
        cluster["extensions"] = extensions
    return {"name": name, "cluster": cluster}


def cluster_profile(
    name: str = "spoke-1",
    *access_providers: dict[str, Any],
    namespace: str = "fleet-system",
    credential_providers: list[dict[str, Any]] | None = None,
    uid: str | None = None,
    resource_version: str | None = None,
    healthy: bool | None = None,
    labels: dict[str, str] | None = None,
    created: str | None = None,
) -> dict[str, Any]:
    """A ClusterProfile dict as the kubernetes client returns it. ``healthy`` sets its
    ``ControlPlaneHealthy`` condition (True or False; None: no condition), ``labels`` its labels
    and ``created`` its creationTimestamp."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels is not None:
        metadata["labels"] = dict(labels)
    if created is not None:
        metadata["creationTimestamp"] = created
    if uid is not None:
        metadata["uid"] = uid
    if resource_version is not None:
        metadata["resourceVersion"] = resource_version
    status: dict[str, Any] = {"accessProviders": list(access_providers)}
    if credential_providers is not None:
        status["credentialProviders"] = credential_providers
    if healthy is not None:
        status["conditions"] = [{"type": "ControlPlaneHealthy", "status": "True" if healthy else "False", "reason": "Test", "message": "set by the test"}]
    return {
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": metadata,
        "spec": {"displayName": name, "clusterManager": {"name": "test"}},
        "status": status,
    }
