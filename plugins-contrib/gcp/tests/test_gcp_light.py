"""What a one-shot run of cpcreds-gcp loads (issue 19): a token for a service-account key from the
Google fake, as kubectl and the kubelet run it, without structured logging, metrics, settings,
PyYAML or the kubernetes client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("cpcreds_gcp", reason="install plugins-contrib/gcp")

from tests.fakes.processes import imported_modules  # noqa: E402

BIN = Path(sys.executable).parent
#: Never needed to answer once: the options are a cpcreds.sdk.Options, read without pydantic;
#: HTTP is urllib3 without requests; the console scripts do not carry the pluggy hook, and the
#: key file is read without the file provider's module (which brings pluggy too).
NOT_NEEDED = {"pydantic", "pydantic_core", "requests", "structlog", "prometheus_client", "pydantic_settings", "yaml", "kubernetes", "pluggy"}


def loaded_by(argv: list[str], stdin: bytes = b"", **env: str) -> set[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CPCREDS_")}
    result = subprocess.run([sys.executable, "-X", "importtime", *argv], input=stdin, capture_output=True, timeout=60, env={**environment, **env})
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    return imported_modules(result.stderr.decode())


def test_an_exec_answer_loads_only_what_it_needs(google, sa_key, write_json) -> None:
    key_file = write_json(google.service_account_info(sa_key))
    info = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "spec": {"interactive": False}}
    modules = loaded_by([str(BIN / "cpcreds-gcp")], GOOGLE_APPLICATION_CREDENTIALS=str(key_file), KUBERNETES_EXEC_INFO=json.dumps(info))
    assert "cpcreds_gcp" in modules and len(google.issued) == 1
    assert sorted(modules & NOT_NEEDED) == []


def test_a_kubelet_answer_loads_only_what_it_needs(google, sa_key, write_json) -> None:
    key_file = write_json(google.service_account_info(sa_key))
    request = b'{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":"us-docker.pkg.dev/p/app:1"}'
    modules = loaded_by([str(BIN / "cpcreds-gcp-credential-provider")], request, GOOGLE_APPLICATION_CREDENTIALS=str(key_file))
    assert "cpcreds_gcp" in modules and len(google.issued) == 1
    assert sorted(modules & NOT_NEEDED) == []
