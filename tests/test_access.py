"""KEP-5339 resolution: ClusterProfile + provider config -> AccessPlan."""

from __future__ import annotations

import base64
import copy
import dataclasses
import json
import logging
import os
import pickle
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpcreds import ClusterProfile, CredentialError, NoMatchingProvider, ProfileError, resolve
from cpcreds.config import access
from cpcreds.config.access import PROFILE_ENV_DENYLIST, AccessPlan, cluster_to_wire, is_denied_env_name, mask_args
from cpcreds.config.wire import ADDITIONAL_ARGS_EXTENSION, ADDITIONAL_ENVS_EXTENSION, EXEC_EXTENSION, ExecCluster
from cpcreds.plan import KEY_ENCODER
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


def test_in_process_plans_of_one_entry_share_the_key_tail_yet_have_the_keys_a_plan_built_anew_has() -> None:
    config = config_of({"name": "tokens", "type": "file", "options": {"tokenFile": "/var/run/t", "n": [1, 2]}, "timeout": "7s"})
    plans = [resolve(config, cluster_profile(name, access_provider("tokens", f"https://{name}.test:6443"))) for name in "abc"]
    for plan in plans:
        built = AccessPlan(provider=plan.provider, kind=plan.kind, cluster=plan.cluster, options=dict(plan.options), timeout=plan.timeout)
        assert plan.key == built.key and plan == built
    assert len({plan.key for plan in plans}) == 3
    other = config_of({"name": "tokens", "type": "file", "options": {"tokenFile": "/var/run/other", "n": [1, 2]}, "timeout": "7s"})
    assert resolve(other, cluster_profile("a", access_provider("tokens", "https://a.test:6443"))).key != plans[0].key


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


# -- profile-sourced environment: the denylist ----------------------------------------------------

DENIED = sorted(PROFILE_ENV_DENYLIST) + ["LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "DYLD_INSERT_LIBRARIES", "PYTHONPATH",
                                         "PYTHONSTARTUP", "PYTHONHOME", "BASH_FUNC_ls%%", "MALLOC_CHECK_", "ld_preload", "Path"]  # fmt: skip


@pytest.mark.parametrize("policy", ["AppendIfNotExists", "Replace"])
@pytest.mark.parametrize("name", DENIED)
def test_profile_may_not_set_a_denied_variable(policy: str, name: str) -> None:
    entry = exec_entry("google", profileSourcedEnvVarsPolicy=policy)
    profile = cluster_profile("c", access_provider("google", additional_envs={name: "/tmp/evil"}))
    if not name.replace("_", "").isalnum():  # BASH_FUNC_ls%% is not even a portable name
        with pytest.raises(ProfileError, match="is not a portable variable name"):
            resolve(config_of(entry), profile)
        return
    with pytest.raises(ProfileError) as info:
        resolve(config_of(entry), profile)
    assert str(info.value).startswith("ClusterProfile fleet-system/c: status.accessProviders[name=google].cluster.extensions[")
    assert f"variable {name} may not be set by a ClusterProfile" in str(info.value)


@pytest.mark.parametrize("name", ["LD_PRELOAD", "PATH", "PYTHONPATH", "BASH_FUNC_x%%", "KUBERNETES_EXEC_INFO", "HOME", "SSL_CERT_FILE"])
def test_denylist_is_public_and_matches_prefixes(name: str) -> None:
    assert is_denied_env_name(name)


@pytest.mark.parametrize("name", ["CLIENT_ID", "TENANT_ID", "AWS_REGION", "LDAP_URL", "PYTH", "MY_PATH", "HOMEDIR"])
def test_ordinary_variables_are_not_denied(name: str) -> None:
    assert not is_denied_env_name(name)


def test_denied_variable_is_not_read_under_ignore() -> None:
    profile = cluster_profile("c", access_provider("google", additional_envs={"LD_PRELOAD": "/tmp/evil.so"}))
    assert resolve(config_of(exec_entry("google")), profile).exec.env == ()


def test_configured_env_may_set_a_denied_variable() -> None:
    # The denylist is about the profile; the admin's own config is trusted.
    entry = exec_entry("google", env=[{"name": "PATH", "value": "/opt/bin"}])
    assert resolve(config_of(entry), cluster_profile("c", access_provider("google"))).exec.env == (("PATH", "/opt/bin"),)


# -- secrets in repr and to_dict -----------------------------------------------------------------

SECRET_ARGS = ["--password=hunter2", "--token", "tok-123", "--client-secret=cs", "--secret=s", "--api-key=ak", "--access-token=at",
               "--verbose", "--password", "pw-2", "--user", "alice"]  # fmt: skip


def secret_plan() -> AccessPlan:
    entry = exec_entry("google", env=[{"name": "CLIENT_SECRET", "value": "env-secret"}, {"name": "MODE", "value": "plain"}])
    entry["execConfig"]["args"] = SECRET_ARGS
    return resolve(config_of(entry), cluster_profile("c", access_provider("google")))


def test_mask_args_masks_secret_flags_in_both_forms() -> None:
    assert mask_args(SECRET_ARGS) == [
        "--password=***", "--token", "***", "--client-secret=***", "--secret=***", "--api-key=***", "--access-token=***",
        "--verbose", "--password", "***", "--user", "alice",
    ]  # fmt: skip


def test_mask_args_does_not_swallow_the_next_flag() -> None:
    assert mask_args(["--token", "--verbose", "x"]) == ["--token", "--verbose", "x"]


def test_repr_of_plan_and_exec_spec_masks_env_values_and_secret_args() -> None:
    plan = secret_plan()
    for text in (repr(plan), repr(plan.exec), str(plan)):
        for secret in ("hunter2", "tok-123", "cs", "ak", "at", "pw-2", "env-secret", "plain"):
            assert f"={secret}'" not in text and f"'{secret}'" not in text
        assert "CLIENT_SECRET=***" in text and "MODE=***" in text
        assert "'--password=***'" in text


def test_to_dict_masks_by_default_and_shows_values_when_asked() -> None:
    plan = secret_plan()
    masked = plan.to_dict()
    assert masked["exec"]["env"] == [{"name": "CLIENT_SECRET", "value": "***"}, {"name": "MODE", "value": "***"}]
    assert "hunter2" not in json.dumps(masked) and "tok-123" not in json.dumps(masked)
    shown = plan.to_dict(show_values=True)
    assert shown["exec"]["env"] == [{"name": "CLIENT_SECRET", "value": "env-secret"}, {"name": "MODE", "value": "plain"}]
    assert shown["exec"]["args"][-len(SECRET_ARGS):] == SECRET_ARGS


def test_masking_does_not_change_the_plan_key() -> None:
    a, b = secret_plan(), secret_plan()
    assert a.key == b.key and "env-secret" in a.key  # the key is the identity, never printed


# -- the plan is a value -------------------------------------------------------------------------


def exec_info_profile() -> dict:
    return cluster_profile(
        "c",
        access_provider("google", exec_extension={"clusterName": "c", "nested": {"list": [1, 2]}}, additional_args=["--a"], additional_envs={"E": "1"}),
    )


def test_mutating_the_profile_after_resolve_changes_nothing_in_the_plan() -> None:
    config = config_of(exec_entry("google", provideClusterInfo=True, profileSourcedCLIArgsPolicy="Append", profileSourcedEnvVarsPolicy="Replace"))
    profile = exec_info_profile()
    plan = resolve(config, profile)
    key, wire = plan.key, json.dumps(cluster_to_wire(plan.cluster))
    cluster = profile["status"]["accessProviders"][0]["cluster"]
    extension = cluster["extensions"][0]["extension"]
    extension["clusterName"] = "changed"
    extension["nested"]["list"].append(3)
    extension["new"] = True
    cluster["extensions"][1]["extension"].append("--evil")
    cluster["extensions"][2]["extension"]["E"] = "2"
    cluster["server"] = "https://elsewhere"
    assert plan.key == key
    assert json.dumps(cluster_to_wire(plan.cluster)) == wire
    assert plan.cluster.config == {"clusterName": "c", "nested": {"list": [1, 2]}}
    assert plan.exec.args[-1] == "--a" and plan.exec.env == (("E", "1"),)
    assert plan == resolve(config, exec_info_profile())


def test_a_provider_cannot_change_the_plan_through_cluster_config() -> None:
    plan = resolve(config_of(exec_entry("google", provideClusterInfo=True)), exec_info_profile())
    key = plan.key
    config = plan.cluster.config
    with pytest.raises(TypeError):
        config["clusterName"] = "x"
    with pytest.raises(TypeError):
        config["nested"]["list"].append(3)
    with pytest.raises(TypeError):
        config.update(a=1)
    with pytest.raises(TypeError):
        del config["nested"]
    assert plan.key == key
    copied = copy.deepcopy(config)  # a provider that wants to change it works on a copy
    copied["nested"]["list"].append(3)
    assert config["nested"]["list"] == [1, 2]


def test_frozen_cluster_config_encodes_like_the_original() -> None:
    extension = {"clusterName": "c", "nested": {"list": [1, "two", None, 1.5, True]}}
    plan = resolve(config_of(exec_entry("google", provideClusterInfo=True)), cluster_profile("c", access_provider("google", exec_extension=extension)))
    assert json.dumps(cluster_to_wire(plan.cluster)["config"]) == json.dumps(extension)
    assert plan.cluster.config == extension
    assert pickle.loads(pickle.dumps(plan.cluster.config)) == extension


def test_in_process_options_are_read_only_in_the_plan() -> None:
    config = config_of({"name": "tokens", "type": "file", "options": {"tokenFile": "/t", "extra": {"a": [1]}}})
    plan = resolve(config, cluster_profile("c", access_provider("tokens")))
    with pytest.raises(TypeError):
        plan.options["extra"]["a"].append(2)
    assert config.providers[0].options == {"tokenFile": "/t", "extra": {"a": [1]}}


# -- profiles without access providers ------------------------------------------------------------


@pytest.mark.parametrize(
    ("profile", "hint"),
    [
        ({"metadata": {"name": "x"}, "spec": {"accessProviders": [{"name": "google"}]}}, "(found spec.accessProviders; it belongs under status)"),
        ({"metadata": {"name": "x"}, "status": {"accessprovider": [{"name": "google"}]}}, "(found status.accessprovider; did you mean status.accessProviders?)"),
        ({"metadata": {"name": "x"}, "status": {"AccessProviders": [{"name": "google"}]}}, "(found status.AccessProviders; did you mean status.accessProviders?)"),
        ({"metadata": {"name": "x"}, "accessProviders": [{"name": "google"}]}, "(found accessProviders at the top level; it belongs under status)"),
        ({"metadata": {"name": "x"}}, "(the profile has no status; the cluster manager fills it in)"),
        ({"metadata": {"name": "x"}, "status": {"conditions": []}}, ""),
    ],
)
def test_profile_without_status_access_providers_says_so(profile: dict, hint: str) -> None:
    with pytest.raises(ProfileError) as info:
        resolve(config_of(exec_entry("google")), profile)
    assert str(info.value) == f"ClusterProfile x: the profile has no status.accessProviders{(' ' + hint) if hint else ''}"


def test_profile_error_has_no_pydantic_wording() -> None:
    with pytest.raises(ProfileError) as info:
        resolve(config_of(exec_entry("google")), {"metadata": {"name": "x"}, "status": {"accessProviders": [{"name": "google", "cluster": {"server": ["s"]}}]}})
    assert str(info.value) == "ClusterProfile x: field status.accessProviders[0].cluster.server: must be a string, not a list"


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (["--signing-key=abc"], ["--signing-key=***"]),
        (["--client-key", "x"], ["--client-key", "***"]),
        (["VAULT_TOKEN=y"], ["***"]),
        (["https://u:p@h.example"], ["***"]),
        (["--cluster", "west", "--verbose"], ["--cluster", "west", "--verbose"]),
    ],
)
def test_mask_args_hides_what_log_redaction_would_hide(args: list[str], shown: list[str]) -> None:
    from cpcreds.config.access import mask_args

    assert mask_args(args) == shown


# -- any profile dict: one route, one answer (issue 29) ------------------------------------------
#
# resolve() validates every profile with the ClusterProfile model and builds its plan: the same
# answer every time, and the profile untouched.


class _Text(str):
    """A str subclass: pydantic takes it as a str."""


def _mostly(good: st.SearchStrategy, *odd: object) -> st.SearchStrategy:
    """``good``, or one in twenty times one of the ``odd`` values."""
    # Not 0 or 19: hypothesis draws the ends of a range far more often than one in twenty times.
    return st.integers(0, 19).flatmap(lambda draw: st.sampled_from(odd) if draw == 7 else good)


_texts = st.one_of(st.text(max_size=6), st.sampled_from(["", "a\x00b", "\ud800", "fleet", "p"]))
_odd_values = (None, 1, 1.5, True, b"x", [], {}, _Text("t"))
_text_field = _mostly(_texts, *_odd_values)
_flag_field = _mostly(st.booleans(), None, 0, 1, "true", 1.0, _Text("x"))
_ca_field = _mostly(
    st.binary(max_size=8).map(lambda data: base64.b64encode(data).decode()), "", "not base64!", "YQ", "é", b"YQ==", None, 3
)
_json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=5)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=8,
)
_extension_names = st.sampled_from([EXEC_EXTENSION, ADDITIONAL_ARGS_EXTENSION, ADDITIONAL_ENVS_EXTENSION, "other"])
_extension_values = st.one_of(
    _json_values,
    st.lists(st.one_of(st.text(max_size=5), st.integers(), st.booleans()), max_size=3),
    st.dictionaries(st.sampled_from(["A", "B", "PATH", "1X", "", "LD_X"]), st.one_of(st.text(max_size=5), st.integers(), st.none()), max_size=3),
    st.just(float("nan")),
)
_extension = _mostly(
    st.fixed_dictionaries({"name": _mostly(_extension_names, None, 1, _Text(EXEC_EXTENSION))}, optional={"extension": _extension_values, "x": _texts}),
    None, "x", [], {"extension": 1},
)
def _rarely_with(base: st.SearchStrategy, key: str, value: st.SearchStrategy) -> st.SearchStrategy:
    """``base`` (a dict), one in twenty times with ``key`` added."""
    return st.tuples(base, st.integers(0, 19), value).map(lambda drawn: {**drawn[0], key: drawn[2]} if drawn[1] == 7 else drawn[0])


_cluster = _rarely_with(
    st.fixed_dictionaries(
        {"server": _mostly(st.sampled_from(["https://a.test", "https://b.test:6443"]), "", *_odd_values)},
        optional={
            "tls-server-name": _text_field,
            "insecure-skip-tls-verify": _flag_field,
            "certificate-authority": _text_field,
            "certificate-authority-data": _ca_field,
            "proxy-url": _text_field,
            "disable-compression": _flag_field,
            "extensions": _mostly(st.lists(_extension, max_size=3), None, (), "x", {}),
            "unknown": _texts,
        },
    ),
    "tls_server_name",
    _texts,
)
_provider = _mostly(
    st.fixed_dictionaries(
        {"name": _mostly(st.sampled_from(["p", "q", "other"]), *_odd_values), "cluster": _mostly(_cluster, None, "x", [])},
        optional={"extra": _texts},
    ),
    None, "p", [],
)
_providers = _mostly(st.lists(_provider, min_size=1, max_size=3), None, (), [], "p", {})
_metadata = _rarely_with(
    st.fixed_dictionaries(
        {},
        optional={
            "name": _text_field, "namespace": _text_field, "uid": _text_field, "resourceVersion": _text_field,
            "generation": _mostly(st.integers(), None, True, "3", 2.0), "labels": _json_values,
        },
    ),
    "resource_version",
    _texts,
)  # fmt: skip
_status = _mostly(
    _rarely_with(
        _rarely_with(st.fixed_dictionaries({"accessProviders": _providers}, optional={"conditions": _json_values}), "access_providers", _providers),
        "credentialProviders",
        st.sampled_from([[], None, (), [{"name": "p"}], "x"]),
    ),
    None, [], {},
)
_profiles = _rarely_with(
    st.fixed_dictionaries(
        {"status": _status},
        optional={
            "apiVersion": _text_field, "kind": _text_field, "metadata": _metadata,
            "spec": _mostly(st.dictionaries(st.text(max_size=4), _json_values, max_size=2), None, [], {1: "x"}, "s"),
        },
    ),
    "api_version",
    _texts,
)  # fmt: skip
_configs = [
    config_of(exec_entry("p")),
    config_of(exec_entry("p", provideClusterInfo=True, installHint="pip install p")),
    config_of(
        exec_entry("q", env=[{"name": "A", "value": "1"}, {"name": "A", "value": "2"}], provideClusterInfo=True),
        exec_entry("p", profileSourcedCLIArgsPolicy="Append", profileSourcedEnvVarsPolicy="AppendIfNotExists"),
    ),
    config_of(exec_entry("p", env=[{"name": "B", "value": "b"}], profileSourcedCLIArgsPolicy="Append", profileSourcedEnvVarsPolicy="Replace")),
    config_of({"name": "p", "type": "file", "options": {"tokenFile": "/t"}}, exec_entry("q")),
]


def _answer(call: Any, *args: Any) -> Any:
    """A plan's whole identity, or the error's type and message."""
    try:
        plan = call(*args)
    except CredentialError as exc:
        return type(exc).__name__, str(exc)
    if plan is None:
        return None
    return plan.key, repr(plan), plan.to_dict(show_values=True), plan.cluster, plan.exec, dict(plan.options), plan.timeout


def key_as_before(plan: AccessPlan) -> str:
    """The plan key as one JSON encoding of the whole identity (how it was first built)."""
    sees_cluster = plan.exec is None or plan.exec.provide_cluster_info
    identity = {
        "provider": plan.provider,
        "kind": plan.kind,
        "timeout": plan.timeout,
        "exec": None if plan.exec is None else {**plan.exec.to_dict(show_values=True), "installHint": plan.exec.install_hint},
        "options": dict(plan.options),
        "cluster": cluster_to_wire(plan.cluster) if sees_cluster else None,
    }
    return json.dumps(identity, sort_keys=True, separators=(",", ":"), default=str)


@settings(max_examples=int(os.environ.get("CPCREDS_HYPOTHESIS_EXAMPLES", "300")), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(profile=_profiles, config=st.sampled_from(_configs))
def test_any_profile_dict_gives_one_plan_or_one_error_and_stays_unchanged(profile: dict, config: Any) -> None:
    before = copy.deepcopy(profile)
    first = _answer(resolve, config, profile)
    assert _answer(resolve, config, copy.deepcopy(profile)) == first
    if len(first) > 2:  # a plan (an error is its type and message)
        assert first[0] == key_as_before(resolve(config, profile))
    assert profile == before


_SECRET = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30).map(lambda text: "Zq5ecret" + text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(["server", "tls-server-name", "insecure-skip-tls-verify", "certificate-authority-data", "proxy-url", "disable-compression", "extensions", "args", "envs", "env-name", "name-list", "generation", "status"]),
    _SECRET,
    st.booleans(),
)
def test_no_profile_error_contains_the_value_given(where: str, secret: str, as_list: bool) -> None:
    value: Any = [secret] if as_list else secret
    provider = access_provider("p")
    cluster = provider["cluster"]
    if where == "args":
        cluster["extensions"] = [{"name": ADDITIONAL_ARGS_EXTENSION, "extension": {"args": [{"x": value}]}}]
    elif where == "envs":
        cluster["extensions"] = [{"name": ADDITIONAL_ENVS_EXTENSION, "extension": {"PATH": value}}]
    elif where == "env-name":
        cluster["extensions"] = [{"name": ADDITIONAL_ENVS_EXTENSION, "extension": {"A": {"v": value}}}]
    elif where == "name-list":
        provider["name"] = [secret]
    elif where in ("generation", "status"):
        pass
    else:
        cluster[where] = value
    profile = cluster_profile("c", provider)
    if where == "generation":
        profile["metadata"]["generation"] = value
    if where == "status":
        profile["status"]["accessProviders"] = value
    try:
        resolve(_configs[3], profile)
    except CredentialError as exc:
        assert secret not in str(exc)
        assert exc.__cause__ is None and exc.__context__ is None


def test_plan_key_is_the_json_of_the_whole_identity() -> None:
    profile = cluster_profile("c", access_provider("p", exec_extension={"z": 1, "a": [None, 1.5]}))
    plans = [resolve(config, profile) for config in _configs[:4]]
    plans.append(resolve(_configs[4], cluster_profile("c", access_provider("p"))))
    plans.append(AccessPlan(provider="p", kind="x", cluster=plans[0].cluster, timeout=5, options={"b": [1], "a": "x"}))
    plans.append(dataclasses.replace(plans[1], timeout=float("inf")))
    for plan in plans:
        assert plan.key == key_as_before(plan)


def field_values(record: Any) -> list[tuple[str, Any]]:
    """Every field of a slotted record, in order (reading one never filled raises)."""
    return [(f.name, getattr(record, f.name)) for f in dataclasses.fields(record)]


def assert_as_validated(cluster: ExecCluster) -> None:
    """A plan's cluster (built in one step) is the ExecCluster its constructor builds, in every way."""
    validated = ExecCluster(**{f.name: getattr(cluster, f.name) for f in dataclasses.fields(ExecCluster)})
    assert type(cluster) is ExecCluster
    assert field_values(cluster) == field_values(validated)  # every slot filled
    assert (cluster, repr(cluster), cluster_to_wire(cluster)) == (validated, repr(validated), cluster_to_wire(validated))
    assert pickle.loads(pickle.dumps(cluster)) == validated


@settings(max_examples=int(os.environ.get("CPCREDS_HYPOTHESIS_EXAMPLES", "150")), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(profile=_profiles, config=st.sampled_from(_configs))
def test_a_resolved_plan_is_the_one_its_validated_fields_build(profile: dict, config: Any) -> None:
    try:
        plan = resolve(config, profile)
    except CredentialError:
        return
    assert_as_validated(plan.cluster)
    rebuilt = AccessPlan(provider=plan.provider, kind=plan.kind, cluster=plan.cluster, exec=plan.exec, options=plan.options, timeout=plan.timeout)
    assert field_values(plan) == field_values(rebuilt)


_flat_values = st.one_of(
    st.text(max_size=5), st.sampled_from(["é", "\ud800", '"\\', "\x00", "<&>"]), st.booleans(), st.none(), st.integers(), st.floats(),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=2), st.integers(), max_size=2), st.builds(_Text, st.text(max_size=3)),
)  # fmt: skip


@given(mapping=st.dictionaries(st.text(max_size=5), _flat_values, max_size=5))
def test_compact_json_writes_what_the_encoder_writes(mapping: dict) -> None:
    for encoder in (json.JSONEncoder(separators=(",", ":")), KEY_ENCODER):
        assert access.compact_json(mapping, encoder) == encoder.encode(mapping)


@given(
    server=st.one_of(st.text(max_size=8), st.sampled_from(["https://c1.test:6443", "é", "\ud800"])),
    config=st.one_of(st.none(), _json_values, st.dictionaries(st.text(max_size=4), st.one_of(st.text(max_size=4), st.sampled_from(["é", "\ud800", '"\\'])), max_size=3)),
    tls_server_name=st.sampled_from(["", "spoke.internal"]),
    ca=st.sampled_from([b"", b"\x00ca"]),
)
def test_a_clusters_json_is_what_the_encoder_writes_of_its_wire_form(server: str, config: Any, tls_server_name: str, ca: bytes) -> None:
    from cpcreds.kep import exec_cluster_of_validated
    from cpcreds.plan import cluster_json

    cluster = exec_cluster_of_validated(server, tls_server_name, False, ca, "", False, config)
    for encoder in (json.JSONEncoder(separators=(",", ":")), KEY_ENCODER):
        assert cluster_json(cluster, encoder) == encoder.encode(cluster_to_wire(cluster))


@settings(max_examples=int(os.environ.get("CPCREDS_HYPOTHESIS_EXAMPLES", "150")), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(profile=_profiles, config=st.sampled_from(_configs), interactive=st.booleans())
def test_exec_info_is_the_request_as_json_dumps_writes_it(profile: dict, config: Any, interactive: bool) -> None:
    from cpcreds.exec.provider import exec_info

    try:
        plan = resolve(config, profile)
    except CredentialError:
        return
    if plan.exec is None:
        return
    for spec in (plan.exec, dataclasses.replace(plan.exec, provide_cluster_info=not plan.exec.provide_cluster_info)):
        request: dict = {"kind": "ExecCredential", "apiVersion": spec.api_version, "spec": {"interactive": interactive}}
        if spec.provide_cluster_info:
            request["spec"]["cluster"] = cluster_to_wire(plan.cluster)
        assert exec_info(spec, plan, interactive=interactive) == json.dumps(request, separators=(",", ":"))


def test_owned_profile_shares_a_flat_exec_extension_and_copies_anything_else() -> None:
    """resolve(..., owned=True): the caller hands over a profile it never changes (cpcreds serve's
    parsed files): a flat exec extension is shared, not copied; the plan's key is the same."""
    config = config_of(exec_entry("fake"))
    flat = {"clusterName": "spoke-1", "port": 6443, "fail": False, "note": None}
    nested = {"clusterName": "spoke-1", "audiences": ["a", "b"]}
    for extension, shared in ((flat, True), (nested, False), ({"ratio": 0.5}, False)):
        profile = cluster_profile("spoke-1", access_provider("fake", exec_extension=extension))
        owned, copied = resolve(config, profile, owned=True), resolve(config, profile)
        assert (owned.cluster.config is extension) is shared
        assert copied.cluster.config is not extension and copied.cluster.config == extension
        assert owned.key == copied.key and owned.cluster.config == copied.cluster.config
    # Whatever is handed over is still checked: a hostile value goes the validating way.
    hostile = cluster_profile("spoke-1", access_provider("fake", exec_extension={"n": float("nan")}))
    with pytest.raises(ProfileError):
        resolve(config, hostile, owned=True)
