"""The hub fake speaks the real Kubernetes API: proven with the official client (CoreV1Api,
CustomObjectsApi, kubernetes.watch.Watch) and, where installed, kubectl."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from tests.fakes.apiserver import UNAUTHORIZED_STATUS
from tests.fakes.fixtures import HUB_TOKEN
from tests.fakes.hub import CLUSTER_PROFILES, DEFAULT_USER, GROUP, SECRETS, HubRequest, HubServer, cluster_profile, secret


@pytest.fixture
def api_for(hub: HubServer, tmp_path: Path) -> Iterator[Callable[[str], client.ApiClient]]:
    """ApiClients built from the hub's kubeconfig, as a user would; closed after the test."""
    made: list[client.ApiClient] = []

    def make(token: str) -> client.ApiClient:
        path = hub.write_kubeconfig(tmp_path / f"kubeconfig-{len(made)}", token)
        api = config.new_client_from_config(config_file=str(path), persist_config=False)
        made.append(api)
        return api

    yield make
    for api in made:
        api.close()


@pytest.fixture
def core(api_for: Callable[[str], client.ApiClient]) -> client.CoreV1Api:
    return client.CoreV1Api(api_for(HUB_TOKEN))


@pytest.fixture
def custom(api_for: Callable[[str], client.ApiClient]) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api_for(HUB_TOKEN))


def status_of(error: ApiException) -> dict[str, Any]:
    return json.loads(error.body)


def profile(namespace: str, name: str, **kwargs: Any) -> dict[str, Any]:
    provider = {"name": "secretreader", "cluster": {"server": f"https://{name}.test:6443"}}
    return cluster_profile(namespace, name, [provider], **kwargs)


# -- Secrets: get ---------------------------------------------------------------------------------


def test_a_secret_is_read_with_its_data_base64_encoded(hub: HubServer, core: client.CoreV1Api) -> None:
    stored = hub.create(secret("fleet", "spoke-1", {"token": "t-1"}))

    read = core.read_namespaced_secret("spoke-1", "fleet")

    assert base64.b64decode(read.data["token"]) == b"t-1"
    assert read.metadata.resource_version == stored["metadata"]["resourceVersion"]
    assert read.metadata.uid == stored["metadata"]["uid"]
    assert hub.requests == [HubRequest("GET", "/api/v1/namespaces/fleet/secrets/spoke-1", "", HUB_TOKEN, DEFAULT_USER, 200)]


def test_string_data_is_folded_into_data_as_the_api_server_does(hub: HubServer, core: client.CoreV1Api) -> None:
    hub.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "fleet"}, "stringData": {"token": "plain"}})

    read = core.read_namespaced_secret("s", "fleet")

    assert read.data == {"token": base64.b64encode(b"plain").decode()}
    assert "stringData" not in hub.get(SECRETS, "fleet", "s")  # type: ignore[operator]


def test_a_missing_secret_is_a_404_not_found_status(hub: HubServer, core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as raised:
        core.read_namespaced_secret("absent", "fleet")

    assert raised.value.status == 404
    assert status_of(raised.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'secrets "absent" not found',
        "reason": "NotFound",
        "details": {"name": "absent", "kind": "secrets"},
        "code": 404,
    }


@pytest.mark.parametrize("token", ["wrong-token", None])
def test_a_bad_or_missing_token_is_the_api_servers_401(hub: HubServer, tmp_path: Path, token: str | None) -> None:
    hub.create(secret("fleet", "spoke-1", {"token": "t-1"}))
    configuration = client.Configuration(host=hub.url)
    ca = tmp_path / "ca.crt"
    ca.write_bytes(hub.ca_pem)
    configuration.ssl_ca_cert = str(ca)
    if token is not None:
        configuration.api_key = {"BearerToken": f"Bearer {token}"}
    with client.ApiClient(configuration) as api, pytest.raises(ApiException) as raised:
        client.CoreV1Api(api).read_namespaced_secret("spoke-1", "fleet")

    assert raised.value.status == 401
    assert status_of(raised.value) == UNAUTHORIZED_STATUS
    assert [(r.token, r.user, r.status) for r in hub.requests] == [(token, None, 401)]


def test_a_revoked_token_is_refused_from_its_next_request(hub: HubServer, core: client.CoreV1Api) -> None:
    hub.create(secret("fleet", "spoke-1", {"token": "t-1"}))
    core.read_namespaced_secret("spoke-1", "fleet")
    hub.revoke(HUB_TOKEN)

    with pytest.raises(ApiException) as raised:
        core.read_namespaced_secret("spoke-1", "fleet")
    assert raised.value.status == 401


def test_a_namespace_the_token_may_not_read_is_a_403_worded_as_rbac_words_it(
    hub: HubServer, api_for: Callable[[str], client.ApiClient]
) -> None:
    hub.grant("narrow", user="system:serviceaccount:team-a:reader", namespaces=["team-a"], resources=["secrets"], verbs=["get"])
    hub.create(secret("team-b", "spoke-1", {"token": "t"}))
    core = client.CoreV1Api(api_for("narrow"))

    with pytest.raises(ApiException) as raised:
        core.read_namespaced_secret("spoke-1", "team-b")
    assert raised.value.status == 403
    assert status_of(raised.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'secrets "spoke-1" is forbidden: User "system:serviceaccount:team-a:reader" cannot get resource "secrets" in API group "" in the namespace "team-b"',
        "reason": "Forbidden",
        "details": {"name": "spoke-1", "kind": "secrets"},
        "code": 403,
    }
    # get does not allow list, even in its own namespace; authorization comes before existence.
    with pytest.raises(ApiException) as listing:
        core.list_namespaced_secret("team-a")
    assert status_of(listing.value)["message"] == (
        'secrets is forbidden: User "system:serviceaccount:team-a:reader" cannot list resource "secrets" in API group "" in the namespace "team-a"'
    )
    with pytest.raises(ApiException) as absent:
        core.read_namespaced_secret("absent", "team-a")
    assert absent.value.status == 404


def test_listing_every_namespace_needs_a_grant_for_every_namespace(hub: HubServer, api_for: Callable[[str], client.ApiClient]) -> None:
    hub.grant("one-namespace", namespaces=["fleet"])

    with pytest.raises(ApiException) as raised:
        client.CoreV1Api(api_for("one-namespace")).list_secret_for_all_namespaces()

    assert raised.value.status == 403
    assert status_of(raised.value)["message"].endswith('cannot list resource "secrets" in API group "" at the cluster scope')


# -- Secrets: list ---------------------------------------------------------------------------------


def test_lists_are_per_namespace_or_all_in_etcd_order_with_the_current_resource_version(hub: HubServer, core: client.CoreV1Api) -> None:
    for namespace, name in [("fleet", "b"), ("other", "a"), ("fleet", "a")]:
        hub.create(secret(namespace, name, {"token": name}))

    every = core.list_secret_for_all_namespaces()
    fleet = core.list_namespaced_secret("fleet")

    assert [(s.metadata.namespace, s.metadata.name) for s in every.items] == [("fleet", "a"), ("fleet", "b"), ("other", "a")]
    assert [s.metadata.name for s in fleet.items] == ["a", "b"]
    assert every.metadata.resource_version == fleet.metadata.resource_version == str(hub.resource_version)


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("tier=gold", ["gold"]),
        ("tier==gold", ["gold"]),
        ("tier!=gold", ["plain", "silver"]),
        ("tier", ["gold", "silver"]),
        ("!tier", ["plain"]),
        ("tier in (gold, silver)", ["gold", "silver"]),
        ("tier notin (gold)", ["plain", "silver"]),
        ("tier,region=eu", ["silver"]),
    ],
)
def test_label_selectors_filter_lists(hub: HubServer, core: client.CoreV1Api, selector: str, expected: list[str]) -> None:
    hub.create(secret("fleet", "gold", labels={"tier": "gold"}))
    hub.create(secret("fleet", "silver", labels={"tier": "silver", "region": "eu"}))
    hub.create(secret("fleet", "plain"))

    listed = core.list_namespaced_secret("fleet", label_selector=selector)

    assert [s.metadata.name for s in listed.items] == expected


def test_field_selectors_filter_lists(hub: HubServer, core: client.CoreV1Api) -> None:
    hub.create(secret("fleet", "a"))
    hub.create(secret("other", "a"))
    hub.create(secret("fleet", "b", type="kubernetes.io/service-account-token"))

    by_name = core.list_secret_for_all_namespaces(field_selector="metadata.name=a,metadata.namespace!=other")
    by_type = core.list_namespaced_secret("fleet", field_selector="type=kubernetes.io/service-account-token")

    assert [(s.metadata.namespace, s.metadata.name) for s in by_name.items] == [("fleet", "a")]
    assert [s.metadata.name for s in by_type.items] == ["b"]


@pytest.mark.parametrize(("parameter", "value"), [("label_selector", "a=(b"), ("field_selector", "spec.nodeName=x")])
def test_a_bad_selector_is_a_400_bad_request(core: client.CoreV1Api, parameter: str, value: str) -> None:
    with pytest.raises(ApiException) as raised:
        core.list_namespaced_secret("fleet", **{parameter: value})
    assert raised.value.status == 400
    assert status_of(raised.value)["reason"] == "BadRequest"


def test_limit_and_continue_page_through_a_list(hub: HubServer, core: client.CoreV1Api) -> None:
    for index in range(5):
        hub.create(secret("fleet", f"s{index}"))

    pages, token = [], None
    while True:
        page = core.list_namespaced_secret("fleet", limit=2, _continue=token)
        pages.append([s.metadata.name for s in page.items])
        token = page.metadata._continue
        if not token:
            break

    assert pages == [["s0", "s1"], ["s2", "s3"], ["s4"]]


def test_a_continue_token_from_before_compaction_is_410_expired(hub: HubServer, core: client.CoreV1Api) -> None:
    for index in range(3):
        hub.create(secret("fleet", f"s{index}"))
    first = core.list_namespaced_secret("fleet", limit=1)
    hub.create(secret("fleet", "later"))
    hub.compact()

    with pytest.raises(ApiException) as raised:
        core.list_namespaced_secret("fleet", limit=1, _continue=first.metadata._continue)
    assert raised.value.status == 410
    assert status_of(raised.value)["reason"] == "Expired"


# -- ClusterProfiles -------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["v1alpha1", "v1alpha2"])
def test_a_cluster_profile_is_served_in_either_version(hub: HubServer, custom: client.CustomObjectsApi, version: str) -> None:
    hub.create(profile("fleet", "spoke-1"))

    got = custom.get_namespaced_custom_object(GROUP, version, "fleet", "clusterprofiles", "spoke-1")

    assert got["apiVersion"] == f"{GROUP}/{version}"
    assert got["kind"] == "ClusterProfile"
    assert got["status"]["accessProviders"][0]["name"] == "secretreader"


def test_a_missing_cluster_profile_is_a_404_naming_the_group(custom: client.CustomObjectsApi) -> None:
    with pytest.raises(ApiException) as raised:
        custom.get_namespaced_custom_object(GROUP, "v1alpha1", "fleet", "clusterprofiles", "absent")
    assert raised.value.status == 404
    assert status_of(raised.value)["message"] == f'clusterprofiles.{GROUP} "absent" not found'
    assert status_of(raised.value)["details"] == {"name": "absent", "group": GROUP, "kind": "clusterprofiles"}


def test_cluster_profiles_are_listed_per_namespace_and_across_namespaces(hub: HubServer, custom: client.CustomObjectsApi) -> None:
    hub.create(profile("fleet", "spoke-1", labels={"env": "prod"}))
    hub.create(profile("fleet", "spoke-2"))
    hub.create(profile("other", "spoke-3", version="v1alpha2", labels={"env": "prod"}))

    fleet = custom.list_namespaced_custom_object(GROUP, "v1alpha1", "fleet", "clusterprofiles")
    prod = custom.list_cluster_custom_object(GROUP, "v1alpha2", "clusterprofiles", label_selector="env=prod")

    assert fleet["kind"] == "ClusterProfileList"
    assert [p["metadata"]["name"] for p in fleet["items"]] == ["spoke-1", "spoke-2"]
    assert [(p["apiVersion"], p["metadata"]["name"]) for p in prod["items"]] == [(f"{GROUP}/v1alpha2", "spoke-1"), (f"{GROUP}/v1alpha2", "spoke-3")]
    assert prod["metadata"]["resourceVersion"] == str(hub.resource_version)


def test_an_unserved_version_is_404(custom: client.CustomObjectsApi) -> None:
    with pytest.raises(ApiException) as raised:
        custom.list_namespaced_custom_object(GROUP, "v1beta1", "fleet", "clusterprofiles")
    assert raised.value.status == 404


# -- watch -----------------------------------------------------------------------------------------


def collect(stream: Iterator[dict[str, Any]], count: int, w: watch.Watch) -> list[tuple[str, str, str]]:
    """The first ``count`` events as (type, name, resourceVersion); stops the watch."""
    seen = []
    for event in stream:
        obj = event["raw_object"]
        seen.append((event["type"], obj["metadata"].get("name", ""), obj["metadata"]["resourceVersion"]))
        if len(seen) == count:
            w.stop()
    return seen


def test_list_then_watch_from_its_resource_version_misses_and_repeats_nothing(hub: HubServer, custom: client.CustomObjectsApi) -> None:
    hub.create(profile("fleet", "before"))
    listed = custom.list_namespaced_custom_object(GROUP, "v1alpha1", "fleet", "clusterprofiles")
    added = hub.create(profile("fleet", "spoke-1"))
    changed = hub.update({**added, "spec": {"displayName": "renamed"}})
    hub.create(profile("other", "elsewhere"))  # another namespace: not in this watch
    gone = hub.delete(CLUSTER_PROFILES, "fleet", "spoke-1")

    w = watch.Watch()
    events = collect(
        w.stream(custom.list_namespaced_custom_object, GROUP, "v1alpha1", "fleet", "clusterprofiles", resource_version=listed["metadata"]["resourceVersion"]),
        3,
        w,
    )

    assert events == [
        ("ADDED", "spoke-1", added["metadata"]["resourceVersion"]),
        ("MODIFIED", "spoke-1", changed["metadata"]["resourceVersion"]),
        ("DELETED", "spoke-1", gone["metadata"]["resourceVersion"]),
    ]
    assert changed["metadata"]["generation"] == 2
    assert w.resource_version == gone["metadata"]["resourceVersion"]


def test_a_watch_without_resource_version_starts_with_the_current_objects_then_goes_live(hub: HubServer, core: client.CoreV1Api) -> None:
    hub.create(secret("fleet", "old"))
    w = watch.Watch()
    stream = w.stream(core.list_namespaced_secret, "fleet")
    first = next(stream)
    assert (first["type"], first["object"].metadata.name) == ("ADDED", "old")

    assert hub.wait_for_watchers(1)
    hub.create(secret("fleet", "new"))

    event = next(stream)
    w.stop()
    assert (event["type"], event["object"].metadata.name) == ("ADDED", "new")
    assert isinstance(event["object"], client.V1Secret)


def test_watching_every_namespace_sees_every_namespace(hub: HubServer, custom: client.CustomObjectsApi) -> None:
    start = hub.resource_version
    hub.create(profile("a", "one"))
    hub.create(profile("b", "two", version="v1alpha2"))

    w = watch.Watch()
    events = collect(w.stream(custom.list_cluster_custom_object, GROUP, "v1alpha2", "clusterprofiles", resource_version=str(start)), 2, w)

    assert [(kind, name) for kind, name, _ in events] == [("ADDED", "one"), ("ADDED", "two")]


def test_an_object_changed_into_or_out_of_a_selector_is_added_or_deleted(hub: HubServer, custom: client.CustomObjectsApi) -> None:
    start = hub.resource_version
    plain = hub.create(profile("fleet", "spoke-1"))
    labelled = hub.update({**plain, "metadata": {**plain["metadata"], "labels": {"env": "prod"}}})
    relabelled = hub.update({**labelled, "metadata": {**labelled["metadata"], "labels": {"env": "dev"}}})

    w = watch.Watch()
    events = collect(
        w.stream(custom.list_namespaced_custom_object, GROUP, "v1alpha1", "fleet", "clusterprofiles", resource_version=str(start), label_selector="env=prod"),
        2,
        w,
    )

    assert events == [
        ("ADDED", "spoke-1", labelled["metadata"]["resourceVersion"]),
        ("DELETED", "spoke-1", relabelled["metadata"]["resourceVersion"]),
    ]


def test_bookmarks_are_sent_to_watches_that_allow_them(hub: HubServer, custom: client.CustomObjectsApi) -> None:
    w = watch.Watch()
    stream = w.stream(
        custom.list_namespaced_custom_object, GROUP, "v1alpha1", "fleet", "clusterprofiles", resource_version=str(hub.resource_version), allow_watch_bookmarks=True
    )
    got: list[dict[str, Any]] = []
    reader = threading.Thread(target=lambda: got.append(next(stream)))
    reader.start()
    assert hub.wait_for_watchers(1)
    hub.create(profile("elsewhere", "not-this-namespace"))
    rv = hub.bookmark()
    reader.join(10)
    w.stop()

    assert got[0]["type"] == "BOOKMARK"
    assert got[0]["raw_object"] == {"kind": "ClusterProfile", "apiVersion": f"{GROUP}/v1alpha1", "metadata": {"resourceVersion": str(rv)}}
    assert w.resource_version == str(rv)


def test_a_watch_from_a_compacted_resource_version_gets_a_410_expired_status(hub: HubServer, core: client.CoreV1Api) -> None:
    old = hub.resource_version
    hub.create(secret("fleet", "s"))
    compacted = hub.compact()

    raw = core.list_namespaced_secret("fleet", watch=True, resource_version=str(old), _preload_content=False)
    lines = raw.data.decode().splitlines()
    assert [json.loads(line) for line in lines] == [
        {
            "type": "ERROR",
            "object": {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": f"too old resource version: {old} ({compacted})",
                "reason": "Expired",
                "details": {},
                "code": 410,
            },
        }
    ]
    with pytest.raises(ApiException) as raised:
        list(watch.Watch().stream(core.list_namespaced_secret, "fleet", resource_version=str(old)))
    assert raised.value.status == 410


def test_timeout_seconds_ends_the_stream_cleanly(hub: HubServer, core: client.CoreV1Api) -> None:
    events = list(watch.Watch().stream(core.list_namespaced_secret, "fleet", resource_version=str(hub.resource_version), timeout_seconds=1))
    assert events == []


def test_stopping_the_hub_ends_open_watches(make_hub: Callable[..., HubServer], tmp_path: Path) -> None:
    hub = make_hub(tokens=[HUB_TOKEN])
    api = config.new_client_from_config(config_file=str(hub.write_kubeconfig(tmp_path / "kc", HUB_TOKEN)), persist_config=False)
    finished = threading.Event()

    def watch_forever() -> None:
        # With timeout_seconds the client does not reconnect when the stream ends.
        stream = watch.Watch().stream(client.CoreV1Api(api).list_namespaced_secret, "fleet", resource_version=str(hub.resource_version), timeout_seconds=600)
        list(stream)
        finished.set()

    reader = threading.Thread(target=watch_forever)
    reader.start()
    assert hub.wait_for_watchers(1)
    hub.stop()
    reader.join(10)
    api.close()
    assert finished.is_set()


def test_forbidden_watches_are_403(hub: HubServer, api_for: Callable[[str], client.ApiClient]) -> None:
    hub.grant("no-watch", verbs=["get", "list"])
    with pytest.raises(ApiException) as raised:
        list(watch.Watch().stream(client.CoreV1Api(api_for("no-watch")).list_namespaced_secret, "fleet", timeout_seconds=1))
    assert raised.value.status == 403


# -- connections, faults, kubeconfig ---------------------------------------------------------------


def test_one_client_reuses_one_connection(hub: HubServer, core: client.CoreV1Api) -> None:
    hub.create(secret("fleet", "s", {"token": "t"}))
    for _ in range(20):
        core.read_namespaced_secret("s", "fleet")
    assert hub.connections == 1


@pytest.mark.parametrize("chunked", [False, True])
def test_an_injected_answer_replaces_the_real_one(hub: HubServer, core: client.CoreV1Api, chunked: bool) -> None:
    body = b"not json " * 20_000
    hub.inject_answer("/api/v1/namespaces/fleet/secrets/s", 200, body, content_type="text/plain", chunked=chunked)
    raw = core.read_namespaced_secret("s", "fleet", _preload_content=False)
    assert raw.data == body
    assert ("Content-Length" in raw.headers) is not chunked
    hub.clear_faults()
    with pytest.raises(ApiException):
        core.read_namespaced_secret("s", "fleet")


def test_a_stalled_path_answers_nothing_until_released(hub: HubServer, core: client.CoreV1Api) -> None:
    hub.create(secret("fleet", "s", {"token": "t"}))
    release = hub.stall("/api/v1/namespaces/fleet/secrets/s")
    core.api_client.configuration.retries = False
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        core.api_client.rest_client.pool_manager.request("GET", f"{hub.url}/api/v1/namespaces/fleet/secrets/s", timeout=0.2, retries=False)
    release.set()
    assert core.read_namespaced_secret("s", "fleet").metadata.name == "s"


def test_the_kubeconfig_carries_the_context_namespace(hub: HubServer, tmp_path: Path) -> None:
    path = hub.write_kubeconfig(tmp_path / "kc", HUB_TOKEN, namespace="fleet-system", context="hub-admin")
    contexts, active = config.list_kube_config_contexts(str(path))
    assert active["name"] == "hub-admin"
    assert active["context"]["namespace"] == "fleet-system"
    assert path.stat().st_mode & 0o777 == 0o600


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_reads_secrets_and_cluster_profiles(hub: HubServer, tmp_path: Path) -> None:
    hub.create(secret("fleet", "spoke-1", {"token": "t"}))
    hub.create(profile("fleet", "spoke-1"))
    kubeconfig = hub.write_kubeconfig(tmp_path / "kc", HUB_TOKEN, namespace="fleet")

    def kubectl(*args: str) -> str:
        result = subprocess.run(
            ["kubectl", f"--kubeconfig={kubeconfig}", f"--cache-dir={tmp_path / 'cache'}", *args],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    assert kubectl("get", "secret", "spoke-1", "-o", "jsonpath={.data.token}") == base64.b64encode(b"t").decode()
    assert kubectl("get", f"clusterprofiles.{GROUP}", "-o", "name").split() == [f"clusterprofile.{GROUP}/spoke-1"]
