"""Constants and builders the azure tests share (the fixtures are in conftest.py)."""

from __future__ import annotations

import base64
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


def profile(server: SpokeServer, name: str = "aks-1", provider: str = PROVIDER) -> dict[str, Any]:
    """A ClusterProfile for ``server`` offering ``provider``."""
    return {
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": name, "namespace": "fleet-system"},
        "status": {"accessProviders": [{"name": provider, "cluster": {
            "server": server.url, "certificate-authority-data": base64.b64encode(server.ca_pem).decode()}}]},
    }
