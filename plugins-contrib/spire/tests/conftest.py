"""Fixtures for the spire provider's tests: a fake SPIRE agent, a registry holding only this
plugin, and an environment without the SPIFFE variables of whoever runs the tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from cpcreds import CredentialEngine, ProviderRegistry
from tests.fakes.builders import config_of

# cpcreds_spire and the fake agent (which needs the spiffe package) are imported in the fixtures:
# without the package installed, the test modules skip themselves and nothing here may fail.


@pytest.fixture(autouse=True)
def _no_spiffe_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SPIFFE_ENDPOINT_SOCKET", "SPIFFE_JWT_AUDIENCE", "KUBERNETES_EXEC_INFO"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def agent() -> Iterator[Any]:
    """A running fake agent (:class:`tests.fakes.spire.SpireAgent`) with one identity,
    spiffe://example.org/fleet/controller."""
    from tests.fakes.spire import SpireAgent

    with SpireAgent() as running:
        yield running


@pytest.fixture
def registry() -> ProviderRegistry:
    """Built-ins and this plugin only: what else is installed cannot change the outcome."""
    from cpcreds_spire import plugin

    return ProviderRegistry(entry_points=False, plugins=(plugin,))


@pytest.fixture
def engine_for(registry: ProviderRegistry) -> Iterator[Callable[..., CredentialEngine]]:
    """``engine_for(options, timeout="5s")``: an engine whose one entry, ``spire-agent``, is a
    ``type: spire`` provider with those options. Closed after the test."""
    made: list[CredentialEngine] = []

    def make(options: dict[str, Any], timeout: str | None = None, name: str = "spire-agent") -> CredentialEngine:
        entry: dict[str, Any] = {"name": name, "type": "spire", "options": options}
        if timeout is not None:
            entry["timeout"] = timeout
        engine = CredentialEngine(config_of(entry), registry=registry)
        made.append(engine)
        return engine

    yield make
    for engine in made:
        engine.close()
