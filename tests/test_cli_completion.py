"""``cpcreds completion bash|zsh|fish``: the scripts complete commands, options and their values
in the real shells (each test skips when its shell is not installed)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_cli import cli_env, run_cli

needs = {shell: pytest.mark.skipif(shutil.which(shell) is None, reason=f"{shell} is not installed") for shell in ("bash", "zsh", "fish")}


def script(tmp_path: Path, shell: str) -> Path:
    result = run_cli("completion", shell, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    path = tmp_path / f"cpcreds.{shell}"
    path.write_text(result.stdout)
    return path


def shell_env(tmp_path: Path) -> dict[str, str]:
    env = cli_env(HOME=str(tmp_path), PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    env.pop("ZDOTDIR", None)
    return env


# -- bash: call the completion function as bash's programmable completion does ---------------------


def complete_bash(tmp_path: Path, line: str) -> list[str]:
    """COMPREPLY for the cursor at the end of ``line``, words split as bash does (``=`` too)."""
    words = line.replace("=", " = ").split()
    if line.endswith(" "):
        words.append("")
    code = (
        f"source {shlex.quote(str(script(tmp_path, 'bash')))}\n"
        f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
        f"COMP_LINE={shlex.quote(line)}; COMP_POINT=${{#COMP_LINE}}\n"
        '_cpcreds; printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    result = subprocess.run(["bash", "--norc", "--noprofile", "-c", code], cwd=tmp_path, env=shell_env(tmp_path), capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    return [w for w in result.stdout.splitlines() if w]


@needs["bash"]
@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("cpcreds ", ["--help", "--version", "-h", "cache", "completion", "get-credential", "image-credential", "kubeconfig", "pin", "plugins", "resolve", "serve", "validate"]),
        ("cpcreds get-cr", ["get-credential"]),
        ("cpcreds resolve --sh", ["--show-values"]),
        ("cpcreds kubeconfig --sk", ["--skip-unmatched"]),
        ("cpcreds get-credential --clusterprofile-p", ["--clusterprofile-provider-file"]),
        ("cpcreds resolve -o ", ["json", "yaml"]),
        ("cpcreds resolve --output=y", ["yaml"]),
        ("cpcreds get-credential --api-version client.authentication.k8s.io/v1b", ["client.authentication.k8s.io/v1beta1"]),
        ("cpcreds plugins -o ", ["json", "text"]),
        ("cpcreds completion ", ["--help", "-h", "bash", "fish", "zsh"]),
        ("cpcreds cache ", ["--help", "-h", "--profile", "--output", "-o", "clear", "list"]),
        ("cpcreds cache list -o ", ["json", "table"]),
        ("cpcreds get-credential --no-c", ["--no-cache"]),
        ("cpcreds get-credential --name ", []),
    ],
)
def test_bash_completes_commands_options_and_choices(tmp_path: Path, line: str, expected: list[str]) -> None:
    assert sorted(complete_bash(tmp_path, line)) == sorted(expected)


@needs["bash"]
def test_bash_completes_file_names_for_file_options(tmp_path: Path) -> None:
    (tmp_path / "providers.yaml").write_text("providers: []\n")
    (tmp_path / "profile.yaml").write_text("{}\n")
    assert complete_bash(tmp_path, "cpcreds get-credential --config prov") == ["providers.yaml"]
    assert complete_bash(tmp_path, "cpcreds kubeconfig --config providers.yaml --profile prof") == ["profile.yaml"]


@needs["bash"]
def test_bash_script_registers_the_completion_for_cpcreds(tmp_path: Path) -> None:
    code = f"source {shlex.quote(str(script(tmp_path, 'bash')))}; complete -p cpcreds"
    result = subprocess.run(["bash", "--norc", "--noprofile", "-c", code], env=shell_env(tmp_path), capture_output=True, text=True, timeout=30)
    assert result.stdout.strip() == "complete -F _cpcreds cpcreds"


# -- zsh: a real interactive zsh in a pseudo-terminal, Tab pressed ----------------------------------

ZSH_DRIVER = r"""
zmodload zsh/zpty || exit 3
zpty z zsh -f -i
zpty -w z 'PS1="> "; autoload -U compinit && compinit -u -D'
zpty -w z "source $1"
zpty -w z 'zstyle ":completion:*" menu no'
zpty -w -n z "$2"$'\t'
sleep 1
zpty -w -n z $'\C-a print -r -- RESULT:\n'
sleep 1
out=""
while zpty -r -t z line; do out+="$line"; done
print -r -- "$out" | tr -d '\r' | grep -a '^RESULT:' | tail -1
zpty -d z
"""


def complete_zsh(tmp_path: Path, line: str) -> str:
    driver = tmp_path / "driver.zsh"
    driver.write_text(ZSH_DRIVER)
    result = subprocess.run(
        ["zsh", "-f", str(driver), str(script(tmp_path, "zsh")), line],
        cwd=tmp_path, env=shell_env(tmp_path), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().removeprefix("RESULT:").strip()


@needs["zsh"]
@pytest.mark.parametrize(
    ("line", "completed"),
    [
        ("cpcreds get-cr", "cpcreds get-credential"),
        ("cpcreds resolve --show", "cpcreds resolve --show-values"),
        ("cpcreds resolve -o ya", "cpcreds resolve -o yaml"),
        ("cpcreds completion fi", "cpcreds completion fish"),
    ],
)
def test_zsh_completes_commands_options_and_choices(tmp_path: Path, line: str, completed: str) -> None:
    assert complete_zsh(tmp_path, line) == completed


# -- fish: its own `complete -C` asks the loaded completions ----------------------------------------


def complete_fish(tmp_path: Path, line: str) -> list[str]:
    code = f"source {shlex.quote(str(script(tmp_path, 'fish')))}; complete -C {shlex.quote(line)}"
    result = subprocess.run(["fish", "--no-config", "-c", code], cwd=tmp_path, env=shell_env(tmp_path), capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    return sorted(entry.split("\t")[0] for entry in result.stdout.splitlines())


@needs["fish"]
@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("cpcreds get-cr", ["get-credential"]),
        ("cpcreds resolve --sh", ["--show-values"]),
        ("cpcreds resolve -o ", ["json", "yaml"]),
        ("cpcreds completion ", ["bash", "fish", "zsh"]),
        ("cpcreds kubeconfig --skip", ["--skip-unmatched"]),
    ],
)
def test_fish_completes_commands_options_and_choices(tmp_path: Path, line: str, expected: list[str]) -> None:
    assert complete_fish(tmp_path, line) == expected


@needs["fish"]
def test_fish_completes_file_names_for_file_options(tmp_path: Path) -> None:
    (tmp_path / "providers.yaml").write_text("providers: []\n")
    assert complete_fish(tmp_path, "cpcreds validate --config prov") == ["providers.yaml"]


def test_completion_for_an_unknown_shell_is_a_usage_error(tmp_path: Path) -> None:
    result = run_cli("completion", "tcsh", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().endswith("(see cpcreds completion --help)")


@needs["zsh"]
def test_zsh_completes_file_names_for_file_options(tmp_path: Path) -> None:
    (tmp_path / "providers.yaml").write_text("providers: []\n")
    assert complete_zsh(tmp_path, "cpcreds validate --config prov") == "cpcreds validate --config providers.yaml"
