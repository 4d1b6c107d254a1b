"""Constants and builders the aws tests share (the fixtures are in conftest.py)."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fakes.spoke import SpokeServer

BIN = Path(sys.executable).parent
CPCREDS_AWS = BIN / "cpcreds-aws"
CPCREDS_AWS_KUBELET = BIN / "cpcreds-aws-credential-provider"
PROVIDER = "argo-cd-builtin-aws"  # the access-provider name Argo CD's ClusterProfile integration publishes
CLUSTER = "fleet-eks-1"
REGION = "us-west-2"
ECR_IMAGE = f"111122223333.dkr.ecr.{REGION}.amazonaws.com/apps/checkout:1.4"


def profile(server: SpokeServer, name: str = "eks-1", provider: str = PROVIDER, cluster: str | None = CLUSTER) -> dict[str, Any]:
    """A ClusterProfile for ``server`` offering ``provider``, naming the EKS ``cluster`` in its
    exec extension (as Argo CD's and the EKS fleet controllers' profiles do)."""
    entry: dict[str, Any] = {
        "name": provider,
        "cluster": {"server": server.url, "certificate-authority-data": base64.b64encode(server.ca_pem).decode()},
    }
    if cluster is not None:
        entry["cluster"]["extensions"] = [{"name": "client.authentication.k8s.io/exec", "extension": {"clusterName": cluster}}]
    return {
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": name, "namespace": "fleet-system"},
        "status": {"accessProviders": [entry]},
    }


def token_url(token: str) -> tuple[str, dict[str, list[str]]]:
    """The presigned URL in an EKS token (its scheme, host and path) and its query."""
    assert token.startswith("k8s-aws-v1.") and "=" not in token
    encoded = token.removeprefix("k8s-aws-v1.")
    url = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}", parse_qs(parts.query)


def exec_info(api_version: str, server: SpokeServer | None = None, cluster: str | None = None) -> str:
    """KUBERNETES_EXEC_INFO as a client sends it (with the cluster when ``server`` is given)."""
    spec: dict[str, Any] = {"interactive": False}
    if server is not None:
        spec["cluster"] = {"server": server.url, "certificate-authority-data": base64.b64encode(server.ca_pem).decode()}
        if cluster is not None:
            spec["cluster"]["config"] = {"clusterName": cluster}
    return json.dumps({"apiVersion": api_version, "kind": "ExecCredential", "spec": spec})
