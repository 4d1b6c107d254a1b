"""``/v1/clusters`` at fleet size: pages as Kubernetes lists (``limit``, ``continue``), filters
(``state``, ``provider``, ``prefix``), one profile at ``/v1/clusters/<namespace>/<name>``, and the
per-profile metrics switch."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpcreds import CredentialEngine, ProviderConfig
from cpcreds.fleet.cluster import FleetCluster
from cpcreds.serve.status import BadQuery, Query, StatusBoard
from tests.fakes.builders import access_provider, cluster_profile, exec_entry
from tests.fleet_harness import MEMBER
from tests.fleet_harness import profile as _profile

#: Resolves a profile offering "mint" (nothing is fetched): the board's rows are fleet clusters.
_ENGINE = CredentialEngine(ProviderConfig.from_dict({"providers": [exec_entry("mint")]}))


def row(key: str, *, provider: bool = True) -> FleetCluster:
    """A cluster of serve's fleet as the board files it: bound to "mint", or to nothing."""
    namespace, _, name = key.rpartition("/")
    profile = cluster_profile(name, access_provider("mint"), namespace=namespace)
    cluster = FleetCluster(key, profile, "test")
    cluster.binding = _ENGINE.bind(profile) if provider else None
    return cluster

MINT = {"name": "mint", "type": "mint", "options": {"lifetime": 3600}}
OTHER = {"name": "other", "type": "mint", "options": {"lifetime": 3600}}


def profile(name: str, provider: str = "mint", namespace: str = "fleet-system", **extension: Any) -> dict[str, Any]:
    document = cluster_profile(name, access_provider(provider, f"https://{name}.test:6443", exec_extension={"clusterName": name, **extension}))
    document["metadata"]["namespace"] = namespace
    return document


def listing(running: Any, query: str) -> tuple[int, dict[str, Any]]:
    status, content_type, body = running.get("/v1/clusters?" + query)
    assert content_type == "application/json"
    return status, json.loads(body)


def all_pages(running: Any, query: str) -> list[str]:
    keys: list[str] = []
    token = ""
    while True:
        status, body = listing(running, query + (f"&continue={quote(token)}" if token else ""))
        assert status == 200
        keys += [c["key"] for c in body["clusters"]]
        token = body["metadata"]["continue"]
        if not token:
            return keys


# -- paging, on the board serve answers from ------------------------------------------------------------

keys = st.lists(st.from_regex(r"[a-c]{1,2}/[a-d]{1,3}", fullmatch=True), unique=True, max_size=40)


@settings(max_examples=150, deadline=None)
@given(
    first=keys,
    limit=st.integers(1, 12),
    changes=st.lists(st.tuples(st.booleans(), st.from_regex(r"[a-c]{1,2}/[a-d]{1,3}", fullmatch=True)), max_size=30),
    order=st.sampled_from(["key", "attention"]),
)
def test_pages_of_any_limit_give_each_profile_present_throughout_exactly_once_in_order(first: list[str], limit: int, changes: list[tuple[bool, str]], order: str) -> None:
    board = StatusBoard()
    for key in first:
        board.put(row(key))
    pages: list[dict[str, Any]] = []
    token = None
    touched: set[str] = set()
    pending = list(changes)
    while True:
        page, token = board.select(Query(limit=limit, continue_=token, order=order))  # type: ignore[arg-type]
        assert len(page) <= limit
        pages += page
        if token is None:
            break
        # Profiles come and go between pages.
        for add, key in pending[:3]:
            touched.add(key)
            board.put(row(key)) if add else board.drop(key)
        pending = pending[3:]
    seen = [c["key"] for c in pages]
    assert len(seen) == len(set(seen))  # never twice
    assert seen == sorted(seen)  # in order (every profile here is pending: the page's order is by key too)
    assert set(first) - touched <= set(seen)  # every profile present throughout is there


def test_a_continue_token_of_another_serve_is_expired_and_a_mangled_one_is_a_bad_request() -> None:
    board, other = StatusBoard(), StatusBoard()
    for board_ in (board, other):
        for i in range(5):
            board_.put(row(f"ns/c{i}", provider=False))
    _, token = other.select(Query(limit=2))
    assert token
    with pytest.raises(BadQuery) as expired:
        board.select(Query(limit=2, continue_=token))
    assert expired.value.code == 410 and expired.value.reason == "Expired"
    with pytest.raises(BadQuery) as mangled:
        board.select(Query(limit=2, continue_=token[:-3] + "!!!"))
    assert mangled.value.code == 400


def test_a_changed_state_moves_a_profile_between_filters_and_counts() -> None:
    board = StatusBoard()
    status = row("ns/c")
    board.put(status)
    status.state = "failing"
    board.put(status)  # as the fleet's hooks do after every change
    assert [c["key"] for c in board.select(Query(state="failing"))[0]] == ["ns/c"]
    assert board.counts()["failing"] == 1 and board.counts_by_provider() == {"mint": {"failing": 1}}
    status.state = "ready"
    board.put(status)
    assert board.select(Query(state="failing"))[0] == []
    board.drop("ns/c")
    assert board.counts_by_provider() == {} and board.select(Query())[0] == []


# -- through cpcreds serve ------------------------------------------------------------------------------------


@pytest.fixture
def fleet(start_serve: Any) -> Any:
    profiles = {f"a{i}.yaml": profile(f"a{i:02d}") for i in range(12)}
    profiles |= {f"b{i}.yaml": profile(f"b{i:02d}", namespace="team-b") for i in range(5)}
    profiles |= {f"o{i}.yaml": profile(f"o{i}", provider="other") for i in range(3)}
    profiles |= {f"f{i}.yaml": profile(f"f{i}", fail=True) for i in range(4)}
    running = start_serve([MINT, OTHER], profiles)
    running.wait_ready()
    return running


def test_v1_clusters_pages_with_limit_and_continue_as_kubernetes_lists(fleet: Any) -> None:
    status, first = listing(fleet, "limit=5")
    assert status == 200 and len(first["clusters"]) == 5 and first["metadata"]["continue"]
    assert first["counts"]["ready"] == 20 and first["counts"]["failing"] == 4
    assert first["countsByProvider"] == {"mint": {"ready": 17, "failing": 4}, "other": {"ready": 3}}
    keys = all_pages(fleet, "limit=7")
    assert keys == sorted(keys) and len(keys) == 24 == len(set(keys))
    assert listing(fleet, "")[1]["metadata"]["continue"] == ""  # no limit: everything, one page


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("state=failing", {"fleet-system/f0", "fleet-system/f1", "fleet-system/f2", "fleet-system/f3"}),
        ("provider=other", {"fleet-system/o0", "fleet-system/o1", "fleet-system/o2"}),
        ("prefix=team-b/", {f"team-b/b{i:02d}" for i in range(5)}),
        ("prefix=fleet-system/a0&state=ready", {f"fleet-system/a{i:02d}" for i in range(10)}),
        ("state=ready&provider=other&prefix=fleet-system/o1", {"fleet-system/o1"}),
        ("state=invalid", set()),
    ],
)
def test_v1_clusters_filters_by_state_provider_and_name_prefix(fleet: Any, query: str, expected: set[str]) -> None:
    keys = all_pages(fleet, query + "&limit=2")
    assert len(keys) == len(set(keys)) and set(keys) == expected


@pytest.mark.parametrize(
    ("query", "code", "reason"),
    [
        ("limit=0", 400, "BadRequest"),
        ("limit=ten", 400, "BadRequest"),
        ("state=sleepy", 400, "BadRequest"),
        ("order=random", 400, "BadRequest"),
        ("limit=2&continue=not-a-token", 400, "BadRequest"),
    ],
)
def test_a_bad_query_is_a_kubernetes_status_with_a_worded_message(fleet: Any, query: str, code: int, reason: str) -> None:
    status, body = listing(fleet, query)
    assert status == code
    assert body["kind"] == "Status" and body["status"] == "Failure" and body["code"] == code and body["reason"] == reason and body["message"]


def test_a_continue_token_for_other_filters_or_of_an_earlier_run_is_refused(fleet: Any) -> None:
    token = listing(fleet, "limit=2&state=ready")[1]["metadata"]["continue"]
    status, body = listing(fleet, f"limit=2&state=failing&continue={quote(token)}")
    assert status == 400 and "other filters" in body["message"]
    foreign = StatusBoard()
    for i in range(3):
        foreign.put(row(f"ns/c{i}", provider=False))
    stale = foreign.select(Query(limit=1))[1]
    status, body = listing(fleet, f"limit=1&continue={quote(stale or '')}")
    assert (status, body["reason"]) == (410, "Expired")


def test_one_profile_answers_at_its_namespace_and_name(fleet: Any) -> None:
    status, _, body = fleet.get("/v1/clusters/team-b/b03")
    one = json.loads(body)
    assert status == 200 and (one["namespace"], one["name"], one["state"], one["consecutiveFailures"]) == ("team-b", "b03", "ready", 0)
    failing = json.loads(fleet.get("/v1/clusters/fleet-system/f1")[2])
    assert failing["state"] == "failing" and failing["consecutiveFailures"] >= 1 and failing["nextRefresh"]
    status, _, body = fleet.get("/v1/clusters/team-b/nope")
    assert status == 404 and json.loads(body)["reason"] == "NotFound"


# -- metrics ---------------------------------------------------------------------------------------------------------


def series(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if re.match(rf"{name}[{{ ]", line)]


@pytest.mark.parametrize(("flag", "per_profile"), [(None, True), ("false", False), ("true", True), ("auto", True)])
def test_per_profile_metrics_switch_and_the_aggregated_series_always(start_serve: Any, flag: str | None, per_profile: bool) -> None:
    extra = {} if flag is None else {"per_profile_metrics": flag}
    running = start_serve([MINT, OTHER], {"a.yaml": profile("a"), "o.yaml": profile("o", provider="other"), "f.yaml": profile("f", fail=True)}, **extra)
    running.wait_ready()
    _, _, text = running.get("/metrics")
    assert 'cpcreds_serve_profiles{provider="other",state="ready"} 1.0' in text
    assert 'cpcreds_serve_profiles{provider="mint",state="failing"} 1.0' in text
    assert f"cpcreds_serve_per_profile_metrics {1.0 if per_profile else 0.0}" in text
    assert bool(series(text, "cpcreds_serve_credential_consecutive_failures")) is per_profile
    assert bool(series(text, "cpcreds_serve_credential_expiry_timestamp_seconds")) is per_profile


def _member(name: str, member_id: str, created: str) -> dict[str, Any]:
    return _profile(name, labels={MEMBER: member_id}, created=created)


def test_serves_metrics_count_the_duplicates_it_does_not_act_on(start_serve: Any, tmp_path: Any) -> None:
    """Issue 28 (also): an operator alerting on KEP-4322 duplicates reads them from serve's /metrics."""
    running = start_serve(
        [MINT],
        {
            "old.yaml": _member("old", "m1", "2026-01-01T00:00:00Z"),
            "new.yaml": _member("new", "m1", "2026-02-01T00:00:00Z"),
            "newer.yaml": _member("newer", "m1", "2026-03-01T00:00:00Z"),
            "alone.yaml": _profile("alone"),
        },
    )
    running.wait_ready()
    assert "\ncpcreds_fleet_duplicate_profiles 2.0\n" in running.get("/metrics")[2]
    (tmp_path / "profiles" / "newer.yaml").unlink()
    (tmp_path / "profiles" / "new.yaml").unlink()
    running.until(lambda: "\ncpcreds_fleet_duplicate_profiles 0.0\n" in running.get("/metrics")[2], what="the duplicates gone")


def test_serve_shows_prometheus_clients_default_registry_and_takes_its_own_series_out_when_it_stops(start_serve: Any) -> None:
    """Issue 29: ``cpcreds serve`` given no registry shows prometheus_client's REGISTRY (what the
    process registered there too), with the engines', the fleet's and its own series."""
    from prometheus_client import REGISTRY, Counter

    program_series = Counter("test_serve_program_marks", "a series the program registered itself", registry=REGISTRY)
    try:
        running = start_serve([MINT], {"a.yaml": profile("a")}, default_registry=True)
        running.wait_ready()
        text = running.get("/metrics")[2]
        assert "\ntest_serve_program_marks_total 0.0\n" in text
        assert 'cpcreds_serve_profiles{provider="mint",state="ready"} 1.0' in text
        assert series(text, "cpcreds_fleet_engaged_clusters") and series(text, "cpcreds_credential_requests_total")
        assert (REGISTRY.get_sample_value("cpcreds_credential_requests_total", {"provider": "mint", "result": "success"}) or 0) >= 1
        running.stop()
        assert REGISTRY.get_sample_value("cpcreds_serve_ready") is None  # the next serve of the process shows its own
    finally:
        REGISTRY.unregister(program_series)
