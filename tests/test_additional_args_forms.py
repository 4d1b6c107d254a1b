"""``clusterprofiles.multicluster.x-k8s.io/exec/additional-args`` in both forms: the KEP's list,
and the object ``{args: [...]}`` that the published ClusterProfile CRD (``extension: type:
object``) can store. Both resolve alike on both resolve paths, in v1alpha1 and v1alpha2 profiles;
hostile shapes are ProfileErrors naming the profile and the extension; ``cpcreds validate
--profile`` says which form a profile uses."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpcreds import ADDITIONAL_ARGS_EXTENSION, ClusterProfile, CredentialError, ProfileError, resolve
from cpcreds.config.access import additional_args_form
from tests.fakes.builders import access_provider, cluster_profile, config_of, exec_entry
from tests.test_cli import one_error_line, run_cli

APPEND = config_of(exec_entry("p", "--configured", profileSourcedCLIArgsPolicy="Append"))
IGNORE = config_of(exec_entry("p", "--configured"))
ARGS = ["-audience", "https://onprem.example.dev"]
WHERE = f"status.accessProviders[name=p].cluster.extensions[{ADDITIONAL_ARGS_EXTENSION}]"


def profile(extension: Any, version: str = "v1alpha1") -> dict[str, Any]:
    made = cluster_profile("onprem", access_provider("p", additional_args=extension))
    made["apiVersion"] = f"multicluster.x-k8s.io/{version}"
    return made


def outcome(config: Any, the_profile: Any) -> Any:
    """The plan's key and args, or the error's type and message."""
    try:
        plan = resolve(config, the_profile)
    except CredentialError as exc:
        return type(exc).__name__, str(exc)
    assert plan.exec is not None
    return plan.key, plan.exec.args


@pytest.mark.parametrize("version", ["v1alpha1", "v1alpha2"])
@pytest.mark.parametrize("as_model", [False, True], ids=["dict", "model"])
def test_the_list_and_the_object_form_append_the_same_args(version: str, as_model: bool) -> None:
    plans = []
    for extension in (ARGS, {"args": ARGS}):
        the_profile: Any = profile(extension, version)
        if as_model:
            the_profile = ClusterProfile.model_validate(the_profile)
        plan = resolve(APPEND, the_profile)
        assert plan.exec is not None and plan.exec.args[-3:] == ("--configured", *ARGS)
        plans.append(plan)
    assert plans[0] == plans[1]


@pytest.mark.parametrize("extension", [ARGS, {"args": ARGS}], ids=["list", "object"])
def test_either_form_is_ignored_unless_the_policy_appends(extension: Any) -> None:
    plan = resolve(IGNORE, profile(extension))
    assert plan == resolve(IGNORE, profile(None)) and plan.exec is not None and plan.exec.args[-1] == "--configured"


@pytest.mark.parametrize("extension", [None, [], {}, {"args": None}, {"args": []}], ids=["null", "empty-list", "empty-object", "args-null", "args-empty"])
def test_empty_forms_add_no_args(extension: Any) -> None:
    plan = resolve(APPEND, profile(extension))
    assert plan.exec is not None and plan.exec.args[-1] == "--configured"


@pytest.mark.parametrize(
    ("extension", "problem"),
    [
        ("-audience", f"{WHERE} must be a list of strings, or an object {{args: [...]}}"),
        (7, f"{WHERE} must be a list of strings, or an object {{args: [...]}}"),
        ({"args": "-audience"}, f"{WHERE}.args must be a list of strings"),
        ({"args": {"a": 1}}, f"{WHERE}.args must be a list of strings"),
        ({"args": ["ok", {"x": 1}]}, f"{WHERE}.args[1] must be a string"),
        ({"args": ["ok", None]}, f"{WHERE}.args[1] must be a string"),
        ({"args": ["a\x00b"]}, f"{WHERE}.args[0] contains a NUL character"),
        ({"args": ["x"] * 257}, f"{WHERE}.args has more than 256 items"),
        ({"args": ARGS, "env": {"A": "1"}}, f"{WHERE}: key 'env' is not allowed (the object form holds only args: a list of strings)"),
        ({"Args": ARGS}, f"{WHERE}: key 'Args' is not allowed"),
        ({"args\n": ARGS}, f"{WHERE}: key (a name that is not shown) is not allowed"),
    ],
)
@pytest.mark.parametrize("as_model", [False, True], ids=["dict", "model"])
def test_hostile_shapes_name_the_profile_and_the_extension(extension: Any, problem: str, as_model: bool) -> None:
    the_profile: Any = profile(extension)
    if as_model:
        the_profile = ClusterProfile.model_validate(the_profile)
    with pytest.raises(ProfileError) as info:
        resolve(APPEND, the_profile)
    message = str(info.value)
    assert message.startswith(f"ClusterProfile fleet-system/onprem: {problem}")
    assert "\n" not in message


def test_the_form_is_told_apart() -> None:
    assert [additional_args_form(value) for value in (ARGS, (), {"args": ARGS}, {}, None, "x", 1)] == ["list", "list", "object", "object", None, None, None]


_items = st.lists(st.one_of(st.text(max_size=6), st.integers(-(2**70), 2**70), st.booleans(), st.floats(), st.none(), st.just({"k": 1})), max_size=4)
_objects = st.one_of(
    _items.map(lambda items: {"args": items}),
    st.dictionaries(st.sampled_from(["args", "Args", "env", ""]), st.one_of(_items, st.text(max_size=3), st.none()), max_size=2),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=_items, version=st.sampled_from(["v1alpha1", "v1alpha2"]))
def test_a_list_and_its_object_form_resolve_alike(items: list[Any], version: str) -> None:
    as_list = outcome(APPEND, profile(items, version))
    as_object = outcome(APPEND, profile({"args": items}, version))
    if as_list[0] == "ProfileError":
        # The same problem, one level down (".args").
        assert as_object == (as_list[0], as_list[1].replace(f"{WHERE}", f"{WHERE}.args", 1))
    else:
        assert as_object == as_list


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(extension=st.one_of(_objects, _items), version=st.sampled_from(["v1alpha1", "v1alpha2"]))
def test_the_direct_dict_reading_and_the_validated_model_agree_on_either_form(extension: Any, version: str) -> None:
    the_profile = profile(extension, version)
    before = copy.deepcopy(the_profile)
    direct = outcome(APPEND, the_profile)  # a plain dict: read without pydantic when it can be
    validated = outcome(APPEND, ClusterProfile.model_validate(the_profile))
    assert direct == validated
    assert the_profile == before


# -- cpcreds validate --profile -----------------------------------------------------------------


def write(path: Path, document: Any) -> Path:
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def test_validate_profile_says_which_form_each_profile_uses(tmp_path: Path) -> None:
    config = write(
        tmp_path / "providers.yaml",
        {
            "failover": True,
            "providers": [
                {**exec_entry("spire-agent", profileSourcedCLIArgsPolicy="Append")},
                exec_entry("google"),
            ],
        },
    )
    listed = cluster_profile("legacy", access_provider("google", additional_args=["--flag"]))
    stored = cluster_profile(
        "onprem",
        access_provider("spire-agent", additional_args={"args": ARGS}),
        access_provider("google", additional_args=["--flag"]),
    )
    stored["apiVersion"] = "multicluster.x-k8s.io/v1alpha2"
    plain = cluster_profile("plain", access_provider("google"))
    profiles = write(tmp_path / "profiles.yaml", {"apiVersion": "v1", "kind": "List", "items": [listed, stored, plain]})
    result = run_cli("validate", "--config", config, "--profile", profiles, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"{config}: 2 provider(s), valid"
    assert lines[3:] == [
        f"{profiles}: 3 ClusterProfile(s), valid",
        "  fleet-system/legacy: uses google",
        "    google: additional-args: list form (KEP-5339; not storable under the published ClusterProfile CRD, whose extension is an object); "
        "1 arg(s), ignored (profileSourcedCLIArgsPolicy: Ignore)",
        "  fleet-system/onprem: uses spire-agent (failover: then google)",
        "    spire-agent: additional-args: object form {args: [...]} (storable under the published ClusterProfile CRD); "
        "2 arg(s), appended (profileSourcedCLIArgsPolicy: Append)",
        "    google: additional-args: list form (KEP-5339; not storable under the published ClusterProfile CRD, whose extension is an object); "
        "1 arg(s), ignored (profileSourcedCLIArgsPolicy: Ignore)",
        "  fleet-system/plain: uses google",
    ]
    assert result.stderr == ""


def test_validate_profile_fails_in_one_line_on_a_hostile_extension_even_when_ignored(tmp_path: Path) -> None:
    config = write(tmp_path / "providers.yaml", {"providers": [exec_entry("p")]})
    profiles = write(tmp_path / "profile.yaml", profile({"args": "-audience"}))
    line = one_error_line(run_cli("validate", "--config", config, "--profile", profiles, cwd=tmp_path))
    assert line.endswith(f"ClusterProfile fleet-system/onprem: {WHERE}.args must be a list of strings")


def test_validate_without_profile_prints_what_it_printed_before(tmp_path: Path) -> None:
    config = write(tmp_path / "providers.yaml", {"providers": [exec_entry("p")]})
    result = run_cli("validate", "--config", config, cwd=tmp_path)
    assert result.returncode == 0 and len(result.stdout.splitlines()) == 2
