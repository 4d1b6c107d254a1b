"""cpcreds serve with the hub source: ClusterProfiles listed and watched on the local hub fake
(the real Kubernetes REST API, through the official client)."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from cpcreds.fleet.hub import HubOptions, HubSource
from cpcreds.fleet.inventory import Change
from cpcreds.serve.settings import ServeSettings
from tests.fakes import mint
from tests.fakes.builders import access_provider, cluster_profile
from tests.fakes.fixtures import HUB_TOKEN
from tests.fakes.hub import CLUSTER_PROFILES

MINT = {"name": "mint", "type": "mint", "options": {"lifetime": 3600}}


def mint_profile(name: str, namespace: str = "fleet-system", **extension: Any) -> dict[str, Any]:
    return cluster_profile(name, access_provider("mint", f"https://{name}.test:6443", exec_extension={"clusterName": name, **extension}), namespace=namespace)


def test_serve_lists_and_watches_the_hubs_clusterprofiles(start_serve: Any, hub: Any, tmp_path: Path) -> None:
    for name in ("hub-a", "hub-b"):
        hub.put(mint_profile(name))
    kubeconfig = hub.write_kubeconfig(tmp_path / "hub.kubeconfig", HUB_TOKEN)
    running = start_serve([MINT], hub_kubeconfig=str(kubeconfig))
    running.wait_ready()
    clusters = running.clusters()
    assert {k: c["state"] for k, c in clusters.items()} == {"fleet-system/hub-a": "ready", "fleet-system/hub-b": "ready"}
    assert clusters["fleet-system/hub-a"]["origin"].startswith("hub (https://127.0.0.1:")
    assert hub.wait_for_watchers(1)
    # The preferred version is the one served (the fake prefers v1alpha2).
    assert any("/multicluster.x-k8s.io/v1alpha2/clusterprofiles" in r.path for r in hub.requests)

    hub.put(mint_profile("hub-c"))  # a watch event: ready within a second
    running.until(lambda: running.clusters().get("fleet-system/hub-c", {}).get("state") == "ready", timeout=1.0, what="the added profile")
    hub.put(mint_profile("hub-a", fail=True))  # changed: re-resolved and refetched
    running.until(lambda: running.clusters()["fleet-system/hub-a"]["state"] == "failing", what="the changed profile")
    hub.delete(CLUSTER_PROFILES, "fleet-system", "hub-b")
    running.until(lambda: "fleet-system/hub-b" not in running.clusters(), what="the deletion")


def test_serve_watches_only_the_namespaces_and_labels_asked_for(start_serve: Any, hub: Any, tmp_path: Path) -> None:
    chosen = mint_profile("in-team", namespace="team-a")
    chosen["metadata"]["labels"] = {"env": "prod"}
    unlabelled = mint_profile("no-label", namespace="team-a")
    elsewhere = mint_profile("other-team", namespace="team-b")
    elsewhere["metadata"]["labels"] = {"env": "prod"}
    for profile in (chosen, unlabelled, elsewhere):
        hub.put(profile)
    kubeconfig = hub.write_kubeconfig(tmp_path / "hub.kubeconfig", HUB_TOKEN)
    running = start_serve([MINT], hub_kubeconfig=str(kubeconfig), namespaces="team-a", label_selector="env=prod")
    running.wait_ready()
    assert list(running.clusters()) == ["team-a/in-team"]


def test_a_forbidden_hub_is_shown_as_a_problem_and_retried(start_serve: Any, hub: Any, tmp_path: Path) -> None:
    hub.grant("weak", namespaces=["elsewhere"])  # may not list ClusterProfiles in all namespaces
    hub.put(mint_profile("unseen"))
    kubeconfig = hub.write_kubeconfig(tmp_path / "hub.kubeconfig", "weak")
    running = start_serve([MINT], hub_kubeconfig=str(kubeconfig))
    problems = running.until(lambda: json.loads(running.get("/v1/clusters")[2])["problems"], what="the problem")
    (message,) = problems.values()
    assert message.startswith("HTTP 403: ") and "forbidden" in message
    hub.grant("weak")  # fixed on the hub: the next retry lists
    running.until(lambda: running.clusters().get("fleet-system/unseen", {}).get("state") == "ready", timeout=15, what="the retry")


def test_the_hub_source_relists_when_its_resource_version_is_gone(hub: Any, tmp_path: Path) -> None:
    for name in ("stays", "goes"):
        hub.put(mint_profile(name))
    kubeconfig = hub.write_kubeconfig(tmp_path / "hub.kubeconfig", HUB_TOKEN)
    source = HubSource(HubOptions(kubeconfig=kubeconfig), watch_seconds=1)
    seen: list[Change] = []
    listed = threading.Event()

    async def collect() -> None:
        task = asyncio.get_running_loop().create_task(source.run(seen.append, listed.set))
        try:
            while not listed.is_set():
                await asyncio.sleep(0.01)
            assert await asyncio.to_thread(hub.wait_for_watchers, 1)
            # Hold the next watch back; meanwhile a profile goes and the history is compacted,
            # so the watch resumes from a resourceVersion that is gone (410) and must relist.
            release = hub.stall("/apis/multicluster.x-k8s.io/v1alpha2/clusterprofiles")
            await asyncio.to_thread(_wait_no_watchers, hub)
            hub.delete(CLUSTER_PROFILES, "fleet-system", "goes")
            hub.compact()
            release.set()
            deadline = asyncio.get_running_loop().time() + 15
            while not any("fleet-system/goes" in change.deletes for change in seen):
                assert asyncio.get_running_loop().time() < deadline, "no relist after 410"
                await asyncio.sleep(0.02)
        finally:
            task.cancel()

    asyncio.run(collect())
    assert set(seen[0].upserts) == {"fleet-system/stays", "fleet-system/goes"}
    lists = [r for r in hub.requests if r.path.endswith("/clusterprofiles") and "watch" not in r.query]
    assert len(lists) == 2  # the first list, and the relist after 410


def _wait_no_watchers(hub: Any) -> None:
    deadline = threading.Event()
    for _ in range(1000):
        if hub.watchers == 0:
            return
        deadline.wait(0.01)
    raise AssertionError("the watch never ended")


@pytest.fixture(autouse=True)
def _fresh_mint_counts() -> None:
    mint.calls.clear()


def test_the_hubs_origin_is_shown_without_the_userinfo_of_its_kubeconfig(start_serve: Any, hub: Any, tmp_path: Path) -> None:
    """Issue 28.2: every cluster's ``origin`` names the hub by its URL, which may hold a user and
    password in the kubeconfig; the API and the page show the URL without them."""
    hub.put(mint_profile("hub-a"))
    document = hub.kubeconfig(HUB_TOKEN)
    password = "Hub-Pa55w0rd-in-the-kubeconfig"
    server = document["clusters"][0]["cluster"]["server"]
    document["clusters"][0]["cluster"]["server"] = server.replace("https://", f"https://hub-user:{password}@")
    kubeconfig = tmp_path / "hub.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(document))
    running = start_serve([MINT], hub_kubeconfig=str(kubeconfig))
    running.wait_ready()
    origin = running.clusters()["fleet-system/hub-a"]["origin"]
    assert origin == f"hub ({server.replace('https://', 'https://***@')})"
    for path in ("/v1/clusters", "/v1/clusters/fleet-system/hub-a", "/", "/metrics"):
        assert password not in running.get(path)[2], path
