"""pytest fixtures for the fakes; load with ``pytest_plugins = ["tests.fakes.fixtures"]``."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from .hub import HubServer
from .pki import PKI
from .spoke import SpokeServer

#: The bearer token the ``spoke`` fixture accepts out of the box.
SPOKE_TOKEN = "spoke-token"
#: The bearer token the ``hub`` fixture accepts, allowed everything (get, list, watch everywhere).
HUB_TOKEN = "hub-token"


@pytest.fixture(scope="session")
def pki() -> PKI:
    """One CA for the whole session: key generation is the slow part."""
    return PKI()


@pytest.fixture
def ca_file(pki: PKI, tmp_path: Any) -> str:
    """The fakes' CA certificate in a PEM file, for clients that take a path (requests' verify=)."""
    path = tmp_path / "ca.pem"
    path.write_bytes(pki.ca_pem)
    return str(path)


def _servers(build: Callable[..., Any]) -> Iterator[Callable[..., Any]]:
    """A factory fixture's body: ``make(**kwargs)`` builds and starts a server; every server made
    is stopped after the test, even if the test fails."""
    started: list[Any] = []

    def make(**kwargs: Any) -> Any:
        server = build(**kwargs).start()
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


@pytest.fixture
def make_spoke(pki: PKI) -> Iterator[Callable[..., SpokeServer]]:
    """Start extra spokes (a fleet); takes SpokeServer's keyword arguments.

    Every spoke made is stopped after the test, even if the test fails.
    """
    yield from _servers(lambda **kwargs: SpokeServer(pki, **kwargs))


@pytest.fixture
def spoke(make_spoke: Callable[..., SpokeServer]) -> SpokeServer:
    """A started spoke accepting token ``spoke-token`` and no client CN."""
    return make_spoke(tokens=[SPOKE_TOKEN])


@pytest.fixture
def make_hub(pki: PKI) -> Iterator[Callable[..., HubServer]]:
    """Start hubs; takes HubServer's keyword arguments. Every hub made is stopped after the test."""
    yield from _servers(lambda **kwargs: HubServer(pki, **kwargs))


@pytest.fixture
def hub(make_hub: Callable[..., HubServer]) -> HubServer:
    """A started, empty hub accepting token ``hub-token`` for everything; its kubeconfig is
    ``hub.write_kubeconfig(path, HUB_TOKEN)``."""
    return make_hub(tokens=[HUB_TOKEN])


def plugin_engines(plugin: ModuleType, provider_type: str, provider_name: str) -> Iterator[Callable[..., Any]]:
    """A ``make_engine`` fixture's body for a contrib plugin's tests: ``make(options, timeout="5s")``
    is an engine whose only provider is ``provider_name`` of ``type: provider_type`` with these
    options, from a registry that knows only ``plugin``. Every engine made is closed after the test."""
    from prometheus_client import CollectorRegistry

    from cpcreds import CredentialEngine, ProviderConfig, ProviderRegistry

    engines: list[CredentialEngine] = []

    def make(options: dict[str, Any] | None = None, *, timeout: str = "5s") -> CredentialEngine:
        config = ProviderConfig.from_dict(
            {"providers": [{"name": provider_name, "type": provider_type, "options": options or {}, "timeout": timeout}]},
            source="providers.yaml",
        )
        engine = CredentialEngine(config, registry=ProviderRegistry(entry_points=False, plugins=(plugin,)), prometheus_registry=CollectorRegistry())
        engines.append(engine)
        return engine

    yield make
    for engine in engines:
        engine.close()


def command_runner(**fixed: str) -> Callable[..., subprocess.CompletedProcess[str]]:
    """A ``run_command`` fixture's value: ``run(args, input=None, **env)`` runs a command with the
    test's environment minus every ``CPCREDS_*`` variable, plus ``fixed``, plus ``env``; stdin is
    ``input`` or nothing; returns the completed process (60 s at most)."""

    def run(args: list[str | Path], input: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
        environment = {k: v for k, v in os.environ.items() if not k.startswith("CPCREDS_")}
        environment.update(fixed)
        environment.update(env)
        return subprocess.run(
            [str(a) for a in args], env=environment, capture_output=True, text=True, timeout=60,
            input=input, stdin=None if input is not None else subprocess.DEVNULL,
        )

    return run


def plugin_fixtures(plugin_module: str, provider_type: str, provider_name: str, **fixed: str) -> tuple[Any, Any]:
    """A contrib plugin's ``make_engine`` and ``run_command`` fixtures; its conftest.py binds them by
    those names (``make_engine, run_command = plugin_fixtures("cpcreds_x.plugin", "x", "name")``).
    ``make_engine`` is :func:`plugin_engines` over ``plugin_module`` (imported on first use);
    ``run_command`` is :func:`command_runner` with ``fixed`` (e.g. ``CPCREDS_PLUGINS="x"``)."""

    @pytest.fixture
    def make_engine() -> Iterator[Callable[..., Any]]:
        from importlib import import_module

        yield from plugin_engines(import_module(plugin_module), provider_type, provider_name)

    @pytest.fixture
    def run_command() -> Callable[..., subprocess.CompletedProcess[str]]:
        return command_runner(**fixed)

    return make_engine, run_command
