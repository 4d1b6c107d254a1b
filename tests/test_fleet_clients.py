"""A FleetCluster's clients make real requests to the spoke fake through a 401 rotation: the
official ``kubernetes`` client, ``kubernetes.aio``, ``kubernetes_asyncio``, and ``httpx`` (sync
and async, token and client certificate). The plugin is a real exec subprocess whose first
token the spoke no longer accepts: one 401, one refresh, one retry."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client as kclient
from kubernetes.aio import client as aclient

from cpcreds import Disengaged, Engaged, Fleet, FleetCluster, ProfileFeed
from tests.fakes.builders import access_provider, cluster_profile, exec_entry
from tests.fakes.pki import PKI
from tests.fakes.spoke import DEFAULT_NAMESPACES, SpokeServer
from tests.fleet_harness import make_engine, make_fleet, until

__all__ = ["make_engine", "make_fleet"]  # fixtures

_PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy")


@pytest.fixture(autouse=True)
def _no_proxy_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in _PROXY_VARS:  # a developer's proxy must not sit between the clients and 127.0.0.1
        monkeypatch.delenv(var, raising=False)


def rotating_fleet(make_fleet: Callable[..., Fleet], make_engine: Callable[..., Any], spoke: SpokeServer, tmp_path: Path) -> tuple[Fleet, ProfileFeed, FleetCluster]:
    """A fleet with one engaged cluster on ``spoke`` whose plugin answers t-1, t-2, …; the
    spoke accepts only t-2, so the first request is a 401."""
    spoke.accept_token("t-2")
    engine = make_engine(exec_entry("fleet", "--token", "t", "--token-per-run", "--count-file", str(tmp_path / "runs")))
    profile = cluster_profile("spoke-1", access_provider("fleet", spoke.url, ca_pem=spoke.ca_pem), healthy=True)
    feed = ProfileFeed([profile])
    fleet = make_fleet(engine, feed=feed)
    until(lambda: "fleet-system/spoke-1" in fleet.engaged, what="the engage")
    return fleet, feed, fleet.engaged["fleet-system/spoke-1"]


def seen(spoke: SpokeServer) -> list[tuple[str | None, int]]:
    return [(r.token, r.status) for r in spoke.requests]


def test_the_kubernetes_client_refreshes_after_a_401_and_retries_once(make_fleet, make_engine, spoke: SpokeServer, tmp_path: Path) -> None:
    _, _, cluster = rotating_fleet(make_fleet, make_engine, spoke, tmp_path)
    v1 = kclient.CoreV1Api(cluster.api_client())
    assert [n.metadata.name for n in v1.list_namespace().items] == list(DEFAULT_NAMESPACES)
    v1.list_namespace()
    assert seen(spoke) == [("t-1", 401), ("t-2", 200), ("t-2", 200)]


@pytest.mark.asyncio
async def test_the_kubernetes_aio_client_refreshes_after_a_401_and_is_closed_before_the_disengage(make_fleet, make_engine, spoke: SpokeServer, tmp_path: Path) -> None:
    fleet, feed, cluster = rotating_fleet(make_fleet, make_engine, spoke, tmp_path)
    events = fleet.events()
    assert isinstance(await asyncio.wait_for(anext(events), 5), Engaged)
    api = await cluster.aapi_client()
    listed = await aclient.CoreV1Api(api).list_namespace()
    assert [n.metadata.name for n in listed.items] == list(DEFAULT_NAMESPACES)
    assert seen(spoke) == [("t-1", 401), ("t-2", 200)]
    session = api.rest_client.pool_manager
    assert session is not None and not session.closed
    feed.delete("fleet-system/spoke-1")
    event = await asyncio.wait_for(anext(events), 5)
    assert isinstance(event, Disengaged) and event.reason == "deleted"
    assert session.closed  # closed on this loop, before the event was sent
    await events.aclose()


@pytest.mark.asyncio
async def test_the_kubernetes_asyncio_client_refreshes_after_a_401_and_retries_once(make_fleet, make_engine, spoke: SpokeServer, tmp_path: Path) -> None:
    from kubernetes_asyncio import client as kaclient

    _, _, cluster = rotating_fleet(make_fleet, make_engine, spoke, tmp_path)
    api = await cluster.kubernetes_asyncio_client()
    assert await cluster.kubernetes_asyncio_client() is api
    listed = await kaclient.CoreV1Api(api).list_namespace()
    assert [n.metadata.name for n in listed.items] == list(DEFAULT_NAMESPACES)
    assert seen(spoke) == [("t-1", 401), ("t-2", 200)]
    spoke.revoke_token("t-2")  # rejected, and the refresh (t-3) is rejected too: the 401 surfaces
    with pytest.raises(kaclient.ApiException) as caught:
        await kaclient.CoreV1Api(api).list_namespace()
    assert caught.value.status == 401
    assert seen(spoke)[2:] == [("t-2", 401), ("t-3", 401)]


def test_httpx_auth_refreshes_after_a_401_in_a_sync_client(make_fleet, make_engine, spoke: SpokeServer, tmp_path: Path) -> None:
    _, _, cluster = rotating_fleet(make_fleet, make_engine, spoke, tmp_path)
    with httpx.Client(base_url=spoke.url, auth=cluster.httpx_auth(), verify=cluster.ssl_context()) as http:
        response = http.get("/api/v1/namespaces")
        assert response.status_code == 200 and len(response.json()["items"]) == len(DEFAULT_NAMESPACES)
    assert seen(spoke) == [("t-1", 401), ("t-2", 200)]


@pytest.mark.asyncio
async def test_httpx_auth_refreshes_after_a_401_in_an_async_client(make_fleet, make_engine, spoke: SpokeServer, tmp_path: Path) -> None:
    _, _, cluster = rotating_fleet(make_fleet, make_engine, spoke, tmp_path)
    async with httpx.AsyncClient(base_url=spoke.url, auth=cluster.httpx_auth(), verify=cluster.ssl_context()) as http:
        response = await http.get("/api/v1/namespaces")
        assert response.status_code == 200
    assert seen(spoke) == [("t-1", 401), ("t-2", 200)]


def test_httpx_with_a_client_certificate_through_the_ssl_context(make_fleet, make_engine, spoke: SpokeServer, pki: PKI, tmp_path: Path) -> None:
    cert = pki.issue_client_cert("fleet-a")
    crt, key = tmp_path / "client.crt", tmp_path / "client.key"
    crt.write_text(cert.cert_pem)
    key.write_text(cert.key_pem)
    spoke.accept_client_cn("fleet-a")
    engine = make_engine(exec_entry("fleet", "--no-token", "--cert", str(crt), "--key", str(key)))
    feed = ProfileFeed([cluster_profile("spoke-1", access_provider("fleet", spoke.url, ca_pem=spoke.ca_pem), healthy=True)])
    fleet = make_fleet(engine, feed=feed)
    until(lambda: "fleet-system/spoke-1" in fleet.engaged, what="the engage")
    cluster = fleet.engaged["fleet-system/spoke-1"]
    with httpx.Client(base_url=spoke.url, auth=cluster.httpx_auth(), verify=cluster.ssl_context()) as http:
        assert http.get("/api/v1/namespaces").status_code == 200
    assert [(r.auth, r.client_cn, r.token) for r in spoke.requests] == [("client-cert", "fleet-a", None)]
    assert not list(Path(tmp_path).glob("cpcreds-tls-*"))
