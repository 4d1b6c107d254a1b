"""The provider config: file formats, validation messages, the KEP flag, process settings."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from cpcreds import ConfigError, ProviderConfig, Settings, load_config, parse_access_provider_flag
from cpcreds.config import parse_duration


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_go_library_json_file_loads_unchanged(tmp_path: Path) -> None:
    # What Go's json.Marshal writes for the reference library's Config: untagged fields of
    # client-go's internal ExecConfig appear capitalised, nil slices as null.
    go_file = {
        "providers": [
            {
                "name": "gkeFleet",
                "execConfig": {
                    "command": "gke-gcloud-auth-plugin",
                    "args": None,
                    "env": None,
                    "apiVersion": "client.authentication.k8s.io/v1beta1",
                    "provideClusterInfo": True,
                    "Config": None,
                    "InteractiveMode": "",
                    "StdinUnavailable": False,
                    "StdinUnavailableMessage": "",
                },
                "profileSourcedCLIArgsPolicy": "Append",
                "profileSourcedEnvVarsPolicy": "Replace",
            },
            {"name": "plain", "execConfig": {"command": "cat", "apiVersion": "client.authentication.k8s.io/v1", "args": ["x"], "env": [{"name": "A", "value": "b"}], "interactiveMode": "IfAvailable"}},
        ]
    }
    path = tmp_path / "providers.json"
    path.write_text(json.dumps(go_file))
    config = load_config(path)
    assert config.names == ["gkeFleet", "plain"]
    gke = config.providers[0]
    assert gke.exec_config.command == "gke-gcloud-auth-plugin"
    assert gke.exec_config.args == () and gke.exec_config.env == ()
    assert gke.exec_config.provide_cluster_info is True
    assert gke.profile_sourced_cli_args_policy == "Append"
    assert gke.profile_sourced_env_vars_policy == "Replace"
    assert config.providers[1].exec_config.interactive_mode == "IfAvailable"
    assert config.providers[1].exec_config.env[0].name == "A"


def test_yaml_file_with_cpcreds_fields_loads(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "providers.yaml",
        """
        providers:
        - name: google
          execConfig: {apiVersion: client.authentication.k8s.io/v1, command: /usr/bin/plugin}
          timeout: 1m30s
        - name: tokens
          type: file
          options: {tokenFile: /var/run/token}
        """,
    )
    config = load_config(path)
    assert config.get("google").timeout == 90.0
    assert config.get("tokens").kind == "file"
    assert config.get("tokens").options == {"tokenFile": "/var/run/token"}
    assert config.get("google").timeout != config.get("tokens").timeout or True
    assert config.get("tokens").timeout == 60.0  # the default bound on one fetch


@pytest.mark.parametrize(("name", "text"), [("empty.json", "{}"), ("empty.yaml", ""), ("none.yaml", "providers: []\n"), ("null.yaml", "providers:\n")])
def test_config_file_without_providers_is_an_error(tmp_path: Path, name: str, text: str) -> None:
    with pytest.raises(ConfigError, match=r"defines no providers") as info:
        load_config(write(tmp_path, name, text))
    assert str(info.value).startswith(str(tmp_path / name) + ": ")


def test_empty_config_from_a_dict_is_allowed_for_building_up_in_python() -> None:
    assert ProviderConfig.from_dict({}).providers == ()


def test_v1_without_interactive_mode_defaults_to_never() -> None:
    config = ProviderConfig.from_dict(
        {"providers": [{"name": "p", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "x"}}]}
    )
    assert config.providers[0].exec_config.interactive_mode == "Never"


def test_relative_command_with_slash_resolves_against_config_folder(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    path = write(
        tmp_path / "conf",
        "p.yaml",
        """
        providers:
        - {name: a, execConfig: {apiVersion: client.authentication.k8s.io/v1, command: ./bin/plugin}}
        - {name: b, execConfig: {apiVersion: client.authentication.k8s.io/v1, command: plugin-on-path}}
        """,
    )
    config = load_config(path)
    assert config.get("a").exec_config.command == str(tmp_path / "conf" / "bin" / "plugin")
    assert config.get("b").exec_config.command == "plugin-on-path"


EXEC = '{apiVersion: client.authentication.k8s.io/v1, command: /bin/plugin}'


@pytest.mark.parametrize(
    ("providers", "entry", "field", "reason"),
    [
        (f"- {{name: a, execConfig: {EXEC}, profileSourcedCLIArgsPolicy: Sometimes}}", '"a" (providers[0])', "profileSourcedCLIArgsPolicy", "must be one of Ignore, Append"),
        (f"- {{name: a, execConfig: {EXEC}, profileSourcedEnvVarsPolicy: Merge}}", '"a"', "profileSourcedEnvVarsPolicy", "must be one of Ignore, AppendIfNotExists, Replace"),
        ("- {name: a, execConfig: {apiVersion: client.authentication.k8s.io/v1alpha1, command: x}}", '"a"', "execConfig.apiVersion", "not supported"),
        ("- {name: a, execConfig: {command: x}}", '"a"', "execConfig.apiVersion", "is required"),
        ("- {name: a, execConfig: {apiVersion: client.authentication.k8s.io/v1}}", '"a"', "execConfig.command", "is required"),
        (f"- {{name: a, execConfig: {EXEC}}}\n- {{name: a, execConfig: {EXEC}}}", '"a" (providers[1])', "name", "duplicate provider name (first at providers[0])"),
        (f"- {{name: a, execConfig: {EXEC}, colour: blue}}", '"a"', "colour", "is not a known field"),
        ("- {name: a, execConfig: {apiVersion: client.authentication.k8s.io/v1, command: x, argz: [1]}}", '"a"', "execConfig.argz", "is not a known field; did you mean 'args'?"),
        ("- {name: a, execConfig: {apiVersion: client.authentication.k8s.io/v1, comand: x}}", '"a"', "execConfig.comand", "did you mean 'command'?"),
        ("- {name: a, execConfig: {apiVersion: client.authentication.k8s.io/v1, command: x, args: --flag}}", '"a"', "execConfig.args", "must be a list, not a string"),
        ("- {name: a, execConfig: {apiVersion: client.authentication.k8s.io/v1, command: x, env: [{name: A, value: 1}]}}", '"a"', "execConfig.env[0].value", "must be a string, not a number"),
        ("- {name: a, type: file, timeot: 1s}", '"a"', "timeot", "did you mean 'timeout'?"),
        ("- {name: a}", '"a"', None, "needs execConfig (an exec plugin) or type"),
        (f"- {{name: a, type: file, execConfig: {EXEC}}}", '"a"', "type", "one or the other"),
        (f"- {{name: a, execConfig: {EXEC}, options: {{x: 1}}}}", '"a"', "options", "only to in-process providers"),
        (f"- {{name: a, execConfig: {EXEC}, timeout: 30}}", '"a"', "timeout", "bare number has no unit"),
        (f"- {{name: a, execConfig: {EXEC}, timeout: soon}}", '"a"', "timeout", "is not a duration"),
        (f"- {{name: a, execConfig: {EXEC}, timeout: 0s}}", '"a"', "timeout", "longer than zero"),
        ("- {name: a, execConfig: {apiVersion: client.authentication.k8s.io/v1, command: x, interactiveMode: Sometimes}}", '"a"', "execConfig.interactiveMode", "must be one of Never, IfAvailable, Always"),
        ("- {name: a, type: file, profileSourcedCLIArgsPolicy: Append}", '"a"', "profileSourcedCLIArgsPolicy", "only to execConfig"),
        ("- name: ''\n  type: file", "providers[0]", "name", "must not be empty"),
        ("- just-a-string", "providers[0]", None, "must be a mapping"),
    ],
)
def test_invalid_entry_error_names_file_entry_and_field(
    tmp_path: Path, providers: str, entry: str, field: str | None, reason: str
) -> None:
    path = tmp_path / "providers.yaml"
    path.write_text("providers:\n" + providers + "\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert message.startswith(str(path) + ": ")
    assert f"provider {entry}" in message
    if field is not None:
        assert f"field {field}" in message
    assert reason in message
    assert "\n" not in message
    for pydantic_wording in ("Input should", "Extra inputs", "type=", "errors.pydantic.dev", "valid tuple"):
        assert pydantic_wording not in message


def test_invalid_yaml_error_names_line(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.yaml", "providers:\n- name: a\n  execConfig: {command: [unclosed\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: not valid YAML: did not find expected ',' or '\]' at line 4$"):
        load_config(path)


def test_invalid_json_error_names_line(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.json", '{"providers": [}')
    with pytest.raises(ConfigError, match=r"bad\.json: not valid JSON: Expecting value \(column 16\) at line 1$"):
        load_config(path)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="nope.yaml: file not found"):
        load_config(tmp_path / "nope.yaml")


def test_unknown_top_level_field_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown top-level field.*'provider'"):
        load_config(write(tmp_path, "p.yaml", "provider: []\n"))


def test_providers_must_be_a_list(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="field providers: must be a list"):
        load_config(write(tmp_path, "p.yaml", "providers: {a: 1}\n"))


def test_access_provider_flag_parses_kep_example() -> None:
    entry = parse_access_provider_flag("google='/usr/bin/gke-gcloud-auth-plugin --flag1 value1 --flag2 value2'")
    assert entry.name == "google"
    assert entry.exec_config.command == "/usr/bin/gke-gcloud-auth-plugin"
    assert entry.exec_config.args == ("--flag1", "value1", "--flag2", "value2")
    assert entry.exec_config.api_version == "client.authentication.k8s.io/v1"
    assert entry.exec_config.interactive_mode == "Never"
    assert entry.exec_config.provide_cluster_info is True  # the plugin gets the profile's cluster
    assert entry.profile_sourced_cli_args_policy == "Ignore"


def test_access_provider_flag_without_quotes_and_with_quoted_arg() -> None:
    entry = parse_access_provider_flag('spire=/opt/spire-plugin -audience "a b"', api_version="client.authentication.k8s.io/v1beta1", timeout=5)
    assert entry.exec_config.args == ("-audience", "a b")
    assert entry.exec_config.api_version == "client.authentication.k8s.io/v1beta1"
    assert entry.timeout == 5


@pytest.mark.parametrize(("spec", "reason"), [("google", "is not NAME="), ("=x", "is not NAME="), ("g=", "no command"), ("g='unclosed", "cannot split")])
def test_access_provider_flag_errors(spec: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason) as info:
        parse_access_provider_flag(spec)
    assert str(info.value).startswith("--clusterprofile-access-provider")


def test_duplicate_names_across_file_and_flags_are_rejected() -> None:
    file_config = ProviderConfig.from_dict({"providers": [{"name": "g", "type": "file", "options": {"tokenFile": "/t"}}]}, source="f.yaml")
    flags = ProviderConfig.from_entries([parse_access_provider_flag("g=/bin/x")], source="--clusterprofile-access-provider")
    with pytest.raises(ConfigError, match="duplicate provider name"):
        file_config.merged_with(flags)


def test_loaded_config_is_not_shared_mutable_state() -> None:
    raw = {"providers": [{"name": "a", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "x", "args": ["1"]}}]}
    config = ProviderConfig.from_dict(raw)
    raw["providers"][0]["execConfig"]["args"].append("2")
    assert config.providers[0].exec_config.args == ("1",)


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30), ("1m30s", 90), ("1.5h", 5400), ("500ms", 0.5), ("2h45m", 9900), ("100us", 1e-4)])
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


def test_one_duration_grammar_callers_keep_their_ranges(tmp_path: Path) -> None:
    """Go's grammar everywhere (0, signs): the provider config refuses <= 0 in its own words,
    and the KEP-2133 reader (which allows 0: do not cache) parses the same strings alike."""
    from cpcreds.images.protocol import parse_response

    for text, seconds in (("0", 0.0), ("-1m", -60.0), ("+5s", 5.0), ("1h0m0s", 3600.0)):
        response = {"apiVersion": "credentialprovider.kubelet.k8s.io/v1", "kind": "CredentialProviderResponse", "cacheKeyType": "Image", "cacheDuration": text}
        assert parse_duration(text) == parse_response(json.dumps(response), response["apiVersion"]).cache_duration == seconds
    for timeout, accepted in (("+5s", True), ("0", False), ("-1m", False)):
        path = tmp_path / "c.yaml"
        path.write_text(f"providers:\n- {{name: a, execConfig: {EXEC}, timeout: {timeout!r}}}\n")
        if accepted:
            assert load_config(path).providers[0].timeout == 5.0
        else:
            with pytest.raises(ConfigError, match="timeout: must be longer than zero"):
                load_config(path)
    with pytest.raises(ConfigError, match="CPCREDS_DEFAULT_TIMEOUT: must be longer than zero"):
        Settings(environ={"CPCREDS_DEFAULT_TIMEOUT": "0"}).default_timeout_seconds


def test_settings_come_from_cpcreds_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CPCREDS_LOG_LEVEL", "DEBUG")
    monkeypatch.setenv("CPCREDS_LOG_FORMAT", "json")
    monkeypatch.setenv("CPCREDS_DEFAULT_TIMEOUT", "15s")
    monkeypatch.setenv("CPCREDS_CONFIG", "/etc/cpcreds/providers.yaml")
    settings = Settings()
    assert settings.log_level == "debug"
    assert settings.log_format == "json"
    assert settings.default_timeout_seconds == 15
    assert str(settings.config) == "/etc/cpcreds/providers.yaml"


def test_bad_setting_is_a_config_error_naming_the_variable_in_our_words(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CPCREDS_LOG_LEVEL", "loud")
    with pytest.raises(ConfigError) as info:
        Settings()
    assert str(info.value) == "CPCREDS_LOG_LEVEL: must be 'debug', 'info', 'warning' or 'error' (got 'loud')"
    assert info.value.__context__ is None


def test_misspelt_top_level_key_gets_a_suggestion(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown top-level field\(s\) 'provider'; did you mean 'providers'\?$"):
        load_config(write(tmp_path, "p.yaml", "provider: []\n"))


def test_config_errors_never_quote_env_values_or_args(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "p.yaml",
        """
        providers:
        - name: a
          execConfig:
            apiVersion: client.authentication.k8s.io/v1
            command: /bin/x
            args: {--password: hunter2}
            env: [{name: TOKEN, value: [hunter3]}]
        """,
    )
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert "hunter2" not in str(info.value) and "hunter3" not in str(info.value)
    assert "field execConfig.args: must be a list, not a mapping" in str(info.value)
    assert info.value.__context__ is None


def test_config_file_that_is_a_directory_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory, not a file$"):
        load_config(tmp_path)


@pytest.mark.parametrize("kind", ["config", "profiles", "node config"])
def test_unreadable_documents_are_one_error_with_nothing_chained(tmp_path: Path, kind: str) -> None:
    """Every reader words a bad file the same way (one helper) and chains no parser or OS error."""
    from cpcreds import ProfileError
    from cpcreds.images.config import load_credential_provider_config
    from cpcreds.config.profiles import load_profiles

    read = {"config": load_config, "profiles": load_profiles, "node config": lambda path: load_credential_provider_config(path, tmp_path)}[kind]
    error = ProfileError if kind == "profiles" else ConfigError
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\nsecret: hunter2\n")
    for path, expected in ((tmp_path / "missing.yaml", "file not found"), (bad, "line")):
        with pytest.raises(error, match=expected) as info:
            read(path)
        assert "hunter2" not in str(info.value)
        assert info.value.__context__ is None and info.value.__cause__ is None


def test_options_that_json_cannot_hold_are_a_config_error() -> None:
    import datetime

    with pytest.raises(ConfigError, match=r'provider "a" \(providers\[0\]\): field options: when is a date, which JSON cannot hold$'):
        ProviderConfig.from_dict({"providers": [{"name": "a", "type": "file", "options": {"when": datetime.date(2024, 1, 1)}}]})


def test_describe_validation_error_names_the_limit_never_the_value() -> None:
    from pydantic import BaseModel, Field, ValidationError

    from cpcreds.config import describe_validation_error

    class Options(BaseModel):
        prefix: str = Field(default="P_", pattern=r"^[A-Z_]+$", max_length=8)
        scopes: list[str] = Field(default=["x"], min_length=1)
        retries: int = Field(default=1, ge=0, le=5)

    cases = [
        ({"prefix": "hunter2"}, ("prefix", "must match the pattern ^[A-Z_]+$ (got a string of 7 characters)")),
        ({"prefix": "ABCDEFGHIJ"}, ("prefix", "must be at most 8 characters")),
        ({"scopes": []}, ("scopes", "must have at least 1 item(s)")),
        ({"retries": 9}, ("retries", "must be at most 5")),
        ({"retries": -1}, ("retries", "must be at least 0")),
    ]
    for given, expected in cases:
        with pytest.raises(ValidationError) as info:
            Options.model_validate(given)
        assert describe_validation_error(info.value)[0] == expected


# -- any entry is read or refused in words, never quoting a value (issue 29) -------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


_odd_text = st.sampled_from(["", "x", "a b", "a=b", "\x00", "\ud800", "é", "api_version"])
_text_or_odd = st.one_of(st.text(max_size=6), _odd_text, st.integers(-1, 1), st.none(), st.booleans(), st.just([]))


def _optional_keys(fields: dict[str, st.SearchStrategy]) -> st.SearchStrategy:
    return st.fixed_dictionaries({}, optional=fields)


_env_var = st.one_of(_optional_keys({"name": _text_or_odd, "value": _text_or_odd, "other": st.just(1)}), _text_or_odd)
_exec_config = _optional_keys(
    {
        "apiVersion": st.one_of(st.sampled_from(["client.authentication.k8s.io/v1", "v9"]), _text_or_odd),
        "command": _text_or_odd,
        "args": st.one_of(st.lists(_text_or_odd, max_size=3), st.tuples(_text_or_odd), _text_or_odd),
        "env": st.one_of(st.lists(_env_var, max_size=2), _text_or_odd),
        "installHint": _text_or_odd,
        "provideClusterInfo": st.one_of(st.booleans(), st.sampled_from(["yes", "true", 1, 0, None])),
        "interactiveMode": st.one_of(st.sampled_from(["Never", "IfAvailable", "Always", "", "never", None]), _text_or_odd),
        "stdinUnavailable": st.one_of(st.booleans(), st.sampled_from(["no", 1])),
        "InteractiveMode": st.sampled_from(["Always", "", None, 3]),
        "Config": st.sampled_from([None, {}]),
        "StdinUnavailable": st.sampled_from([True, False, 0, "x"]),
        "StdinUnavailableMessage": _text_or_odd,
        "provide_cluster_info": st.booleans(),
        "unknown": st.just(1),
    }
)
_policy_value = st.one_of(st.sampled_from(["Ignore", "Append", "AppendIfNotExists", "Replace", "", None, "ignore"]), _text_or_odd)
_entry = _optional_keys(
    {
        "name": _text_or_odd,
        "execConfig": st.one_of(_exec_config, _text_or_odd),
        "profileSourcedCLIArgsPolicy": _policy_value,
        "profileSourcedEnvVarsPolicy": _policy_value,
        "timeout": st.one_of(st.sampled_from(["30s", "0s", "25h", "1m30s", "1.5h", "x", 30, 1.5, True]), _text_or_odd),
        "type": _text_or_odd,
        "options": st.one_of(st.dictionaries(st.one_of(st.text(max_size=3), st.integers(0, 2), _odd_text), st.integers(), max_size=2), _text_or_odd),
        "failover": st.one_of(st.booleans(), st.sampled_from(["true", 1, None])),
        "exec_config": st.none(),
        "typo": st.just(1),
    }
)
_word = st.text(st.characters(codec="utf-8", exclude_characters="\x00="), min_size=1, max_size=6)
_good_exec_config = _optional_keys(
    {
        "apiVersion": st.sampled_from(["client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"]),
        "command": _word,
        "args": st.lists(_word, max_size=3),
        "env": st.lists(st.fixed_dictionaries({"name": _word, "value": _word}), max_size=2),
        "installHint": _word,
        "provideClusterInfo": st.booleans(),
        "interactiveMode": st.sampled_from(["Never", "IfAvailable", "Always"]),
        "stdinUnavailable": st.booleans(),
    }
)
_good_entry = st.fixed_dictionaries(
    {"name": _word},
    optional={
        "execConfig": _good_exec_config,
        "profileSourcedCLIArgsPolicy": st.sampled_from(["Ignore", "Append", ""]),
        "profileSourcedEnvVarsPolicy": st.sampled_from(["Ignore", "AppendIfNotExists", "Replace"]),
        "timeout": st.sampled_from(["30s", "1m30s", "1.5h", "500ms"]),
        "type": _word,
        "options": st.dictionaries(_word, st.integers(), max_size=2),
        "failover": st.booleans(),
    },
)


@st.composite
def _entries(draw: st.DrawFn) -> dict:
    """Well-formed entries, some with one field made odd, and odd ones throughout."""
    entry = draw(st.one_of(_good_entry, _good_entry, _entry))
    if draw(st.booleans()):
        odd = draw(_entry)
        entry.update(dict(list(odd.items())[:1]))
    return entry


_sha = st.sampled_from(["a" * 64, "A" * 64, "a" * 64 + "\n", "g" * 64, "", None, 5])
_allowlist_entry = st.one_of(_optional_keys({"command": _text_or_odd, "sha256": _sha, "name": _text_or_odd, "other": st.just(1)}), _text_or_odd)
_policy = _optional_keys(
    {
        "policyType": st.one_of(st.sampled_from(["AllowAll", "DenyAll", "Allowlist", "allowAll"]), _text_or_odd),
        "allowlist": st.one_of(
            st.lists(st.fixed_dictionaries({"command": _word}, optional={"sha256": _sha}), max_size=3),
            st.lists(_allowlist_entry, max_size=3),
            st.none(),
            _text_or_odd,
        ),
        "policy_type": st.just("DenyAll"),
    }
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_entries(), _policy)
def test_any_entry_and_policy_are_read_or_refused_with_one_config_error(raw: dict, policy: dict) -> None:
    try:
        ProviderConfig.from_dict({"providers": [raw], "pluginPolicy": policy})
    except ConfigError as exc:
        assert "\n" not in str(exc) and exc.__cause__ is None and exc.__context__ is None


#: A secret-looking value: a marker no message holds, then anything.
_secret = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30).map(lambda text: "Zq5ecret" + text)
_ENTRY_FIELDS = ["name", "type", "timeout", "profileSourcedCLIArgsPolicy", "profileSourcedEnvVarsPolicy", "failover", "options", "execConfig"]
_EXEC_FIELDS = ["apiVersion", "command", "args", "installHint", "provideClusterInfo", "interactiveMode", "stdinUnavailable", "env", "InteractiveMode", "Config"]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(_ENTRY_FIELDS + [f"execConfig.{name}" for name in _EXEC_FIELDS] + ["env.name", "env.value", "pluginPolicy.policyType", "pluginPolicy.allowlist", "allowlist.command", "allowlist.sha256", "serve", "failover.top"]),
    _secret,
    st.booleans(),
)
def test_no_config_error_contains_the_value_given(where: str, secret: str, as_list: bool) -> None:
    value: object = [secret] if as_list else secret
    entry: dict = {"name": "p", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "/bin/p"}}
    data: dict = {"providers": [entry]}
    field = where.split(".")[-1]
    if where.startswith("execConfig."):
        entry["execConfig"][field] = value
    elif where.startswith("env."):
        entry["execConfig"]["env"] = [{"name": "A", "value": "b", field: value}]
    elif where.startswith("pluginPolicy."):
        data["pluginPolicy"] = {"policyType": "Allowlist", "allowlist": [{"command": "/bin/p"}], field: value}
    elif where.startswith("allowlist."):
        data["pluginPolicy"] = {"policyType": "Allowlist", "allowlist": [{"command": "/bin/p", field: value}]}
    elif where in ("serve", "failover.top"):
        data[field if where == "serve" else "failover"] = value
    elif where in ("type", "options"):
        entry.pop("execConfig")
        entry["type"] = "file"
        entry[where] = value if where == "type" else {"x": value} if as_list else value
    else:
        entry[where] = value
    try:
        ProviderConfig.from_dict(data)
    except ConfigError as exc:
        assert secret not in str(exc)
        assert exc.__cause__ is None and exc.__context__ is None


def test_no_flag_error_contains_the_command_line() -> None:
    with pytest.raises(ConfigError) as info:
        parse_access_provider_flag("p='/bin/plugin Zq5ecret\x00'")
    assert "Zq5ecret" not in str(info.value)


def test_settings_word_a_bad_value_without_pydantic(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("cpcreds_log_format", "XML")  # names in any case, as before
    with pytest.raises(ConfigError) as info:
        Settings()
    assert str(info.value) == "CPCREDS_LOG_FORMAT: must be 'console' or 'json' (got 'xml')"
