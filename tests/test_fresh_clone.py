"""What a newcomer does first works from a fresh clone: the README's first command serves the
bundled example (slow: a new venv and an install), and the README's test command passes when it
runs in the background (where the shell starts it with Ctrl-C ignored)."""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_a_suite_run_in_the_background_still_gives_its_children_ctrl_c(tmp_path: Path) -> None:
    # A test that sends Ctrl-C to a child, run by a pytest that a background shell started: the
    # suite's setup (tests/conftest.py) must hand the child SIGINT's default back.
    test_file = tmp_path / "test_ctrl_c_child.py"
    test_file.write_text(
        textwrap.dedent(
            """
            import signal, subprocess, sys

            def test_the_child_dies_of_ctrl_c():
                child = subprocess.run([sys.executable, "-c", "import signal; signal.raise_signal(signal.SIGINT)"], timeout=60)
                assert child.returncode == -signal.SIGINT
            """
        )
    )
    # Started with `&` by a non-interactive shell, as CI runners do: the shell starts the job
    # with SIGINT and SIGQUIT ignored. (Not a preexec_fn: Python code between fork and exec in a
    # worker that has loaded grpc can abort in grpc's fork handler.)
    pytest_command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "tests.conftest", "-q", "--rootdir", str(tmp_path), str(test_file)]
    run = subprocess.run(
        ["bash", "-c", '"$@" & wait $!', "bash", *pytest_command],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr


def _read_until(process: subprocess.Popen[str], needle: str, timeout: float) -> list[str]:
    """The process's output lines up to the first one containing ``needle``."""
    assert process.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while not lines or needle not in lines[-1]:
        remaining = deadline - time.monotonic()
        ready, _, _ = select.select([process.stdout], [], [], max(remaining, 0))
        line = process.stdout.readline() if ready else ""
        if not line:  # timed out, or the output ended (the script exited)
            raise AssertionError(f"no line with {needle!r} within {timeout:.0f} s; got:\n" + "".join(lines))
        lines.append(line)
    return lines


@pytest.mark.slow
@pytest.mark.skipif(not (ROOT / ".git").exists() or shutil.which("git") is None, reason="needs a git checkout and git")
def test_the_readmes_first_command_serves_the_example_from_a_fresh_clone(tmp_path: Path) -> None:
    clone = tmp_path / "cpcreds"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=120)
    # A newcomer's shell: none of this suite's venv, cache folder (tests/conftest.py's
    # XDG_CACHE_HOME) or cpcreds settings; pip's download cache in ~/.cache/pip is reused.
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "XDG_CACHE_HOME") and not k.startswith("CPCREDS_")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if Path(p) != Path(sys.executable).parent)
    process = subprocess.Popen(
        ["bash", "scripts/example.sh", "--listen", "127.0.0.1:0"],
        cwd=clone, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,  # its own process group: the script, pip, serve and its plugins
    )  # fmt: skip
    try:
        lines = _read_until(process, "cpcreds serve: ready:", timeout=300)
        assert any(line.startswith("==> installing cpcreds' dependencies from requirements.lock") for line in lines)
        assert any(line.startswith(f"cpcreds serve: kubeconfigs in {clone}") for line in lines), lines
        os.killpg(process.pid, signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        if process.stdout is not None:
            process.stdout.close()
    with pytest.raises(ProcessLookupError):  # nothing of the group outlived serve
        os.killpg(process.pid, 0)
