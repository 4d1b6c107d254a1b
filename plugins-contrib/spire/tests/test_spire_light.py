"""What a one-shot run of cpcreds-spire loads (issue 19): a JWT-SVID from the Workload API fake,
without structured logging, metrics, settings, PyYAML or the kubernetes client; and loading the
plugin (what ``cpcreds plugins`` and every engine do) without grpc or the spiffe client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("cpcreds_spire", reason="install plugins-contrib/spire")

from tests.fakes.processes import imported_modules  # noqa: E402
from tests.fakes.spire import DEFAULT_IDENTITY  # noqa: E402

BIN = Path(sys.executable).parent
#: The console script does not carry the pluggy hook (cpcreds_spire.console, not .plugin).
NOT_NEEDED = {"pydantic", "pydantic_core", "structlog", "prometheus_client", "pydantic_settings", "yaml", "kubernetes", "pluggy"}


def loaded_by(argv: list[str], **env: str) -> set[str]:
    result = subprocess.run([sys.executable, "-X", "importtime", *argv], capture_output=True, timeout=60, env={**os.environ, **env})
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    return imported_modules(result.stderr.decode())


def test_an_exec_answer_loads_only_what_it_needs(agent) -> None:
    info = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "spec": {"interactive": False}}
    argv = [str(BIN / "cpcreds-spire"), "-audience", "a", "-socket", agent.address, "-spiffeId", DEFAULT_IDENTITY]
    modules = loaded_by(argv, KUBERNETES_EXEC_INFO=json.dumps(info))
    assert "cpcreds_spire" in modules and len(agent.requests) == 1
    assert sorted(modules & NOT_NEEDED) == []


def test_loading_the_plugin_loads_neither_grpc_nor_the_spiffe_client() -> None:
    code = "import sys, cpcreds_spire.plugin; print(sorted({m.split('.')[0] for m in sys.modules}))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert sorted({"grpc", "spiffe"} & set(eval(result.stdout))) == []
