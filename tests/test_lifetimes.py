"""What a removal or a reload must drop: a removed profile's credential leaves the engine's cache
(unless a live profile shares its plan), and N config reloads keep no more of cpcreds' objects
alive than one does. Objects are counted (``gc``, weakrefs), never RSS."""

from __future__ import annotations

import asyncio
import gc
import threading
import weakref
from collections import Counter
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from cpcreds import Credential, CredentialEngine, Fleet, ProviderRegistry
from cpcreds.fleet.inventory import ProfileFeed
from cpcreds.sdk import hookimpl
from tests.fakes import mint
from tests.fakes.builders import access_provider, cluster_profile, config_of
from tests.fleet_harness import MINT, auntil, make_engine, make_fleet, profile, until  # noqa: F401 - fixtures
from tests.serve_harness import start_serve  # noqa: F401 - fixture

CACHE_ENTRIES = "cpcreds_credential_cache_entries"


def cache_entries(engine: CredentialEngine) -> float | None:
    registry = engine.metrics.registry
    assert registry is not None
    return registry.get_sample_value(CACHE_ENTRIES)


#: The running engine's worker bookkeeping (settled calls waiting for the deadline watcher, at
#: most 4 x its concurrency; idle pool threads) varies with timing, not with reloads. (What
#: resolution derives from a config entry goes with the entry: cpcreds.plan.IdentityCache.)
_BOUNDED_CACHES = {"_Call", "_Thread"}


def own_objects() -> Counter[str]:
    """Live objects of cpcreds' own classes, by class name (after a full collection)."""
    for _ in range(20):
        gc.unfreeze()  # serve freezes what its first sync built: get_objects() would not list it
        gc.collect()
        objects = gc.get_objects()
        if gc.get_freeze_count() == 0:  # serve's collector thread did not freeze them meanwhile
            break
    return Counter(
        type(o).__qualname__
        for o in objects
        if str(getattr(type(o), "__module__", "")).startswith("cpcreds.") and type(o).__qualname__ not in _BOUNDED_CACHES
    )


def live_tokens(prefix: str) -> int:
    """Credentials alive anywhere in the process whose token starts with ``prefix``."""
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, Credential) and (o.token or "").startswith(prefix))


# -- item 9: a removed profile's credential goes -------------------------------------------------


def test_removed_profiles_leave_no_credential_in_the_engine(make_fleet: Any) -> None:
    feed = ProfileFeed()
    fleet = make_fleet(feed=feed)
    names = [f"gone{i}" for i in range(1500)]
    for name in [*names, "stays"]:
        feed.put(profile(name))
    until(lambda: len(fleet.engaged) == 1501, timeout=30, what="1501 engaged")
    assert cache_entries(fleet.engine) == 1501
    assert live_tokens("mint-gone") >= 1500
    for name in names:
        feed.delete(f"fleet-system/{name}")
    until(lambda: cache_entries(fleet.engine) == 1, timeout=30, what="the cache to hold the live profile only")
    assert set(fleet.clusters) == {"fleet-system/stays"}
    assert live_tokens("mint-gone") == 0, "removed profiles' credentials are still reachable"


def test_a_plan_two_profiles_share_keeps_its_credential_until_both_are_gone(make_fleet: Any) -> None:
    def twin(namespace: str) -> dict[str, Any]:
        return cluster_profile(
            "twin", access_provider("mint", "https://twin.test:6443", exec_extension={"clusterName": "twin"}), namespace=namespace, healthy=True
        )

    feed = ProfileFeed([twin("one"), twin("two")])
    fleet = make_fleet(feed=feed)
    until(lambda: len(fleet.engaged) == 2, what="both twins engaged")
    assert cache_entries(fleet.engine) == 1  # one plan, one credential
    held = fleet.engine.get_credential(twin("two"))
    calls = mint.calls["twin"]
    feed.delete("one/twin")
    feed.put(profile("marker"))  # the fleet takes changes in order: once this is in, so is the delete
    until(lambda: "fleet-system/marker" in fleet.engaged, what="the marker engaged")
    assert "one/twin" not in fleet.clusters
    assert cache_entries(fleet.engine) == 2
    assert fleet.engine.get_credential(twin("two")) is held and mint.calls["twin"] == calls
    feed.delete("two/twin")
    until(lambda: cache_entries(fleet.engine) == 1, what="the shared credential dropped with its last profile")


def test_a_changed_plan_drops_the_old_plans_credential(make_fleet: Any) -> None:
    feed = ProfileFeed([profile("moving")])
    fleet = make_fleet(feed=feed)
    until(lambda: "fleet-system/moving" in fleet.engaged, what="engaged")
    assert live_tokens("mint-moving") == 1
    feed.put(profile("moving", server="https://elsewhere.test:6443"))
    until(lambda: fleet.clusters["fleet-system/moving"].server == "https://elsewhere.test:6443" and fleet.clusters["fleet-system/moving"].credentialed, what="the new plan answered")
    until(lambda: cache_entries(fleet.engine) == 1, what="the old plan's credential dropped")
    assert live_tokens("mint-moving") == 1  # the new plan's only


class _Gate:
    entered = threading.Event()
    release = threading.Event()

    def __init__(self, options: Any) -> None:
        pass

    def get_credential(self, plan: Any) -> Credential:
        _Gate.entered.set()
        assert _Gate.release.wait(30), "the test never released the provider"
        return Credential(token="gated-secret", expiration_timestamp=datetime.now(timezone.utc) + timedelta(hours=1))


class _GatePlugin:
    @hookimpl
    def cpcreds_register_providers(self, register: Any) -> None:
        register("gate", _Gate)


def test_releasing_a_binding_while_its_fetch_runs_answers_the_caller_and_caches_nothing() -> None:
    _Gate.entered.clear()
    _Gate.release.clear()
    engine = CredentialEngine(
        config_of({"name": "gate", "type": "gate"}),
        registry=ProviderRegistry(entry_points=False, plugins=(_GatePlugin(),)),
        prometheus_registry=CollectorRegistry(),
    )
    with engine:
        binding = engine.bind(cluster_profile("g", access_provider("gate", "https://g.test:6443")), hold=True)
        box: dict[str, Any] = {}
        caller = threading.Thread(target=lambda: box.setdefault("credential", binding.credential()))
        caller.start()
        assert _Gate.entered.wait(20)
        binding.release()
        _Gate.release.set()
        caller.join(20)
        assert box["credential"].token == "gated-secret"  # the in-flight caller got its answer
        assert cache_entries(engine) == 0  # and nothing was cached for the released profile
        binding.release()  # idempotent


def test_a_binding_that_is_not_held_keeps_the_cache_as_before(make_engine: Any) -> None:
    engine = make_engine()
    held = engine.bind(profile("x"), hold=True)
    loose = engine.bind(profile("x"))
    credential = held.credential()
    loose.release()  # never held: releasing it drops nothing
    assert cache_entries(engine) == 1 and loose.credential() is credential
    held.release()
    assert cache_entries(engine) == 0


# -- item 10: N reloads keep what one does ---------------------------------------------------------


@pytest.mark.asyncio
async def test_n_engine_swaps_keep_no_more_objects_alive_than_one() -> None:
    metrics = CollectorRegistry()  # shared by the engines of reloads, as serve's is

    def engine() -> CredentialEngine:
        return CredentialEngine(config_of(MINT), registry=ProviderRegistry(entry_points=False, plugins=(mint,)), prometheus_registry=metrics, max_entries=100_000)

    feed = ProfileFeed([profile(f"r{i}") for i in range(300)])
    fleet = Fleet(engine(), feed=feed)
    running = asyncio.create_task(fleet.run())
    try:
        await auntil(lambda: len(fleet.engaged) == 300, timeout=30, what="300 engaged")
        retired: list[weakref.ref[CredentialEngine]] = []

        async def swap() -> None:
            old = fleet.engine
            await fleet.use_engine(engine())
            await old.aclose()
            retired.append(weakref.ref(old))
            del old
            await auntil(lambda: all(c.credentialed and c.engaged for c in fleet.clusters.values()), timeout=30, what="every cluster answered by the new engine")

        await swap()
        after_one = own_objects()
        for _ in range(5):
            await swap()
        after_six = own_objects()
        assert [ref for ref in retired if ref() is not None] == []
        grown = {name: (after_one[name], count) for name, count in after_six.items() if count > after_one[name]}
        assert grown == {}, f"objects kept alive by reloads: {grown}"
    finally:
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running


def test_serve_reloads_keep_no_more_objects_alive_than_one(start_serve: Any) -> None:  # noqa: F811
    profiles = {f"p{i}.yaml": profile(f"p{i}") for i in range(100)}
    running = start_serve([MINT], profiles, watch_config=False)
    running.wait_ready()
    running.until(lambda: all(c["state"] == "ready" for c in running.clusters().values()), what="ready")

    def reload() -> None:
        assert running.reload() is True
        fleet = running.service.fleet
        running.until(lambda: all(c.credentialed and c.binding is not None for c in fleet.clusters.values()), what="the reloaded answers")
        running.until(lambda: all(c["state"] == "ready" for c in running.clusters().values()), what="the board to show them")

    reload()
    after_one = own_objects()
    for _ in range(5):
        reload()
    grown: dict[str, tuple[int, int]] = {}

    def as_after_one() -> bool:
        # Counted until equal: the folder's scans make a Change now and then, alive for a moment.
        grown.clear()
        grown.update({name: (after_one[name], count) for name, count in own_objects().items() if count > after_one[name]})
        return not grown

    try:
        running.until(as_after_one, timeout=30, what="the objects after six reloads to be those after one")
    except AssertionError:
        raise AssertionError(f"objects kept alive by reloads: {grown}") from None
    assert running.service.metrics.get_sample_value(CACHE_ENTRIES) == 100
