"""What a one-shot run of cpcreds-azure loads: an AKS token and an ACR answer from the Entra and
registry fakes, as kubectl and the kubelet run them, without pydantic (the options are a
cpcreds.sdk.Options), structured logging, metrics, settings, PyYAML or the kubernetes client."""

from __future__ import annotations

import json
import sys

from cpcreds.api import API_VERSION_V1, EXEC_INFO_ENV
from cpcreds.images.protocol import API_VERSION_V1 as KUBELET_V1
from cpcreds.images.protocol import encode_request
from tests.fakes.azure import AKS_SERVER_ID
from tests.fakes.processes import imported_modules

from azure_helpers import CPCREDS_AZURE, CPCREDS_AZURE_KUBELET

#: Never needed to answer once.
NOT_NEEDED = {"pydantic", "pydantic_core", "structlog", "prometheus_client", "pydantic_settings", "yaml", "kubernetes"}


def _loaded(run_command, argv: list, stdin: str | None = None, **env: str) -> set[str]:
    result = run_command([sys.executable, "-X", "importtime", *argv], input=stdin, **env)
    assert result.returncode == 0, result.stderr[-2000:]
    return imported_modules(result.stderr)


def test_an_exec_answer_loads_only_what_it_needs(entra, workload_identity, run_command) -> None:
    info = json.dumps({"apiVersion": API_VERSION_V1, "kind": "ExecCredential", "spec": {"interactive": False}})
    argv = [CPCREDS_AZURE, "get-token", "--login", "workloadidentity", "--server-id", AKS_SERVER_ID,
            "--authority-host", entra.authority, "--disable-instance-discovery"]
    modules = _loaded(run_command, argv, **{EXEC_INFO_ENV: info})
    assert "cpcreds_azure" in modules and len(entra.issued) == 1
    assert sorted(modules & NOT_NEEDED) == []
    assert "pluggy" not in modules  # the console script registers no plugin


def test_a_kubelet_answer_loads_only_what_it_needs(entra, registry, workload_identity, run_command) -> None:
    argv = [CPCREDS_AZURE_KUBELET, "--login=workloadidentity", "--disable-instance-discovery", f"--registries={registry.host}"]
    modules = _loaded(run_command, argv, encode_request(f"{registry.host}/team/app:1", KUBELET_V1).decode())
    assert "cpcreds_azure" in modules and len(registry.exchanges) == 1
    assert sorted(modules & NOT_NEEDED) == []
