"""The real ``cpcreds`` command line, run as a subprocess (``python -m cpcreds``).

Every test controls the child's working directory and environment: ``KUBERNETES_EXEC_INFO`` and
``CPCREDS_*`` from the outer environment never leak in. Provider configs and ClusterProfiles are
written to ``tmp_path``; the provider plugin is the fake in ``tests/fakes/exec_plugin.py``.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fakes.builders import FAKE_PLUGIN, access_provider, cluster_profile, exec_entry
from tests.fakes.distributions import installed_distribution
from tests.fakes.fixtures import SPOKE_TOKEN
from tests.fakes.spoke import DEFAULT_NAMESPACES, SpokeServer

REPO = Path(__file__).resolve().parents[1]
V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"
CA_PEM = b"-----BEGIN CERTIFICATE-----\nnot-a-real-ca\n-----END CERTIFICATE-----\n"
ERROR_LINE = re.compile(r"^cpcreds: error: \S.*$")
#: Usage errors are one line that starts "cpcreds: usage error:" and points at the right --help.
USAGE_LINE = re.compile(r"^cpcreds: usage error: \S.*\(see cpcreds(?: [a-z-]+)? --help\)$")
_PROXY_VARS = {"http_proxy", "https_proxy", "all_proxy", "no_proxy"}


# -- running the CLI ---------------------------------------------------------------------------


def cli_env(**extra: str) -> dict[str, str]:
    """The outer environment without KUBERNETES_EXEC_INFO and CPCREDS_*, plus ``extra``.

    Third-party plugins installed here (contrib packages, the provider tutorial's) are not loaded
    (``CPCREDS_DISABLE_PLUGINS=*``) unless ``extra`` says otherwise: what else is installed must
    not decide a test.
    """
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_EXEC_INFO" and not k.startswith("CPCREDS_")}
    env["CPCREDS_DISABLE_PLUGINS"] = "*"
    env.update(extra)
    return env


def run_cli(
    *args: str | os.PathLike[str],
    cwd: Path,
    env: dict[str, str] | None = None,
    stdin_text: str | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cpcreds", *map(os.fspath, args)],
        cwd=cwd,
        env=cli_env() if env is None else env,
        input=stdin_text,
        stdin=subprocess.DEVNULL if stdin_text is None else None,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def ok_json(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return json.loads(result.stdout)


def one_line(result: subprocess.CompletedProcess[str], exit_code: int, shape: re.Pattern[str]) -> str:
    """Assert a documented failure shape (exit code, one stderr line, nothing else) and return it."""
    assert result.returncode == exit_code, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert shape.match(lines[0]), lines[0]
    return lines[0]


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    """Exit 1 and one ``cpcreds: error:`` line."""
    return one_line(result, 1, ERROR_LINE)


def one_usage_line(result: subprocess.CompletedProcess[str]) -> str:
    """Exit 2 and one ``cpcreds: usage error:`` line."""
    return one_line(result, 2, USAGE_LINE)


# -- files -------------------------------------------------------------------------------------


def write_yaml(path: Path, data: Any) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def write_config(path: Path, *entries: dict[str, Any]) -> Path:
    return write_yaml(path, {"providers": list(entries)})


def fake_flag(name: str, *plugin_args: str) -> str:
    """A KEP-5339 ``--clusterprofile-access-provider`` value running the fake plugin."""
    return f"{name}='{' '.join([sys.executable, str(FAKE_PLUGIN), *plugin_args])}'"


def two_profiles() -> list[dict[str, Any]]:
    """``alpha`` offers provider p-alpha only, ``beta`` p-beta only: the token tells which ran."""
    return [
        cluster_profile("alpha", access_provider("p-alpha", "https://alpha.test:6443")),
        cluster_profile("beta", access_provider("p-beta", "https://beta.test:6443")),
    ]


def write_two_profiles(path: Path, layout: str) -> Path:
    profiles = two_profiles()
    if layout == "list":
        return write_yaml(path, {"apiVersion": "v1", "kind": "List", "items": profiles})
    path.write_text(yaml.safe_dump_all(profiles, sort_keys=False))
    return path


@pytest.fixture
def profile_file(tmp_path: Path) -> Path:
    """One ClusterProfile (fleet-system/spoke-1) offering provider ``fake``."""
    return write_yaml(tmp_path / "profile.yaml", cluster_profile("spoke-1", access_provider("fake", ca_pem=CA_PEM)))


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    """Provider ``fake``: the fake plugin answering token ``file-token`` (v1)."""
    return write_config(tmp_path / "providers.yaml", exec_entry("fake", "--token", "file-token"))


@pytest.fixture
def two_profile_config(tmp_path: Path) -> Path:
    return write_config(
        tmp_path / "fleet-providers.yaml",
        exec_entry("p-alpha", "--token", "alpha-token"),
        exec_entry("p-beta", "--token", "beta-token"),
    )


def exec_info(api_version: str) -> str:
    return json.dumps({"apiVersion": api_version, "kind": "ExecCredential", "spec": {"interactive": False}})


# -- get-credential ----------------------------------------------------------------------------


def test_bundled_example_prints_v1_exec_credential() -> None:
    result = run_cli(
        "get-credential", "--config", "config.example.yaml", "--profile", "examples/clusterprofile.yaml", cwd=REPO
    )
    answer = ok_json(result)
    assert answer["apiVersion"] == V1
    assert answer["kind"] == "ExecCredential"
    assert answer["status"]["token"]
    expiry = datetime.fromisoformat(answer["status"]["expirationTimestamp"].replace("Z", "+00:00"))
    assert expiry > datetime.now(timezone.utc)


def test_exec_plugin_mode_answers_in_requested_api_version(tmp_path: Path, profile_file: Path) -> None:
    record = tmp_path / "seen.json"
    config = write_config(tmp_path / "providers.yaml", exec_entry("fake", "--token", "t1", "--record", str(record)))
    env = cli_env(KUBERNETES_EXEC_INFO=exec_info(V1BETA1))
    answer = ok_json(run_cli("get-credential", "--config", config, "--profile", profile_file, cwd=tmp_path, env=env))
    assert answer == {"apiVersion": V1BETA1, "kind": "ExecCredential", "status": {"token": "t1"}}
    # The provider plugin itself was asked in the version it is configured for, not the client's.
    assert json.loads(record.read_text())["exec_info"]["apiVersion"] == V1


def test_api_version_flag_overrides_exec_info(tmp_path: Path, config_file: Path, profile_file: Path) -> None:
    env = cli_env(KUBERNETES_EXEC_INFO=exec_info(V1BETA1))
    args = ("get-credential", "--config", config_file, "--profile", profile_file, "--api-version", V1)
    answer = ok_json(run_cli(*args, cwd=tmp_path, env=env))
    assert answer["apiVersion"] == V1
    assert answer["status"]["token"] == "file-token"


def test_access_provider_flag_works_without_config_file(tmp_path: Path, profile_file: Path) -> None:
    flag = fake_flag("fake", "--token", "flag-token")
    answer = ok_json(run_cli("get-credential", "--clusterprofile-access-provider", flag, "--profile", profile_file, cwd=tmp_path))
    assert answer == {"apiVersion": V1, "kind": "ExecCredential", "status": {"token": "flag-token"}}


def test_access_provider_flag_and_config_file_are_both_usable(tmp_path: Path) -> None:
    config = write_config(tmp_path / "providers.yaml", exec_entry("p-alpha", "--token", "alpha-token"))
    profiles = write_two_profiles(tmp_path / "fleet.yaml", "list")
    base = ("get-credential", "--config", config, "--clusterprofile-access-provider", fake_flag("p-beta", "--token", "flag-token"))
    from_file = ok_json(run_cli(*base, "--profile", profiles, "--name", "alpha", cwd=tmp_path))
    from_flag = ok_json(run_cli(*base, "--profile", profiles, "--name", "beta", cwd=tmp_path))
    assert from_file["status"]["token"] == "alpha-token"
    assert from_flag["status"]["token"] == "flag-token"


def test_duplicate_provider_name_across_file_and_flag_is_error(tmp_path: Path, config_file: Path, profile_file: Path) -> None:
    result = run_cli(
        "get-credential", "--config", config_file, "--clusterprofile-access-provider", fake_flag("fake"),
        "--profile", profile_file, cwd=tmp_path,
    )  # fmt: skip
    line = one_error_line(result)
    assert "duplicate provider name" in line
    assert '"fake"' in line


def test_cpcreds_config_env_var_is_used_without_config_flag(tmp_path: Path, config_file: Path, profile_file: Path) -> None:
    env = cli_env(CPCREDS_CONFIG=str(config_file))
    answer = ok_json(run_cli("get-credential", "--profile", profile_file, cwd=tmp_path, env=env))
    assert answer["status"]["token"] == "file-token"


def test_no_config_and_no_flags_is_one_line_error(tmp_path: Path, profile_file: Path) -> None:
    line = one_error_line(run_cli("get-credential", "--profile", profile_file, cwd=tmp_path))
    assert "--config" in line and "CPCREDS_CONFIG" in line and "--clusterprofile-access-provider" in line


def test_profile_dash_reads_profile_from_stdin(tmp_path: Path, config_file: Path) -> None:
    text = yaml.safe_dump(cluster_profile("from-stdin", access_provider("fake")))
    answer = ok_json(run_cli("get-credential", "--config", config_file, "--profile", "-", cwd=tmp_path, stdin_text=text))
    assert answer["status"]["token"] == "file-token"


@pytest.mark.parametrize("layout", ["list", "multi-document"])
def test_multi_profile_file_needs_name_for_get_credential(tmp_path: Path, two_profile_config: Path, layout: str) -> None:
    profiles = write_two_profiles(tmp_path / "fleet.yaml", layout)
    line = one_error_line(run_cli("get-credential", "--config", two_profile_config, "--profile", profiles, cwd=tmp_path))
    assert "--name" in line
    assert "fleet-system/alpha" in line and "fleet-system/beta" in line


@pytest.mark.parametrize(
    ("layout", "name"),
    [("list", "fleet-system/beta"), ("list", "beta"), ("multi-document", "fleet-system/beta"), ("multi-document", "beta")],
)
def test_name_picks_one_profile(tmp_path: Path, two_profile_config: Path, layout: str, name: str) -> None:
    profiles = write_two_profiles(tmp_path / "fleet.yaml", layout)
    args = ("get-credential", "--config", two_profile_config, "--profile", profiles, "--name", name)
    assert ok_json(run_cli(*args, cwd=tmp_path))["status"]["token"] == "beta-token"


def test_bare_name_shared_by_two_namespaces_needs_namespace(tmp_path: Path, config_file: Path) -> None:
    profiles = [
        cluster_profile("dup", access_provider("fake"), namespace="team-a"),
        cluster_profile("dup", access_provider("fake"), namespace="team-b"),
    ]
    path = write_yaml(tmp_path / "fleet.yaml", {"apiVersion": "v1", "kind": "List", "items": profiles})
    line = one_error_line(run_cli("get-credential", "--config", config_file, "--profile", path, "--name", "dup", cwd=tmp_path))
    assert "namespace/name" in line


# -- resolve -----------------------------------------------------------------------------------


def test_resolve_prints_documented_exec_plan(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "providers.yaml",
        exec_entry(
            "fake", "--token", "x",
            env=[{"name": "FAKE_CONFIGURED", "value": "1"}],
            provideClusterInfo=True,
            profileSourcedCLIArgsPolicy="Append",
            profileSourcedEnvVarsPolicy="AppendIfNotExists",
        ),
    )  # fmt: skip
    provider = access_provider(
        "fake",
        "https://spoke.test:6443",
        ca_pem=CA_PEM,
        exec_extension={"clusterName": "spoke-1"},
        additional_args=["--from-profile"],
        additional_envs={"FAKE_B": "b", "FAKE_A": "a", "FAKE_CONFIGURED": "ignored"},
        **{"tls-server-name": "spoke.internal", "proxy-url": "http://proxy.test:3128"},
    )
    profile = write_yaml(tmp_path / "profile.yaml", cluster_profile("spoke-1", provider))
    result = run_cli("resolve", "--config", config, "--profile", profile, "--show-values", cwd=tmp_path)
    plan = ok_json(result)
    assert plan == {
        "provider": "fake",
        "cluster": {
            "server": "https://spoke.test:6443",
            "tls-server-name": "spoke.internal",
            "certificate-authority-data": base64.b64encode(CA_PEM).decode(),
            "proxy-url": "http://proxy.test:3128",
            "config": {"clusterName": "spoke-1"},
        },
        "exec": {
            "apiVersion": V1,
            "command": sys.executable,
            "args": [str(FAKE_PLUGIN), "--token", "x", "--from-profile"],
            "env": [
                {"name": "FAKE_CONFIGURED", "value": "1"},
                {"name": "FAKE_A", "value": "a"},
                {"name": "FAKE_B", "value": "b"},
            ],
            "provideClusterInfo": True,
            "interactiveMode": "Never",
            "executable": sys.executable,
        },
    }
    assert list(plan) == ["provider", "cluster", "exec"]
    assert list(plan["exec"]) == ["apiVersion", "command", "args", "env", "provideClusterInfo", "interactiveMode", "executable"]


def test_resolve_file_provider_prints_type_and_options(tmp_path: Path, profile_file: Path) -> None:
    options = {"tokenFile": str(tmp_path / "token"), "refreshInterval": "30s"}
    config = write_config(tmp_path / "providers.yaml", {"name": "fake", "type": "file", "options": options})
    plan = ok_json(run_cli("resolve", "--config", config, "--profile", profile_file, cwd=tmp_path))
    assert plan == {
        "provider": "fake",
        "cluster": {"server": "https://spoke.test:6443", "certificate-authority-data": base64.b64encode(CA_PEM).decode()},
        "type": "file",
        "options": options,
    }


def test_resolve_list_of_profiles_prints_json_list(tmp_path: Path, two_profile_config: Path) -> None:
    profiles = write_two_profiles(tmp_path / "fleet.yaml", "list")
    plans = ok_json(run_cli("resolve", "--config", two_profile_config, "--profile", profiles, "--show-values", cwd=tmp_path))
    assert isinstance(plans, list)
    assert [(p["provider"], p["cluster"]["server"]) for p in plans] == [
        ("p-alpha", "https://alpha.test:6443"),
        ("p-beta", "https://beta.test:6443"),
    ]
    assert [p["exec"]["args"][-1] for p in plans] == ["alpha-token", "beta-token"]


# -- errors ------------------------------------------------------------------------------------


def test_bad_config_error_names_file_entry_and_field(tmp_path: Path, profile_file: Path) -> None:
    config = write_config(tmp_path / "providers.yaml", exec_entry("fake"), exec_entry("broken", timeout=None) | {"timeout": 30})
    line = one_error_line(run_cli("get-credential", "--config", config, "--profile", profile_file, cwd=tmp_path))
    assert str(config) in line
    assert '"broken"' in line and "providers[1]" in line
    assert "timeout" in line


def test_no_matching_provider_names_profile_and_offered_providers(tmp_path: Path, profile_file: Path) -> None:
    config = write_config(tmp_path / "providers.yaml", exec_entry("other"))
    line = one_error_line(run_cli("get-credential", "--config", config, "--profile", profile_file, cwd=tmp_path))
    assert "fleet-system/spoke-1" in line
    assert "[fake]" in line and "[other]" in line


def test_failing_plugin_error_has_exit_code_and_stderr_line(tmp_path: Path, profile_file: Path) -> None:
    config = write_config(
        tmp_path / "providers.yaml", exec_entry("fake", "--exit-code", "3", "--stderr", "identity provider said no")
    )
    line = one_error_line(run_cli("get-credential", "--config", config, "--profile", profile_file, cwd=tmp_path))
    assert "provider fake" in line
    assert "exited with code 3" in line
    assert "identity provider said no" in line


def test_plugin_timeout_is_one_line_error(tmp_path: Path, profile_file: Path) -> None:
    config = write_config(tmp_path / "providers.yaml", exec_entry("fake", "--hang", timeout="300ms"))
    result = run_cli("get-credential", "--config", config, "--profile", profile_file, cwd=tmp_path, timeout=20)
    line = one_error_line(result)
    assert "provider fake" in line
    assert "did not answer within 0.3s" in line


def test_unknown_subcommand_is_usage_error(tmp_path: Path) -> None:
    line = one_usage_line(run_cli("get-credentials", cwd=tmp_path))
    assert line.startswith("cpcreds: usage error: ")
    assert "get-credentials" in line


def test_missing_profile_is_usage_error(tmp_path: Path, config_file: Path) -> None:
    line = one_usage_line(run_cli("get-credential", "--config", config_file, cwd=tmp_path))
    assert "--profile" in line


# -- validate ----------------------------------------------------------------------------------


def test_validate_prints_providers_and_valid(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "providers.yaml",
        exec_entry("fake"),
        {"name": "projected", "type": "file", "options": {"tokenFile": "/var/run/secrets/tokens/t"}},
    )
    result = run_cli("validate", "--config", config, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0] == f"{config}: 2 provider(s), valid"
    assert lines[1] == f"  fake: exec {sys.executable} ({V1})"
    assert lines[2] == "  projected: file"
    assert "warning" not in result.stdout


def test_validate_warns_for_exec_command_not_found(tmp_path: Path) -> None:
    entry = {"name": "missing", "execConfig": {"apiVersion": V1, "command": "cpcreds-test-no-such-plugin"}}
    config = write_config(tmp_path / "providers.yaml", entry)
    result = run_cli("validate", "--config", config, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "valid" in result.stdout.splitlines()[0]
    (line,) = [ln for ln in result.stdout.splitlines() if "missing:" in ln]
    assert "cpcreds-test-no-such-plugin" in line and "warning: executable not found" in line


def test_validate_fails_for_unknown_provider_type(tmp_path: Path) -> None:
    config = write_config(tmp_path / "providers.yaml", {"name": "vault", "type": "no-such-type"})
    line = one_error_line(run_cli("validate", "--config", config, cwd=tmp_path))
    assert str(config) in line and '"vault"' in line
    assert "unknown provider type 'no-such-type'" in line
    assert "file" in line  # names the installed types


def test_validate_fails_for_bad_options(tmp_path: Path) -> None:
    entry = {"name": "projected", "type": "file", "options": {"tokenFiel": "/tmp/t"}}
    config = write_config(tmp_path / "providers.yaml", entry)
    line = one_error_line(run_cli("validate", "--config", config, cwd=tmp_path))
    assert str(config) in line and '"projected"' in line
    assert "options.tokenFiel" in line


# -- plugins, version, help --------------------------------------------------------------------


def test_plugins_lists_exec_and_file_as_builtin(tmp_path: Path) -> None:
    result = run_cli("plugins", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line for line in result.stdout.splitlines() if line and not line.startswith("failed:")}
    assert "built-in" in rows["exec"]
    assert "built-in" in rows["file"]


def test_plugins_json_has_providers_and_load_errors(tmp_path: Path) -> None:
    result = run_cli("plugins", "-o", "json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert set(doc) == {"providers", "loadErrors"}
    assert isinstance(doc["loadErrors"], list)
    by_type = {p["type"]: p for p in doc["providers"]}
    assert "built-in" in by_type["exec"]["plugin"]
    assert "built-in" in by_type["file"]["plugin"]


def test_version_prints_cpcreds_version(tmp_path: Path) -> None:
    from cpcreds import __version__

    result = run_cli("--version", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout == f"cpcreds {__version__}\n"


def test_help_shows_examples(tmp_path: Path) -> None:
    result = run_cli("--help", cwd=tmp_path)
    assert result.returncode == 0
    assert "examples:" in result.stdout
    assert "cpcreds get-credential --config providers.yaml --profile cluster.yaml" in result.stdout
    assert "CPCREDS_CONFIG" in result.stdout


# -- secrets -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("level", "fmt"), [("warning", "console"), ("debug", "console"), ("debug", "json")], ids=["default", "debug", "debug-json"]
)
def test_token_never_appears_on_stderr(tmp_path: Path, level: str, fmt: str) -> None:
    token = "s3cr3t-TOKEN-value-7f3a"
    config = write_config(tmp_path / "providers.yaml", exec_entry("fake", "--token", token, "--expires-in", "3600"))
    # The deprecated field makes cpcreds log a warning while it handles the credential.
    deprecated = access_provider("fake")
    profile = write_yaml(tmp_path / "profile.yaml", cluster_profile("spoke-1", credential_providers=[deprecated]))
    env = cli_env(CPCREDS_LOG_LEVEL=level, CPCREDS_LOG_FORMAT=fmt, KUBERNETES_EXEC_INFO=exec_info(V1))
    result = run_cli("get-credential", "--config", config, "--profile", profile, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["status"]["token"] == token
    assert "deprecated" in result.stderr  # logging did reach stderr
    assert token not in result.stderr
    # Through the CLI's handler (installed when the first event came, see logs.configure_logging).
    line = next(line for line in result.stderr.splitlines() if "deprecated" in line)
    assert json.loads(line)["level"] == "warning" if fmt == "json" else line.startswith("cpcreds: warning: ")


# -- kubeconfig --------------------------------------------------------------------------------


def test_kubeconfig_has_one_context_per_profile_and_no_token(tmp_path: Path, two_profile_config: Path) -> None:
    write_two_profiles(tmp_path / "fleet.yaml", "list")
    result = run_cli("kubeconfig", "--config", two_profile_config.name, "--profile", "fleet.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert "alpha-token" not in result.stdout and "beta-token" not in result.stdout
    assert "token:" not in result.stdout
    doc = yaml.safe_load(result.stdout)
    assert doc["kind"] == "Config"
    assert [c["name"] for c in doc["contexts"]] == ["fleet-system/alpha", "fleet-system/beta"]
    assert doc["current-context"] == "fleet-system/alpha"
    clusters = {c["name"]: c["cluster"] for c in doc["clusters"]}
    assert clusters["fleet-system/alpha"]["server"] == "https://alpha.test:6443"
    assert clusters["fleet-system/beta"]["server"] == "https://beta.test:6443"
    users = {u["name"]: u["user"]["exec"] for u in doc["users"]}
    for name in ("fleet-system/alpha", "fleet-system/beta"):
        ctx = next(c["context"] for c in doc["contexts"] if c["name"] == name)
        assert ctx == {"cluster": name, "user": name}
        spec = users[name]
        assert spec["apiVersion"] == V1
        assert spec["interactiveMode"] == "Never"
        assert spec["command"] == sys.executable
        args = spec["args"]
        assert args[:3] == ["-m", "cpcreds", "get-credential"]
        config_arg = args[args.index("--config") + 1]
        profile_arg = args[args.index("--profile") + 1]
        assert os.path.isabs(config_arg) and Path(config_arg) == two_profile_config.resolve()
        assert os.path.isabs(profile_arg) and Path(profile_arg) == (tmp_path / "fleet.yaml").resolve()
        assert args[args.index("--name") + 1] == name


def test_kubeconfig_output_file_has_mode_0600(tmp_path: Path, config_file: Path, profile_file: Path) -> None:
    out = tmp_path / "fleet.kubeconfig"
    result = run_cli("kubeconfig", "--config", config_file, "--profile", profile_file, "-o", out, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and result.stderr == ""
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert [c["name"] for c in yaml.safe_load(out.read_text())["contexts"]] == ["fleet-system/spoke-1"]


def test_kubeconfig_output_over_existing_file_has_mode_0600(tmp_path: Path, config_file: Path, profile_file: Path) -> None:
    out = tmp_path / "fleet.kubeconfig"
    out.write_text("old\n")
    out.chmod(0o644)
    result = run_cli("kubeconfig", "--config", config_file, "--profile", profile_file, "-o", out, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o600


def test_kubeconfig_refuses_profile_from_stdin(tmp_path: Path, config_file: Path) -> None:
    text = yaml.safe_dump(cluster_profile("spoke-1", access_provider("fake")))
    result = run_cli("kubeconfig", "--config", config_file, "--profile", "-", cwd=tmp_path, stdin_text=text)
    line = one_error_line(result)
    assert "--profile FILE" in line


# -- kubectl end to end ------------------------------------------------------------------------

needs_kubectl = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")


def kubectl_env(tmp_path: Path) -> dict[str, str]:
    """No proxy can route 127.0.0.1 elsewhere, and kubectl's cache lives in tmp_path."""
    env = {k: v for k, v in cli_env().items() if k.lower() not in _PROXY_VARS and k != "KUBECONFIG"}
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env.update(HOME=str(home), NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    return env


def spoke_kubeconfig(tmp_path: Path, spoke: SpokeServer, *plugin_args: str) -> Path:
    config = write_config(tmp_path / "providers.yaml", exec_entry("fake", *plugin_args))
    profile = write_yaml(
        tmp_path / "spoke.yaml", cluster_profile("spoke-1", access_provider("fake", spoke.url, ca_pem=spoke.ca_pem))
    )
    out = tmp_path / "fleet.kubeconfig"
    result = run_cli("kubeconfig", "--config", config, "--profile", profile, "-o", out, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return out


def run_kubectl(kubeconfig: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), "--request-timeout=20s", "get", "namespaces", "-o", "name"],
        cwd=tmp_path,
        env=kubectl_env(tmp_path),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


@needs_kubectl
def test_kubectl_lists_namespaces_with_cpcreds_credential(tmp_path: Path, spoke: SpokeServer) -> None:
    kubeconfig = spoke_kubeconfig(tmp_path, spoke, "--token", SPOKE_TOKEN, "--expires-in", "3600")
    result = run_kubectl(kubeconfig, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [f"namespace/{name}" for name in DEFAULT_NAMESPACES]
    assert SPOKE_TOKEN not in result.stderr
    namespace_calls = [r for r in spoke.requests if r.path == "/api/v1/namespaces"]
    assert namespace_calls and all(r.auth == "token" and r.status == 200 for r in namespace_calls)


@needs_kubectl
def test_kubectl_shows_cpcreds_error_when_plugin_fails(tmp_path: Path, spoke: SpokeServer) -> None:
    kubeconfig = spoke_kubeconfig(tmp_path, spoke, "--exit-code", "7", "--stderr", "login required")
    result = run_kubectl(kubeconfig, tmp_path)
    assert result.returncode != 0
    cpcreds_lines = [line for line in result.stderr.splitlines() if line.startswith("cpcreds: error:")]
    assert cpcreds_lines, result.stderr
    assert "exited with code 7" in cpcreds_lines[0] and "login required" in cpcreds_lines[0]
    assert "Traceback" not in result.stderr
    assert not any(r.auth == "token" for r in spoke.requests)


def test_plugins_exits_1_and_names_a_plugin_that_failed_to_load(tmp_path: Path) -> None:
    site = installed_distribution(
        tmp_path / "site", dist="cpcreds-broken-plugin", module="cpcreds_broken_plugin", version="0.1",
        entry_points={"broken": "cpcreds_broken_plugin"}, body="raise ImportError('needs libfoo')\n",
    )
    env = cli_env(PYTHONPATH=str(site), CPCREDS_DISABLE_PLUGINS="", CPCREDS_PLUGINS="broken")
    result = run_cli("plugins", cwd=tmp_path, env=env)
    assert result.returncode == 1
    assert "failed: broken (cpcreds-broken-plugin): ImportError: needs libfoo" in result.stdout
    assert "exec" in result.stdout and "file" in result.stdout  # the rest still loaded
    env.update(CPCREDS_DISABLE_PLUGINS="broken")
    assert run_cli("plugins", cwd=tmp_path, env=env).returncode == 0


def test_kubeconfig_refuses_a_profile_listed_twice(tmp_path: Path) -> None:
    config = write_config(tmp_path / "providers.yaml", exec_entry("fake"))
    one = cluster_profile("spoke-1", access_provider("fake"))
    profiles = write_yaml(tmp_path / "fleet.yaml", {"apiVersion": "v1", "kind": "List", "items": [one, one]})
    result = run_cli("kubeconfig", "--config", config, "--profile", profiles, cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip().endswith("ClusterProfile fleet-system/spoke-1 appears more than once; kubectl could not pick one")


def test_resolve_shows_the_executable_found_on_our_path_not_the_plugins(tmp_path: Path) -> None:
    config = write_config(tmp_path / "c.yaml", {"name": "fake", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "sh",
                                                                     "env": [{"name": "PATH", "value": str(tmp_path)}]}})
    profile = write_yaml(tmp_path / "p.yaml", cluster_profile("c", access_provider("fake")))
    shown = ok_json(run_cli("resolve", "--config", str(config), "--profile", str(profile), cwd=tmp_path))
    import shutil

    assert shown["exec"]["command"] == "sh" and shown["exec"]["executable"] == shutil.which("sh")


# -- settings read when needed ------------------------------------------------------------------


def no_settings_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """An environment with no CPCREDS_* variable at all: the settings are their declared defaults
    (third-party plugins installed here load; the exec provider answers either way)."""
    env = {k: v for k, v in cli_env(**extra).items() if not k.upper().startswith("CPCREDS_")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg-cache")
    return env


@pytest.mark.parametrize("cache", ["--no-cache", "cache on"])
def test_without_settings_variables_get_credential_logs_at_the_declared_level_and_caches_by_default(tmp_path: Path, cache: str) -> None:
    config = write_config(tmp_path / "providers.yaml", exec_entry("fake", "--token", "t-default", "--expires-in", "3600"))
    deprecated = access_provider("fake")  # the deprecated field makes cpcreds log a warning
    profile = write_yaml(tmp_path / "profile.yaml", cluster_profile("spoke-1", credential_providers=[deprecated]))
    flags = ["--no-cache"] if cache == "--no-cache" else []
    env = no_settings_env(tmp_path, KUBERNETES_EXEC_INFO=exec_info(V1))
    result = run_cli("get-credential", *flags, "--config", config, "--profile", profile, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["status"]["token"] == "t-default"
    warnings = [line for line in result.stderr.splitlines() if line.startswith("cpcreds: warning: ") and "deprecated" in line]
    assert len(warnings) == 1, result.stderr  # the default level, warning, let it through
    cached = list((tmp_path / "xdg-cache" / "cpcreds").glob("*")) if (tmp_path / "xdg-cache" / "cpcreds").exists() else []
    assert bool(cached) == (cache == "cache on")  # the cache is on unless --no-cache says otherwise


def test_without_settings_variables_a_debug_event_is_dropped_at_the_declared_level(tmp_path: Path) -> None:
    config = write_config(tmp_path / "providers.yaml", exec_entry("fake", "--exit-code", "3", "--stderr", "no login"))
    profile = write_yaml(tmp_path / "profile.yaml", cluster_profile("spoke-1", access_provider("fake")))
    env = no_settings_env(tmp_path, KUBERNETES_EXEC_INFO=exec_info(V1))
    result = run_cli("get-credential", "--no-cache", "--config", config, "--profile", profile, cwd=tmp_path, env=env)
    assert result.returncode == 1
    assert [line for line in result.stderr.splitlines() if line] == [result.stderr.strip()]  # the error alone
    assert ERROR_LINE.match(result.stderr.strip())
