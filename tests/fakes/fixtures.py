"""pytest fixtures for the fakes; load with ``pytest_plugins = ["tests.fakes.fixtures"]``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
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
