"""``cpcreds kubeconfig``: nothing secret goes into the file, and profiles no provider matches can be
left out with a warning each. The real command, as a subprocess."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from tests.fakes.builders import FAKE_PLUGIN, access_provider, cluster_profile, exec_entry
from tests.test_cli import ERROR_LINE, cli_env, fake_flag, one_error_line, run_cli, write_config, write_yaml

WARNING_LINE = "cpcreds: warning: skipped ClusterProfile {ref}: no configured provider matches; the profile offers [{offered}], the config has [{configured}]"


def exec_users(text: str) -> dict[str, dict]:
    return {u["name"]: u["user"]["exec"] for u in yaml.safe_load(text)["users"]}


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    """Three profiles: alpha offers p-file, beta offers p-flag, gamma offers only p-none."""
    return write_yaml(
        tmp_path / "fleet.yaml",
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                cluster_profile("alpha", access_provider("p-file", "https://alpha.test:6443")),
                cluster_profile("beta", access_provider("p-flag", "https://beta.test:6443")),
                cluster_profile("gamma", access_provider("p-none", "https://gamma.test:6443")),
            ],
        },
    )


def test_kubeconfig_holds_no_env_value_or_arg_of_the_config_only_its_path(tmp_path: Path, fleet: Path) -> None:
    entry = exec_entry(
        "p-file", "--password=arg-s3cret", "--token", "tok-s3cret",
        env=[{"name": "TEAM_KEY", "value": "env-s3cret"}],
    )  # fmt: skip
    config = write_config(tmp_path / "providers.yaml", entry)
    result = run_cli("kubeconfig", "--config", config, "--profile", fleet, "--name", "alpha", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for secret in ("arg-s3cret", "tok-s3cret", "env-s3cret", "TEAM_KEY"):
        assert secret not in result.stdout
    args = exec_users(result.stdout)["fleet-system/alpha"]["args"]
    assert args[args.index("--config") + 1] == str(config.resolve())
    assert "env" not in exec_users(result.stdout)["fleet-system/alpha"]


def test_kubeconfig_refuses_a_flag_provider_whose_args_look_secret(tmp_path: Path, fleet: Path) -> None:
    flag = fake_flag("p-flag", "--password=hunter2")
    result = run_cli("kubeconfig", "--clusterprofile-access-provider", flag, "--profile", fleet, "--name", "beta", cwd=tmp_path)
    line = one_error_line(result)
    assert "hunter2" not in line
    assert line.startswith('cpcreds: error: --clusterprofile-access-provider: provider "p-flag": ')
    assert "--password=***" in line
    assert "put this provider in a provider config file and use --config FILE" in line


@pytest.mark.parametrize(
    "secret_args",
    [("--token", "tok-123"), ("--client-secret=abc",), ("https://user:pw123@idp.example",), ("--signing-key", "sk-123"), ("VAULT_TOKEN=hvs.x1",)],
)
def test_kubeconfig_refuses_every_secret_looking_flag_provider_argument(tmp_path: Path, fleet: Path, secret_args: tuple[str, ...]) -> None:
    flag = fake_flag("p-flag", *secret_args)
    result = run_cli("kubeconfig", "--clusterprofile-access-provider", flag, "--profile", fleet, "--name", "beta", cwd=tmp_path)
    line = one_error_line(result)
    assert secret_args[-1] not in line
    assert '"p-flag"' in line


def test_kubeconfig_records_a_harmless_flag_provider_only_for_the_profiles_that_use_it(tmp_path: Path, fleet: Path) -> None:
    config = write_config(tmp_path / "providers.yaml", exec_entry("p-file"))
    flag = fake_flag("p-flag", "--expires-in", "60")
    result = run_cli(
        "kubeconfig", "--config", config, "--clusterprofile-access-provider", flag,
        "--profile", fleet, "--skip-unmatched", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    users = exec_users(result.stdout)
    assert "--clusterprofile-access-provider" not in users["fleet-system/alpha"]["args"]
    beta = users["fleet-system/beta"]["args"]
    assert beta[beta.index("--clusterprofile-access-provider") + 1] == flag
    assert beta[beta.index("--config") + 1] == str(config.resolve())


def test_kubeconfig_fails_on_a_profile_no_provider_matches(tmp_path: Path, fleet: Path) -> None:
    config = write_config(tmp_path / "providers.yaml", exec_entry("p-file"), exec_entry("p-flag"))
    line = one_error_line(run_cli("kubeconfig", "--config", config, "--profile", fleet, cwd=tmp_path))
    assert "ClusterProfile fleet-system/gamma: no configured provider matches" in line


def test_skip_unmatched_warns_once_per_skipped_profile_and_writes_the_others(tmp_path: Path, fleet: Path) -> None:
    config = write_config(tmp_path / "providers.yaml", exec_entry("p-file"))
    out = tmp_path / "fleet.kubeconfig"
    result = run_cli("kubeconfig", "--config", config, "--profile", fleet, "--skip-unmatched", "-o", out, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        WARNING_LINE.format(ref="fleet-system/beta", offered="p-flag", configured="p-file"),
        WARNING_LINE.format(ref="fleet-system/gamma", offered="p-none", configured="p-file"),
    ]
    doc = yaml.safe_load(out.read_text())
    assert [c["name"] for c in doc["contexts"]] == ["fleet-system/alpha"]
    assert doc["current-context"] == "fleet-system/alpha"


def test_skip_unmatched_with_no_profile_left_is_an_error(tmp_path: Path, fleet: Path) -> None:
    config = write_config(tmp_path / "providers.yaml", exec_entry("p-other"))
    result = run_cli("kubeconfig", "--config", config, "--profile", fleet, "--skip-unmatched", cwd=tmp_path)
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 4 and all(line.startswith("cpcreds: warning: skipped ") for line in lines[:3])
    assert ERROR_LINE.match(lines[3]) and "nothing to write" in lines[3]
    assert result.stdout == ""


def test_kubeconfig_user_runs_with_the_recorded_flag_provider(tmp_path: Path, fleet: Path) -> None:
    # The recorded command line is enough on its own: run it as kubectl would.
    flag = fake_flag("p-flag", "--expires-in", "60")
    result = run_cli("kubeconfig", "--clusterprofile-access-provider", flag, "--profile", fleet, "--name", "beta", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    user = exec_users(result.stdout)["fleet-system/beta"]
    assert user["command"] == sys.executable and str(FAKE_PLUGIN) in " ".join(user["args"])
    answer = run_cli(*user["args"][2:], cwd=tmp_path, env=cli_env())
    assert answer.returncode == 0, answer.stderr
    assert '"token": "fake-token"' in answer.stdout


def test_kubeconfig_makes_a_relative_flag_command_absolute_so_kubectl_can_run_it_anywhere(tmp_path: Path, fleet: Path) -> None:
    plugin_dir = tmp_path / "plugins"
    plugin_dir.mkdir()
    plugin = plugin_dir / "team plugin"  # a space, to check the quoting
    plugin.write_text(f"#!{sys.executable}\nexec(open({str(FAKE_PLUGIN)!r}).read())\n")
    plugin.chmod(0o755)
    record = tmp_path / "seen.json"
    flag = f"p-flag='\"./plugins/team plugin\" --record {record} \"two words\"'"
    result = run_cli("kubeconfig", "--clusterprofile-access-provider", flag, "--profile", fleet, "--name", "beta", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    args = exec_users(result.stdout)["fleet-system/beta"]["args"]
    recorded = args[args.index("--clusterprofile-access-provider") + 1]
    assert str(plugin) in recorded
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    answer = run_cli(*args[2:], cwd=elsewhere)
    assert answer.returncode == 0, answer.stderr
    assert json.loads(record.read_text())["argv"][-1] == "two words"
