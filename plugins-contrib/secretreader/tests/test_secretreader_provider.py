"""secretreader in-process: through CredentialEngine.get_credential(profile) with a real registry,
against the hub fake over real TLS, as KEP-5339's Secret Reader and the Go plugin behave."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

pytest.importorskip("cpcreds_secretreader", reason="install plugins-contrib/secretreader")

from cpcreds import AccessPlan, ConfigError, CredentialEngine, ProviderError, ProviderRegistry, resolve  # noqa: E402
from cpcreds_secretreader.hub import HUB_CLIENTS  # noqa: E402
from cpcreds_secretreader.provider import SecretReaderProvider  # noqa: E402
from secretreader_helpers import FLEET, cluster, entry, profile  # noqa: E402
from tests.fakes.builders import config_of  # noqa: E402
from tests.fakes.fixtures import HUB_TOKEN  # noqa: E402
from tests.fakes.hub import HubServer, secret  # noqa: E402

Engine = Callable[..., CredentialEngine]


def jwt(claims: dict[str, object]) -> str:
    def segment(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{segment({'alg': 'RS256', 'kid': 'k'})}.{segment(claims)}.c2lnbmF0dXJl"


# -- reading the token ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["v1alpha1", "v1alpha2"])
def test_the_token_is_data_token_of_the_secret_named_after_the_cluster(hub: HubServer, kubeconfig: Path, make_engine: Engine, version: str) -> None:
    hub.create(secret(FLEET, "spoke-1", {"token": "t-spoke-1"}))
    engine = make_engine(entry({"kubeconfig": str(kubeconfig)}))

    credential = engine.get_credential(cluster("spoke-1", version=version))

    assert credential.token == "t-spoke-1"
    assert credential.expiration_timestamp is None  # a static token: kept until a spoke refuses it
    assert [(r.path, r.status) for r in hub.requests] == [(f"/api/v1/namespaces/{FLEET}/secrets/spoke-1", 200)]


def test_a_jwt_exp_is_the_credentials_expiry(hub: HubServer, kubeconfig: Path, make_engine: Engine) -> None:
    exp = int((datetime.now(timezone.utc) + timedelta(hours=1)).timestamp())
    token = jwt({"iss": "kubernetes/serviceaccount", "sub": "system:serviceaccount:ocm:fleet", "exp": exp})
    hub.create(secret(FLEET, "spoke-1", {"token": token}))

    credential = make_engine(entry({"kubeconfig": str(kubeconfig)})).get_credential(cluster("spoke-1"))

    assert credential.token == token
    assert credential.expiration_timestamp == datetime.fromtimestamp(exp, timezone.utc)


def test_an_expired_jwt_is_an_error_naming_the_secret(hub: HubServer, kubeconfig: Path, make_engine: Engine) -> None:
    hub.create(secret(FLEET, "spoke-1", {"token": jwt({"exp": 1_600_000_000})}))

    with pytest.raises(ProviderError) as raised:
        make_engine(entry({"kubeconfig": str(kubeconfig)})).get_credential(cluster("spoke-1"))

    assert str(raised.value) == (
        f"provider secretreader: Secret {FLEET}/spoke-1 data.token holds a token that expired at 2020-09-13T12:26:40Z"
    )


def test_the_file_ending_newline_kubectl_keeps_is_not_part_of_the_token(hub: HubServer, kubeconfig: Path, make_engine: Engine) -> None:
    hub.create(secret(FLEET, "spoke-1", {"token": "t-spoke-1\n"}))
    assert make_engine(entry({"kubeconfig": str(kubeconfig)})).get_credential(cluster("spoke-1")).token == "t-spoke-1"


def test_the_key_option_picks_another_data_key(hub: HubServer, kubeconfig: Path, make_engine: Engine) -> None:
    hub.create(secret(FLEET, "spoke-1", {"token": "not-this", "bearer": "this"}))
    engine = make_engine(entry({"kubeconfig": str(kubeconfig), "key": "bearer"}))
    assert engine.get_credential(cluster("spoke-1")).token == "this"


def test_open_cluster_management_managed_serviceaccount_secrets_are_cluster_dash_account(
    hub: HubServer, kubeconfig: Path, make_engine: Engine
) -> None:
    # OCM's ClusterProfileCredSyncer copies each ManagedServiceAccount's token Secret into the
    # ClusterProfiles' namespace as <clusterName>-<account> (what OCM's cp-creds plugin reads).
    token = jwt({"sub": "system:serviceaccount:open-cluster-management-agent-addon:my-account", "exp": 4_102_444_800})
    hub.create(secret(FLEET, "spoke-1-my-account", {"token": token, "ca.crt": "-----BEGIN CERTIFICATE-----"}))
    engine = make_engine(
        entry({"kubeconfig": str(kubeconfig), "secretName": "{clusterName}-my-account"}, name="open-cluster-management")
    )

    credential = engine.get_credential(profile({"clusterName": "spoke-1"}, provider="open-cluster-management"))

    assert credential.token == token
    assert credential.expiration_timestamp == datetime(2100, 1, 1, tzinfo=timezone.utc)


# -- errors, each naming the Secret -----------------------------------------------------------------


def test_a_missing_secret_names_the_secret_and_the_hub(hub: HubServer, kubeconfig: Path, make_engine: Engine) -> None:
    with pytest.raises(ProviderError) as raised:
        make_engine(entry({"kubeconfig": str(kubeconfig)})).get_credential(cluster("spoke-9"))
    assert str(raised.value) == f"provider secretreader: Secret {FLEET}/spoke-9 not found on the hub {hub.url}"


def test_a_missing_key_names_the_secret_the_key_and_the_keys_there_are(hub: HubServer, kubeconfig: Path, make_engine: Engine) -> None:
    hub.create(secret(FLEET, "spoke-1", {"ca.crt": "pem", "namespace": "x"}))
    with pytest.raises(ProviderError) as raised:
        make_engine(entry({"kubeconfig": str(kubeconfig)})).get_credential(cluster("spoke-1"))
    assert str(raised.value) == f"provider secretreader: Secret {FLEET}/spoke-1 has no data.token (its keys: ca.crt, namespace)"


def test_an_empty_value_is_a_missing_key(hub: HubServer, kubeconfig: Path, make_engine: Engine) -> None:
    hub.create(secret(FLEET, "spoke-1", {"token": ""}))
    with pytest.raises(ProviderError, match=f"Secret {FLEET}/spoke-1 has no data.token$"):
        make_engine(entry({"kubeconfig": str(kubeconfig)})).get_credential(cluster("spoke-1"))


def test_a_401_from_the_hub_says_its_credentials_were_refused(hub: HubServer, tmp_path: Path, make_engine: Engine) -> None:
    hub.create(secret(FLEET, "spoke-1", {"token": "t"}))
    wrong = hub.write_kubeconfig(tmp_path / "wrong.kubeconfig", "not-a-hub-token", namespace=FLEET)

    with pytest.raises(ProviderError) as raised:
        make_engine(entry({"kubeconfig": str(wrong)})).get_credential(cluster("spoke-1"))

    assert str(raised.value) == (
        f"provider secretreader: the hub {hub.url} refused its credentials (401 Unauthorized) reading Secret {FLEET}/spoke-1: "
        "check the hub kubeconfig or service account token"
    )
    assert "not-a-hub-token" not in str(raised.value)


def test_a_403_from_the_hub_names_the_secret_and_the_rbac_to_grant(hub: HubServer, tmp_path: Path, make_engine: Engine) -> None:
    hub.grant("team-token", namespaces=["team-a"], resources=["secrets"], verbs=["get"])
    hub.create(secret(FLEET, "spoke-1", {"token": "t"}))
    narrow = hub.write_kubeconfig(tmp_path / "narrow.kubeconfig", "team-token")

    with pytest.raises(ProviderError) as raised:
        make_engine(entry({"kubeconfig": str(narrow), "namespace": FLEET})).get_credential(cluster("spoke-1"))

    assert str(raised.value) == (
        f"provider secretreader: the hub credentials may not read Secret {FLEET}/spoke-1 (403 Forbidden): grant get on secrets in namespace {FLEET}"
    )


@pytest.mark.parametrize(
    ("extension", "message"),
    [
        ({}, "missing clusterName in the client.authentication.k8s.io/exec extension"),
        ({"clusterName": ""}, "missing clusterName in the client.authentication.k8s.io/exec extension"),
        ({"clusterName": 42}, "clusterName in the client.authentication.k8s.io/exec extension is not a string"),
        ({"clusterName": "Spoke_1"}, "clusterName 'Spoke_1' does not make a valid Secret name with secretName {clusterName}"),
        ({"clusterName": "a/../../b"}, "clusterName 'a/../../b' does not make a valid Secret name with secretName {clusterName}"),
        (["spoke-1"], "the client.authentication.k8s.io/exec extension is not an object"),
        (None, "the access provider has no client.authentication.k8s.io/exec extension; secretreader needs its clusterName "
               "(the cluster's name on the hub, which names the Secret)"),
    ],
)
def test_a_profile_without_a_usable_cluster_name_is_an_error_before_any_request(
    hub: HubServer, kubeconfig: Path, make_engine: Engine, extension: object, message: str
) -> None:
    with pytest.raises(ProviderError) as raised:
        make_engine(entry({"kubeconfig": str(kubeconfig)})).get_credential(profile(extension))
    assert str(raised.value) == f"provider secretreader: {message}"
    assert hub.requests == []


# -- options -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "field", "message"),
    [
        ({"secretName": "{cluster}"}, "options.secretName", "the only placeholder is {clusterName}, without format or conversion"),
        ({"secretName": "{clusterName!r}"}, "options.secretName", "the only placeholder is {clusterName}, without format or conversion"),
        ({"secretName": "{clusterName:>9}"}, "options.secretName", "the only placeholder is {clusterName}, without format or conversion"),
        ({"secretName": "{}"}, "options.secretName", "the only placeholder is {clusterName}, without format or conversion"),
        ({"secretName": "{clusterName"}, "options.secretName", "has an unmatched '{' or '}'; the only placeholder is {clusterName}"),
        ({"secretName": "fleet-token"}, "options.secretName", "must contain {clusterName} (every cluster has its own Secret)"),
        ({"secretName": "{clusterName}_Token"}, "options.secretName", "may hold only lower-case letters, digits, '-', '.' and {clusterName}"),
        ({"key": "a/b"}, "options.key", "must be a Secret data key (letters, digits, '-', '_' and '.', at most 253)"),
        ({"namespace": "Fleet"}, "options.namespace", "must be a namespace name (lower-case letters, digits and '-', at most 63)"),
        ({"secretname": "{clusterName}"}, "options.secretname", "is not a known field; did you mean 'secretName'?"),
    ],
)
def test_bad_options_are_config_errors_naming_the_option(make_engine: Engine, options: dict[str, str], field: str, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        make_engine(entry(options))
    assert str(raised.value) == f'test-config.yaml: provider "secretreader": field {field}: {message}'


def test_building_the_provider_touches_nothing(hub: HubServer, kubeconfig: Path, make_engine: Engine) -> None:
    # cpcreds validate builds providers: no hub connection, no kubeconfig read.
    make_engine(entry({"kubeconfig": str(tmp := kubeconfig.with_name("absent"))}))
    assert hub.connections == 0 and not tmp.exists()


# -- namespace and hub credentials ------------------------------------------------------------------


def test_the_namespace_option_wins_over_the_kubeconfig_context(hub: HubServer, kubeconfig: Path, make_engine: Engine) -> None:
    hub.create(secret("elsewhere", "spoke-1", {"token": "from-elsewhere"}))
    engine = make_engine(entry({"kubeconfig": str(kubeconfig), "namespace": "elsewhere"}))
    assert engine.get_credential(cluster("spoke-1")).token == "from-elsewhere"


def test_the_namespace_falls_back_to_pod_namespace_then_the_service_account_file_then_default(
    hub: HubServer, tmp_path: Path, service_account_dir: Path, pod_registry: ProviderRegistry, make_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_namespace = hub.write_kubeconfig(tmp_path / "plain.kubeconfig", HUB_TOKEN)  # a context without namespace
    for namespace in ("from-pod-env", "from-sa-file", "default"):
        hub.create(secret(namespace, "spoke-1", {"token": namespace}))

    def token() -> str | None:
        return make_engine(entry({"kubeconfig": str(no_namespace)}), registry=pod_registry).get_credential(cluster("spoke-1")).token

    (service_account_dir / "namespace").write_text("from-sa-file")
    monkeypatch.setenv("POD_NAMESPACE", "from-pod-env")
    assert token() == "from-pod-env"
    monkeypatch.delenv("POD_NAMESPACE")
    assert token() == "from-sa-file"
    (service_account_dir / "namespace").unlink()
    assert token() == "default"


def test_the_context_option_picks_a_context_of_the_kubeconfig(hub: HubServer, tmp_path: Path, make_engine: Engine) -> None:
    hub.grant("reader-token", namespaces=["team-b"])
    hub.create(secret("team-b", "spoke-1", {"token": "team-b-token"}))
    both = hub.kubeconfig(HUB_TOKEN, namespace=FLEET)  # current context: admin in fleet-system
    reader = hub.kubeconfig("reader-token", namespace="team-b", context="reader", user="reader")
    both["users"] += reader["users"]
    both["contexts"] += reader["contexts"]
    path = tmp_path / "two-contexts.kubeconfig"
    path.write_text(json.dumps(both))

    engine = make_engine(entry({"kubeconfig": str(path), "context": "reader"}))

    assert engine.get_credential(cluster("spoke-1")).token == "team-b-token"
    assert {r.token for r in hub.requests} == {"reader-token"}


def test_without_options_kubeconfig_is_read_from_the_kubeconfig_variable(
    hub: HubServer, kubeconfig: Path, make_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub.create(secret(FLEET, "spoke-1", {"token": "t"}))
    monkeypatch.setenv("KUBECONFIG", f"{kubeconfig.with_name('absent')}:{kubeconfig}")  # a list, merged
    assert make_engine(entry()).get_credential(cluster("spoke-1")).token == "t"


def test_without_options_or_kubeconfig_the_home_kubeconfig_is_read(hub: HubServer, make_engine: Engine) -> None:
    hub.create(secret(FLEET, "spoke-1", {"token": "t"}))
    home = Path.home() / ".kube"
    home.mkdir()
    hub.write_kubeconfig(home / "config", HUB_TOKEN, namespace=FLEET)
    assert make_engine(entry()).get_credential(cluster("spoke-1")).token == "t"


def test_in_a_pod_the_service_account_is_the_hub_credential(
    hub: HubServer, service_account_dir: Path, pod_registry: ProviderRegistry, make_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub.grant("pod-sa-token", user="system:serviceaccount:fleet-system:controller")
    (service_account_dir / "token").write_text("pod-sa-token")
    (service_account_dir / "ca.crt").write_bytes(hub.ca_pem)
    (service_account_dir / "namespace").write_text("controller-ns")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(hub.port))
    hub.create(secret("controller-ns", "spoke-1", {"token": "t"}))

    assert make_engine(entry(), registry=pod_registry).get_credential(cluster("spoke-1")).token == "t"
    assert [r.user for r in hub.requests] == ["system:serviceaccount:fleet-system:controller"]


def test_no_hub_credentials_at_all_is_one_clear_error(make_engine: Engine) -> None:
    with pytest.raises(ProviderError) as raised:
        make_engine(entry()).get_credential(cluster("spoke-1"))
    assert str(raised.value) == (
        "provider secretreader: no hub kubeconfig: ~/.kube/config does not exist and this is not a pod with a service account "
        "(set the kubeconfig option, or KUBECONFIG)"
    )


def test_a_broken_hub_kubeconfig_is_named_without_its_content(tmp_path: Path, make_engine: Engine) -> None:
    broken = tmp_path / "broken.kubeconfig"
    broken.write_text("users:\n- name: u\n  user: {token: hub-secret-value\n")
    with pytest.raises(ProviderError) as raised:
        make_engine(entry({"kubeconfig": str(broken)})).get_credential(cluster("spoke-1"))
    assert str(raised.value).startswith(f"provider secretreader: cannot load the hub kubeconfig {broken}: ")
    assert "hub-secret-value" not in str(raised.value)


# -- one hub client per process ---------------------------------------------------------------------


def test_many_clusters_are_read_over_one_hub_connection(hub: HubServer, kubeconfig: Path, make_engine: Engine) -> None:
    for index in range(50):
        hub.create(secret(FLEET, f"spoke-{index}", {"token": f"t-{index}"}))
    engine = make_engine(entry({"kubeconfig": str(kubeconfig)}))

    tokens = [engine.get_credential(cluster(f"spoke-{index}")).token for index in range(50)]

    assert tokens == [f"t-{index}" for index in range(50)]
    assert hub.connections == 1


def test_a_keep_alive_connection_the_hub_closed_is_not_used_again(hub: HubServer, kubeconfig: Path, make_engine: Engine) -> None:
    for index in range(2):
        hub.create(secret(FLEET, f"spoke-{index}", {"token": f"t-{index}"}))
    engine = make_engine(entry({"kubeconfig": str(kubeconfig)}))
    assert engine.get_credential(cluster("spoke-0")).token == "t-0"

    hub.drop_connections()  # as an API server closes an idle keep-alive connection

    assert engine.get_credential(cluster("spoke-1")).token == "t-1"
    assert hub.connections == 2


def test_providers_of_one_hub_share_one_client_which_the_last_close_releases(hub: HubServer, kubeconfig: Path, make_engine: Engine) -> None:
    hub.create(secret(FLEET, "spoke-1", {"token": "direct"}))
    hub.create(secret(FLEET, "spoke-1-my-account", {"token": "ocm"}))
    options = {"kubeconfig": str(kubeconfig)}
    first = make_engine(entry(options), entry({**options, "secretName": "{clusterName}-my-account"}, name="open-cluster-management"))
    second = make_engine(entry(options))
    before = len(HUB_CLIENTS)

    assert first.get_credential(cluster("spoke-1")).token == "direct"
    assert first.get_credential(profile({"clusterName": "spoke-1"}, provider="open-cluster-management")).token == "ocm"
    assert second.get_credential(cluster("spoke-1")).token == "direct"
    assert len(HUB_CLIENTS) == before + 1
    assert hub.connections == 1

    first.close()
    assert len(HUB_CLIENTS) == before + 1  # the second engine still uses it
    second.close()
    assert len(HUB_CLIENTS) == before


def test_concurrent_fetches_from_worker_threads_share_the_client(hub: HubServer, kubeconfig: Path) -> None:
    for index in range(64):
        hub.create(secret(FLEET, f"spoke-{index}", {"token": f"t-{index}"}))
    provider = SecretReaderProvider({"kubeconfig": str(kubeconfig)})
    config = config_of(entry({"kubeconfig": str(kubeconfig)}))
    plans = [resolve(config, cluster(f"spoke-{index}")) for index in range(64)]
    results: dict[int, str | None] = {}
    start = threading.Barrier(8)

    def work(offset: int) -> None:
        start.wait()
        for index in range(offset, 64, 8):
            results[index] = provider.get_credential(plans[index]).token

    threads = [threading.Thread(target=work, args=(offset,)) for offset in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    provider.close()

    assert results == {index: f"t-{index}" for index in range(64)}
    assert hub.connections <= 8


def read_then_rotate(hub: HubServer, kubeconfig: Path) -> tuple[SecretReaderProvider, AccessPlan]:
    """A provider that has read spoke-1's Secret once, and a hub that now accepts only
    ``rotated-token``; the provider and the plan."""
    hub.create(secret(FLEET, "spoke-1", {"token": "t"}))
    provider = SecretReaderProvider({"kubeconfig": str(kubeconfig)})
    plan = resolve(config_of(entry({"kubeconfig": str(kubeconfig)})), cluster("spoke-1"))
    assert provider.get_credential(plan).token == "t"
    hub.revoke(HUB_TOKEN)
    hub.grant("rotated-token")
    return provider, plan


def test_a_refused_hub_credential_is_reloaded_on_the_next_fetch(hub: HubServer, kubeconfig: Path) -> None:
    # A kubeconfig mounted from a Secret is rewritten when its token rotates.
    provider, plan = read_then_rotate(hub, kubeconfig)
    with pytest.raises(ProviderError, match="401 Unauthorized"):
        provider.get_credential(plan)

    hub.write_kubeconfig(kubeconfig, "rotated-token", namespace=FLEET)

    assert provider.get_credential(plan).token == "t"
    provider.close()


def test_a_hub_token_file_is_read_again_as_it_rotates(hub: HubServer, tmp_path: Path) -> None:
    # A projected service-account token is replaced on disk; the next request carries the new one,
    # without a 401 first (and a moment without the file keeps the last one read).
    token_file = tmp_path / "hub-token"
    token_file.write_text(HUB_TOKEN + "\n")
    document = hub.kubeconfig(HUB_TOKEN, namespace=FLEET)
    user = document["users"][0]["user"]
    user.pop("token")
    user["tokenFile"] = token_file.name  # relative to the kubeconfig's folder, as client-go reads it
    kubeconfig = tmp_path / "hub.kubeconfig"
    kubeconfig.write_text(json.dumps(document))
    provider, plan = read_then_rotate(hub, kubeconfig)

    token_file.write_text("rotated-token")
    assert provider.get_credential(plan).token == "t"
    token_file.unlink()
    assert provider.get_credential(plan).token == "t"
    provider.close()

    assert [r.token for r in hub.requests] == [HUB_TOKEN, "rotated-token", "rotated-token"]


def test_a_hub_that_does_not_answer_fails_the_fetch_within_its_timeout(hub: HubServer, kubeconfig: Path) -> None:
    hub.create(secret(FLEET, "spoke-1", {"token": "t"}))
    release = hub.stall(f"/api/v1/namespaces/{FLEET}/secrets/spoke-1")
    provider = SecretReaderProvider({"kubeconfig": str(kubeconfig)})
    plan = resolve(config_of(entry({"kubeconfig": str(kubeconfig)}, timeout="300ms")), cluster("spoke-1"))

    started = time.monotonic()
    with pytest.raises(ProviderError) as raised:
        provider.get_credential(plan)
    took = time.monotonic() - started
    release.set()
    provider.close()

    assert str(raised.value) == f"provider secretreader: the hub {hub.url} did not answer within 0.3s reading Secret {FLEET}/spoke-1"
    # It gives up at the fetch's deadline (cpcreds.sdk.deadline), which keeps a share of the
    # timeout for the error to reach the engine before the engine's own timeout.
    from cpcreds.sdk import DEADLINE_MARGIN

    assert (1 - DEADLINE_MARGIN) * 0.3 <= took < 2.0


def test_a_hub_that_is_gone_is_cannot_connect(make_hub: Callable[..., HubServer], tmp_path: Path, make_engine: Engine) -> None:
    gone = make_hub(tokens=[HUB_TOKEN])
    path = gone.write_kubeconfig(tmp_path / "gone.kubeconfig", HUB_TOKEN, namespace=FLEET)
    url = gone.url
    gone.stop()
    with pytest.raises(ProviderError) as raised:
        make_engine(entry({"kubeconfig": str(path)})).get_credential(cluster("spoke-1"))
    assert str(raised.value) == f"provider secretreader: cannot read Secret {FLEET}/spoke-1 from the hub {url}: cannot connect"


def test_a_hub_with_another_ca_is_a_tls_error(hub: HubServer, tmp_path: Path, make_engine: Engine) -> None:
    from tests.fakes.pki import PKI

    config = hub.kubeconfig(HUB_TOKEN, namespace=FLEET)
    config["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(PKI().ca_pem).decode()
    path = tmp_path / "other-ca.kubeconfig"
    path.write_text(json.dumps(config))
    with pytest.raises(ProviderError) as raised:
        make_engine(entry({"kubeconfig": str(path)})).get_credential(cluster("spoke-1"))
    assert str(raised.value) == f"provider secretreader: cannot read Secret {FLEET}/spoke-1 from the hub {hub.url}: TLS handshake failed (check the hub's CA)"
