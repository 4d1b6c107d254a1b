"""A broken installed plugin: silent where it is not needed (kubectl runs get-credential on every
command), named where it is (a config asking for a type nobody registered, ``cpcreds plugins``);
and what ``cpcreds plugins`` credits to which installed plugin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes.builders import access_provider, cluster_profile, exec_entry
from tests.fakes.distributions import installed_distribution
from tests.test_cli import cli_env, ok_json, one_error_line, run_cli, write_config, write_yaml


@pytest.fixture
def broken_site(tmp_path: Path) -> Path:
    """A folder holding an installed distribution whose ``cpcreds`` entry point raises on import."""
    return installed_distribution(
        tmp_path / "site", dist="cpcreds-test-vault", module="cpcreds_test_vault", version="0.3",
        entry_points={"test-vault": "cpcreds_test_vault"}, body="raise ImportError('needs hvac>=2')\n",
    )


@pytest.fixture
def env(broken_site: Path) -> dict[str, str]:
    return cli_env(PYTHONPATH=str(broken_site), CPCREDS_DISABLE_PLUGINS="", CPCREDS_PLUGINS="test-vault")


@pytest.mark.parametrize("level", ["warning", "debug"])
def test_get_credential_says_nothing_about_a_broken_plugin_it_does_not_need(tmp_path: Path, env: dict[str, str], level: str) -> None:
    config = write_config(tmp_path / "providers.yaml", exec_entry("fake", "--token", "t"))
    profile = write_yaml(tmp_path / "profile.yaml", cluster_profile("spoke-1", access_provider("fake")))
    env["CPCREDS_LOG_LEVEL"] = level
    result = run_cli("get-credential", "--config", config, "--profile", profile, cwd=tmp_path, env=env)
    assert ok_json(result)["status"]["token"] == "t"  # ok_json: stderr is empty


def test_config_asking_for_the_broken_plugins_type_names_it_and_why_in_one_line(tmp_path: Path, env: dict[str, str]) -> None:
    config = write_config(tmp_path / "providers.yaml", {"name": "hub", "type": "vault"})
    line = one_error_line(run_cli("validate", "--config", config, cwd=tmp_path, env=env))
    assert "unknown provider type 'vault'" in line
    assert "plugins that failed to load: test-vault (ImportError: needs hvac>=2)" in line


def test_plugins_warns_once_and_lists_the_failure(tmp_path: Path, env: dict[str, str]) -> None:
    result = run_cli("plugins", cwd=tmp_path, env=env)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "cpcreds: warning: plugin failed to load; skipped plugin=test-vault distribution=cpcreds-test-vault error=ImportError: needs hvac>=2"
    ]
    assert "failed: test-vault (cpcreds-test-vault): ImportError: needs hvac>=2" in result.stdout


def test_get_credential_shows_what_an_in_process_plugin_logs_through_its_handler(tmp_path: Path) -> None:
    # get-credential puts its log handler off until something logs (logging is not imported by a
    # run that logs nothing); a third-party plugin logging through the standard logger, on import
    # and while it answers, still gets it: one line each, worded and redacted by cpcreds.
    body = (
        "import logging\n"
        "from cpcreds.sdk import Credential, hookimpl\n"
        "logging.getLogger('vendor').warning('loaded with password=hunter2')\n"
        "class P:\n"
        "    def __init__(self, options): pass\n"
        "    def get_credential(self, plan):\n"
        "        logging.getLogger('vendor').warning('asked for %s', plan.provider)\n"
        "        return Credential(token='t')\n"
        "@hookimpl\n"
        "def cpcreds_register_providers(register):\n"
        "    register('logging-vault', P)\n"
    )
    site = installed_distribution(
        tmp_path / "site", dist="cpcreds-test-logging", module="cpcreds_test_logging", entry_points={"logging-vault": "cpcreds_test_logging"}, body=body
    )
    env = cli_env(PYTHONPATH=str(site), CPCREDS_DISABLE_PLUGINS="", CPCREDS_PLUGINS="logging-vault")
    config = write_config(tmp_path / "providers.yaml", {"name": "v", "type": "logging-vault"})
    profile = write_yaml(tmp_path / "profile.yaml", cluster_profile("spoke-1", access_provider("v")))
    result = run_cli("get-credential", "--no-cache", "--config", config, "--profile", profile, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        "cpcreds: warning: loaded with password=[REDACTED]",
        "cpcreds: warning: asked for v",
    ]


def test_plugins_credits_each_type_to_its_plugin_and_lists_one_that_claims_exec(tmp_path: Path) -> None:
    # Two real entry points through pluggy: a tryfirst plugin that tries to take the exec type,
    # and a wrapper that registers a fallback once it has seen what the others registered.
    body = (
        "from cpcreds.sdk import hookimpl\n"
        "class Usurper:\n"
        "    @hookimpl(tryfirst=True)\n"
        "    def cpcreds_register_providers(self, register):\n"
        "        register('exec', dict)\n"
        "class Fallback:\n"
        "    @hookimpl(wrapper=True)\n"
        "    def cpcreds_register_providers(self, register):\n"
        "        yield\n"
        "        if 'vault' not in register.types:\n"
        "            register('vault', dict)\n"
        "usurper, fallback = Usurper(), Fallback()\n"
    )
    site = installed_distribution(
        tmp_path / "site", dist="cpcreds-test-pair", module="cpcreds_test_pair", version="1.4",
        entry_points={"test-usurper": "cpcreds_test_pair:usurper", "test-fallback": "cpcreds_test_pair:fallback"}, body=body,
    )  # fmt: skip
    env = cli_env(PYTHONPATH=str(site), CPCREDS_DISABLE_PLUGINS="", CPCREDS_PLUGINS="test-usurper,test-fallback")
    result = run_cli("plugins", "-o", "json", cwd=tmp_path, env=env)
    assert result.returncode == 1
    answer = json.loads(result.stdout)
    assert {p["type"]: (p["plugin"], p["distribution"]) for p in answer["providers"]} == {
        "exec": ("cpcreds (built-in)", None), "file": ("cpcreds (built-in)", None), "vault": ("test-fallback", "cpcreds-test-pair")
    }  # fmt: skip
    [error] = answer["loadErrors"]
    assert (error["plugin"], error["distribution"]) == ("test-usurper", "cpcreds-test-pair")
    assert "'exec' is already registered by cpcreds (built-in)" in error["error"]
