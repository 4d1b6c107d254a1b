"""cpcreds.Fleet: engage/update/disengage, the health gate, KEP-4322 duplicates, isolation,
bursts and shutdown, on a fed or folder inventory with real providers (the in-process ``mint``
type, the ``file`` type, real exec plugin subprocesses)."""

from __future__ import annotations

import asyncio
import json
import pickle
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from cpcreds import CredentialEngine, Disengaged, Engaged, Fleet, FleetEvent, ProfileFeed, Updated
from cpcreds.fleet.hooks import FleetHooks
from tests.fakes.builders import exec_entry
from tests.fleet_harness import MEMBER, Recorder, auntil, make_engine, make_fleet, profile, until

__all__ = ["make_engine", "make_fleet"]  # fixtures


# -- the gate ------------------------------------------------------------------------------------


def test_a_cluster_is_engaged_once_its_credential_works_and_it_is_healthy(make_fleet: Callable[..., Fleet]) -> None:
    feed = ProfileFeed(
        [
            profile("good"),
            profile("sick", healthy=False),
            profile("no-condition", healthy=None),
            profile("broken", fail=True),
            profile("unmatched", provider="nobody"),
        ]
    )
    fleet = make_fleet(feed=feed)
    assert fleet.wait_synced(5)
    assert set(fleet.engaged) == {"fleet-system/good"}
    states = {key: cluster.state for key, cluster in fleet.clusters.items()}
    assert states == {
        "fleet-system/good": "ready",
        "fleet-system/sick": "unhealthy",
        "fleet-system/no-condition": "unhealthy",
        "fleet-system/broken": "failing",
        "fleet-system/unmatched": "unmatched",
    }
    broken = fleet.clusters["fleet-system/broken"]
    assert broken.last_error and "mint refuses cluster broken" in broken.last_error and broken.failures >= 1
    good = fleet.engaged["fleet-system/good"]
    assert (good.namespace, good.name, good.provider, good.server) == ("fleet-system", "good", "mint", "https://good.test:6443")
    assert good.binding is not None and good.binding.credential().token.startswith("mint-good-")


def test_require_healthy_false_engages_clusters_without_the_condition(make_fleet: Callable[..., Fleet]) -> None:
    fleet = make_fleet(feed=ProfileFeed([profile("sick", healthy=False), profile("none", healthy=None)]), require_healthy=False)
    assert fleet.wait_synced(5)
    assert set(fleet.engaged) == {"fleet-system/sick", "fleet-system/none"}


def test_a_cluster_turning_unhealthy_is_disengaged_and_engaged_again_when_it_recovers(make_fleet: Callable[..., Fleet]) -> None:
    recorder = Recorder()
    feed = ProfileFeed([profile("a")])
    fleet = make_fleet(feed=feed, **recorder.callbacks())
    until(lambda: recorder.seen == [("engage", "fleet-system/a")], what="the engage")
    feed.put(profile("a", healthy=False))
    until(lambda: recorder.seen[-1:] == [("disengage", "fleet-system/a")], what="the disengage")
    assert fleet.clusters["fleet-system/a"].state == "unhealthy" and not fleet.engaged
    feed.put(profile("a"))
    until(lambda: recorder.seen[-1:] == [("engage", "fleet-system/a")], what="the engage again")
    assert recorder.engaged() == {"fleet-system/a"}


def test_marking_keeps_an_unhealthy_cluster_engaged_and_says_so_in_an_update(make_fleet: Callable[..., Fleet]) -> None:
    recorder = Recorder()
    feed = ProfileFeed([profile("a")])
    fleet = make_fleet(feed=feed, on_unhealthy="mark", **recorder.callbacks())
    until(lambda: recorder.seen == [("engage", "fleet-system/a")], what="the engage")
    feed.put(profile("a", healthy=False))
    until(lambda: recorder.seen[-1:] == [("update", "fleet-system/a")], what="the update")
    cluster = fleet.engaged["fleet-system/a"]
    assert cluster.state == "unhealthy" and not cluster.healthy
    feed.put(profile("a"))
    until(lambda: len(recorder.seen) == 3 and cluster.state == "ready", what="the recovery")
    assert recorder.engaged() == {"fleet-system/a"}


# -- changes and clients ---------------------------------------------------------------------------


def test_a_changed_endpoint_is_an_update_with_new_clients_and_the_old_ones_closed(make_fleet: Callable[..., Fleet]) -> None:
    recorder = Recorder()
    feed = ProfileFeed([profile("a")])
    fleet = make_fleet(feed=feed, **recorder.callbacks())
    until(lambda: "fleet-system/a" in fleet.engaged, what="the engage")
    cluster = fleet.engaged["fleet-system/a"]
    old = cluster.api_client()
    assert cluster.api_client() is old  # shared while the endpoint stays
    assert old.configuration.host == "https://a.test:6443"
    feed.put(profile("a", labels={"team": "x"}))  # not the endpoint: an update, same clients
    until(lambda: recorder.seen[-1:] == [("update", "fleet-system/a")], what="the label update")
    assert cluster.api_client() is old
    feed.put(profile("a", server="https://a-moved.test:6443"))
    until(lambda: len(recorder.seen) == 3, what="the endpoint update")
    assert recorder.seen[-1] == ("update", "fleet-system/a")
    new = cluster.api_client()
    assert new is not old and new.configuration.host == "https://a-moved.test:6443"
    assert old.configuration.cpcreds_binding._finalizer is None or not old.configuration.cpcreds_binding._finalizer.alive


def test_a_provider_that_fails_after_the_change_disengages_the_cluster(make_fleet: Callable[..., Fleet]) -> None:
    recorder = Recorder()
    feed = ProfileFeed([profile("a")])
    make_fleet(feed=feed, **recorder.callbacks())
    until(lambda: recorder.seen == [("engage", "fleet-system/a")], what="the engage")
    feed.put(profile("a", fail=True))
    until(lambda: recorder.seen[-1:] == [("disengage", "fleet-system/a")], what="the disengage")
    feed.put(profile("a", provider="nobody"))
    feed.put(profile("a"))
    until(lambda: recorder.seen[-1:] == [("engage", "fleet-system/a")], what="the engage again")
    recorder.engaged()


@pytest.mark.asyncio
async def test_a_deleted_cluster_is_disengaged_after_its_asyncio_clients_are_closed(make_fleet: Callable[..., Fleet]) -> None:
    feed = ProfileFeed([profile("a")])
    fleet = make_fleet(feed=feed)
    events = fleet.events()
    first = await asyncio.wait_for(anext(events), 5)
    assert isinstance(first, Engaged) and first.cluster.key == "fleet-system/a"
    client = await first.cluster.aapi_client()
    assert await first.cluster.aapi_client() is client
    feed.delete("fleet-system/a")
    gone = await asyncio.wait_for(anext(events), 5)
    assert isinstance(gone, Disengaged) and gone.reason == "deleted" and gone.cluster is first.cluster
    assert first.cluster._clients == {}  # taken off the cluster and closed before the event was sent
    assert "fleet-system/a" not in fleet.clusters
    feed.put(profile("a"))  # re-added: a new cluster, engaged again
    again = await asyncio.wait_for(anext(events), 5)
    assert isinstance(again, Engaged) and again.cluster is not first.cluster
    await events.aclose()


@pytest.mark.asyncio
async def test_a_cancelled_consumer_does_not_stop_the_fleet_for_others(make_fleet: Callable[..., Fleet]) -> None:
    feed = ProfileFeed()
    fleet = make_fleet(feed=feed)
    seen: list[FleetEvent] = []

    async def consume() -> None:
        async for event in fleet.events():
            seen.append(event)

    quitter = asyncio.create_task(consume())
    stayer = fleet.events()
    feed.put(profile("a"))
    assert isinstance(await asyncio.wait_for(anext(stayer), 5), Engaged)
    await auntil(lambda: bool(seen), what="the quitter's first event")  # both had it; then it quits
    quitter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await quitter
    feed.put(profile("b"))
    event = await asyncio.wait_for(anext(stayer), 5)
    assert isinstance(event, Engaged) and event.cluster.key == "fleet-system/b"
    late = fleet.events()  # a late consumer starts with what is engaged now
    assert {(await anext(late)).cluster.key for _ in range(2)} == {"fleet-system/a", "fleet-system/b"}
    assert [e.cluster.key for e in seen] == ["fleet-system/a"]
    await stayer.aclose()
    await late.aclose()


def test_a_callback_that_raises_does_not_stop_the_others(make_fleet: Callable[..., Fleet]) -> None:
    seen: list[str] = []

    def flaky(cluster: Any) -> None:
        seen.append(cluster.key)
        if cluster.name == "a":
            raise RuntimeError("the program's bug")

    make_fleet(feed=ProfileFeed([profile("a"), profile("b")]), on_engage=flaky)
    until(lambda: sorted(seen) == ["fleet-system/a", "fleet-system/b"], what="both callbacks")


# -- duplicates (KEP-4322) -----------------------------------------------------------------------


def member(name: str, member_id: str, created: str | None, namespace: str = "fleet-system") -> dict[str, Any]:
    return profile(name, labels={MEMBER: member_id}, created=created, namespace=namespace)


def test_duplicates_act_on_the_oldest_profile_and_on_none_when_the_oldest_tie(make_fleet: Callable[..., Fleet]) -> None:
    registry = CollectorRegistry()
    feed = ProfileFeed(
        [
            member("old", "m1", "2026-01-01T00:00:00Z"),
            member("new", "m1", "2026-02-01T00:00:00Z"),
            member("tie-1", "m2", "2026-01-01T00:00:00Z"),
            member("tie-2", "m2", "2026-01-01T00:00:00Z"),
            member("other-ns", "m1", "2026-03-01T00:00:00Z", namespace="team-b"),  # another inventory
            member("empty-id", "", None),
        ]
    )
    fleet = make_fleet(feed=feed, prometheus_registry=registry)
    assert fleet.wait_synced(5)
    assert set(fleet.engaged) == {"fleet-system/old", "team-b/other-ns", "fleet-system/empty-id"}
    assert fleet.duplicates == {("fleet-system", "m1"): ["fleet-system/new", "fleet-system/old"], ("fleet-system", "m2"): ["fleet-system/tie-1", "fleet-system/tie-2"]}
    assert fleet.duplicate_count == 3
    assert registry.get_sample_value("cpcreds_fleet_duplicate_profiles") == 3
    assert registry.get_sample_value("cpcreds_fleet_engaged_clusters") == 3
    feed.delete("fleet-system/old")  # the newer one now stands for the cluster
    until(lambda: set(fleet.engaged) == {"fleet-system/new", "team-b/other-ns", "fleet-system/empty-id"}, what="the newer profile")
    feed.put(member("tie-0", "m2", "2025-12-31T00:00:00Z"))  # older than the tie: it alone stands
    until(lambda: "fleet-system/tie-0" in fleet.engaged, what="the oldest of m2")


def test_deduplication_can_be_turned_off(make_fleet: Callable[..., Fleet]) -> None:
    feed = ProfileFeed([member("a", "m", "2026-01-01T00:00:00Z"), member("b", "m", "2026-01-01T00:00:00Z")])
    fleet = make_fleet(feed=feed, dedupe=False)
    assert fleet.wait_synced(5)
    assert set(fleet.engaged) == {"fleet-system/a", "fleet-system/b"} and fleet.duplicates == {}


# -- isolation, bursts, shutdown -----------------------------------------------------------------


def test_a_hanging_plugin_for_one_cluster_does_not_delay_the_others_and_close_kills_it(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    config = tmp_path / "providers.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "providers": [
                    exec_entry("stuck", "--hang", "--child-pidfile", str(pidfile), timeout="60s"),
                    exec_entry("quick", "--token", "quick-token"),
                ]
            }
        )
    )
    feed = ProfileFeed([profile("stuck", provider="stuck"), *(profile(f"q{i}", provider="quick") for i in range(5))])
    fleet = Fleet(config, feed=feed).start()
    try:
        took = until(lambda: len(fleet.engaged) == 5, what="the quick clusters")
        assert took < 5
        assert fleet.clusters["fleet-system/stuck"].state == "pending" and not fleet.synced
        until(pidfile.exists, what="the stuck plugin's child")
    finally:
        started = time.monotonic()
        fleet.close()
        closed_in = time.monotonic() - started
    assert closed_in < 1.5
    pid = int(pidfile.read_text())
    until(lambda: not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2], what="the plugin's child to die")


def test_a_burst_of_thousands_of_clusters_is_engaged_deleted_and_readded(make_fleet: Callable[..., Fleet]) -> None:
    recorder = Recorder()
    feed = ProfileFeed()
    fleet = make_fleet(feed=feed, **recorder.callbacks())
    names = [f"c{i}" for i in range(3000)]
    for name in names:
        feed.put(profile(name))
    until(lambda: len(fleet.engaged) == 3000, timeout=20, what="3000 engaged")
    for name in names[:1500]:
        feed.delete(f"fleet-system/{name}")
    for name in names[1500:2000]:
        feed.put(profile(name, healthy=False))
    until(lambda: len(fleet.engaged) == 1000, timeout=20, what="the deletions")
    for name in names[:1500]:
        feed.put(profile(name))
    until(lambda: len(fleet.engaged) == 2500, timeout=20, what="the re-added")
    until(lambda: recorder.engaged() == set(fleet.engaged), what="the callbacks")


def test_close_ends_every_thread_of_the_fleet_within_a_second(make_engine: Callable[..., CredentialEngine], tmp_path: Path) -> None:
    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "a.yaml").write_text(yaml.safe_dump(profile("a")))
    with Fleet(make_engine(), folder=folder, scan_interval=0.05) as fleet:
        assert fleet.wait_synced(5)
        assert set(fleet.engaged) == {"fleet-system/a"}
        (folder / "b.yaml").write_text(yaml.safe_dump(profile("b")))
        until(lambda: "fleet-system/b" in fleet.engaged, what="the added file")
        (folder / "a.yaml").unlink()
        until(lambda: set(fleet.engaged) == {"fleet-system/b"}, what="the removed file")
        started = time.monotonic()
    assert time.monotonic() - started < 1.0
    assert not [t for t in threading.enumerate() if t.name.startswith("cpcreds-fleet")]


@pytest.mark.asyncio
async def test_async_with_closes_the_fleet_and_ends_its_iterators(make_engine: Callable[..., CredentialEngine]) -> None:
    async with Fleet(make_engine(), feed=ProfileFeed([profile("a")])) as fleet:
        events = fleet.events()
        assert isinstance(await asyncio.wait_for(anext(events), 5), Engaged)
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(anext(events), 1)


def test_a_fleet_needs_exactly_one_inventory(make_engine: Callable[..., CredentialEngine], tmp_path: Path) -> None:
    from cpcreds import ConfigError

    with pytest.raises(ConfigError):
        Fleet(make_engine())
    with pytest.raises(ConfigError):
        Fleet(make_engine(), feed=ProfileFeed(), folder=tmp_path)
    with pytest.raises(ConfigError):
        Fleet(tmp_path / "missing.yaml", feed=ProfileFeed())


def test_settings_given_as_groups_make_the_fleet_their_keywords_make(make_engine: Callable[..., CredentialEngine]) -> None:
    recorder = Recorder()
    callbacks = recorder.callbacks()
    feed = ProfileFeed([profile("sick", healthy=False)])
    grouped = Fleet(
        make_engine(),
        Fleet.Inventory(feed=feed),
        engagement=Fleet.Engagement(require_healthy=False, on_unhealthy="mark"),
        fetching=Fleet.Fetching(concurrency=4, jitter=0.0),
        listeners=Fleet.Listeners(**callbacks),
    )
    with grouped as fleet:
        assert fleet.wait_synced(5)
        until(lambda: ("engage", "fleet-system/sick") in recorder.seen, what="the unhealthy cluster engaged")
    keywords = Fleet(make_engine(), feed=feed, require_healthy=False, on_unhealthy="mark", concurrency=4, jitter=0.0, **callbacks)
    assert (keywords.inventory, keywords.engagement, keywords.fetching, keywords.listeners) == (grouped.inventory, grouped.engagement, grouped.fetching, grouped.listeners)
    assert (keywords.require_healthy, keywords.on_unhealthy, keywords.concurrency, keywords.jitter) == (False, "mark", 4, 0.0)


def test_a_keyword_beside_its_own_group_or_belonging_to_none_is_refused(make_engine: Callable[..., CredentialEngine]) -> None:
    from cpcreds import ConfigError

    with pytest.raises(ConfigError, match="dedupe="):
        Fleet(make_engine(), feed=ProfileFeed(), engagement=Fleet.Engagement(), dedupe=False)
    with pytest.raises(ConfigError, match="folder="):
        Fleet(make_engine(), Fleet.Inventory(feed=ProfileFeed()), folder="profiles")
    with pytest.raises(TypeError, match="require_health"):
        Fleet(make_engine(), feed=ProfileFeed(), require_health=False)


# -- the model -------------------------------------------------------------------------------------

NAMES = ["a", "b", "c", "d"]
Put = st.tuples(
    st.just("put"),
    st.sampled_from(NAMES),
    st.booleans(),  # the credential works
    st.booleans(),  # healthy
    st.sampled_from([None, "m1", "m2"]),  # member id
    st.sampled_from(["2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"]),
)
Delete = st.tuples(st.just("delete"), st.sampled_from(NAMES))


def expected(held: dict[str, tuple[bool, bool, str | None, str]]) -> set[str]:
    """The clusters that must be engaged: healthy, credentialed, and the one oldest of their member."""
    engaged = set()
    for name, (works, healthy, member_id, created) in held.items():
        if not (works and healthy):
            continue
        if member_id is not None:
            dates = [c for n, (_, _, m, c) in held.items() if m == member_id]
            if created != min(dates) or dates.count(created) > 1:
                continue
        engaged.add(f"fleet-system/{name}")
    return engaged


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(steps=st.lists(st.one_of(Put, Delete), min_size=1, max_size=12))
def test_the_engaged_clusters_are_the_healthy_credentialed_non_duplicate_profiles(make_engine: Callable[..., CredentialEngine], steps: list[tuple[Any, ...]]) -> None:
    recorder = Recorder()
    feed = ProfileFeed()
    held: dict[str, tuple[bool, bool, str | None, str]] = {}
    with Fleet(make_engine(), feed=feed, **recorder.callbacks()) as fleet:
        for step in steps:
            if step[0] == "put":
                _, name, works, healthy, member_id, created = step
                labels = {MEMBER: member_id} if member_id else None
                feed.put(profile(name, fail=not works, healthy=healthy, labels=labels, created=created))
                held[name] = (works, healthy, member_id, created)
            else:
                feed.delete(f"fleet-system/{step[1]}")
                held.pop(step[1], None)
        want = expected(held)
        until(lambda: set(fleet.engaged) == want and recorder.engaged() == want, what=f"engaged == {sorted(want)}")



# -- hostile profiles -------------------------------------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
    max_leaves=10,
)
_hostile = st.fixed_dictionaries(
    {"metadata": st.fixed_dictionaries({"name": st.sampled_from(["a", "b"]), "namespace": st.just("ns")}, optional={"labels": _json, "creationTimestamp": _json})},
    optional={"status": st.one_of(_json, st.fixed_dictionaries({"conditions": _json, "accessProviders": _json})), "spec": _json},
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(profiles=st.lists(_hostile, min_size=1, max_size=6))
def test_any_profile_leaves_the_fleet_running_with_a_known_state(make_engine: Callable[..., CredentialEngine], profiles: list[dict[str, Any]]) -> None:
    from cpcreds.fleet.cluster import CLUSTER_STATES

    feed = ProfileFeed()
    with Fleet(make_engine(), feed=feed) as fleet:
        for item in profiles:
            feed.put(item)
        feed.put(profile("good", namespace="ns"))  # and a good one next to them still engages
        until(lambda: "ns/good" in fleet.engaged, what="the good profile")
        assert all(cluster.state in CLUSTER_STATES for cluster in fleet.clusters.values())


def test_a_profile_without_a_name_or_referring_to_itself_is_a_profile_error() -> None:
    from cpcreds import ProfileError

    feed = ProfileFeed()
    with pytest.raises(ProfileError):
        feed.put({"metadata": {"namespace": "ns"}})
    looped: dict[str, Any] = {"metadata": {"name": "a"}}
    looped["spec"] = looped
    with pytest.raises(ProfileError):
        feed.put(looped)


def test_a_client_built_on_the_changed_profile_is_not_closed_by_its_update(make_engine: Callable[..., CredentialEngine], tmp_path: Path) -> None:
    from tests.fakes.builders import access_provider, cluster_profile
    from tests.fakes.pki import PKI

    gate = tmp_path / "gate"
    engine = make_engine({"name": "mint", "type": "mint"}, exec_entry("gated", "--wait-for", str(gate), "--token", "gated-token"))
    ca = PKI().ca_pem  # a CA, so each client has a private folder that closing removes

    def with_provider(name: str) -> dict[str, Any]:
        return cluster_profile("a", access_provider(name, "https://a.test:6443", ca_pem=ca, exec_extension={"clusterName": "a"}), healthy=True)

    recorder = Recorder()
    feed = ProfileFeed([with_provider("mint")])
    with Fleet(engine, feed=feed, **recorder.callbacks()) as fleet:
        until(lambda: recorder.seen == [("engage", "fleet-system/a")], what="the engage")
        cluster = fleet.engaged["fleet-system/a"]
        old = cluster.api_client()
        feed.put(with_provider("gated"))  # the new provider waits for the gate
        until(lambda: cluster.provider == "gated", what="the new binding")
        built: list[Any] = []
        builder = threading.Thread(target=lambda: built.append(cluster.api_client()))
        builder.start()
        gate.touch()
        builder.join(10)
        until(lambda: recorder.seen[-1:] == [("update", "fleet-system/a")], what="the update")
        (new,) = built
        until(lambda: not old.configuration.cpcreds_binding._finalizer.alive, what="the old client to close")
        assert new.configuration.cpcreds_binding._finalizer.alive  # built on the new binding: kept
        assert cluster.api_client() is new


_parsed = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=300),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12) | st.integers() | st.booleans(), inner, max_size=5),
    max_leaves=25,
)


@settings(max_examples=200, deadline=None)
@given(value=_parsed)
def test_profiles_held_with_shared_strings_equal_the_parsed_ones(value: Any) -> None:
    from cpcreds.fleet.inventory import shared

    assert shared(value) == value  # YAML's int and bool keys and long strings pass as they are


def test_profiles_of_a_folder_are_held_packed_unless_json_would_change_them(tmp_path: Path) -> None:
    from cpcreds.fleet.inventory import DirectorySource, held
    from cpcreds.fleet.packed import PackedProfile

    (tmp_path / "a.yaml").write_text(yaml.safe_dump(profile("a")))
    (tmp_path / "b.json").write_text(json.dumps(profile("b")))
    upserts = DirectorySource(tmp_path).scan().upserts
    a, b = (upserts[f"fleet-system/{name}"][0] for name in "ab")
    assert type(a) is PackedProfile and type(b) is PackedProfile and a.unpack() == profile("a") and b == profile("b")
    # A program's profile may hold what JSON would turn into something else (a datetime, a
    # tuple): held as parsed.
    c = held({**profile("c"), "extra": (datetime(2026, 1, 2, tzinfo=timezone.utc),)})
    assert type(c) is dict and c["extra"] == (datetime(2026, 1, 2, tzinfo=timezone.utc),)


@settings(max_examples=300, deadline=None)
@given(value=_parsed)
def test_a_packed_profile_reads_back_exactly_what_was_packed(value: Any) -> None:
    from cpcreds.fleet.packed import PackedProfile, packed, unpacked

    profile = {"metadata": {"name": "x"}, "spec": value}
    kept = packed(profile)
    back = unpacked(kept)
    # Equal, and of the same types all the way down (JSON would make an int key a string).
    assert back == profile and repr(back) == repr(profile)
    if type(kept) is PackedProfile:
        assert kept == profile and kept == packed(json.loads(json.dumps(profile))) and back is not unpacked(kept)
        assert pickle.loads(pickle.dumps(kept)) == kept and dict(kept.items()) == profile and len(kept) == 2
    else:
        assert kept is profile


def test_a_packed_profile_equals_the_same_profile_with_its_keys_in_another_order() -> None:
    from cpcreds.fleet.packed import packed

    one, other = packed({"a": 1, "b": {"c": 2, "d": 3}}), packed({"b": {"d": 3, "c": 2}, "a": 1})
    assert one == other and not one != other and one != packed({"a": 1, "b": {"c": 2, "d": 4}})
    assert one != "not a mapping" and "a" in one and one.get("missing", 7) == 7


class _Heard(FleetHooks):
    """Everything a fleet's hooks hear, in order."""

    def __init__(self) -> None:
        self.heard: list[tuple[str, str]] = []

    def changed(self, cluster: Any) -> None:
        self.heard.append(("changed", f"{cluster.key}:{cluster.state}"))

    def plan(self, key: str, plan: Any, profile: Any) -> None:
        self.heard.append(("plan", f"{key}:{plan.provider if plan is not None else None}"))

    def removed(self, cluster: Any) -> None:
        self.heard.append(("removed", cluster.key))

    def synced(self) -> None:
        self.heard.append(("synced", ""))


@pytest.mark.asyncio
async def test_a_fleet_run_on_the_programs_loop_takes_a_new_engine_and_ends_with_its_task(make_engine: Callable[..., CredentialEngine]) -> None:
    feed, hooks = ProfileFeed([profile("a")]), _Heard()
    fleet = Fleet(make_engine(), feed=feed, hooks=hooks)
    running = asyncio.create_task(fleet.run())
    events = fleet.events()
    first = await asyncio.wait_for(anext(events), 5)
    assert isinstance(first, Engaged) and first.cluster.answered_by == "mint" and first.cluster.expires_at
    assert threading.current_thread() is threading.main_thread()  # no thread of the fleet's own
    assert ("plan", "fleet-system/a:mint") in hooks.heard and ("synced", "") in hooks.heard
    api = await first.cluster.aapi_client()
    await fleet.use_engine(make_engine())  # a config reload: same plan, new engine
    update = await asyncio.wait_for(anext(events), 5)
    assert isinstance(update, Updated) and update.clients_changed and update.cluster.engaged
    assert await first.cluster.aapi_client() is not api  # the old client was closed with the update
    feed.delete("fleet-system/a")
    gone = await asyncio.wait_for(anext(events), 5)
    assert isinstance(gone, Disengaged) and gone.reason == "deleted" and ("removed", "fleet-system/a") in hooks.heard
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(anext(events), 5)  # the fleet closed with its task
