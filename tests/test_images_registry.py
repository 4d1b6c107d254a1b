"""End to end: credentials from a real kubelet plugin open a registry's /v2/ endpoint
(tests/fakes/registry.py: 401 without, 200 with the right basic auth), through the Python API and
through the docker config.json the command prints."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from cpcreds import ImageCredentials
from tests.fakes.kubelet_plugin import install, provider_entry, write_config
from tests.fakes.pki import PKI
from tests.fakes.registry import FakeRegistry

PASSWORD = "registry-pass:with-colon"


@pytest.fixture
def registry(pki: PKI) -> Iterator[FakeRegistry]:
    with FakeRegistry(pki, users={"robot": PASSWORD}) as server:
        yield server


@pytest.fixture
def node(tmp_path: Path, registry: FakeRegistry) -> tuple[Path, Path]:
    """A node whose plugin answers the registry's robot account for 127.0.0.1:<port>."""
    install(tmp_path / "bin", "local-registry", "--auth", f"REGISTRY=robot:{PASSWORD}", "--auth", f"{registry.host}/other=nobody:x")
    config = write_config(tmp_path / "config.json", provider_entry("local-registry", registry.host))
    return config, tmp_path / "bin"


def test_the_credential_opens_the_registry(registry: FakeRegistry, ca_file: str, node: tuple[Path, Path]) -> None:
    assert requests.get(f"{registry.url}/v2/", verify=ca_file, timeout=10).status_code == 401
    with ImageCredentials.from_kubelet_config(*node) as images:
        credentials = images.get(f"{registry.host}/team/app:1.0")
    assert [c.key for c in credentials] == [registry.host]  # registry.host/other does not match team/app
    best = credentials[0]
    answer = requests.get(f"{registry.url}/v2/", headers={"Authorization": f"Basic {best.basic_auth()}"}, verify=ca_file, timeout=10)
    assert answer.status_code == 200
    assert [(r.username, r.authenticated) for r in registry.requests] == [(None, False), ("robot", True)]


def test_the_docker_config_from_the_command_opens_the_registry(registry: FakeRegistry, ca_file: str, node: tuple[Path, Path], tmp_path: Path) -> None:
    config, bin_dir = node
    env = {k: v for k, v in os.environ.items() if not k.startswith("CPCREDS_")}
    run = subprocess.run(
        [sys.executable, "-m", "cpcreds", "image-credential", f"{registry.host}/team/app@sha256:{'e' * 64}", "-o", "docker-config",
         "--image-credential-provider-config", str(config), "--image-credential-provider-bin-dir", str(bin_dir)],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    entry = json.loads(run.stdout)["auths"][registry.host]  # keyed as docker looks the registry up: host:port
    username, _, password = base64.b64decode(entry["auth"]).decode().partition(":")
    assert requests.get(f"{registry.url}/v2/", auth=(username, password), verify=ca_file, timeout=10).status_code == 200
    assert requests.get(f"{registry.url}/v2/", auth=(entry["username"], entry["password"]), verify=ca_file, timeout=10).status_code == 200
