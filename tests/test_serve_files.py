"""The files ``cpcreds serve`` reads and writes, through the real command: paths from outside are
opened without blocking (a FIFO is refused, never waited on), the profiles folder and the
kubeconfig folder are checked at start and watched after, a kubeconfig that cannot be written is
a per-profile problem, and kubeconfig file names never collide."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fakes.builders import access_provider, cluster_profile
from tests.test_serve_process import CPCREDS, Serve

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs and signals")


@pytest.fixture
def serve() -> Any:
    started: list[Serve] = []

    def start(*args: str) -> Serve:
        process = Serve(list(args))
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()


def _setup(tmp_path: Path, *names: tuple[str, str]) -> tuple[Path, Path]:
    """A config with the in-process ``file`` provider (no plugin process per fetch) and a folder
    with one profile per (namespace, name); returns (config, profiles folder)."""
    token = tmp_path / "token"
    token.write_text("file-token\n")
    config = tmp_path / "providers.yaml"
    config.write_text(yaml.safe_dump({"providers": [{"name": "f", "type": "file", "options": {"tokenFile": str(token)}}]}))
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    for index, (namespace, name) in enumerate(names or (("fleet-system", "one"),)):
        profile = cluster_profile(name, access_provider("f", f"https://{index}.spoke.test:6443"), namespace=namespace)
        if not namespace:
            del profile["metadata"]["namespace"]
        (profiles / f"p{index}.yaml").write_text(yaml.safe_dump(profile))
    return config, profiles


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _until(condition: Any, what: str, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        pause.wait(0.02)


def _stops_promptly(process: Serve) -> None:
    code, took = process.stop(signal.SIGTERM, timeout=10)
    assert code == 0 and took < 5


# -- paths from outside are opened without blocking (issue 18.6, 18.7) -----------------------------


def test_a_config_file_replaced_by_a_fifo_is_a_failed_reload_and_serve_still_stops(serve: Any, tmp_path: Path) -> None:
    config, profiles = _setup(tmp_path)
    process = serve("--config", str(config), "--profiles-dir", str(profiles))
    process.wait_for(r"ready: 1 ready")
    config.unlink()
    os.mkfifo(config)  # nobody ever writes: opening it for reading the blocking way waits for ever
    process.wait_for(r"config reload failed, keeping the running config: .*is not a regular file", timeout=10)
    assert _get(process.url + "/healthz")[0] == 200
    _stops_promptly(process)


def test_a_profile_file_swapped_for_a_fifo_while_scanning_is_a_file_problem_not_a_hang(serve: Any, tmp_path: Path) -> None:
    config, profiles = _setup(tmp_path)
    process = serve("--config", str(config), "--profiles-dir", str(profiles), "--scan-interval", "10ms")
    process.wait_for(r"ready: 1 ready")
    url, target, text = process.url, profiles / "p0.yaml", (profiles / "p0.yaml").read_text()
    stop = threading.Event()

    def swap() -> None:
        # Regular file and FIFO in turn under one name, each renamed into place: a scan lists
        # a regular file and may find the FIFO when it opens it.
        while not stop.is_set():
            os.mkfifo(profiles / ".fifo")
            os.replace(profiles / ".fifo", target)
            (profiles / ".regular").write_text(text)
            os.replace(profiles / ".regular", target)

    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    try:
        _until(lambda: "is not a regular file" in json.dumps(json.loads(_get(url + "/v1/clusters")[1])["problems"]), "the FIFO reported", timeout=15)
    finally:
        stop.set()
        swapper.join(5)
    _until(lambda: not json.loads(_get(url + "/v1/clusters")[1])["problems"], "the problem cleared")
    assert json.loads(_get(url + "/v1/clusters")[1])["counts"]["ready"] == 1
    _stops_promptly(process)


@pytest.mark.parametrize("flag", ["--profile", "--config"])
def test_the_cli_refuses_a_fifo_named_as_a_file_at_once(tmp_path: Path, flag: str) -> None:
    config, profiles = _setup(tmp_path)
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    paths = {"--config": str(config), "--profile": str(profiles / "p0.yaml"), flag: str(fifo)}
    result = subprocess.run(
        [str(CPCREDS), "get-credential", "--config", paths["--config"], "--profile", paths["--profile"]],
        capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
        env={k: v for k, v in os.environ.items() if not k.startswith("CPCREDS_")},
    )
    assert result.returncode != 0
    assert result.stderr.strip().endswith(f"{fifo}: is not a regular file"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
