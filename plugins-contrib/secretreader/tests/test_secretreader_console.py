"""The console scripts cpcreds-secretreader and cpcreds-kubeconfig-secretreader: KEP-541 exec
plugins run by cpcreds itself (v1 and v1beta1), by hand with KUBERNETES_EXEC_INFO as a Go
controller runs the Go plugins, and by kubectl; plus the in-process type through the cpcreds CLI."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("cpcreds_secretreader", reason="install plugins-contrib/secretreader")

from cpcreds import API_VERSION_V1, API_VERSION_V1BETA1, CredentialEngine, PluginExecutionError  # noqa: E402
from secretreader_helpers import BIN, EXEC_EXTENSION, FLEET, cluster, profile  # noqa: E402
from tests.fakes.hub import HubServer, secret  # noqa: E402
from tests.fakes.pki import PKI  # noqa: E402
from tests.fakes.spoke import SpokeServer  # noqa: E402

Engine = Callable[..., CredentialEngine]
SECRETREADER = BIN / "cpcreds-secretreader"
KUBECONFIG_SECRETREADER = BIN / "cpcreds-kubeconfig-secretreader"


def exec_entry(command: Path, *args: str, api_version: str = API_VERSION_V1, name: str = "secretreader", **fields: Any) -> dict[str, Any]:
    return {"name": name, "execConfig": {"apiVersion": api_version, "command": str(command), "args": list(args), "provideClusterInfo": True, **fields}}


def exec_info(extension: Any, *, api_version: str = API_VERSION_V1, server: str = "https://spoke-1.example:6443") -> str:
    """KUBERNETES_EXEC_INFO as client-go writes it with provideClusterInfo: true."""
    return json.dumps(
        {
            "kind": "ExecCredential",
            "apiVersion": api_version,
            "spec": {"cluster": {"server": server, "config": extension}, "interactive": False},
        }
    )


def run(command: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(command), *args], env={**os.environ, **env}, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )


@pytest.mark.parametrize("api_version", [API_VERSION_V1, API_VERSION_V1BETA1])
def test_cpcreds_runs_the_console_script_as_an_exec_plugin(hub: HubServer, kubeconfig: Path, make_engine: Engine, api_version: str) -> None:
    hub.create(secret(FLEET, "spoke-1", {"token": "t-spoke-1"}))
    engine = make_engine(exec_entry(SECRETREADER, "--kubeconfig", str(kubeconfig), api_version=api_version))

    credential = engine.get_credential(cluster("spoke-1"))

    assert credential.token == "t-spoke-1"


@pytest.mark.parametrize("api_version", [API_VERSION_V1, API_VERSION_V1BETA1])
def test_the_console_script_with_the_go_plugins_environment_only(hub: HubServer, kubeconfig: Path, api_version: str) -> None:
    # The Go plugin takes no flags: KUBECONFIG (or in-cluster config) and the exec info.
    hub.create(secret(FLEET, "spoke-1", {"token": "t-spoke-1"}))

    result = run(SECRETREADER, KUBECONFIG=str(kubeconfig), KUBERNETES_EXEC_INFO=exec_info({"clusterName": "spoke-1"}, api_version=api_version))

    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert json.loads(result.stdout) == {"apiVersion": api_version, "kind": "ExecCredential", "status": {"token": "t-spoke-1"}}


def test_open_cluster_management_secrets_with_the_secret_name_flag(hub: HubServer, kubeconfig: Path, make_engine: Engine) -> None:
    hub.create(secret(FLEET, "spoke-1-my-account", {"token": "ocm-token"}))
    engine = make_engine(
        exec_entry(SECRETREADER, "--kubeconfig", str(kubeconfig), "--secret-name={clusterName}-my-account", name="open-cluster-management")
    )
    assert engine.get_credential(profile({"clusterName": "spoke-1"}, provider="open-cluster-management")).token == "ocm-token"


def test_a_failure_is_one_line_naming_the_secret_that_cpcreds_passes_on(hub: HubServer, kubeconfig: Path, make_engine: Engine) -> None:
    engine = make_engine(exec_entry(SECRETREADER, "--kubeconfig", str(kubeconfig)))

    with pytest.raises(PluginExecutionError) as raised:
        engine.get_credential(cluster("spoke-9"))

    assert f"cpcreds-secretreader: provider secretreader: Secret {FLEET}/spoke-9 not found on the hub {hub.url}" in str(raised.value)


def test_without_provide_cluster_info_the_script_says_what_is_missing(kubeconfig: Path) -> None:
    info = json.dumps({"kind": "ExecCredential", "apiVersion": API_VERSION_V1, "spec": {"interactive": False}})
    result = run(SECRETREADER, "--kubeconfig", str(kubeconfig), KUBERNETES_EXEC_INFO=info)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == (
        "cpcreds-secretreader: provider secretreader: no cluster information in the request: the exec config needs provideClusterInfo: true\n"
    )


def test_a_bad_flag_is_one_line_naming_the_option(kubeconfig: Path) -> None:
    result = run(SECRETREADER, "--secret-name", "{name}", KUBERNETES_EXEC_INFO=exec_info({"clusterName": "spoke-1"}))
    assert result.returncode == 1
    assert result.stderr == "cpcreds-secretreader: option secretName: the only placeholder is {clusterName}, without format or conversion\n"


HUB_OPTIONS = (
    "  --namespace  string; default: unset",
    "  --kubeconfig  string; default: unset",
    "  --context  string; default: unset",
)


@pytest.mark.parametrize(
    ("script", "options"),
    [
        ("cpcreds-secretreader", (*HUB_OPTIONS, "  --key  string; default: token", "  --secretName  string; default: {clusterName}")),
        ("cpcreds-kubeconfig-secretreader", HUB_OPTIONS),
        ("cpcreds-secretreader-credential-provider", (*HUB_OPTIONS, "  --secretName  string; required", "  --cacheDuration  duration; default: unset")),
    ],
)
def test_help_lists_every_option_with_its_type_and_default_from_the_options_model(script: str, options: tuple[str, ...]) -> None:
    result = run(BIN / script, "--help")
    assert (result.returncode, result.stderr) == (0, "")
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"usage: {script} [--OPTION=VALUE ...]")
    assert [line for line in lines if line.startswith("  --")] == list(options)


def test_an_unknown_flag_gets_did_you_mean_and_the_list_of_options() -> None:
    result = run(SECRETREADER, "--secretNme=spoke-1-token", KUBERNETES_EXEC_INFO=exec_info({"clusterName": "spoke-1"}))
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        "cpcreds-secretreader: option secretNme: is not a known option; did you mean 'secretName'? "
        "(options: namespace, kubeconfig, context, key, secretName; --help describes them)\n"
    )


def test_a_kubeconfig_that_does_not_exist_is_named_by_its_path(tmp_path: Path) -> None:
    # "no hub credentials: <path>" was redacted as if the path were a credential.
    missing = tmp_path / "hub-kubeconfig.yaml"
    result = run(SECRETREADER, f"--kubeconfig={missing}", KUBERNETES_EXEC_INFO=exec_info({"clusterName": "spoke-1"}))
    assert (result.returncode, result.stdout) == (1, "")
    assert str(missing) in result.stderr and "[REDACTED]" not in result.stderr


def test_a_profile_without_the_exec_extension_is_told_it_needs_the_cluster_name() -> None:
    info = json.dumps({"kind": "ExecCredential", "apiVersion": API_VERSION_V1, "spec": {"interactive": False, "cluster": {"server": "https://spoke-1.example:6443"}}})
    result = run(SECRETREADER, KUBERNETES_EXEC_INFO=info)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        f"cpcreds-secretreader: provider secretreader: the access provider has no {EXEC_EXTENSION} extension; "
        f"secretreader needs its clusterName (the cluster's name on the hub, which names the Secret)\n"
    )


def test_the_kubeconfig_secretreader_script_reads_a_stored_kubeconfig(hub: HubServer, kubeconfig: Path, pki: PKI, make_engine: Engine) -> None:
    issued = pki.issue_client_cert("spoke-admin")
    stored = {
        "apiVersion": "v1",
        "kind": "Config",
        "users": [
            {
                "name": "admin",
                "user": {
                    "client-certificate-data": base64.b64encode(issued.cert_pem.encode()).decode(),
                    "client-key-data": base64.b64encode(issued.key_pem.encode()).decode(),
                },
            }
        ],
        "contexts": [{"name": "admin@spoke-1", "context": {"cluster": "spoke-1", "user": "admin"}}],
        "current-context": "admin@spoke-1",
    }
    hub.create(secret(FLEET, "spoke-1-kubeconfig", {"value": yaml.safe_dump(stored)}))
    engine = make_engine(
        exec_entry(KUBECONFIG_SECRETREADER, "--kubeconfig", str(kubeconfig), api_version=API_VERSION_V1BETA1, name="kubeconfig-secretreader")
    )

    credential = engine.get_credential(profile({"name": "spoke-1-kubeconfig", "key": "value"}, provider="kubeconfig-secretreader"))

    assert credential.client_certificate_data == issued.cert_pem
    assert credential.client_key_data == issued.key_pem
    assert credential.expiration_timestamp == issued.not_after


def test_the_cpcreds_cli_runs_the_type_in_process(hub: HubServer, kubeconfig: Path, tmp_path: Path) -> None:
    hub.create(secret(FLEET, "spoke-1", {"token": "t-spoke-1"}))
    config = tmp_path / "providers.yaml"
    config.write_text(yaml.safe_dump({"providers": [{"name": "secretreader", "type": "secretreader", "options": {"kubeconfig": str(kubeconfig)}}]}))
    spoke_profile = tmp_path / "spoke-1.yaml"
    spoke_profile.write_text(yaml.safe_dump(cluster("spoke-1")))

    result = run(BIN / "cpcreds", "get-credential", "--config", str(config), "--profile", str(spoke_profile), CPCREDS_PLUGINS="secretreader")

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"apiVersion": API_VERSION_V1, "kind": "ExecCredential", "status": {"token": "t-spoke-1"}}


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_runs_the_console_script_and_reaches_the_spoke(hub: HubServer, kubeconfig: Path, spoke: SpokeServer, tmp_path: Path) -> None:
    hub.create(secret(FLEET, "spoke-1", {"token": "spoke-token"}))
    spoke_kubeconfig = tmp_path / "spoke.kubeconfig"
    spoke_kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "spoke-1",
                        "cluster": {
                            "server": spoke.url,
                            "certificate-authority-data": base64.b64encode(spoke.ca_pem).decode(),
                            "extensions": [{"name": EXEC_EXTENSION, "extension": {"clusterName": "spoke-1"}}],
                        },
                    }
                ],
                "users": [
                    {
                        "name": "secretreader",
                        "user": {
                            "exec": {
                                "apiVersion": API_VERSION_V1,
                                "command": str(SECRETREADER),
                                "args": ["--kubeconfig", str(kubeconfig)],
                                "provideClusterInfo": True,
                                "interactiveMode": "Never",
                            }
                        },
                    }
                ],
                "contexts": [{"name": "spoke-1", "context": {"cluster": "spoke-1", "user": "secretreader"}}],
                "current-context": "spoke-1",
            }
        )
    )

    result = run(Path(shutil.which("kubectl") or "kubectl"), f"--kubeconfig={spoke_kubeconfig}", f"--cache-dir={tmp_path / 'cache'}", "get", "namespaces", "-o", "name")

    assert result.returncode == 0, result.stderr
    assert "namespace/default" in result.stdout.split()
    assert {r.token for r in spoke.requests} == {"spoke-token"}


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_a_hub_kubeconfig_that_is_a_fifo_is_refused_at_once_naming_its_path(tmp_path: Path) -> None:
    # KUBECONFIG-style list: a regular file, so the kubernetes loader runs, and a FIFO nobody
    # writes, which its blocking open() would wait on for ever.
    regular, fifo = tmp_path / "hub.yaml", tmp_path / "hub-kubeconfig.yaml"
    regular.write_text("apiVersion: v1\nkind: Config\n")
    os.mkfifo(fifo)
    result = run(SECRETREADER, f"--kubeconfig={regular}{os.pathsep}{fifo}", KUBERNETES_EXEC_INFO=exec_info({"clusterName": "spoke-1"}))
    assert (result.returncode, result.stdout) == (1, "")
    assert f"{fifo}: is not a regular file" in result.stderr



@pytest.mark.parametrize("fault", ["too-large", "redirect"])
def test_the_console_script_keeps_the_hub_bounds(hub: HubServer, kubeconfig: Path, fault: str) -> None:
    # The one-shot run reads the hub with the same client as the in-process type, bounds included
    # (a trickled answer: test_secretreader_kubelet.py, whose script takes CPCREDS_DEFAULT_TIMEOUT).
    path = f"/api/v1/namespaces/{FLEET}/secrets/spoke-1"
    hub.create(secret(FLEET, "elsewhere", {"token": "t-elsewhere"}))
    if fault == "too-large":
        hub.inject_answer(path, 200, b'{"data": {"token": "' + b"A" * (4 * 1024 * 1024) + b'"}}', chunked=True)
        words = f"the hub's answer for Secret {FLEET}/spoke-1 is larger than 3072 KiB"
    else:
        hub.inject_answer(path, 307, b"", headers={"Location": f"/api/v1/namespaces/{FLEET}/secrets/elsewhere"})
        words = f"the hub {hub.url} answered HTTP 307 reading Secret {FLEET}/spoke-1"
    result = run(SECRETREADER, "--kubeconfig", str(kubeconfig), KUBERNETES_EXEC_INFO=exec_info({"clusterName": "spoke-1"}))
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == f"cpcreds-secretreader: provider secretreader: {words}\n"
