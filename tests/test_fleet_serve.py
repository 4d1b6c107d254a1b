"""``cpcreds serve`` shares the Fleet's inventory: its sources (cpcreds.fleet) and its KEP-4322
deduplication, so serve keeps one credential and one kubeconfig per inventory member."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fleet_harness import MEMBER, MINT, profile
from tests.serve_harness import write_profiles


def member(name: str, member_id: str, created: str) -> dict[str, Any]:
    return profile(name, labels={MEMBER: member_id}, created=created)


def test_serve_acts_on_the_oldest_profile_of_an_inventory_member_and_says_so(start_serve: Any, tmp_path: Path) -> None:
    running = start_serve(
        [MINT],
        {
            "old.yaml": member("old", "m1", "2026-01-01T00:00:00Z"),
            "new.yaml": member("new", "m1", "2026-02-01T00:00:00Z"),
            "tie-1.yaml": member("tie-1", "m2", "2026-01-01T00:00:00Z"),
            "tie-2.yaml": member("tie-2", "m2", "2026-01-01T00:00:00Z"),
            "alone.yaml": profile("alone"),
        },
    )
    running.wait_ready()
    assert set(running.clusters()) == {"fleet-system/old", "fleet-system/alone"}
    problems = json.loads(running.get("/v1/clusters")[2])["problems"]
    (text,) = [problem for origin, problem in problems.items() if "KEP-4322" in origin]
    assert "fleet-system/new, fleet-system/old): serving fleet-system/old" in text
    assert "serving none (the oldest tie)" in text
    (tmp_path / "profiles" / "old.yaml").unlink()  # the newer profile now stands for the cluster
    running.until(lambda: set(running.clusters()) == {"fleet-system/new", "fleet-system/alone"}, what="the newer profile")
    (tmp_path / "profiles" / "tie-2.yaml").unlink()
    (tmp_path / "profiles" / "new.yaml").unlink()
    running.until(lambda: set(running.clusters()) == {"fleet-system/tie-1", "fleet-system/alone"}, what="the tie broken")
    running.until(lambda: not any("KEP-4322" in o for o in json.loads(running.get("/v1/clusters")[2])["problems"]), what="the problem to clear")
    write_profiles(tmp_path / "profiles", {"again.yaml": member("again", "m2", "2025-01-01T00:00:00Z")})
    running.until(lambda: set(running.clusters()) == {"fleet-system/again", "fleet-system/alone"}, what="the older profile")


def test_serve_with_dedupe_off_acts_on_every_profile(start_serve: Any) -> None:
    running = start_serve(
        [MINT],
        {"old.yaml": member("old", "m1", "2026-01-01T00:00:00Z"), "new.yaml": member("new", "m1", "2026-02-01T00:00:00Z")},
        serve_section={"dedupe": False},
    )
    running.wait_ready()
    assert set(running.clusters()) == {"fleet-system/old", "fleet-system/new"}
    problems = json.loads(running.get("/v1/clusters")[2])["problems"]
    assert not any("KEP-4322" in origin for origin in problems)
