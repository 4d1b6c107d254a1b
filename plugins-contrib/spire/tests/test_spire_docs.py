"""The examples of docs/providers-spire.md and the package README run as shown: their provider
configs and ClusterProfile get tokens from an agent (the fake one, at the socket they name)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("cpcreds_spire", reason="install plugins-contrib/spire")

import yaml  # noqa: E402

from cpcreds import ConfigError, CredentialEngine, ProviderConfig, ProviderRegistry  # noqa: E402
from tests.fakes.spire import SpireAgent  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
PAGES = [ROOT / "docs" / "providers-spire.md", ROOT / "plugins-contrib" / "spire" / "README.md"]
SOCKET = "unix:///spiffe-workload-api/spire-agent.sock"
IDENTITY = "spiffe://example.org/ns/fleet-system/sa/fleet-controller"


def block(page: Path, marker: str) -> Any:
    """The YAML block of ``page`` that starts with the comment ``# <marker>``."""
    found = re.findall(rf"```yaml\n(# {re.escape(marker)}\b[^\n]*\n.*?)```", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    assert found, f"{page.name} has no yaml block starting with # {marker}"
    return yaml.safe_load(found[0])


def at(agent: SpireAgent, document: Any) -> Any:
    """The document with the page's socket replaced by the fake agent's."""
    return yaml.safe_load(yaml.safe_dump(document).replace(SOCKET, agent.address))


@pytest.fixture
def fleet_agent():
    with SpireAgent(identities=["spiffe://example.org/ns/fleet-system/sa/other", IDENTITY]) as agent:
        yield agent


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_in_process_example_runs(fleet_agent, registry, page) -> None:
    config = ProviderConfig.from_dict(at(fleet_agent, block(page, "providers.yaml")), source="providers.yaml")
    profile = block(page, "spoke-1.yaml")
    audience = profile["status"]["accessProviders"][0]["cluster"]["extensions"][0]["extension"]["audience"]
    with CredentialEngine(config, registry=registry) as engine:
        credential = engine.get_credential(profile)
    claims = fleet_agent.verify(credential.token, audience)
    assert claims is not None and claims["sub"] == IDENTITY


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_exec_example_runs(fleet_agent, page, monkeypatch) -> None:
    # The example names the command, found on PATH as cpcreds would find it on a controller.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    config = ProviderConfig.from_dict(at(fleet_agent, block(page, "providers-exec.yaml")), source="providers-exec.yaml")
    profile = block(page, "spoke-1.yaml")
    with CredentialEngine(config, registry=ProviderRegistry(entry_points=False)) as engine:
        credential = engine.get_credential(profile)
    assert fleet_agent.verify(credential.token, "https://spoke-1.example.internal") is not None


def test_the_api_servers_audience_is_the_profiles() -> None:
    page = PAGES[0]
    authentication = block(page, "authentication-config.yaml")
    profile = block(page, "spoke-1.yaml")
    audience = profile["status"]["accessProviders"][0]["cluster"]["extensions"][0]["extension"]["audience"]
    assert authentication["jwt"][0]["issuer"]["audiences"] == [audience]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_option_error_shown_is_the_real_one(registry, page) -> None:
    bad = ProviderConfig.from_dict(
        {"providers": [{"name": "spire-agent", "type": "spire", "options": {"socket": "tcp://127.0.0.1:8081"}}]}, source="bad.yaml"
    )
    with pytest.raises(ConfigError) as caught:
        CredentialEngine(bad, registry=registry)
    assert f"cpcreds: error: {caught.value}\n" in page.read_text(encoding="utf-8")
