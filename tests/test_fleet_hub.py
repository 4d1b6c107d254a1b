"""cpcreds.Fleet on the hub fake: list, watch with bookmarks, 410 relist, RBAC errors, namespaces,
label selectors and versions; clusters added, changed, deleted and re-added within a second;
close within a second with a watch open."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cpcreds import Fleet, HubOptions
from tests.fakes.fixtures import HUB_TOKEN
from tests.fakes.hub import CLUSTER_PROFILES
from tests.fleet_harness import MEMBER, Recorder, make_engine, make_fleet, profile, until

__all__ = ["make_engine", "make_fleet"]  # fixtures


def test_the_fleet_follows_the_hubs_watch(make_fleet: Callable[..., Fleet], hub: Any, tmp_path: Path) -> None:
    # Every change comes through the watch (the source lists once, then watches), so waiting for
    # each is waiting for the watch; a busy machine may take a while, hence until's default bound.
    for name in ("a", "b"):
        hub.put(profile(name))
    kubeconfig = hub.write_kubeconfig(tmp_path / "hub.kubeconfig", HUB_TOKEN)
    recorder = Recorder()
    fleet = make_fleet(hub=kubeconfig, **recorder.callbacks())
    assert fleet.wait_synced(10)
    assert set(fleet.engaged) == {"fleet-system/a", "fleet-system/b"}
    assert hub.wait_for_watchers(1)
    hub.bookmark()  # a bookmark is no change

    hub.put(profile("c"))
    until(lambda: "fleet-system/c" in fleet.engaged, what="the added profile")
    hub.put(profile("a", server="https://a-moved.test:6443"))
    until(lambda: ("update", "fleet-system/a") in recorder.seen, what="the endpoint update")
    assert fleet.engaged["fleet-system/a"].server == "https://a-moved.test:6443"
    hub.put(profile("b", healthy=False))
    until(lambda: "fleet-system/b" not in fleet.engaged, what="the unhealthy disengage")
    hub.delete(CLUSTER_PROFILES, "fleet-system", "c")
    until(lambda: "fleet-system/c" not in fleet.clusters, what="the deletion")
    hub.put(profile("c"))
    # The callbacks follow the fleet's own state, so they are waited for in their turn.
    until(lambda: recorder.engaged() == {"fleet-system/a", "fleet-system/c"}, what="the re-added profile's engage")
    assert fleet.problems == {}


def test_the_fleet_relists_after_410_and_drops_what_went_meanwhile(make_fleet: Callable[..., Fleet], hub: Any, tmp_path: Path) -> None:
    for name in ("stays", "goes"):
        hub.put(profile(name))
    kubeconfig = hub.write_kubeconfig(tmp_path / "hub.kubeconfig", HUB_TOKEN)
    fleet = make_fleet(hub=kubeconfig)
    assert fleet.wait_synced(10) and hub.wait_for_watchers(1)
    release = hub.stall("/apis/multicluster.x-k8s.io/v1alpha2/clusterprofiles")
    hub.end_watches()
    until(lambda: hub.watchers == 0, what="the watch to end")
    hub.delete(CLUSTER_PROFILES, "fleet-system", "goes")
    hub.compact()
    release.set()
    until(lambda: set(fleet.clusters) == {"fleet-system/stays"}, timeout=10, what="the relist")
    assert set(fleet.engaged) == {"fleet-system/stays"}


def test_a_forbidden_hub_is_a_problem_until_it_is_allowed(make_fleet: Callable[..., Fleet], hub: Any, tmp_path: Path) -> None:
    hub.put(profile("a"))
    hub.grant("weak", namespaces=["elsewhere"])
    kubeconfig = hub.write_kubeconfig(tmp_path / "hub.kubeconfig", "weak")
    fleet = make_fleet(hub=HubOptions(kubeconfig=kubeconfig, timeout=5))
    until(lambda: bool(fleet.problems), what="the problem")
    (message,) = fleet.problems.values()
    assert message.startswith("HTTP 403: ") and "weak" not in message.split(":", 1)[0]
    hub.grant("weak")
    until(lambda: "fleet-system/a" in fleet.engaged, timeout=10, what="the retry after the grant")
    until(lambda: fleet.problems == {}, what="the problem to clear")


def test_namespaces_label_selector_and_version_choose_what_the_fleet_sees(make_fleet: Callable[..., Fleet], hub: Any, tmp_path: Path) -> None:
    hub.put(profile("chosen", namespace="team-a", labels={"env": "prod"}))
    hub.put(profile("unlabelled", namespace="team-a"))
    hub.put(profile("elsewhere", namespace="team-b", labels={"env": "prod"}))
    kubeconfig = hub.write_kubeconfig(tmp_path / "hub.kubeconfig", HUB_TOKEN)
    fleet = make_fleet(hub=HubOptions(kubeconfig=kubeconfig, namespaces=("team-a",), label_selector="env=prod", version="v1alpha1"))
    assert fleet.wait_synced(10)
    assert set(fleet.clusters) == {"team-a/chosen"}
    assert fleet.engaged["team-a/chosen"].profile["apiVersion"] == "multicluster.x-k8s.io/v1alpha1"
    assert all("/v1alpha2/" not in r.path for r in hub.requests if "clusterprofiles" in r.path)


def test_duplicates_on_the_hub_are_acted_on_once(make_fleet: Callable[..., Fleet], hub: Any, tmp_path: Path) -> None:
    hub.put(profile("first", labels={MEMBER: "m"}, created="2026-01-01T00:00:00Z"))
    hub.put(profile("second", labels={MEMBER: "m"}, created="2026-01-02T00:00:00Z"))
    kubeconfig = hub.write_kubeconfig(tmp_path / "hub.kubeconfig", HUB_TOKEN)
    fleet = make_fleet(hub=kubeconfig)
    assert fleet.wait_synced(10)
    assert set(fleet.engaged) == {"fleet-system/first"}
    assert fleet.duplicates == {("fleet-system", "m"): ["fleet-system/first", "fleet-system/second"]}


def test_close_ends_an_open_watch_and_every_thread_within_a_second(make_engine: Callable[..., Any], hub: Any, tmp_path: Path) -> None:
    hub.put(profile("a"))
    kubeconfig = hub.write_kubeconfig(tmp_path / "hub.kubeconfig", HUB_TOKEN)
    fleet = Fleet(make_engine(), hub=HubOptions(kubeconfig=kubeconfig, namespaces=("fleet-system", "team-b"))).start()
    assert fleet.wait_synced(10) and hub.wait_for_watchers(2)
    started = time.monotonic()
    fleet.close()
    assert time.monotonic() - started < 1.0
    assert not [t.name for t in threading.enumerate() if t.name.startswith(("cpcreds-fleet", "cpcreds-hub"))]
    # The connections are closed, not left half-open: the hub's next writes find them gone
    # (a server only learns of a closed stream when it writes, as kube-apiserver does).
    until(lambda: hub.bookmark() is not None and hub.watchers == 0, what="the hub to see the watches go")
