"""The real ``cpcreds serve`` command: help, the README's main job on the bundled example,
signals (SIGTERM, SIGINT, SIGHUP), no orphan plugin processes."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fakes.builders import FAKE_PLUGIN, access_provider, cluster_profile
from tests.fakes.processes import alive

ROOT = Path(__file__).resolve().parent.parent
CPCREDS = Path(sys.executable).with_name("cpcreds")


class Serve:
    """A ``cpcreds serve`` subprocess whose stderr is read line by line."""

    def __init__(self, args: list[str], cwd: Path = ROOT, env: dict[str, str] | None = None, **popen: Any) -> None:
        """``popen``: more Popen arguments (``preexec_fn``, ``stdout``; stdout is discarded by default)."""
        environment = {k: v for k, v in os.environ.items() if not k.startswith("CPCREDS_")}
        environment.update(env or {})
        self.process = subprocess.Popen(
            [str(CPCREDS), "serve", "--listen", "127.0.0.1:0", *args],
            cwd=cwd,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=popen.pop("stdout", subprocess.DEVNULL),
            stderr=subprocess.PIPE,
            text=True,
            **popen,
        )
        self.lines: list[str] = []
        self._partial = ""  # the start of a line whose end has not arrived yet

    def wait_for(self, pattern: str, timeout: float = 60.0) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        assert self.process.stderr is not None
        while True:
            for line in self.lines:
                if match := re.search(pattern, line):
                    return match
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.process.poll() is not None and not select.select([self.process.stderr], [], [], 0)[0]:
                raise AssertionError(f"no line matching {pattern!r}; got:\n" + "".join(self.lines))
            ready, _, _ = select.select([self.process.stderr], [], [], remaining)
            if ready:
                # The descriptor, not readline(): a text stream would read two lines that arrived
                # together into its own buffer, where select() cannot see the second one.
                chunk = os.read(self.process.stderr.fileno(), 65536).decode("utf-8", "replace")
                if chunk:
                    self._partial += chunk
                    *complete, self._partial = self._partial.split("\n")
                    self.lines += [line + "\n" for line in complete]

    @property
    def url(self) -> str:
        return self.wait_for(r"status page (http://\S+)/").group(1)

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 10.0) -> tuple[int, float]:
        started = time.monotonic()
        self.process.send_signal(signum)
        code = self.process.wait(timeout)
        return code, time.monotonic() - started

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if self.process.stderr is not None:
            self.process.stderr.close()


@pytest.fixture
def serve() -> Any:
    started: list[Serve] = []

    def start(*args: str, **kwargs: Any) -> Serve:
        process = Serve(list(args), **kwargs)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()


def test_help_shows_each_setting_as_flag_variable_and_file_field() -> None:
    result = subprocess.run([str(CPCREDS), "serve", "--help"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    for flag, variable, field in [
        ("--profiles-dir", "CPCREDS_PROFILES_DIR", "serve.profilesDir"),
        ("--hub-kubeconfig", "CPCREDS_HUB_KUBECONFIG", "serve.hubKubeconfig"),
        ("--in-cluster", "CPCREDS_IN_CLUSTER", "serve.inCluster"),
        ("--listen", "CPCREDS_LISTEN", "serve.listen"),
        ("--kubeconfig-dir", "CPCREDS_KUBECONFIG_DIR", "serve.kubeconfigDir"),
    ]:
        assert flag in text and f"[{variable}, {field}]" in text


def test_the_readme_main_job_serves_the_bundled_example_and_stops_on_ctrl_c(serve: Any, tmp_path: Path) -> None:
    kubeconfigs = tmp_path / "kubeconfigs"
    process = serve("--config", "config.example.yaml", "--profiles-dir", "examples", "--kubeconfig-dir", str(kubeconfigs))
    url = process.url
    process.wait_for(r"kubeconfigs in .*kubeconfigs")
    process.wait_for(r"ready: 1 ready")
    with urllib.request.urlopen(url + "/v1/clusters", timeout=10) as response:
        clusters = json.loads(response.read())["clusters"]
    assert [(c["key"], c["state"], c["provider"]) for c in clusters] == [("fleet-system/demo-cluster", "ready", "demo")]
    code, took = process.stop(signal.SIGINT)
    assert code == 0 and took < 5
    # The kubeconfig it wrote works on its own: its exec entry prints the credential.
    document = yaml.safe_load((kubeconfigs / "kubeconfig").read_text())
    entry = document["users"][0]["user"]["exec"]
    result = subprocess.run([entry["command"], *entry["args"]], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["status"]["token"].startswith("demo.fleet.demo-cluster.")


def _hanging_setup(tmp_path: Path) -> tuple[Path, Path]:
    pidfile = tmp_path / "child.pid"
    config = tmp_path / "providers.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "providers": [
                    {
                        "name": "hang",
                        "timeout": "5m",
                        "execConfig": {
                            "apiVersion": "client.authentication.k8s.io/v1",
                            "command": sys.executable,
                            "args": [str(FAKE_PLUGIN), "--hang", "--child-pidfile", str(pidfile)],
                        },
                    }
                ]
            }
        )
    )
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "a.yaml").write_text(yaml.safe_dump(cluster_profile("hung", access_provider("hang"))))
    return config, pidfile


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_shutdown_within_5s_kills_running_plugins(serve: Any, tmp_path: Path, signum: int) -> None:
    config, pidfile = _hanging_setup(tmp_path)
    process = serve("--config", str(config), "--profiles-dir", str(tmp_path / "profiles"))
    process.url
    deadline = time.monotonic() + 20
    while not (pidfile.exists() and pidfile.read_text().strip()):  # the plugin started its child
        assert time.monotonic() < deadline, "the plugin never started"
        select.select([], [], [], 0.02)
    child = int(pidfile.read_text())
    code, took = process.stop(signum)
    assert code == 0 and took < 5
    assert not alive(child), "a plugin process outlived serve"


def test_sighup_with_a_broken_config_keeps_serving(serve: Any, tmp_path: Path) -> None:
    config = tmp_path / "providers.yaml"
    config.write_text((ROOT / "config.example.yaml").read_text().replace("./examples/plugins", str(ROOT / "examples" / "plugins")))
    process = serve("--config", str(config), "--profiles-dir", str(ROOT / "examples"), "--no-watch-config")
    url = process.url
    process.wait_for(r"ready: 1 ready")
    config.write_text("providers: nope\n")
    process.process.send_signal(signal.SIGHUP)
    process.wait_for(r"config reload failed, keeping the running config: .*providers")
    with urllib.request.urlopen(url + "/healthz", timeout=10) as response:
        assert response.status == 200
    code, _ = process.stop()
    assert code == 0


def test_kubectl_reaches_a_cluster_through_the_kubeconfig_serve_wrote(serve: Any, tmp_path: Path, spoke: Any) -> None:
    import shutil

    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("no kubectl on this machine")
    config = tmp_path / "providers.yaml"
    config.write_text(
        yaml.safe_dump(
            {"providers": [{"name": "token", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable, "args": [str(FAKE_PLUGIN), "--token", "spoke-token", "--expires-in", "600"]}}]}
        )
    )
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "spoke.yaml").write_text(yaml.safe_dump(cluster_profile("kubectl", access_provider("token", spoke.url, ca_pem=spoke.ca_pem))))
    kubeconfigs = tmp_path / "kubeconfigs"
    process = serve("--config", str(config), "--profiles-dir", str(profiles), "--kubeconfig-dir", str(kubeconfigs))
    process.wait_for(r"ready: 1 ready")
    process.wait_for(r"kubeconfigs in")
    merged = kubeconfigs / "kubeconfig"
    deadline = time.monotonic() + 10
    while not merged.exists():
        assert time.monotonic() < deadline, "no merged kubeconfig"
        select.select([], [], [], 0.05)
    result = subprocess.run(
        [kubectl, "--kubeconfig", str(merged), "--context", "fleet-system/kubectl", "get", "namespaces", "-o", "name"],
        capture_output=True, text=True, timeout=60, env={k: v for k, v in os.environ.items() if not k.startswith("CPCREDS_")},
    )
    assert result.returncode == 0, result.stderr
    assert "namespace/default" in result.stdout
