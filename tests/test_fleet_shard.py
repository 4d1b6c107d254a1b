"""``Fleet(shard=...)``: fleets with a Shard each split one inventory's clusters on the hub fake's
Leases (short leases: 1 s / 0.6 s / 0.2 s), move only what a membership change moves, and let go of
their clusters while their Lease is stale."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from cpcreds import Fleet, HubOptions, ProfileFeed, Shard
from cpcreds.shard import assign
from tests.fakes.fixtures import HUB_TOKEN
from tests.fakes.hub import HubServer
from tests.fleet_harness import Recorder, make_engine, make_fleet, profile, until

__all__ = ["make_engine", "make_fleet"]  # fixtures

NAMESPACE = "cpcreds-system"
NAMES = [f"cluster-{i}" for i in range(120)]


@pytest.fixture
def new_shard(hub: HubServer, tmp_path: Path) -> Iterator[Callable[[str], Shard]]:
    """``new_shard(identity)``: a Shard (not started: the fleet starts it) with short leases
    (``lease_duration`` seconds, renewed within 60% of it)."""
    made: list[Shard] = []

    def make(identity: str, lease_duration: float = 1.0) -> Shard:
        kubeconfig = hub.write_kubeconfig(tmp_path / f"{identity}.kubeconfig", HUB_TOKEN)
        shard = Shard(
            HubOptions(kubeconfig=kubeconfig, timeout=5), namespace=NAMESPACE, identity=identity,
            lease_duration=lease_duration, renew_deadline=0.6 * lease_duration, retry_interval=0.2,
        )  # fmt: skip
        made.append(shard)
        return shard

    yield make
    for shard in made:
        shard.stop()


def feed() -> ProfileFeed:
    return ProfileFeed([profile(name, namespace="fleet") for name in NAMES])


def engaged_split(fleets: list[Fleet]) -> Callable[[], bool]:
    """Every cluster engaged by exactly one of ``fleets``."""

    def check() -> bool:
        keys = [key for fleet in fleets for key in fleet.engaged]
        return len(keys) == len(NAMES) and len(set(keys)) == len(NAMES)

    return check


def test_two_fleets_with_a_shard_each_split_the_clusters_by_rendezvous(make_fleet: Callable[..., Fleet], new_shard: Callable[[str], Shard]) -> None:
    alpha, bravo = new_shard("alpha"), new_shard("bravo")
    fleets = [make_fleet(feed=feed(), shard=alpha), make_fleet(feed=feed(), shard=bravo)]
    assert all(fleet.wait_synced(10) for fleet in fleets)
    until(engaged_split(fleets), timeout=5, what="the clusters split between the fleets")
    for fleet, shard in zip(fleets, (alpha, bravo)):
        assert set(fleet.engaged) == shard.assignment(f"fleet/{name}" for name in NAMES).owned_by(shard.identity)
        assert 30 <= len(fleet.engaged) <= 90


def test_a_fleet_closed_hands_its_clusters_to_the_other_which_disengages_none(make_fleet: Callable[..., Fleet], new_shard: Callable[[str], Shard]) -> None:
    recorder = Recorder()
    # Leases of 30 s: a takeover well within that came of the release, not of an expiry.
    staying = make_fleet(feed=feed(), shard=new_shard("alpha", lease_duration=30.0), **recorder.callbacks())
    leaving = make_fleet(feed=feed(), shard=new_shard("bravo", lease_duration=30.0))
    until(engaged_split([staying, leaving]), timeout=10, what="the split")
    kept = set(staying.engaged)
    until(lambda: kept <= recorder.engaged(), what="the engage callbacks")
    leaving.close()
    until(lambda: len(staying.engaged) == len(NAMES), timeout=15, what="the takeover on the release")
    assert not [key for kind, key in recorder.seen if kind == "disengage"]


def test_a_newcomer_takes_only_the_clusters_it_wins_and_the_other_disengages_exactly_those(make_fleet: Callable[..., Fleet], new_shard: Callable[[str], Shard]) -> None:
    # 30-second leases: on one-second ones a busy machine can delay alpha's watch past its renew
    # deadline, and a stale alpha rightly disengages every cluster, not only bravo's.
    moved: list[str] = []
    first = make_fleet(feed=feed(), shard=new_shard("alpha", lease_duration=30.0), on_disengage=lambda cluster: moved.append(cluster.key))
    until(lambda: len(first.engaged) == len(NAMES), timeout=10, what="alpha engaging everything")
    second_shard = new_shard("bravo", lease_duration=30.0)
    second = make_fleet(feed=feed(), shard=second_shard)
    until(engaged_split([first, second]), timeout=10, what="the split")
    won = second_shard.assignment(f"fleet/{name}" for name in NAMES).owned_by("bravo")
    assert set(second.engaged) == won
    until(lambda: set(moved) == won, what="alpha's disengage callbacks")
    assert len(moved) == len(won)


def test_a_fleet_whose_lease_is_stale_disengages_its_clusters_and_engages_them_again_once_renewed(hub: HubServer, make_fleet: Callable[..., Fleet], new_shard: Callable[[str], Shard]) -> None:
    shard = new_shard("alpha")
    fleet = make_fleet(feed=ProfileFeed([profile("only", namespace="fleet")]), shard=shard)
    until(lambda: "fleet/only" in fleet.engaged, timeout=10, what="engaged")
    release = hub.stall_lease_writes(NAMESPACE, shard.lease_name)
    until(lambda: "fleet/only" not in fleet.engaged, timeout=3, what="fenced")
    assert not shard.fresh() and not shard.owns("fleet/only") and "fleet/only" not in fleet.clusters
    release.set()
    until(lambda: "fleet/only" in fleet.engaged, timeout=5, what="back")


def test_a_graceful_handover_counts_no_overlap_fetch(make_fleet: Callable[..., Fleet], new_shard: Callable[[str], Shard]) -> None:
    # 30-second leases: the staying member's latest handover is the release, not a rejoin of its
    # own after a renewal a busy machine delayed past a one-second lease's deadline.
    staying_shard = new_shard("alpha", lease_duration=30.0)
    staying = make_fleet(feed=feed(), shard=staying_shard)
    leaving = make_fleet(feed=feed(), shard=new_shard("bravo", lease_duration=30.0))
    until(engaged_split([staying, leaving]), timeout=10, what="the split")
    counted = sum(staying_shard.overlap.fetches.values())
    leaving.close()  # cancels its work, then releases its Lease
    until(lambda: len(staying.engaged) == len(NAMES), timeout=15, what="the takeover on the release")
    overlap = staying_shard.overlap
    assert sum(overlap.fetches.values()) == counted and overlap.bound == 0.0


def test_a_member_back_from_a_stall_counts_its_overlap_fetches_each_within_the_bound(hub: HubServer, make_fleet: Callable[..., Fleet], new_shard: Callable[[str], Shard]) -> None:
    stalled_shard, other_shard = new_shard("alpha"), new_shard("bravo")
    registry = CollectorRegistry()
    stalled = make_fleet(feed=feed(), shard=stalled_shard, prometheus_registry=registry)
    other = make_fleet(feed=feed(), shard=other_shard)
    until(engaged_split([stalled, other]), timeout=10, what="the split")
    counted = sum(other_shard.overlap.fetches.values())  # bravo joined after alpha: it counted some
    release = hub.stall_lease_writes(NAMESPACE, stalled_shard.lease_name)
    until(lambda: len(other.engaged) == len(NAMES), timeout=5, what="bravo taking alpha's clusters on expiry")
    # Taken on expiry: alpha fenced itself a renew deadline after its last renewal, before that.
    assert sum(other_shard.overlap.fetches.values()) == counted and other_shard.overlap.bound == 0.0
    before = stalled_shard.overlap.fetches["joined"]
    release.set()
    # Back, alpha wins its clusters from bravo while bravo's Lease is live: bravo may still be
    # fetching them until it sees alpha's Lease (at the latest, until its own goes stale).
    won = assign([f"fleet/{name}" for name in NAMES], ("alpha", "bravo")).owned_by("alpha")
    until(lambda: set(stalled.engaged) == won, timeout=5, what="alpha taking its clusters back")
    overlap = stalled_shard.overlap
    assert 0 < overlap.fetches["joined"] - before  # fetch attempts: a retried key counts again
    assert overlap.fetches["expired"] == overlap.fetches["released"] == 0
    assert 0 < overlap.bound <= stalled_shard.renew_deadline
    assert overlap.latest < overlap.bound  # every counted fetch happened within the window
    # The fleet's registry shows them as cpcreds serve --shard does.
    assert registry.get_sample_value("cpcreds_shard_overlap_fetches_total", {"reason": "joined"}) == overlap.fetches["joined"]
    assert registry.get_sample_value("cpcreds_shard_overlap_bound_seconds") == overlap.bound


def test_a_shard_registers_its_series_once_in_a_registry_also_given_to_its_fleet(make_fleet: Callable[..., Fleet], new_shard: Callable[[str], Shard]) -> None:
    shard, registry = new_shard("alpha"), CollectorRegistry()
    shard.register_metrics(registry)  # as a program exposing the shard's series itself would
    fleet = make_fleet(feed=feed(), shard=shard, prometheus_registry=registry)
    until(lambda: len(fleet.engaged) == len(NAMES), timeout=10, what="alpha engaging everything")
    assert registry.get_sample_value("cpcreds_shard_overlap_bound_seconds") == 0.0
    assert registry.get_sample_value("cpcreds_shard_overlap_fetches_total", {"reason": "joined"}) == 0.0
