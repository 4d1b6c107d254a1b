"""scripts/dev-cluster.py: the local API server the docs send newcomers to, driven as they would."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.test_cli import REPO, cli_env, ok_json, run_cli
from tests.test_cli import kubectl_env as _kubectl_env

SCRIPT = REPO / "scripts" / "dev-cluster.py"


@pytest.fixture
def dev_cluster(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path, list[str]]]:
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT)], cwd=tmp_path, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    lines: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line.rstrip("\n"))
        if line.startswith("Ctrl-C"):
            break
    match = re.match(r"dev cluster: https://127\.0\.0\.1:\d+ \(CA: (?P<dir>.+)/ca\.crt\)$", lines[0]) if lines else None
    assert match, (lines, proc.stderr.read() if proc.poll() is not None and proc.stderr else "")
    try:
        yield proc, Path(match["dir"]), lines
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_dev_cluster_serves_what_it_prints_and_stops_on_ctrl_c(dev_cluster: tuple[subprocess.Popen[str], Path, list[str]], tmp_path: Path) -> None:
    proc, folder, lines = dev_cluster
    assert f"  cd {folder}" in lines
    for name in ("providers.yaml", "clusterprofiles.yaml", "hub.kubeconfig", "token", "ca.crt"):
        assert (folder / name).is_file()
    # The commands it suggests, run as printed.
    answer = ok_json(run_cli("get-credential", "--config", "providers.yaml", "--profile", "clusterprofiles.yaml", "--name", "spoke-1", cwd=folder))
    assert answer["status"]["token"] == (folder / "token").read_text().strip()
    kubeconfig = run_cli("kubeconfig", "--config", "providers.yaml", "--profile", "clusterprofiles.yaml", "-o", tmp_path / "fleet.kubeconfig", cwd=folder)
    assert kubeconfig.returncode == 0, kubeconfig.stderr
    assert [c["name"] for c in yaml.safe_load((tmp_path / "fleet.kubeconfig").read_text())["contexts"]] == ["fleet/spoke-1", "fleet/spoke-2"]
    if shutil.which("kubectl"):
        env = _kubectl_env(tmp_path)
        for kubeconfig_path, args in (
            (tmp_path / "fleet.kubeconfig", ["--context", "fleet/spoke-1", "get", "namespaces", "-o", "name"]),
            (folder / "hub.kubeconfig", ["get", "clusterprofiles", "-o", "name"]),
        ):
            result = subprocess.run(
                ["kubectl", "--kubeconfig", str(kubeconfig_path), "--request-timeout=20s", *args],
                cwd=folder, env=env, capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert result.returncode == 0, result.stderr
            assert result.stdout.split()[0] in ("namespace/default", "clusterprofile.multicluster.x-k8s.io/spoke-1")
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=20) == 0
    assert proc.stdout is not None and "dev cluster stopped" in proc.stdout.read()
    assert not folder.exists()  # a temporary folder goes with the server
