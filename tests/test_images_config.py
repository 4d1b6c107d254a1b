"""The kubelet's CredentialProviderConfig, validated as the kubelet validates it, with errors that
name the file, the provider and the field."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpcreds import ConfigError, ImageCredentials
from cpcreds.images.config import TokenAttributes, load_credential_provider_config, parse_credential_provider_config
from tests.fakes.kubelet_plugin import install, provider_entry, write_config

V1 = "credentialprovider.kubelet.k8s.io/v1"


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    for name in ("ecr", "gcr", "acr"):
        install(tmp_path / "bin", name)
    return tmp_path / "bin"


def test_full_config_in_yaml_loads_every_field(tmp_path: Path, bin_dir: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        """\
apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: ecr
  matchImages: ["*.dkr.ecr.*.amazonaws.com", "*.dkr.ecr.*.amazonaws.com.cn"]
  defaultCacheDuration: 12h
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  args: [get-credentials]
  env:
  - {name: AWS_PROFILE, value: nodes}
  tokenAttributes:
    serviceAccountTokenAudience: sts.amazonaws.com
    requireServiceAccount: true
    requiredServiceAccountAnnotationKeys: [eks.amazonaws.com/role-arn]
    optionalServiceAccountAnnotationKeys: [example.com/team]
    cacheType: Token
- name: gcr
  matchImages: [gcr.io, "*.gcr.io", "*.pkg.dev"]
  defaultCacheDuration: 0s
  apiVersion: credentialprovider.kubelet.k8s.io/v1alpha1
"""
    )
    config = load_credential_provider_config(path, bin_dir)
    ecr, gcr = config.providers
    assert ecr.name == "ecr" and ecr.executable == os.path.join(bin_dir, "ecr") and ecr.default_cache_duration == 12 * 3600
    assert ecr.args == ("get-credentials",) and ecr.env == (("AWS_PROFILE", "nodes"),)
    assert ecr.token_attributes == TokenAttributes("sts.amazonaws.com", True, ("eks.amazonaws.com/role-arn",), ("example.com/team",), "Token")
    assert gcr.match_images == ("gcr.io", "*.gcr.io", "*.pkg.dev") and gcr.default_cache_duration == 0 and gcr.token_attributes is None
    assert (config.source, config.bin_dir) == (str(path), str(bin_dir))


@pytest.mark.parametrize("api_version", ["kubelet.config.k8s.io/v1", "kubelet.config.k8s.io/v1beta1", "kubelet.config.k8s.io/v1alpha1"])
def test_every_config_api_version_loads(tmp_path: Path, bin_dir: Path, api_version: str) -> None:
    path = write_config(tmp_path / "c.json", provider_entry("gcr", "gcr.io"), api_version=api_version)
    assert [p.name for p in load_credential_provider_config(path, bin_dir).providers] == ["gcr"]


def _document(*providers: dict[str, Any], **top: Any) -> dict[str, Any]:
    document = {"apiVersion": "kubelet.config.k8s.io/v1", "kind": "CredentialProviderConfig", "providers": list(providers)}
    document.update(top)
    return {k: v for k, v in document.items() if v is not None}


TOKEN = {"serviceAccountTokenAudience": "aud", "requireServiceAccount": True, "cacheType": "ServiceAccount"}

INVALID = [
    # (document, field, words in the message)
    (_document(kind="KubeletConfiguration"), "kind", "expected CredentialProviderConfig"),
    (_document(kind=None), "kind", "missing"),
    (_document(apiVersion="kubelet.config.k8s.io/v2"), "apiVersion", "expected one of"),
    (_document(), "providers", "at least 1 item in providers is required"),
    (_document(providers="gcr"), "providers", "must be a list"),
    (_document(extra=1), "extra", "unknown field"),
    (_document(provider_entry("gcr", "gcr.io", matchImage=["x"])), "providers[0].matchImage", "unknown field"),
    (_document(provider_entry("", "gcr.io")), "providers[0].name", "is required"),
    (_document(provider_entry("a/b", "gcr.io")), "providers[0].name", "cannot contain '/'"),
    (_document(provider_entry("a b", "gcr.io")), "providers[0].name", "cannot contain spaces"),
    (_document(provider_entry(".", "gcr.io")), "providers[0].name", "cannot be '.'"),
    (_document(provider_entry("..", "gcr.io")), "providers[0].name", "cannot be '..'"),
    (_document(provider_entry("gcr", "gcr.io"), provider_entry("gcr", "quay.io")), "providers[1].name", "duplicate provider name"),
    (_document(provider_entry("gcr")), "providers[0].matchImages", "at least 1 item in matchImages is required"),
    (_document(provider_entry("gcr", "")), "providers[0].matchImages[0]", "empty"),
    (_document(provider_entry("gcr", "gcr.io", "gcr .io")), "providers[0].matchImages[1]", "invalid character in the host name"),
    (_document(provider_entry("gcr", "gcr.io:http")), "providers[0].matchImages[0]", "invalid port"),
    (_document(provider_entry("gcr", "r[a-.io")), "providers[0].matchImages[0]", "malformed glob"),
    (_document(provider_entry("gcr", "gcr.io", matchImages="gcr.io")), "providers[0].matchImages", "must be a list"),
    (_document(provider_entry("gcr", "gcr.io", defaultCacheDuration=None)), "providers[0].defaultCacheDuration", "is required"),
    (_document(provider_entry("gcr", "gcr.io", defaultCacheDuration="-1m")), "providers[0].defaultCacheDuration", "greater than or equal to 0"),
    (_document(provider_entry("gcr", "gcr.io", defaultCacheDuration=600)), "providers[0].defaultCacheDuration", "bare number"),
    (_document(provider_entry("gcr", "gcr.io", defaultCacheDuration="10 minutes")), "providers[0].defaultCacheDuration", "not a duration"),
    (_document(provider_entry("gcr", "gcr.io", apiVersion=None)), "providers[0].apiVersion", "is required"),
    (_document(provider_entry("gcr", "gcr.io", apiVersion="client.authentication.k8s.io/v1")), "providers[0].apiVersion", "not supported"),
    (_document(provider_entry("gcr", "gcr.io", args="--x")), "providers[0].args", "must be a list"),
    (_document(provider_entry("gcr", "gcr.io", args=["a\x00b"])), "providers[0].args[0]", "NUL"),
    (_document(provider_entry("gcr", "gcr.io", env=[{"name": "A=B", "value": "x"}])), "providers[0].env[0].name", "without '='"),
    (_document(provider_entry("gcr", "gcr.io", env=[{"value": "x"}])), "providers[0].env[0].name", "non-empty"),
    (_document(provider_entry("gcr", "gcr.io", env=[{"name": "A", "value": 1}])), "providers[0].env[0].value", "must be a string"),
    (_document(provider_entry("gcr", "gcr.io", apiVersion="credentialprovider.kubelet.k8s.io/v1beta1", tokenAttributes=TOKEN)),
     "providers[0].tokenAttributes", f"only supported for {V1}"),
    (_document(provider_entry("gcr", "gcr.io", tokenAttributes={**TOKEN, "serviceAccountTokenAudience": ""})),
     "providers[0].tokenAttributes.serviceAccountTokenAudience", "is required"),
    (_document(provider_entry("gcr", "gcr.io", tokenAttributes={k: v for k, v in TOKEN.items() if k != "requireServiceAccount"})),
     "providers[0].tokenAttributes.requireServiceAccount", "is required"),
    (_document(provider_entry("gcr", "gcr.io", tokenAttributes={**TOKEN, "requireServiceAccount": False,
                                                                "requiredServiceAccountAnnotationKeys": ["a.io/b"]})),
     "providers[0].tokenAttributes.requiredServiceAccountAnnotationKeys", "cannot be false"),
    (_document(provider_entry("gcr", "gcr.io", tokenAttributes={**TOKEN, "requiredServiceAccountAnnotationKeys": ["a.io/b"],
                                                                "optionalServiceAccountAnnotationKeys": ["a.io/b"]})),
     "providers[0].tokenAttributes", "both required and optional"),
    (_document(provider_entry("gcr", "gcr.io", tokenAttributes={**TOKEN, "optionalServiceAccountAnnotationKeys": ["a.io/b", "a.io/b"]})),
     "providers[0].tokenAttributes.optionalServiceAccountAnnotationKeys[1]", "duplicate"),
    (_document(provider_entry("gcr", "gcr.io", tokenAttributes={**TOKEN, "optionalServiceAccountAnnotationKeys": ["-bad-/x"]})),
     "providers[0].tokenAttributes.optionalServiceAccountAnnotationKeys[0]", "not a valid annotation key"),
    (_document(provider_entry("gcr", "gcr.io", tokenAttributes={**TOKEN, "cacheType": ""})),
     "providers[0].tokenAttributes.cacheType", "is required"),
    (_document(provider_entry("gcr", "gcr.io", tokenAttributes={**TOKEN, "cacheType": "Pod"})),
     "providers[0].tokenAttributes.cacheType", "not supported"),
    (_document(provider_entry("gcr", "gcr.io", tokenAttributes={**TOKEN, "audience": "x"})),
     "providers[0].tokenAttributes.audience", "unknown field"),
    # The kubelet's Test_readCredentialProviderConfig: the field exists only in kubelet.config.k8s.io/v1.
    (_document(provider_entry("gcr", "gcr.io", tokenAttributes=TOKEN), apiVersion="kubelet.config.k8s.io/v1beta1"),
     "providers[0].tokenAttributes", "is not a field of kubelet.config.k8s.io/v1beta1"),
    (_document(provider_entry("gcr", "gcr.io", tokenAttributes=TOKEN), apiVersion="kubelet.config.k8s.io/v1alpha1"),
     "providers[0].tokenAttributes", "is not a field of kubelet.config.k8s.io/v1alpha1"),
    (_document({**provider_entry("gcr", "gcr.io"), "tokenAttributes": None}, apiVersion="kubelet.config.k8s.io/v1beta1"),
     "providers[0].tokenAttributes", "exists only in kubelet.config.k8s.io/v1"),
]


@pytest.mark.parametrize("document, field, words", INVALID, ids=[f"{i}-{case[1]}" for i, case in enumerate(INVALID)])
def test_invalid_config_names_file_provider_and_field(tmp_path: Path, bin_dir: Path, document: dict[str, Any], field: str, words: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ConfigError) as caught:
        load_credential_provider_config(path, bin_dir)
    error = caught.value
    assert error.source == str(path) and error.field == field, str(error)
    assert words in str(error) and "\n" not in str(error)
    providers = document.get("providers")
    if isinstance(providers, list) and providers and providers[-1].get("name") not in (None, "", "a/b", "a b", ".", ".."):
        assert error.entry == providers[-1]["name"]


def test_plugin_binary_must_exist_and_be_executable(tmp_path: Path, bin_dir: Path) -> None:
    path = write_config(tmp_path / "c.json", provider_entry("gcr", "gcr.io"), provider_entry("missing", "quay.io"))
    with pytest.raises(ConfigError, match=r"provider missing: field providers\[1\].name: plugin binary executable .*/missing did not exist"):
        load_credential_provider_config(path, bin_dir)
    (bin_dir / "missing").write_text("#!/bin/sh\n")
    with pytest.raises(ConfigError, match="is not executable"):
        load_credential_provider_config(path, bin_dir)
    (bin_dir / "missing").unlink()
    (bin_dir / "missing").mkdir()
    with pytest.raises(ConfigError, match="is not a file"):
        load_credential_provider_config(path, bin_dir)


def test_bin_dir_must_exist(tmp_path: Path, bin_dir: Path) -> None:
    path = write_config(tmp_path / "c.json", provider_entry("gcr", "gcr.io"))
    with pytest.raises(ConfigError, match="plugin binary directory did not exist"):
        ImageCredentials.from_kubelet_config(path, tmp_path / "nowhere")


def test_directory_of_configs_is_read_in_lexicographic_order(tmp_path: Path, bin_dir: Path) -> None:
    folder = tmp_path / "configs"
    folder.mkdir()
    write_config(folder / "20-gcr.yaml", provider_entry("gcr", "gcr.io"))
    write_config(folder / "10-ecr.json", provider_entry("ecr", "*.amazonaws.com"))
    (folder / "README.txt").write_text("not a config")
    assert [p.name for p in load_credential_provider_config(folder, bin_dir).providers] == ["ecr", "gcr"]
    write_config(folder / "30-again.yml", provider_entry("ecr", "quay.io"))
    with pytest.raises(ConfigError, match=r"30-again.yml: provider ecr: .*duplicate provider name \(also in .*10-ecr.json\)"):
        load_credential_provider_config(folder, bin_dir)


def test_empty_directory_and_missing_file_are_errors(tmp_path: Path, bin_dir: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="no configuration files"):
        load_credential_provider_config(tmp_path / "empty", bin_dir)
    with pytest.raises(ConfigError, match="file not found"):
        load_credential_provider_config(tmp_path / "absent.yaml", bin_dir)


@pytest.mark.parametrize(
    "text, words",
    [
        ("", "is empty"),
        ("providers: [", "at line"),
        ("a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(f"a{i}: &a{i} [*a{'' if i == 0 else i - 1}, *a{'' if i == 0 else i - 1}]\n" for i in range(40)), "alias"),
        ("[" * 200 + "]" * 200, "deep"),
        ("x" * (2 * 1024 * 1024), "larger than"),
        ("apiVersion: kubelet.config.k8s.io/v1\napiVersion: kubelet.config.k8s.io/v1\n", "duplicate"),
    ],
    ids=["empty", "syntax", "billion-laughs", "deep", "huge", "duplicate-key"],
)
def test_hostile_documents_are_bounded_config_errors(tmp_path: Path, bin_dir: Path, text: str, words: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=words):
        load_credential_provider_config(path, bin_dir)


_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12) | st.sampled_from(["gcr.io", "*.io", "10m", "0s", V1, "-1s"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(
        ["name", "matchImages", "defaultCacheDuration", "apiVersion", "args", "env", "tokenAttributes", "value", "cacheType",
         "requireServiceAccount", "serviceAccountTokenAudience"]), inner, max_size=5),
    max_leaves=12,
)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_VALUES, max_size=3))
def test_any_providers_list_is_valid_or_a_config_error(providers: list[Any]) -> None:
    document = {"apiVersion": "kubelet.config.k8s.io/v1", "kind": "CredentialProviderConfig", "providers": providers}
    try:
        parse_credential_provider_config(document, source="fuzz.yaml", bin_dir="/nonexistent")
    except ConfigError as exc:
        assert str(exc).startswith("fuzz.yaml: ") and "\n" not in str(exc)


def test_yaml_and_json_spellings_give_the_same_config(tmp_path: Path, bin_dir: Path) -> None:
    document = _document(provider_entry("gcr", "gcr.io", "*.gcr.io", args=["a"], env=[{"name": "X", "value": "y"}]))
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(document))
    (tmp_path / "c.json").write_text(json.dumps(document))
    from_yaml = load_credential_provider_config(tmp_path / "c.yaml", bin_dir).providers
    from_json = load_credential_provider_config(tmp_path / "c.json", bin_dir).providers
    assert [(p.name, p.match_images, p.args, p.env) for p in from_yaml] == [(p.name, p.match_images, p.args, p.env) for p in from_json]
