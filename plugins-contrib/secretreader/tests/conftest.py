"""Fixtures for the secretreader providers' tests: the hub fake with a kubeconfig for it, engines
built with a registry of this plugin only, and an environment that cannot reach a real hub (no
KUBECONFIG, no in-cluster variables, an empty HOME)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from cpcreds import CredentialEngine, ProviderRegistry
from secretreader_helpers import FLEET, PodPlugin
from tests.fakes.builders import config_of
from tests.fakes import fixtures as fakes
from tests.fakes.fixtures import HUB_TOKEN
from tests.fakes.hub import HubServer

# cpcreds_secretreader is imported inside the fixtures: without the package installed, the test
# modules skip themselves and nothing here may fail.

# The fakes' fixtures (tests/conftest.py does not reach plugins-contrib).
pki, make_hub, hub, make_spoke, spoke = fakes.pki, fakes.make_hub, fakes.hub, fakes.make_spoke, fakes.spoke


@pytest.fixture(autouse=True)
def _no_real_hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "POD_NAMESPACE", "KUBERNETES_EXEC_INFO"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))  # no ~/.kube/config of whoever runs the tests


@pytest.fixture
def kubeconfig(hub: HubServer, tmp_path: Path) -> Path:
    """A kubeconfig for the hub with HUB_TOKEN, its context's namespace ``fleet-system``."""
    return hub.write_kubeconfig(tmp_path / "hub.kubeconfig", HUB_TOKEN, namespace=FLEET)


@pytest.fixture
def service_account_dir(tmp_path: Path) -> Path:
    """Where the tests' 'pod' has its service account (empty until a test writes into it); the
    real /var/run/secrets/... of a CI pod must not leak into the tests."""
    directory = tmp_path / "serviceaccount"
    directory.mkdir()
    return directory


@pytest.fixture
def registry() -> ProviderRegistry:
    """Built-ins and this plugin's module only: what else is installed cannot change the outcome."""
    from cpcreds_secretreader import plugin

    return ProviderRegistry(entry_points=False, plugins=(plugin,))


@pytest.fixture
def pod_registry(service_account_dir: Path) -> ProviderRegistry:
    return ProviderRegistry(entry_points=False, plugins=(PodPlugin(service_account_dir),))


@pytest.fixture
def make_engine(registry: ProviderRegistry) -> Iterator[Callable[..., CredentialEngine]]:
    """``make_engine(*entries, registry=None)``: an engine for these provider entries; closed after the test."""
    made: list[CredentialEngine] = []

    def make(*entries: dict[str, Any], registry: ProviderRegistry = registry) -> CredentialEngine:
        engine = CredentialEngine(config_of(*entries), registry=registry, prometheus_registry=CollectorRegistry())
        made.append(engine)
        return engine

    yield make
    for engine in made:
        engine.close()
