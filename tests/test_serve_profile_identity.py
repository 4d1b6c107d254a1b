"""serve with profiles from a folder: a profile's plan is decided by its file's content, never by
metadata copied into the file (issue 18, item 1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.fakes.builders import access_provider, cluster_profile
from tests.serve_harness import write_profiles

MINT = {"name": "mint", "type": "mint", "options": {"lifetime": 3600}}


def exported(name: str, server: str) -> dict[str, Any]:
    # As saved from one `kubectl get -o yaml` and copied: the same uid and resourceVersion.
    return cluster_profile(
        name, access_provider("mint", server, exec_extension={"clusterName": name}), uid="3f1c-one-export", resource_version="4711"
    )


def test_copies_of_one_export_each_show_their_own_server(start_serve: Any) -> None:
    running = start_serve([MINT], {"prod.yaml": exported("prod", "https://prod.test:6443"), "staging.yaml": exported("staging", "https://staging.test:6443")})
    running.wait_ready()
    clusters = running.clusters()
    assert clusters["fleet-system/prod"]["server"] == "https://prod.test:6443"
    assert clusters["fleet-system/staging"]["server"] == "https://staging.test:6443"


def test_an_edit_that_keeps_uid_and_resource_version_is_applied(start_serve: Any, tmp_path: Path) -> None:
    running = start_serve([MINT], {"prod.yaml": exported("prod", "https://old.test:6443")})
    running.wait_ready()
    assert running.clusters()["fleet-system/prod"]["server"] == "https://old.test:6443"
    write_profiles(tmp_path / "profiles", {"prod.yaml": exported("prod", "https://moved.test:6443")})
    running.until(lambda: running.clusters()["fleet-system/prod"]["server"] == "https://moved.test:6443", what="the edited server")
