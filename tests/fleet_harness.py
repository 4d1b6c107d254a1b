"""What the Fleet tests share: engines on the in-process ``mint`` provider, fleets closed after
the test, profiles, polling with a deadline, and a recorder of the fleet's callbacks that checks
their order. Import the fixtures into a test module to use them."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from cpcreds import CredentialEngine, Fleet, ProviderRegistry
from tests.fakes import mint
from tests.fakes.builders import access_provider, cluster_profile, config_of

MEMBER = "multicluster.x-k8s.io/inventory-member-id"
MINT = {"name": "mint", "type": "mint", "options": {"lifetime": 3600}}


@pytest.fixture
def make_engine() -> Iterator[Callable[..., CredentialEngine]]:
    engines: list[CredentialEngine] = []

    def make(*entries: dict[str, Any]) -> CredentialEngine:
        engine = CredentialEngine(
            config_of(*(entries or (MINT,))),
            registry=ProviderRegistry(entry_points=False, plugins=(mint,)),
            prometheus_registry=CollectorRegistry(),
            max_entries=100_000,
        )
        engines.append(engine)
        return engine

    yield make
    for engine in engines:
        engine.close()


@pytest.fixture
def make_fleet(make_engine: Callable[..., CredentialEngine]) -> Iterator[Callable[..., Fleet]]:
    """Started fleets on a mint engine (unless ``config`` is given); closed after the test."""
    fleets: list[Fleet] = []

    def make(config: Any = None, **kwargs: Any) -> Fleet:
        fleet = Fleet(config if config is not None else make_engine(), **kwargs).start()
        fleets.append(fleet)
        return fleet

    yield make
    for fleet in fleets:
        fleet.close()


def profile(name: str, *, fail: bool = False, healthy: bool | None = True, server: str | None = None, provider: str = "mint", **kwargs: Any) -> dict[str, Any]:
    extension = {"clusterName": name, **({"fail": True} if fail else {})}
    return cluster_profile(name, access_provider(provider, server or f"https://{name}.test:6443", exec_extension=extension), healthy=healthy, **kwargs)


def until(condition: Callable[[], bool], *, timeout: float = 5.0, what: str = "the condition") -> float:
    """Poll ``condition`` until it holds (returns the seconds it took) or fail after ``timeout``."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout, f"timed out waiting for {what}"
        time.sleep(0.005)
    return time.monotonic() - started


async def auntil(condition: Callable[[], bool], *, timeout: float = 5.0, what: str = "the condition") -> None:
    return await asyncio.to_thread(until, condition, timeout=timeout, what=what)


class Recorder:
    """The fleet's callbacks, recorded in order: (kind, key)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def callbacks(self) -> dict[str, Callable[[Any], None]]:
        return {f"on_{kind}": self._record(kind) for kind in ("engage", "update", "disengage")}

    def _record(self, kind: str) -> Callable[[Any], None]:
        def record(cluster: Any) -> None:
            with self._lock:
                self.seen.append((kind, cluster.key))

        return record

    def engaged(self) -> set[str]:
        """The keys engaged according to the events, checking their order: engage and
        disengage alternate per cluster, and an update comes only while engaged."""
        state: dict[str, bool] = {}
        with self._lock:
            seen = list(self.seen)
        for kind, key in seen:
            if kind == "engage":
                assert not state.get(key), f"{key} engaged twice"
                state[key] = True
            elif kind == "disengage":
                assert state.get(key), f"{key} disengaged while not engaged"
                state[key] = False
            else:
                assert state.get(key), f"{key} updated while not engaged"
        return {key for key, engaged in state.items() if engaged}
