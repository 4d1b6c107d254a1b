"""Constants and builders the azure tests share (the fixtures are in conftest.py)."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.fakes.spoke import SpokeServer

BIN = Path(sys.executable).parent
CPCREDS_AZURE = BIN / "cpcreds-azure"
CPCREDS_AZURE_KUBELET = BIN / "cpcreds-azure-credential-provider"
PROVIDER = "argo-cd-builtin-azure"  # the access-provider name Argo CD's ClusterProfile integration publishes
CLIENT_ID = "11111111-2222-3333-4444-555555555555"
SECRET = "s3cret~" + "Qx7" * 10
NODE_CLIENT_ID = "99999999-8888-7777-6666-555555555555"  # the node's (kubelet's) managed identity
POD_CLIENT_ID = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"  # a pod's federated identity
POD_SUBJECT = "system:serviceaccount:shop:web"


def profile(server: SpokeServer, name: str = "aks-1", provider: str = PROVIDER) -> dict[str, Any]:
    """A ClusterProfile for ``server`` offering ``provider``."""
    return {
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": name, "namespace": "fleet-system"},
        "status": {"accessProviders": [{"name": provider, "cluster": {
            "server": server.url, "certificate-authority-data": base64.b64encode(server.ca_pem).decode()}}]},
    }


def run_kubelet_plugin(stdin: bytes, *args: str, **env: str) -> subprocess.CompletedProcess[bytes]:
    """``cpcreds-azure-credential-provider ARGS < stdin`` as the kubelet runs it: the test's
    environment (without ``CPCREDS_*``) and ``env``."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CPCREDS_")} | env
    return subprocess.run([str(CPCREDS_AZURE_KUBELET), *args], input=stdin, capture_output=True, env=environ, timeout=60)
