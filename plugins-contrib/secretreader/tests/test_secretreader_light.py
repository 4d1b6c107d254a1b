"""What a one-shot run of the console scripts loads (issue 19): an answer from the hub fake, as a
Go controller and the kubelet run them, without structured logging, metrics or settings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("cpcreds_secretreader", reason="install plugins-contrib/secretreader")

from secretreader_helpers import BIN, FLEET  # noqa: E402
from tests.fakes.hub import HubServer, secret  # noqa: E402
from tests.fakes.processes import imported_modules  # noqa: E402

#: Never needed to answer once from a plain hub kubeconfig: the kubernetes client (and urllib3)
#: serve only the kubeconfigs the plain reading leaves to them, the standard library's HTTPS the
#: rest; the options are read without pydantic; the console scripts do not carry the pluggy hook.
#: (PyYAML is cpcreds' one YAML reader since issue 28 item 16: a kubeconfig is read with it.)
NOT_NEEDED = {
    "pydantic", "pydantic_core", "structlog", "prometheus_client", "pydantic_settings", "kubernetes", "urllib3", "pluggy",
    "requests", "cryptography", "asyncio",
}  # fmt: skip


def loaded_by(argv: list[str], stdin: bytes = b"", **env: str) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", *argv], input=stdin, capture_output=True, timeout=60, env={**os.environ, **env}
    )
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    return imported_modules(result.stderr.decode())


def test_an_exec_answer_loads_no_logging_metrics_or_settings(hub: HubServer, kubeconfig: Path) -> None:
    hub.create(secret(FLEET, "spoke-1", {"token": "t-spoke-1"}))
    info = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
            "spec": {"interactive": False, "cluster": {"server": "https://spoke-1.example:6443", "config": {"clusterName": "spoke-1"}}}}  # fmt: skip
    modules = loaded_by([str(BIN / "cpcreds-secretreader"), "--kubeconfig", str(kubeconfig)], KUBERNETES_EXEC_INFO=json.dumps(info))
    assert "cpcreds_secretreader" in modules
    assert sorted(modules & NOT_NEEDED) == []


def test_a_kubelet_answer_loads_no_logging_metrics_or_settings(hub: HubServer, kubeconfig: Path) -> None:
    auths = {"auths": {"registry.example.com": {"username": "robot", "password": "pw"}}}
    hub.create(secret(FLEET, "pull", {".dockerconfigjson": json.dumps(auths)}, type="kubernetes.io/dockerconfigjson"))
    request = b'{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":"registry.example.com/a:1"}'
    argv = [str(BIN / "cpcreds-secretreader-credential-provider"), "--kubeconfig", str(kubeconfig), "--secret-name=pull", f"--namespace={FLEET}"]
    modules = loaded_by(argv, request)
    assert "cpcreds_secretreader" in modules
    assert sorted(modules & NOT_NEEDED) == []
