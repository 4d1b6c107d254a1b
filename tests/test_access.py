"""KEP-5339 resolution: ClusterProfile + provider config -> AccessPlan."""

from __future__ import annotations

import copy
import logging

import pytest

from cpcreds import ClusterProfile, NoMatchingProvider, ProfileError, resolve
from tests.fakes.builders import access_provider, cluster_profile, config_of, exec_entry

ARGS = {"additional_args": ["--audience", "https://spoke-1"]}
ENVS = {"additional_envs": {"CLIENT_ID": "from-profile", "TENANT_ID": "t-1"}}


def test_first_provider_in_config_order_wins_not_profile_order() -> None:
    config = config_of(exec_entry("google"), exec_entry("spire-agent"))
    profile = cluster_profile("c", access_provider("spire-agent", "https://spire"), access_provider("google", "https://google"))
    plan = resolve(config, profile)
    assert plan.provider == "google"
    assert plan.cluster.server == "https://google"


def test_no_matching_provider_names_profile_offered_and_configured() -> None:
    config = config_of(exec_entry("google"))
    profile = cluster_profile("c", access_provider("kubelogin"), access_provider("spire-agent"))
    with pytest.raises(NoMatchingProvider) as info:
        resolve(config, profile)
    assert str(info.value) == (
        "ClusterProfile fleet-system/c: no configured provider matches; "
        "the profile offers [kubelogin, spire-agent], the config has [google]"
    )


def test_profile_without_access_providers_matches_nothing() -> None:
    with pytest.raises(NoMatchingProvider, match=r"offers \[none\]"):
        resolve(config_of(exec_entry("google")), cluster_profile("c"))


def test_deprecated_credential_providers_are_used_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    profile = cluster_profile("old", credential_providers=[access_provider("google", "https://legacy")])
    with caplog.at_level(logging.WARNING, logger="cpcreds"):
        plan = resolve(config_of(exec_entry("google")), profile)
    assert plan.cluster.server == "https://legacy"
    assert any("deprecated status.credentialProviders" in r.getMessage() and "fleet-system/old" in r.getMessage() for r in caplog.records)


def test_access_providers_win_over_credential_providers_on_a_name_clash() -> None:
    profile = cluster_profile(
        "c", access_provider("google", "https://new"), credential_providers=[access_provider("google", "https://legacy")]
    )
    assert resolve(config_of(exec_entry("google")), profile).cluster.server == "https://new"


def test_exec_extension_becomes_cluster_config_verbatim() -> None:
    extension = {"clusterName": "spoke-1", "nested": {"list": [1, "two", None], "flag": True}}
    profile = cluster_profile("c", access_provider("google", exec_extension=extension))
    plan = resolve(config_of(exec_entry("google", provideClusterInfo=True)), profile)
    assert plan.cluster.config == extension
    assert plan.to_dict()["cluster"]["config"] == extension


def test_cluster_fields_are_carried_with_ca_data_decoded(pki) -> None:
    profile = cluster_profile(
        "c",
        access_provider(
            "google",
            "https://10.0.0.1:6443",
            ca_pem=pki.ca_pem,
            **{"tls-server-name": "spoke.test", "proxy-url": "socks5://proxy:1080", "disable-compression": True},
        ),
    )
    plan = resolve(config_of(exec_entry("google")), profile)
    assert plan.cluster.certificate_authority_data == pki.ca_pem
    assert plan.cluster.tls_server_name == "spoke.test"
    assert plan.cluster.proxy_url == "socks5://proxy:1080"
    assert plan.cluster.disable_compression is True
    wire = plan.to_dict()["cluster"]
    assert set(wire) == {"server", "certificate-authority-data", "tls-server-name", "proxy-url", "disable-compression"}


def test_additional_args_are_ignored_by_default() -> None:
    profile = cluster_profile("c", access_provider("google", **ARGS))
    plan = resolve(config_of(exec_entry("google", "--base")), profile)
    assert plan.exec.args[-1] == "--base"


def test_additional_args_are_appended_after_configured_args_under_append() -> None:
    profile = cluster_profile("c", access_provider("google", **ARGS))
    plan = resolve(config_of(exec_entry("google", "--base", profileSourcedCLIArgsPolicy="Append")), profile)
    assert plan.exec.args[-3:] == ("--base", "--audience", "https://spoke-1")


def test_resolving_twice_does_not_pile_up_args_or_mutate_inputs() -> None:
    config = config_of(exec_entry("google", "--base", profileSourcedCLIArgsPolicy="Append"))
    profile = cluster_profile("c", access_provider("google", **ARGS))
    before = copy.deepcopy(profile)
    first, second = resolve(config, profile), resolve(config, profile)
    assert first == second and first.key == second.key
    assert first.exec.args.count("--audience") == 1
    assert config.providers[0].exec_config.args[-1] == "--base"
    assert profile == before


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("Ignore", (("CLIENT_ID", "configured"),)),
        ("AppendIfNotExists", (("CLIENT_ID", "configured"), ("TENANT_ID", "t-1"))),
        ("Replace", (("CLIENT_ID", "from-profile"), ("TENANT_ID", "t-1"))),
    ],
)
def test_additional_envs_follow_the_env_vars_policy(policy: str, expected: tuple) -> None:
    entry = exec_entry("google", env=[{"name": "CLIENT_ID", "value": "configured"}], profileSourcedEnvVarsPolicy=policy)
    plan = resolve(config_of(entry), cluster_profile("c", access_provider("google", **ENVS)))
    assert plan.exec.env == expected


def test_env_order_is_fixed_whatever_the_map_order() -> None:
    entry = exec_entry("google", profileSourcedEnvVarsPolicy="Replace")
    a = resolve(config_of(entry), cluster_profile("c", access_provider("google", additional_envs={"B": "1", "A": "2"})))
    b = resolve(config_of(entry), cluster_profile("c", access_provider("google", additional_envs={"A": "2", "B": "1"})))
    assert a.exec.env == b.exec.env == (("A", "2"), ("B", "1"))
    assert a == b


@pytest.mark.parametrize(
    ("extension", "policy_field", "message"),
    [
        ({"additional_args": "--not-a-list"}, {"profileSourcedCLIArgsPolicy": "Append"}, "additional-args] must be a list of strings"),
        ({"additional_args": [{"a": 1}]}, {"profileSourcedCLIArgsPolicy": "Append"}, "additional-args][0] must be a string"),
        ({"additional_envs": ["A=1"]}, {"profileSourcedEnvVarsPolicy": "Replace"}, "additional-envs] must be a map of strings"),
        ({"additional_envs": {"A": {"x": 1}}}, {"profileSourcedEnvVarsPolicy": "AppendIfNotExists"}, "entry 'A' must map"),
    ],
)
def test_malformed_reserved_extension_is_a_profile_error_under_a_policy_that_reads_it(
    extension: dict, policy_field: dict, message: str
) -> None:
    profile = cluster_profile("bad", access_provider("google", **extension))
    with pytest.raises(ProfileError, match="ClusterProfile fleet-system/bad: .*" + message.replace("[", r"\[").replace("]", r"\]")):
        resolve(config_of(exec_entry("google", **policy_field)), profile)
    # Under Ignore the extension is never read, so it cannot fail.
    assert resolve(config_of(exec_entry("google")), profile).provider == "google"


def test_scalar_extension_values_become_strings_as_in_go() -> None:
    profile = cluster_profile("c", access_provider("google", additional_args=["--port", 8443, True]))
    plan = resolve(config_of(exec_entry("google", profileSourcedCLIArgsPolicy="Append")), profile)
    assert plan.exec.args[-3:] == ("--port", "8443", "true")


def test_profiles_differing_only_in_cluster_share_a_plan_when_the_plugin_cannot_see_the_cluster() -> None:
    config = config_of(exec_entry("google"))
    a = resolve(config, cluster_profile("a", access_provider("google", "https://a")))
    b = resolve(config, cluster_profile("b", access_provider("google", "https://b")))
    assert a == b and hash(a) == hash(b)
    assert a.cluster.server != b.cluster.server  # adapters still get each profile's own server


def test_profiles_differing_in_cluster_get_their_own_plan_with_provide_cluster_info() -> None:
    config = config_of(exec_entry("google", provideClusterInfo=True))
    a = resolve(config, cluster_profile("a", access_provider("google", "https://a")))
    b = resolve(config, cluster_profile("b", access_provider("google", "https://b")))
    assert a != b


def test_model_and_dict_profiles_resolve_to_the_same_plan() -> None:
    config = config_of(exec_entry("google", provideClusterInfo=True))
    profile = cluster_profile("c", access_provider("google", exec_extension={"clusterName": "c"}))
    assert resolve(config, profile) == resolve(config, ClusterProfile.model_validate(profile))


def test_in_process_provider_plan_carries_type_and_options() -> None:
    config = config_of({"name": "tokens", "type": "file", "options": {"tokenFile": "/var/run/t"}})
    plan = resolve(config, cluster_profile("c", access_provider("tokens")))
    assert plan.exec is None
    assert plan.to_dict() == {
        "provider": "tokens",
        "cluster": {"server": "https://spoke.test:6443"},
        "type": "file",
        "options": {"tokenFile": "/var/run/t"},
    }


@pytest.mark.parametrize(
    ("profile", "message"),
    [
        ({"metadata": {"name": "x"}, "status": {"accessProviders": [{"name": "google"}]}}, "ClusterProfile x: status.accessProviders[name=google].cluster is missing"),
        ({"metadata": {"name": "x"}, "status": {"accessProviders": [{"name": "google", "cluster": {}}]}}, "cluster.server is empty"),
        ({"metadata": {"name": "x"}, "status": {"accessProviders": "google"}}, "ClusterProfile x: field status.accessProviders"),
        ({"metadata": {"name": "x"}, "status": {"accessProviders": [{"name": "google", "cluster": {"server": "s", "certificate-authority-data": "%%%"}}]}}, "certificate-authority-data"),
    ],
)
def test_malformed_profile_is_one_clear_error(profile: dict, message: str) -> None:
    with pytest.raises(ProfileError) as info:
        resolve(config_of(exec_entry("google")), profile)
    assert message in str(info.value)


def test_non_mapping_profile_is_rejected() -> None:
    with pytest.raises(ProfileError, match="expected a ClusterProfile mapping, got list"):
        resolve(config_of(exec_entry("google")), [])  # type: ignore[arg-type]
