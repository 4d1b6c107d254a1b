"""cpcreds-spire, the console script: a KEP-541 exec plugin run by cpcreds itself (v1 and
v1beta1, provideClusterInfo), by hand with spire-agent's flags, and the in-process provider found
through its entry point by the ``cpcreds`` command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("cpcreds_spire", reason="install plugins-contrib/spire")

from cpcreds import (  # noqa: E402
    API_VERSION_V1,
    API_VERSION_V1BETA1,
    CredentialEngine,
    PluginExecutionError,
    ProviderRegistry,
)
from tests.fakes.builders import access_provider, cluster_profile, config_of  # noqa: E402
from tests.fakes.spire import DEFAULT_IDENTITY  # noqa: E402

BIN = Path(sys.executable).parent
SCRIPT = BIN / "cpcreds-spire"


def exec_engine(api_version: str, args: list[str], env: dict[str, str] | None = None, **entry: Any) -> CredentialEngine:
    """An engine whose ``spire-agent`` entry runs cpcreds-spire as an exec plugin."""
    exec_config: dict[str, Any] = {
        "apiVersion": api_version,
        "command": str(SCRIPT),
        "args": args,
        "provideClusterInfo": True,
        "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
    }
    config = config_of({"name": "spire-agent", "execConfig": exec_config, **entry})
    return CredentialEngine(config, registry=ProviderRegistry(entry_points=False))


def spoke(extension: Any = None, additional_args: Any = None) -> dict[str, Any]:
    return cluster_profile(
        "spoke-1",
        access_provider("spire-agent", "https://spoke-1.example:6443", exec_extension=extension, additional_args=additional_args),
    )


@pytest.mark.parametrize("api_version", [API_VERSION_V1, API_VERSION_V1BETA1])
def test_cpcreds_runs_it_as_an_exec_plugin_with_the_audience_from_the_cluster_info(agent, api_version) -> None:
    with exec_engine(api_version, [], env={"SPIFFE_ENDPOINT_SOCKET": agent.address}) as engine:
        credential = engine.get_credential(spoke({"audience": "https://spoke-1.example"}))
    claims = agent.verify(credential.token, "https://spoke-1.example")
    assert claims is not None and claims["sub"] == DEFAULT_IDENTITY
    assert credential.expiration_timestamp == datetime.fromtimestamp(claims["exp"], timezone.utc)


def test_go_style_flags_set_the_options(agent) -> None:
    args = ["-audience", "from-flag", "-socket", agent.address, "-spiffeId", DEFAULT_IDENTITY]
    with exec_engine(API_VERSION_V1, args) as engine:
        credential = engine.get_credential(spoke({"audience": "from-profile"}))
    assert agent.requests[-1].audience == ("from-flag",)
    assert agent.requests[-1].spiffe_id == DEFAULT_IDENTITY
    assert agent.verify(credential.token, "from-flag") is not None


def test_a_profile_sourced_audience_arg_is_used_under_Append(agent) -> None:
    # KEP-5339's example: the ClusterProfile appends `-audience https://my-on-prem-k8s.example.dev`.
    profile = spoke(additional_args=["-audience", "https://my-on-prem-k8s.example.dev"])
    with exec_engine(API_VERSION_V1, ["-socket", agent.address], profileSourcedCLIArgsPolicy="Append") as engine:
        credential = engine.get_credential(profile)
    assert agent.requests[-1].audience == ("https://my-on-prem-k8s.example.dev",)
    assert agent.verify(credential.token, "https://my-on-prem-k8s.example.dev") is not None


def test_the_agents_refusal_is_the_plugins_one_line_error(agent) -> None:
    agent.identities = []
    with exec_engine(API_VERSION_V1, ["-audience", "k8s", "-socket", agent.address]) as engine:
        with pytest.raises(PluginExecutionError) as caught:
            engine.get_credential(spoke())
    assert str(caught.value) == (
        f"provider spire-agent: exec: {SCRIPT} exited with code 1: cpcreds-spire: provider spire: spire: the SPIFFE Workload API "
        f"at {agent.address} issued no JWT-SVID to this workload (PERMISSION_DENIED: no identity issued); is it registered "
        "with the SPIRE server?"
    )


def test_the_timeout_flag_bounds_the_wait_for_a_silent_agent(agent) -> None:
    agent.hang = True
    started = time.monotonic()
    with exec_engine(API_VERSION_V1, ["-audience", "k8s", "-socket", agent.address, "-timeout", "500ms"], timeout="20s") as engine:
        with pytest.raises(PluginExecutionError, match=r"did not answer within 0\.5s \(DEADLINE_EXCEEDED\)$"):
            engine.get_credential(spoke())
    assert time.monotonic() - started < 10


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SPIFFE_", "CPCREDS_")) and k != "KUBERNETES_EXEC_INFO"}
    return subprocess.run(args, env={**base, **env}, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def test_by_hand_it_takes_spire_agents_flags_and_answers_v1(agent) -> None:
    result = run([str(SCRIPT), "-audience", "k8s", "-socketPath", str(agent.socket_path), "-spiffeID", DEFAULT_IDENTITY], {})
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["apiVersion"] == API_VERSION_V1 and answer["kind"] == "ExecCredential"
    assert agent.verify(answer["status"]["token"], "k8s") is not None


def test_a_bad_flag_value_is_one_line_naming_the_option() -> None:
    result = run([str(SCRIPT), "-audience", "k8s", "-socket", "tcp://127.0.0.1:8081"], {})
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == (
        "cpcreds-spire: option socket: must be unix:///path/to/socket or an absolute path (the Workload API is a unix socket)\n"
    )


def test_help_lists_every_option_with_its_type_and_default_from_the_options_model() -> None:
    result = run([str(SCRIPT), "--help"], {})
    assert (result.returncode, result.stderr) == (0, "")
    lines = result.stdout.splitlines()
    assert lines[0] == "usage: cpcreds-spire [--OPTION=VALUE ...]"
    for line in (
        "  --audience  list of strings (repeat the flag); default: unset",
        "  --socket --socketPath  string; default: unset",
        "  --spiffeId --spiffeID  string; default: unset",
        "  --timeout  duration; default: unset",
    ):
        assert line in lines
    # Nothing of another plugin's help (secretreader's --secretName was shown here).
    assert "secretName" not in result.stdout and "secret-name" not in result.stdout


def test_an_unknown_flag_gets_did_you_mean_and_the_options_before_the_agent_is_asked() -> None:
    result = run([str(SCRIPT), "-audience", "k8s", "-spifeid", "spiffe://example.org/x"], {})
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        "cpcreds-spire: option spifeid: is not a known option; did you mean 'spiffeId'? "
        "(options: audience, socket, spiffeId, timeout; --help describes them)\n"
    )


def test_the_cpcreds_command_finds_the_provider_by_its_entry_point(agent, tmp_path) -> None:
    config = tmp_path / "providers.yaml"
    config.write_text(json.dumps({"providers": [{"name": "spire-agent", "type": "spire", "options": {"socket": agent.address}}]}))
    profile = tmp_path / "spoke-1.yaml"
    profile.write_text(json.dumps(spoke({"audience": "https://spoke-1.example"})))
    result = run([str(BIN / "cpcreds"), "get-credential", "--config", str(config), "--profile", str(profile)], {"CPCREDS_PLUGINS": "spire"})
    assert result.returncode == 0, result.stderr
    assert agent.verify(json.loads(result.stdout)["status"]["token"], "https://spoke-1.example") is not None
