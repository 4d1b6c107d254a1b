"""What the command line says when something is wrong, and the output formats.

Run in process through ``cpcreds.cli.main.main`` (stdout/stderr captured): one line, exit 1 for an error
a user, a config or a plugin can cause; one line naming the right ``--help``, exit 2, for a usage
error; never a secret.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from cpcreds.cli.main import main
from cpcreds.cli.parser import COMMANDS, build_parser
from tests.fakes.builders import access_provider, cluster_profile, exec_entry

ERROR_LINE = re.compile(r"^cpcreds: error: \S.*$")
USAGE_LINE = re.compile(r"^cpcreds: usage error: \S.*\(see (?P<help>cpcreds(?: [a-z-]+)?) --help\)$")


@pytest.fixture(autouse=True)
def _clean_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith("CPCREDS_") or name == "KUBERNETES_EXEC_INFO":
            monkeypatch.delenv(name)
    monkeypatch.setenv("CPCREDS_DISABLE_PLUGINS", "*")  # installed plugins must not decide a test
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        if handler not in handlers:  # main() installs a stderr handler; it must not outlive capsys
            root.removeHandler(handler)
    root.setLevel(level)


class Run:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    def line(self, code: int, shape: re.Pattern[str]) -> re.Match[str]:
        """Assert exit ``code``, nothing on stdout and one stderr line of ``shape``."""
        assert self.code == code, (self.out, self.err)
        assert self.out == ""
        lines = self.err.splitlines()
        assert len(lines) == 1, self.err
        match = shape.match(lines[0])
        assert match, lines[0]
        return match


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Any:
    def run(*args: str | os.PathLike[str]) -> Run:
        try:
            code = main([os.fspath(a) for a in args])
        except SystemExit as exc:  # argparse: --help, --version, usage errors
            code = int(exc.code or 0)
        out, err = capsys.readouterr()
        return Run(code, out, err)

    return run


def write_yaml(path: Path, data: Any) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    return write_yaml(tmp_path / "providers.yaml", {"providers": [exec_entry("fake", "--token", "file-token")]})


@pytest.fixture
def profile_file(tmp_path: Path) -> Path:
    return write_yaml(tmp_path / "profile.yaml", cluster_profile("spoke-1", access_provider("fake")))


# -- help and usage errors ---------------------------------------------------------------------


def test_cpcreds_alone_prints_the_help_and_exits_0(cli: Any) -> None:
    run = cli()
    assert run.code == 0 and run.err == ""
    assert run.out.startswith("usage: cpcreds")
    for command in COMMANDS:
        assert command in run.out


def test_unknown_command_suggests_the_closest_one(cli: Any) -> None:
    match = cli("get-credentials").line(2, USAGE_LINE)
    assert match["help"] == "cpcreds"
    assert "unknown command 'get-credentials'; did you mean 'get-credential'?" in match.string


def test_unknown_command_like_no_other_lists_the_commands(cli: Any) -> None:
    match = cli("bogus").line(2, USAGE_LINE)
    assert "unknown command 'bogus'; commands: get-credential, resolve, kubeconfig, validate, plugins, serve, cache, completion" in match.string


def test_missing_option_of_a_command_points_to_that_commands_help(cli: Any, config_file: Path) -> None:
    match = cli("get-credential", "--config", config_file).line(2, USAGE_LINE)
    assert match["help"] == "cpcreds get-credential"
    assert "--profile" in match.string


def test_misspelt_option_points_to_the_commands_help_and_suggests_the_option(cli: Any, profile_file: Path) -> None:
    match = cli("resolve", "--confg", "x.yaml", "--profile", profile_file).line(2, USAGE_LINE)
    assert match["help"] == "cpcreds resolve"
    assert "unrecognized arguments: --confg x.yaml; did you mean '--config'?" in match.string


def test_option_before_the_command_says_where_it_goes(cli: Any) -> None:
    match = cli("--config", "providers.yaml", "get-credential", "--profile", "p.yaml").line(2, USAGE_LINE)
    assert match["help"] == "cpcreds"
    assert "--config is an option of get-credential, resolve, kubeconfig, validate, serve, pin; put it after the command" in match.string


def test_misspelt_top_level_option_suggests_the_option(cli: Any) -> None:
    match = cli("--verison").line(2, USAGE_LINE)
    assert "unrecognized arguments: --verison; did you mean '--version'?" in match.string


def test_invalid_choice_suggests_the_closest_choice(cli: Any, profile_file: Path) -> None:
    match = cli("resolve", "--config", "c.yaml", "--profile", profile_file, "-o", "yml").line(2, USAGE_LINE)
    assert match["help"] == "cpcreds resolve"
    assert "did you mean 'yaml'?" in match.string


def test_usage_error_does_not_repeat_a_secret_given_as_an_option(cli: Any, profile_file: Path) -> None:
    match = cli("get-credential", "--profile", profile_file, "--password=hunter2").line(2, USAGE_LINE)
    assert "hunter2" not in match.string
    assert "--password=" in match.string


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_a_description_in_its_help(cli: Any, command: str) -> None:
    run = cli(command, "--help")
    assert run.code == 0
    paragraphs = run.out.split("\n\n")
    assert paragraphs[0].startswith(f"usage: cpcreds {command}")
    description = paragraphs[1]
    assert not description.lstrip().startswith(("options:", "positional arguments:")), run.out
    assert len(description.split()) >= 8


def test_commands_are_every_command_of_the_parser_in_help_order() -> None:
    assert tuple(build_parser().commands) == COMMANDS


def test_every_commands_description_is_its_own(cli: Any) -> None:
    descriptions = {command: " ".join(cli(command, "--help").out.split("\n\n")[1].split()) for command in COMMANDS}
    top = " ".join(cli("--help").out.split("\n\n")[1].split())
    assert len(set(descriptions.values())) == len(COMMANDS) and top not in descriptions.values()


def test_the_command_table_of_docs_cli_lists_every_command_in_help_order() -> None:
    table = (Path(__file__).parents[1] / "docs" / "cli.md").read_text(encoding="utf-8").split("\n## ", 1)[0]
    assert tuple(re.findall(r"^\| \[`([a-z-]+)`\]", table, flags=re.MULTILINE)) == COMMANDS


DEMO_PLUGIN = Path(__file__).parents[1] / "examples" / "plugins" / "demo-token-plugin"
EXEC_EXTENSION = "client.authentication.k8s.io/exec"


@pytest.mark.parametrize(
    ("spec", "hint"),
    [
        ({}, "the request has no cluster (set provideClusterInfo: true in the exec config)"),
        # provideClusterInfo is set (there is a cluster): the hint is about the profile, not about it.
        ({"cluster": {"server": "https://spoke-1.example:6443"}},
         f"the ClusterProfile's access provider has no {EXEC_EXTENSION} extension (it needs clusterName)"),
        ({"cluster": {"server": "https://spoke-1.example:6443", "config": {"audience": "x"}}},
         f"no clusterName in the ClusterProfile's {EXEC_EXTENSION} extension"),
    ],
)
def test_the_demo_plugin_says_what_is_missing_and_nothing_already_set(spec: dict[str, Any], hint: str) -> None:
    info = json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "spec": {"interactive": False, **spec}})
    result = subprocess.run([str(DEMO_PLUGIN)], env={**os.environ, "KUBERNETES_EXEC_INFO": info}, capture_output=True, text=True, timeout=30)
    assert (result.returncode, result.stdout, result.stderr) == (1, "", f"demo-token-plugin: {hint}\n")


def test_cpcreds_setting_with_a_bad_value_is_one_line(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CPCREDS_LOG_LEVEL", "loud")
    match = cli("plugins").line(1, ERROR_LINE)
    assert match.string.startswith("cpcreds: error: CPCREDS_LOG_LEVEL: ")
    assert "'loud'" in match.string


# -- --clusterprofile-provider-file ----------------------------------------------------------------


def test_clusterprofile_provider_file_is_the_same_as_config(cli: Any, config_file: Path, profile_file: Path) -> None:
    run = cli("get-credential", "--clusterprofile-provider-file", config_file, "--profile", profile_file)
    assert run.code == 0, run.err
    assert json.loads(run.out)["status"]["token"] == "file-token"
    run = cli("validate", "--clusterprofile-provider-file", config_file)
    assert run.code == 0, run.err
    assert run.out.startswith(f"{config_file}: 1 provider(s), valid")


# -- files: one shape for every way a file can be wrong ---------------------------------------------


def _broken_files(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "folder").mkdir()
    (tmp_path / "bad.yaml").write_text("providers:\n  - name: [unclosed\n")
    (tmp_path / "bad.json").write_text('{"providers": [}')
    return {
        "missing": tmp_path / "missing.yaml",
        "directory": tmp_path / "folder",
        "bad-yaml": tmp_path / "bad.yaml",
        "bad-json": tmp_path / "bad.json",
    }


@pytest.mark.parametrize("problem", ["missing", "directory", "bad-yaml", "bad-json"])
def test_unusable_config_file_is_one_line_naming_the_file(cli: Any, tmp_path: Path, profile_file: Path, problem: str) -> None:
    path = _broken_files(tmp_path)[problem]
    for args in (("get-credential", "--profile", profile_file), ("resolve", "--profile", profile_file), ("validate",)):
        match = cli(*args, "--config", path).line(1, ERROR_LINE)
        assert match.string.startswith(f"cpcreds: error: {path}: "), match.string


@pytest.mark.parametrize("problem", ["missing", "directory", "bad-yaml", "bad-json"])
def test_unusable_profile_file_is_one_line_naming_the_file(cli: Any, tmp_path: Path, config_file: Path, problem: str) -> None:
    path = _broken_files(tmp_path)[problem]
    for command in ("get-credential", "resolve", "kubeconfig"):
        match = cli(command, "--config", config_file, "--profile", path).line(1, ERROR_LINE)
        assert match.string.startswith(f"cpcreds: error: {path}: "), match.string


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_config_file_is_one_line_naming_the_file(cli: Any, config_file: Path) -> None:
    config_file.chmod(0)
    match = cli("validate", "--config", config_file).line(1, ERROR_LINE)
    assert match.string.startswith(f"cpcreds: error: {config_file}: cannot read")


def test_config_without_providers_fails_validate_in_one_line(cli: Any, tmp_path: Path) -> None:
    for name, text in (("empty.yaml", ""), ("braces.yaml", "{}\n"), ("none.yaml", "providers: []\n")):
        path = tmp_path / name
        path.write_text(text)
        match = cli("validate", "--config", path).line(1, ERROR_LINE)
        assert match.string.startswith(f"cpcreds: error: {path}: ")
        assert "no providers" in match.string


def test_kubeconfig_that_cannot_be_written_is_one_line(cli: Any, tmp_path: Path, config_file: Path, profile_file: Path) -> None:
    out = tmp_path / "no-such-folder" / "fleet.kubeconfig"
    match = cli("kubeconfig", "--config", config_file, "--profile", profile_file, "-o", out).line(1, ERROR_LINE)
    assert match.string == f"cpcreds: error: {out}: cannot write: No such file or directory"


# -- output formats ---------------------------------------------------------------------------------


def test_get_credential_prints_one_line_of_json_by_default(cli: Any, config_file: Path, profile_file: Path) -> None:
    run = cli("get-credential", "--config", config_file, "--profile", profile_file)
    assert run.code == 0, run.err
    assert run.out.count("\n") == 1
    assert json.loads(run.out) == {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": {"token": "file-token"}}


def test_get_credential_prints_yaml_with_output_yaml(cli: Any, config_file: Path, profile_file: Path) -> None:
    run = cli("get-credential", "--config", config_file, "--profile", profile_file, "-o", "yaml")
    assert run.code == 0, run.err
    assert yaml.safe_load(run.out) == {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": {"token": "file-token"}}
    assert run.out.startswith("apiVersion: client.authentication.k8s.io/v1\n")


def test_resolve_prints_the_same_plan_as_yaml_and_json(cli: Any, config_file: Path, profile_file: Path) -> None:
    as_json = cli("resolve", "--config", config_file, "--profile", profile_file)
    as_yaml = cli("resolve", "--config", config_file, "--profile", profile_file, "--output", "yaml")
    assert as_json.code == as_yaml.code == 0
    assert yaml.safe_load(as_yaml.out) == json.loads(as_json.out)
    assert as_yaml.out.startswith("provider: fake\n")


# -- resolve hides values unless asked --------------------------------------------------------------


def test_resolve_masks_env_values_and_secret_args_unless_show_values(cli: Any, tmp_path: Path, profile_file: Path) -> None:
    entry = exec_entry(
        "fake", "--password=arg-s3cret", "--token", "tok-s3cret", "--verbose",
        env=[{"name": "TEAM_KEY", "value": "env-s3cret"}],
    )  # fmt: skip
    config = write_yaml(tmp_path / "providers.yaml", {"providers": [entry]})
    masked = cli("resolve", "--config", config, "--profile", profile_file)
    assert masked.code == 0, masked.err
    for secret in ("arg-s3cret", "tok-s3cret", "env-s3cret"):
        assert secret not in masked.out
    plan = json.loads(masked.out)["exec"]
    assert plan["env"] == [{"name": "TEAM_KEY", "value": "***"}]
    assert "--verbose" in plan["args"] and "--password=***" in plan["args"]
    shown = json.loads(cli("resolve", "--config", config, "--profile", profile_file, "--show-values").out)["exec"]
    assert shown["env"] == [{"name": "TEAM_KEY", "value": "env-s3cret"}]
    assert shown["args"][-4:] == ["--password=arg-s3cret", "--token", "tok-s3cret", "--verbose"]


# -- errors never carry a secret --------------------------------------------------------------------


def test_flag_that_cannot_be_split_is_one_line_without_its_secret(cli: Any, profile_file: Path) -> None:
    spec = f"fake='{sys.executable} --password=hunter2 \"unclosed'"
    match = cli("get-credential", "--clusterprofile-access-provider", spec, "--profile", profile_file).line(1, ERROR_LINE)
    assert "hunter2" not in match.string
