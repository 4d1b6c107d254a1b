"""A hub kubeconfig whose user is an exec plugin (gke-gcloud-auth-plugin, kubelogin, aws...): run by
cpcreds within the provider's timeout, its process group killed at that timeout, and its
credential used to read the Secret; and HTTPS_PROXY carrying the hub's request."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("cpcreds_secretreader", reason="install plugins-contrib/secretreader")

from cpcreds import CredentialEngine, ProviderError  # noqa: E402
from secretreader_helpers import BIN, FLEET, cluster, entry  # noqa: E402
from tests.fakes.fixtures import HUB_TOKEN  # noqa: E402
from tests.fakes.hub import HubServer, secret  # noqa: E402
from tests.fakes.processes import alive  # noqa: E402
from tests.test_kube import ConnectProxy  # noqa: E402

EXEC_PLUGIN = Path(__file__).resolve().parents[3] / "tests" / "fakes" / "exec_plugin.py"


def exec_kubeconfig(hub: HubServer, path: Path, *plugin_args: str, **fields: Any) -> Path:
    """The hub's kubeconfig with its user an exec plugin (the tests' fake) run with ``plugin_args``
    (``fields`` replace those of the exec entry)."""
    document: dict[str, Any] = hub.kubeconfig(HUB_TOKEN, namespace=FLEET)
    exec_user = {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable, "args": [str(EXEC_PLUGIN), *plugin_args], **fields}
    document["users"][0]["user"] = {"exec": exec_user}
    path.write_text(yaml.safe_dump(document))
    return path


def get_credential(tmp_path: Path, kubeconfig: Path, timeout: str, **env: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """``cpcreds get-credential`` for spoke-1 with the in-process secretreader type; its result and how long it took."""
    config = tmp_path / "providers.yaml"
    config.write_text(yaml.safe_dump({"providers": [entry({"kubeconfig": str(kubeconfig)}, timeout=timeout)]}))
    profile = tmp_path / "spoke-1.yaml"
    profile.write_text(yaml.safe_dump(cluster("spoke-1")))
    started = time.monotonic()
    result = subprocess.run(
        [str(BIN / "cpcreds"), "get-credential", "--no-cache", "--config", str(config), "--profile", str(profile)],
        env={**os.environ, "CPCREDS_PLUGINS": "secretreader", **env},
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    return result, time.monotonic() - started


def test_a_hub_exec_user_gives_the_credential_the_secret_is_read_with(hub: HubServer, tmp_path: Path) -> None:
    hub.create(secret(FLEET, "spoke-1", {"token": "t-spoke-1"}))
    kubeconfig = exec_kubeconfig(hub, tmp_path / "hub.kubeconfig", "--token", HUB_TOKEN, "--expires-in", "3600")

    result, _ = get_credential(tmp_path, kubeconfig, "10s")

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["status"]["token"] == "t-spoke-1"


def test_a_hanging_hub_exec_user_is_one_line_within_the_timeout_and_is_killed(hub: HubServer, tmp_path: Path) -> None:
    pidfile = tmp_path / "plugin-child.pid"
    kubeconfig = exec_kubeconfig(hub, tmp_path / "hub.kubeconfig", "--hang", "--child-pidfile", str(pidfile))

    # 5 s: the provider's own error (naming the exec plugin it killed) must come before the
    # engine's timeout, in the last fifth of it, which 2 s leaves too short on a loaded machine.
    result, took = get_credential(tmp_path, kubeconfig, "5s")

    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "exec plugin" in result.stderr and "killed" in result.stderr
    assert took < 5 + 8  # the timeout, plus starting cpcreds on a loaded machine
    assert not alive(int(pidfile.read_text())), "the hub exec plugin's process group was left running"


def test_https_proxy_carries_the_hubs_request(hub: HubServer, kubeconfig: Path, tmp_path: Path) -> None:
    hub.create(secret(FLEET, "spoke-1", {"token": "t-spoke-1"}))
    with ConnectProxy() as proxy:
        result, _ = get_credential(tmp_path, kubeconfig, "10s", HTTPS_PROXY=proxy.url, NO_PROXY="", no_proxy="")

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["status"]["token"] == "t-spoke-1"
    assert proxy.targets == [hub.url.removeprefix("https://")]


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        pytest.param({"apiVersion": None}, "an exec entry without apiVersion", id="no-api-version"),
        pytest.param({"command": ""}, "an exec entry without command", id="no-command"),
        pytest.param({"env": "A=b"}, "env is not a list", id="env-not-a-list"),
        pytest.param({"args": "--token x"}, "args are not a list", id="args-not-a-list"),
        pytest.param({"args": [str(EXEC_PLUGIN), "--exit-code", "3", "--stderr", "no hub for you"]}, "exec plugin failed", id="plugin-fails"),
    ],
)
def test_a_broken_hub_exec_user_is_one_provider_error(hub: HubServer, tmp_path: Path, make_engine: Any, fields: dict[str, Any], words: str) -> None:
    engine: CredentialEngine = make_engine(entry({"kubeconfig": str(exec_kubeconfig(hub, tmp_path / "hub.kubeconfig", **fields))}, timeout="10s"))

    with pytest.raises(ProviderError) as raised:
        engine.get_credential(cluster("spoke-1"))

    assert words in str(raised.value) and "\n" not in str(raised.value)
