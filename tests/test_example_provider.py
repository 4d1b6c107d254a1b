"""The example package of docs/writing-a-provider.md, built with pip and exercised as a user would:
found by entry point, run in-process, and run as an exec plugin through its console script.

The page's code blocks must be the package's files, so the tutorial cannot drift from what is
tested here."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cpcreds.config.wire import API_VERSION_V1BETA1, EXEC_INFO_ENV

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "writing-a-provider.md"
PACKAGE = ROOT / "examples" / "cpcreds-envtoken"
CPCREDS = Path(sys.executable).with_name("cpcreds")


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.DOTALL)


@pytest.mark.parametrize(
    ("language", "marker", "path"),
    [
        ("toml", "[project]", "pyproject.toml"),
        ("python", '"""cpcreds provider type ``envtoken``', "src/cpcreds_envtoken/plugin.py"),
        ("yaml", "# providers.yaml", "providers.yaml"),
        ("yaml", "# spoke-1.yaml", "spoke-1.yaml"),
    ],
)
def test_the_page_shows_the_example_package_files_as_they_are(language: str, marker: str, path: str) -> None:
    shown = [block for block in _blocks(language) if marker in block]
    assert shown, f"{PAGE.name} has no {language} block with {marker!r}"
    assert shown[0] == (PACKAGE / path).read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example package built and installed by pip into a folder of its own (not the venv:
    no other test may see it)."""
    target = tmp_path_factory.mktemp("envtoken-site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps", "--target", str(target), str(PACKAGE)],
        check=True,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=300,
    )
    return target


def _env(site: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEET_TOKEN_", "CPCREDS_")) and k != EXEC_INFO_ENV}
    env["PYTHONPATH"] = str(site)
    env["CPCREDS_PLUGINS"] = "envtoken"  # whatever else is installed cannot change the outcome
    env.update(extra)
    return env


def _run(args: list[str], env: dict[str, str], cwd: Path = PACKAGE) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def test_the_built_package_is_found_by_its_entry_point(site: Path) -> None:
    result = _run([str(CPCREDS), "plugins"], _env(site))
    assert result.returncode == 0, result.stderr
    assert re.search(r"^envtoken\s+cpcreds-envtoken 0\.1\.0$", result.stdout, flags=re.MULTILINE)


def test_the_built_package_runs_in_process(site: Path) -> None:
    args = [str(CPCREDS), "get-credential", "--config", "providers.yaml", "--profile", "spoke-1.yaml"]
    result = _run(args, _env(site, FLEET_TOKEN_SPOKE_1="t-0123456789"))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["status"]["token"] == "t-0123456789"
    missing = _run(args, _env(site))
    assert missing.returncode == 1
    assert missing.stderr == "cpcreds: error: provider envtoken: envtoken: FLEET_TOKEN_SPOKE_1 is not set\n"


def test_the_console_script_is_an_exec_plugin_cpcreds_itself_can_run(site: Path, tmp_path: Path) -> None:
    config = tmp_path / "exec.yaml"
    config.write_text(
        json.dumps(
            {
                "providers": [
                    {
                        "name": "envtoken",
                        "execConfig": {
                            "apiVersion": API_VERSION_V1BETA1,
                            "command": str(site / "bin" / "cpcreds-envtoken"),
                            "args": ["--ttl", "2m"],
                            "env": [{"name": "PYTHONPATH", "value": str(site)}],
                            "provideClusterInfo": True,
                        },
                    }
                ]
            }
        )
    )
    args = [str(CPCREDS), "get-credential", "--config", str(config), "--profile", "spoke-1.yaml"]
    result = _run(args, _env(site, FLEET_TOKEN_SPOKE_1="t-exec"))
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["status"]["token"] == "t-exec"


def test_the_console_script_names_a_bad_option_in_one_line(site: Path) -> None:
    result = _run([str(site / "bin" / "cpcreds-envtoken"), "--prefix=fleet-"], _env(site))
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith("cpcreds-envtoken: option prefix: ")
    assert result.stderr.count("\n") == 1
