"""cpcreds.shard: replicas split keys over Leases on the hub fake (short leases: 1 s / 0.6 s /
0.2 s), and rendezvous hashing moves only the keys a joining member wins."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpcreds import HubOptions
from cpcreds.errors import ConfigError
from cpcreds.shard import Shard, assign, owner
from cpcreds.shard.leases import micro_time
from cpcreds.shard.membership import GROUP_LABEL, STATUS_ANNOTATION
from tests.fakes.fixtures import HUB_TOKEN
from tests.fakes.hub import HubServer, lease
from tests.fleet_harness import until

NAMESPACE = "cpcreds-system"
LEASE, RENEW, RETRY = 1.0, 0.6, 0.2
KEYS = [f"team-{i % 7}/cluster-{i}" for i in range(3000)]
MICRO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


@pytest.fixture
def make_shard(hub: HubServer, tmp_path: Path) -> Iterator[Callable[..., Shard]]:
    """``make_shard(identity, token=HUB_TOKEN, **knobs)``: a started Shard with short leases;
    every one is stopped after the test."""
    made: list[Shard] = []

    def make(identity: str, *, token: str = HUB_TOKEN, start: bool = True, **knobs: Any) -> Shard:
        kubeconfig = hub.write_kubeconfig(tmp_path / f"{identity}.kubeconfig", token)
        settings_ = {"lease_duration": LEASE, "renew_deadline": RENEW, "retry_interval": RETRY, **knobs}
        shard = Shard(HubOptions(kubeconfig=kubeconfig, timeout=5), namespace=NAMESPACE, identity=identity, status_url=f"https://{identity}.test", **settings_)
        made.append(shard)
        return shard.start() if start else shard

    yield make
    for shard in made:
        shard.stop()


def settled(shards: list[Shard]) -> Callable[[], bool]:
    """Every shard claims and sees exactly these members."""
    names = tuple(sorted(s.identity for s in shards))
    return lambda: all(s.claiming() and s.membership.members == names for s in shards)


def owners_of(key: str, shards: list[Shard]) -> list[str]:
    return [s.identity for s in shards if s.owns(key)]


def test_every_key_has_exactly_one_owner_and_the_shares_are_even(make_shard: Callable[..., Shard]) -> None:
    shards = [make_shard(name) for name in ("alpha", "bravo", "charlie")]
    until(settled(shards), timeout=5, what="three members")
    shares = {s.identity: 0 for s in shards}
    for key in KEYS:
        owners = owners_of(key, shards)
        assert len(owners) == 1, (key, owners)
        shares[owners[0]] += 1
    assert all(850 <= count <= 1150 for count in shares.values()), shares
    assert shards[0].membership.status_urls == {s.identity: f"https://{s.identity}.test" for s in shards}


def test_a_member_stopped_gracefully_hands_over_its_keys_within_one_renew_interval(make_shard: Callable[..., Shard]) -> None:
    alpha, bravo, charlie = (make_shard(name) for name in ("alpha", "bravo", "charlie"))
    until(settled([alpha, bravo, charlie]), timeout=5, what="three members")
    charlie.stop()
    took = until(settled([alpha, bravo]), timeout=LEASE, what="the handover")
    assert took < RETRY
    assert alpha.membership.reason == "released"
    assert all(len(owners_of(key, [alpha, bravo, charlie])) == 1 for key in KEYS[:500])


def test_a_stalled_member_stops_owning_before_its_peers_take_over_and_gets_its_keys_back(hub: HubServer, make_shard: Callable[..., Shard]) -> None:
    shards = [make_shard(name) for name in ("alpha", "bravo", "charlie")]
    alpha, bravo, charlie = shards
    until(settled(shards), timeout=5, what="three members")
    before = {key: owners_of(key, shards) for key in KEYS}
    doubles: list[tuple[str, list[str]]] = []
    moments: dict[str, float] = {}

    def check(view: Any) -> None:
        # At every membership event: no key is owned by two members that both hold it fresh.
        now = time.monotonic()
        if view.identity == "charlie" and not view.claiming:
            moments.setdefault("charlie stale", now)
        if view.identity != "charlie" and "charlie" not in view.members:
            moments.setdefault(f"{view.identity} took over", now)
        for key in KEYS[::5]:
            owners = owners_of(key, shards)
            if len(owners) > 1:
                doubles.append((key, owners))

    for shard in shards:
        shard.subscribe(check)
    release = hub.stall_lease_writes(NAMESPACE, charlie.lease_name)
    stalled_at = time.monotonic()
    until(settled([alpha, bravo]), timeout=3 * LEASE, what="the takeover")
    assert not charlie.fresh() and not any(charlie.owns(key) for key in KEYS)
    assert moments["charlie stale"] < moments["alpha took over"] and moments["charlie stale"] < moments["bravo took over"]
    assert moments["charlie stale"] - stalled_at <= RENEW + RETRY + 0.1
    assert moments["alpha took over"] - stalled_at <= LEASE + RENEW + 0.2
    assert all(len(owners_of(key, shards)) == 1 for key in KEYS[::3])

    release.set()
    until(settled(shards), timeout=3 * LEASE, what="charlie back")
    assert {key: owners_of(key, shards) for key in KEYS} == before
    assert doubles == []


def test_a_member_added_takes_only_the_keys_it_wins(make_shard: Callable[..., Shard]) -> None:
    alpha, bravo = make_shard("alpha"), make_shard("bravo")
    until(settled([alpha, bravo]), timeout=5, what="two members")
    before = {key: owners_of(key, [alpha, bravo]) for key in KEYS}
    charlie = make_shard("charlie")
    took = until(settled([alpha, bravo, charlie]), timeout=5, what="three members")
    assert took < 2 * RETRY + 2.0  # the newcomer waits one renew interval, then claims (slack for a loaded machine)

    moved: list[str] = []

    def handed_over() -> bool:
        # Each replica lets go of what it lost on its own tick: counted once every moved key is
        # charlie's alone.
        after = {key: owners_of(key, [alpha, bravo, charlie]) for key in KEYS}
        moved[:] = [key for key in KEYS if after[key] != before[key]]
        return all(after[key] == ["charlie"] for key in moved)

    until(handed_over, timeout=5, what="the moved keys to be charlie's alone")
    assert 0.25 < len(moved) / len(KEYS) < 0.42
    assert alpha.membership.reason == "joined"


def test_lease_times_have_six_fractional_digits_even_on_a_whole_second(hub: HubServer, make_shard: Callable[..., Shard]) -> None:
    assert micro_time(1795600000.0) == "2026-11-25T09:46:40.000000Z"
    shard = make_shard("alpha")
    until(settled([shard]), timeout=5, what="one member")
    until(lambda: shard.renewals["renewed"] >= 2, timeout=2, what="two renewals")
    stored = hub.leases(NAMESPACE)[shard.lease_name]
    spec = stored["spec"]
    assert MICRO_TIME.fullmatch(spec["renewTime"]) and MICRO_TIME.fullmatch(spec["acquireTime"])
    assert spec["holderIdentity"] == "alpha" and spec["leaseDurationSeconds"] == 1
    assert stored["metadata"]["labels"] == {GROUP_LABEL: "cpcreds"}
    annotations = stored["metadata"]["annotations"]
    assert annotations.pop(STATUS_ANNOTATION) == "https://alpha.test" and set(annotations) == {"shard.cpcreds.io/instance"}
    # The fake answers 400 to any other time format, as kube-apiserver does.
    assert [seen.status for seen in hub.requests if seen.method in ("POST", "PUT")] and not [seen for seen in hub.requests if seen.status == 400]


def test_a_conflict_is_read_again_and_retried(hub: HubServer, make_shard: Callable[..., Shard]) -> None:
    shard = make_shard("alpha")
    until(settled([shard]), timeout=5, what="one member")
    stored = hub.leases(NAMESPACE)[shard.lease_name]
    hub.update(stored)  # someone else wrote it: our resourceVersion is old now
    renewed = shard.renewals["renewed"]
    until(lambda: shard.renewals["renewed"] > renewed + 1, timeout=2, what="renewals after the conflict")
    assert shard.renewals["conflict"] >= 1
    assert [seen.status for seen in hub.requests if seen.method == "PUT"].count(409) >= 1
    until(shard.fresh, timeout=2, what="fresh after the conflict")


def test_a_lease_answer_trickled_a_byte_at_a_time_fails_the_renewal_at_its_deadline(hub: HubServer, make_shard: Callable[..., Shard]) -> None:
    # Each byte comes well within a read timeout; the answer never ends (it would take 15 s). The
    # renewer must give up at the renew deadline (and renew on its next tick), not read on while
    # its Lease goes stale.
    path = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/cpcreds-alpha"
    hub.inject_answer(path, 200, json.dumps(lease(NAMESPACE, "cpcreds-alpha", "alpha")).encode(), trickle=0.05)
    alpha = make_shard("alpha")
    started = time.monotonic()
    until(lambda: alpha.renewals["failed"] >= 1, timeout=RENEW + 5.0, what="the trickled renewal given up")
    assert time.monotonic() - started < RENEW + 5.0  # far from the 15 s the whole answer takes
    assert not alpha.fresh()
    # ``problem`` is the last hub failure of any request: a watch dropped meanwhile may say its own
    # for a moment, until the next renewal, trickled too, fails again the same way.
    until(lambda: "did not finish its answer in time" in alpha.problem, timeout=RENEW + 5.0, what="the renewal's failure said")
    hub.clear_faults()
    until(alpha.claiming, timeout=5, what="alpha renewing once the hub answers")


def test_the_expired_lease_of_a_departed_replica_is_deleted(hub: HubServer, make_shard: Callable[..., Shard]) -> None:
    gone = lease(NAMESPACE, "cpcreds-gone-12345", "gone-12345", renew_time="2026-01-01T00:00:00.000000Z", duration=1, labels={GROUP_LABEL: "cpcreds"})
    hub.create(gone)
    other_group = lease(NAMESPACE, "other-x", "x", renew_time="2026-01-01T00:00:00.000000Z", duration=1, labels={GROUP_LABEL: "other"})
    hub.create(other_group)
    shard = make_shard("alpha")
    # Judged on this machine's clock: the peer counts as alive for one lease duration from when
    # it is first seen, whatever its renewTime says (clocks may disagree).
    until(lambda: "gone-12345" in shard.membership.members or not hub.leases(NAMESPACE).get("cpcreds-gone-12345"), timeout=2, what="the peer seen")
    until(lambda: shard.cleaned == 1, timeout=LEASE + 1, what="the departed Lease deleted")
    assert "cpcreds-gone-12345" not in hub.leases(NAMESPACE)
    assert "other-x" in hub.leases(NAMESPACE)  # another group's Lease is not ours to judge
    until(settled([shard]), timeout=2, what="alone")


def test_without_the_lease_verbs_the_replica_is_never_fresh(hub: HubServer, make_shard: Callable[..., Shard]) -> None:
    hub.grant("read-only", verbs=["get", "list", "watch"])
    shard = make_shard("alpha", token="read-only")
    until(lambda: shard.renewals["failed"] >= 1, timeout=2, what="a refused renewal")
    assert not shard.fresh() and not shard.owns(KEYS[0])
    assert "403" in shard.problem and "read-only" not in shard.problem


def test_a_graceful_stop_releases_the_lease(hub: HubServer, make_shard: Callable[..., Shard]) -> None:
    shard = make_shard("alpha")
    until(settled([shard]), timeout=5, what="one member")
    shard.stop()
    stored = hub.leases(NAMESPACE).get(shard.lease_name)
    assert stored is not None and stored["spec"]["holderIdentity"] == ""
    assert shard.renewals["released"] == 1 and not shard.fresh()


def test_changes_yield_the_view_then_every_change_until_stopped(make_shard: Callable[..., Shard]) -> None:
    shard = make_shard("alpha")

    async def follow() -> list[tuple[str, bool]]:
        seen = []
        async for view in shard.changes():
            seen.append((view.reason, view.claiming))
            if view.claiming:
                await asyncio.to_thread(shard.stop)
        return seen

    seen = asyncio.run(asyncio.wait_for(follow(), 5))
    assert seen[-1] == ("stopped", False)
    assert ("fresh", True) in seen or ("joined", True) in seen


def test_a_hundred_thousand_keys_are_assigned_off_the_event_loop(make_shard: Callable[..., Shard]) -> None:
    shard = make_shard("alpha")
    until(settled([shard]), timeout=5, what="one member")
    keys = [f"ns-{i % 50}/c-{i}" for i in range(100_000)]

    async def main() -> tuple[Any, int]:
        ticks = 0
        task = asyncio.create_task(shard.assign(keys))
        while not task.done():
            ticks += 1
            await asyncio.sleep(0.005)
        return task.result(), ticks

    assignment, ticks = asyncio.run(main())
    assert assignment.shares() == {"alpha": 100_000} and assignment.seconds > 0
    assert ticks > 2  # the loop kept running while the assignment was computed


def test_invalid_settings_are_config_errors(hub: HubServer, tmp_path: Path) -> None:
    options = HubOptions(kubeconfig=hub.write_kubeconfig(tmp_path / "k", HUB_TOKEN))
    for knobs in (
        {"namespace": "Not_A_Namespace"},
        {"namespace": "ns", "group": "no spaces"},
        {"namespace": "ns", "lease_duration": 10, "renew_deadline": 10},
        {"namespace": "ns", "retry_interval": 0},
        {"namespace": "ns", "identity": ""},
        {"namespace": "ns", "identity": "a\r\nb"},
        {"namespace": "ns", "identity": "x" * 254},
    ):
        with pytest.raises(ConfigError):
            Shard(options, **knobs)


def test_the_default_identity_is_the_pod_name_and_a_random_suffix(hub: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAME", "cpcreds-7d9f8-abcde")
    options = HubOptions(kubeconfig=hub.write_kubeconfig(tmp_path / "k", HUB_TOKEN))
    first, second = Shard(options, namespace="ns"), Shard(options, namespace="ns")
    assert re.fullmatch(r"cpcreds-7d9f8-abcde-[a-z0-9]{5}", first.identity)
    assert first.identity != second.identity
    assert (first.lease_duration, first.renew_deadline, first.retry_interval) == (15.0, 10.0, 2.0)


# -- rendezvous hashing ------------------------------------------------------------------------

_members = st.sets(st.text(st.characters(codec="utf-8"), min_size=1, max_size=12), min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(members=_members, newcomer=st.text(min_size=1, max_size=12), keys=st.lists(st.text(max_size=30), min_size=1, max_size=200, unique=True))
def test_a_joining_member_moves_only_the_keys_it_wins(members: set[str], newcomer: str, keys: list[str]) -> None:
    if newcomer in members:
        return
    before = assign(keys, members).owners
    after = assign(keys, members | {newcomer}).owners
    for key in keys:
        assert after[key] in (before[key], newcomer)
        assert after[key] == owner(key, members | {newcomer})


@settings(max_examples=60, deadline=None)
@given(members=_members, keys=st.lists(st.text(max_size=30), min_size=1, max_size=200, unique=True))
def test_a_leaving_member_hands_only_its_own_keys_over(members: set[str], keys: list[str]) -> None:
    leaving = sorted(members)[0]
    before = assign(keys, members).owners
    after = assign(keys, members - {leaving}).owners
    for key in keys:
        if before[key] != leaving:
            assert after[key] == before[key]


def test_the_assignment_is_the_same_in_every_process() -> None:
    script = "import json; from cpcreds.shard import assign; print(json.dumps(assign([f'ns/c{i}' for i in range(300)], ['a', 'b', 'c']).owners))"
    answers = [
        json.loads(subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONHASHSEED": seed}, capture_output=True, text=True, check=True).stdout)
        for seed in ("1", "2")
    ]
    assert answers[0] == answers[1] == dict(assign([f"ns/c{i}" for i in range(300)], ["a", "b", "c"]).owners)


# -- the hub fake's Leases, as kube-apiserver serves them ---------------------------------------


@pytest.fixture
def api_client(hub: HubServer) -> Iterator[Any]:
    from kubernetes import client
    from kubernetes.config.kube_config import KubeConfigLoader

    configuration = client.Configuration()
    KubeConfigLoader(config_dict=hub.kubeconfig(HUB_TOKEN)).load_and_set(configuration)
    with client.ApiClient(configuration) as made:
        yield made


def test_the_official_clients_typed_lease_is_refused_on_a_whole_second(api_client: Any) -> None:
    from datetime import UTC, datetime

    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from cpcreds.shard.leases import LeaseAPI

    whole_second = datetime(2026, 11, 25, 10, 0, 0, tzinfo=UTC)
    typed = client.V1Lease(metadata=client.V1ObjectMeta(name="typed"), spec=client.V1LeaseSpec(holder_identity="x", renew_time=whole_second))
    with pytest.raises(ApiException) as refused:
        client.CoordinationV1Api(api_client).create_namespaced_lease(NAMESPACE, typed)
    assert refused.value.status == 400  # isoformat() wrote 2026-11-25T10:00:00+00:00
    ours = {"metadata": {"name": "ours"}, "spec": {"holderIdentity": "x", "renewTime": micro_time(whole_second.timestamp())}}
    assert LeaseAPI(api_client, NAMESPACE).create(ours, 5)[0] == 201


def test_lease_writes_conflict_as_kube_apiserver_words_it(api_client: Any) -> None:
    from cpcreds.shard.leases import LeaseAPI

    leases = LeaseAPI(api_client, NAMESPACE)
    body = {"metadata": {"name": "l"}, "spec": {"holderIdentity": "x", "leaseDurationSeconds": 1}}
    status, created = leases.create(body, 5)
    assert status == 201
    assert leases.create(body, 5)[1]["reason"] == "AlreadyExists"
    stale = {**body, "metadata": {"name": "l", "resourceVersion": "1"}}
    status, answer = leases.replace("l", stale, 5)
    assert (status, answer["reason"]) == (409, "Conflict")
    assert answer["message"] == (
        'Operation cannot be fulfilled on leases.coordination.k8s.io "l": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    assert leases.replace("l", body, 5)[0] == 422  # Leases take no unconditional update
    status, replaced = leases.replace("l", {**body, "metadata": created["metadata"]}, 5)
    assert status == 200
    assert leases.delete("l", created["metadata"]["resourceVersion"], 5)[0] == 409  # it changed since
    assert leases.delete("l", replaced["metadata"]["resourceVersion"], 5)[0] == 200
    assert leases.get("l", 5)[0] == 404


def test_a_silent_watch_fences_the_replica_until_it_is_reopened(hub: HubServer, make_shard: Callable[..., Shard]) -> None:
    shard = make_shard("alpha")
    until(settled([shard]), timeout=5, what="one member")
    watches = sum(1 for seen in hub.requests if seen.watch)
    assert hub.mute_watches() == 1
    muted_at = time.monotonic()
    until(lambda: not shard.fresh(), timeout=2, what="fenced")
    assert time.monotonic() - muted_at <= RENEW + RETRY + 0.2  # peers cannot be seen: not fresh
    until(lambda: sum(1 for seen in hub.requests if seen.watch) > watches, timeout=2, what="the watch reopened")
    until(settled([shard]), timeout=2, what="claiming again")


# -- one Lease per identity, and only a Lease's rightful holder counts (issue 28, items 4, 6, 7) ----

#: A Lease name as kube-apiserver validates it: a DNS-1123 subdomain of at most 253 characters.
_LEASE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_groups = st.from_regex(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,20}[A-Za-z0-9])?", fullmatch=True)
_plain = st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,30}[a-z0-9])?", fullmatch=True)


@st.composite
def _identities(draw: st.DrawFn) -> list[str]:
    """Hostile sets of identities: arbitrary text, valid lowercase names, their case variants, and
    names spelled like another identity's hashed Lease name (the collision a naive rule makes)."""
    from cpcreds.shard import lease_name

    group = draw(_groups)
    base = draw(st.lists(st.text(min_size=1, max_size=60) | _plain, min_size=1, max_size=8))
    variants = [i.upper() for i in base] + [i.swapcase() for i in base]
    mimics = [lease_name(group, i)[len(group) + 1 :] for i in base if lease_name(group, i).startswith(f"{group}-")]
    return [group, *dict.fromkeys(i for i in base + variants + mimics if i)]


@settings(max_examples=300, deadline=None)
@given(drawn=_identities())
def test_lease_names_are_valid_and_one_per_identity(drawn: list[str]) -> None:
    from cpcreds.shard import lease_name

    group, identities = drawn[0], drawn[1:]
    names = {identity: lease_name(group, identity) for identity in identities}
    assert len(set(names.values())) == len(names), names
    for identity, name in names.items():
        assert len(name) <= 253 and _LEASE_NAME.fullmatch(name), (identity, name)
        if _LEASE_NAME.fullmatch(f"{group}-{identity}") and len(f"{group}-{identity}") <= 253 and group == group.lower():
            # Readable: a lowercase name keeps its name unless it is spelled like a hashed one.
            assert name == f"{group}-{identity}" or re.search(r"-[a-z2-7]{16}$", f"{group}-{identity}"), (identity, name)


def test_identities_that_differ_only_in_case_are_two_members_with_two_leases(hub: HubServer, make_shard: Callable[..., Shard]) -> None:
    upper, lower = make_shard("Pod-A"), make_shard("pod-a")
    assert upper.lease_name != lower.lease_name and upper.lease_name.startswith("cpcreds-pod-a-") and lower.lease_name == "cpcreds-pod-a"
    until(settled([upper, lower]), timeout=5, what="two members")
    assert all(len(owners_of(key, [upper, lower])) == 1 for key in KEYS[::3])
    stored = hub.leases(NAMESPACE)
    assert stored[upper.lease_name]["spec"]["holderIdentity"] == "Pod-A" and stored[lower.lease_name]["spec"]["holderIdentity"] == "pod-a"


def _contended(shard: Shard) -> float:
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    shard.register_metrics(registry)
    return registry.get_sample_value("cpcreds_shard_lease_contended") or 0.0


def test_two_replicas_given_one_identity_never_both_serve_and_the_one_left_out_says_so(make_shard: Callable[..., Shard]) -> None:
    alpha, first, second = make_shard("alpha"), make_shard("twin"), make_shard("twin")
    assert first.lease_name == second.lease_name
    twins = [first, second]
    until(lambda: alpha.claiming() and sum(t.claiming() for t in twins) == 1 and any(t.contended for t in twins), timeout=5, what="one twin holding the Lease")
    # The one left out is the one told the Lease is held (claiming can lapse for a moment on a
    # loaded machine; being left out does not).
    holder, left_out = (second, first) if first.contended else (first, second)
    assert not left_out.fresh() and not any(left_out.owns(key) for key in KEYS[::3])
    assert all(len(owners_of(key, [alpha, *twins])) <= 1 for key in KEYS[::3])  # never two
    until(lambda: all(len(owners_of(key, [alpha, *twins])) == 1 for key in KEYS[::3]), timeout=5, what="every key owned once")
    assert "held by another replica" in left_out.contended and "'twin'" in left_out.contended
    assert left_out.renewals["contended"] >= 1 and left_out.problem == left_out.contended
    assert (_contended(left_out), _contended(holder)) == (1.0, 0.0) and holder.contended == ""
    # The holder leaves gracefully: the Lease is free at once, and the other twin takes it.
    holder.stop()
    until(lambda: left_out.claiming() and alpha.membership.members == ("alpha", "twin"), timeout=5, what="the other twin holding the Lease")
    assert left_out.contended == "" and _contended(left_out) == 0.0


def test_a_replica_that_cannot_watch_the_leases_stops_renewing_so_its_share_moves(hub: HubServer, make_shard: Callable[..., Shard]) -> None:
    hub.grant("blind")
    alpha, bravo = make_shard("alpha"), make_shard("bravo", token="blind")
    until(settled([alpha, bravo]), timeout=5, what="two members")
    # bravo may still write its Lease but no longer list or watch the group's.
    hub.grant("blind", verbs=["get", "create", "update", "delete"])
    hub.mute_watches()
    until(lambda: alpha.membership.members == ("alpha",) and alpha.claiming(), timeout=10, what="bravo's share moved to alpha")
    assert not bravo.fresh() and all(owners_of(key, [alpha, bravo]) == ["alpha"] for key in KEYS[::7])
    renewed = bravo.renewals["renewed"]
    until(lambda: alpha.cleaned >= 1, timeout=5, what="bravo's expired Lease deleted")
    assert bravo.renewals["renewed"] == renewed  # not fresh: it does not claim to be alive
    hub.grant("blind")  # listing works again: bravo renews, rejoins and takes its share back
    until(settled([alpha, bravo]), timeout=10, what="bravo back")


def test_a_leftover_lease_or_a_long_declared_duration_keeps_no_dead_member_alive(hub: HubServer, make_shard: Callable[..., Shard]) -> None:
    labels = {GROUP_LABEL: "cpcreds"}
    hub.create(lease(NAMESPACE, "cpcreds-leftover", "r3", duration=3600, labels=labels))  # not r3's Lease
    hub.create(lease(NAMESPACE, "cpcreds-ghost", "ghost", duration=3600, labels=labels))  # declares an hour
    alpha, r3 = make_shard("alpha"), make_shard("r3")
    until(lambda: alpha.claiming() and r3.claiming() and "r3" in alpha.membership.members, timeout=5, what="alpha and r3")
    release = hub.stall_lease_writes(NAMESPACE, r3.lease_name)  # r3 is gone: its Lease stops changing
    try:
        until(lambda: alpha.membership.members == ("alpha",), timeout=5 * LEASE + 5, what="r3 and ghost expired")
        assert all(alpha.owns(key) for key in KEYS[::7])
        assert "cpcreds-leftover" in hub.leases(NAMESPACE)  # not a member's Lease: ignored, not deleted
    finally:
        release.set()
