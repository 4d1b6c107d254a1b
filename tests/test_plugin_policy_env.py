"""pluginPolicy through ``env``: the program a ``#!/usr/bin/env ...`` line (or an ``env``
command) would run is checked and, when pinned, run from its sealed copy, whatever env's
options (``-S``, ``-i``, ``-u``, ``NAME=VALUE``, ``-C``, ...) say (issue 18, item 3)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cpcreds import PluginNotAllowed
from cpcreds.config import PluginPolicy
from cpcreds.exec.envline import EnvLineError, parse_env_args
from cpcreds.exec.pinning import PinStore
from cpcreds.exec.policy import PluginGate
from tests.test_cli import cli_env, run_cli
from tests.test_plugin_policy import SH, answer, config, digest, entry, pinned, profile, refusal_of, script_plugin, token_of

ENV = shutil.which("env", path="/usr/bin:/bin")
pytestmark = pytest.mark.skipif(ENV is None or not os.path.exists(SH), reason="needs env and /bin/sh")


def impostor(folder: Path, name: str = "sh") -> Path:
    """A program called ``name`` that answers a token nobody allowed."""
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\nprintf '%s' '{answer('impostor')}'\n")
    path.chmod(0o755)
    return path


def write_config(tmp_path: Path, policy: dict[str, Any] | None, *entries: dict[str, Any], name: str = "config.yaml") -> None:
    document: dict[str, Any] = {"providers": list(entries)}
    if policy is not None:
        document["pluginPolicy"] = policy
    (tmp_path / name).write_text(yaml.safe_dump(document))
    (tmp_path / "profile.yaml").write_text(yaml.safe_dump(profile(entries[0]["name"])))


def with_path(*folders: Path | str) -> dict[str, str]:
    env = cli_env()
    env["PATH"] = os.pathsep.join([*map(str, folders), "/usr/bin", "/bin"])
    return env


def test_env_split_string_program_is_checked_not_just_env(tmp_path: Path) -> None:
    # The script and env pinned (what `cpcreds pin` printed before): env -S's program is a
    # `sh` first on PATH that nobody allowed. It must not run, and validate must say so.
    evil = tmp_path / "evil"
    impostor(evil)
    plugin = script_plugin(tmp_path, "genuine", shebang=f"#!{ENV} -S sh -e")
    write_config(tmp_path, pinned(tmp_path, (plugin, digest(plugin)), (ENV, digest(ENV))), entry("p", str(plugin)))  # type: ignore[arg-type]
    refused = run_cli("get-credential", "--no-cache", "--config", "config.yaml", "--profile", "profile.yaml", cwd=tmp_path, env=with_path(evil))
    assert refused.returncode == 1 and refused.stdout == "" and "impostor" not in refused.stderr
    assert f"its interpreter sh (from #! via {ENV}) is not in pluginPolicy.allowlist" in refused.stderr
    checked = run_cli("validate", "--config", "config.yaml", cwd=tmp_path, env=with_path(evil))
    assert "pluginPolicy refuses it: its interpreter sh" in checked.stdout and "allowed by pluginPolicy" not in checked.stdout


def test_pin_lists_the_program_env_runs_and_then_only_that_program_runs(tmp_path: Path) -> None:
    plugin = script_plugin(tmp_path, "through-env-S", shebang=f"#!{ENV} -S sh -e")
    write_config(tmp_path, None, entry("p", str(plugin)))
    printed = run_cli("pin", "--config", "config.yaml", cwd=tmp_path, env=with_path())
    assert printed.returncode == 0, printed.stderr
    sh = shutil.which("sh", path="/usr/bin:/bin")
    assert f'- command: "{sh}"  # interpreter of {plugin}, through {ENV}' in printed.stdout
    (tmp_path / "pinned.yaml").write_text(printed.stdout + yaml.safe_dump({"providers": [entry("p", str(plugin))]}))
    ran = run_cli("get-credential", "--no-cache", "--config", "pinned.yaml", "--profile", "profile.yaml", cwd=tmp_path, env=with_path())
    assert ran.returncode == 0 and "through-env-S" in ran.stdout, ran.stderr
    evil = tmp_path / "evil"
    impostor(evil)
    refused = run_cli("get-credential", "--no-cache", "--config", "pinned.yaml", "--profile", "profile.yaml", cwd=tmp_path, env=with_path(evil))
    assert refused.returncode == 1 and "impostor" not in refused.stdout + refused.stderr
    assert f"its interpreter sh (from #! via {ENV}) is not in pluginPolicy.allowlist" in refused.stderr


def test_a_path_set_by_env_decides_which_program_is_checked(tmp_path: Path) -> None:
    evil = tmp_path / "evil"
    impostor(evil)
    plugin = script_plugin(tmp_path, "x", shebang=f"#!{ENV} -S PATH={evil} sh")
    policy = pinned(tmp_path, (plugin, digest(plugin)), (ENV, digest(ENV)), (SH, None), ("/usr/bin/sh", None))  # type: ignore[arg-type]
    error = refusal_of(config(tmp_path, policy, entry("p", str(plugin))), "p")
    assert f"its interpreter sh (from #! via {ENV}) is not in pluginPolicy.allowlist" in str(error)
    # -i empties the environment: execvp then searches /bin:/usr/bin, where the real sh is.
    cleared = script_plugin(tmp_path, "cleared", name="cleared", shebang=f"#!{ENV} -S -i sh")
    policy = pinned(tmp_path, (cleared, digest(cleared)), (ENV, None), (SH, None))  # type: ignore[arg-type]
    assert token_of(config(tmp_path, policy, entry("p", str(cleared))), "p") == "cleared"


def test_env_options_with_a_pinned_program_are_refused_not_dropped(tmp_path: Path) -> None:
    # cpcreds runs a pinned program from its sealed copy itself; it cannot apply env's -i then.
    plugin = script_plugin(tmp_path, "x", shebang=f"#!{ENV} -S -i sh")
    policy = pinned(tmp_path, (plugin, digest(plugin)), (ENV, digest(ENV)), (SH, digest(SH)))  # type: ignore[arg-type]
    error = refusal_of(config(tmp_path, policy, entry("p", str(plugin))), "p")
    assert error.decision == "interpreter" and "is pinned, but env must run it by name to apply -i" in str(error)


def test_an_env_line_env_would_refuse_is_refused(tmp_path: Path) -> None:
    plugin = script_plugin(tmp_path, "x", shebang=f'#!{ENV} -S "sh')
    policy = pinned(tmp_path, (plugin, digest(plugin)), (ENV, None), (SH, None))  # type: ignore[arg-type]
    error = refusal_of(config(tmp_path, policy, entry("p", str(plugin))), "p")
    assert "no terminating quote" in str(error)


def test_env_as_the_command_is_checked_like_env_in_a_shebang(tmp_path: Path) -> None:
    evil = tmp_path / "evil"
    impostor(evil)
    script = script_plugin(tmp_path, "direct")
    policy = pinned(tmp_path, (ENV, digest(ENV)), (script, None))  # type: ignore[arg-type]
    error = refusal_of(config(tmp_path, policy, entry("p", ENV, f"PATH={evil}", "sh", str(script))), "p")  # type: ignore[arg-type]
    assert f"sh (run by {ENV}) is not in pluginPolicy.allowlist" in str(error)
    sh = shutil.which("sh")  # env's program as the PATH of this process finds it
    allowed = pinned(tmp_path, (ENV, digest(ENV)), (script, None), (sh, digest(sh)))  # type: ignore[arg-type]
    assert token_of(config(tmp_path, allowed, entry("p", ENV, "-S", "sh -e", str(script))), "p") == "direct"


# -- what env would run, read as GNU env reads it ---------------------------------------------

_TOKENS = ["-S", "-S ", "-i", "-u", "-uPATH", "PATH", "PATH=/nonexistent", "PATH=/bin:/usr/bin", "A=1", "sh", "/bin/sh", "-",
           "--", "-v", "-C", "/", "'", '"', "\\_", "\\c", "#", "${HOME}", "${PATH}", "--split-string=", "--ignore-env", "-0",
           "--unset=PATH", "--default-signal", "-iS", "-vS", "-Ssh", "\\t", " ", "  "]
lines = st.lists(st.sampled_from(_TOKENS), max_size=8).map("".join).filter(lambda line: "\n" not in line and len(line) < 200)

_STORE = PinStore()


@settings(max_examples=120, deadline=None)
@given(line=lines, args=st.lists(st.sampled_from(["sh", "-i", "A=1", "--", "x"]), max_size=2))
def test_no_env_line_is_allowed_unless_the_program_it_runs_is_pinned(tmp_path_factory: pytest.TempPathFactory, line: str, args: list[str]) -> None:
    folder = tmp_path_factory.mktemp("envline")
    plugin = folder / "plugin"
    plugin.write_text(f"#!{ENV} {line}\nexit 0\n")
    plugin.chmod(0o755)
    environ = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}
    # Script and env pinned, nothing else allowed: every line is refused, whatever env would run.
    gate = PluginGate(PluginPolicy.model_validate(pinned(folder, (plugin, digest(plugin)), (ENV, digest(ENV)))), pins=_STORE)  # type: ignore[arg-type]
    with pytest.raises(PluginNotAllowed) as refused:
        gate.admit("p", str(plugin), str(plugin), [str(plugin), *args], environ)
    assert str(refused.value).isprintable()
    # With sh pinned as well: allowed only when env would run sh, and then sh's sealed copy runs.
    sh = shutil.which("sh", path=environ["PATH"])
    gate = PluginGate(PluginPolicy.model_validate(pinned(folder, (plugin, digest(plugin)), (ENV, digest(ENV)), (sh, digest(sh)))), pins=_STORE)  # type: ignore[arg-type]
    try:
        admission = gate.admit("p", str(plugin), str(plugin), [str(plugin), *args], environ)
    except PluginNotAllowed:
        return
    try:
        assert admission.pinned and admission.executable == admission.pinned[-1].executable
        assert admission.pinned[-1].sha256 == digest(sh)  # type: ignore[arg-type]
        parsed = parse_env_args([line.strip(" \t"), "/dev/fd/N", *args], environ)
        assert parsed.find_program(environ) == sh and parsed.only_finds_program
    finally:
        admission.release()


@settings(max_examples=60, deadline=None)
@given(line=lines)
def test_the_program_read_from_an_env_line_is_the_one_gnu_env_runs(tmp_path_factory: pytest.TempPathFactory, line: str) -> None:
    # Differential: the real env runs with a PATH of programs that say who they are.
    folder = tmp_path_factory.mktemp("differential")
    for name in ("sh", "x"):
        path = folder / name
        path.write_text(f"#!/bin/sh\nprintf 'ran:%s' \"$0\"\n")  # $0: the path execvp found
        path.chmod(0o755)
    environ = {"PATH": str(folder), "HOME": str(folder)}
    args = [line.strip(" \t"), "x"] if line.strip(" \t") else ["x"]
    try:
        parsed = parse_env_args(args, environ)
    except EnvLineError:
        expected = None
    else:
        program = parsed.find_program(environ, cwd=str(folder))
        expected = Path(program).name if program is not None and Path(program).parent == folder else "?"
    ran = subprocess.run([ENV, *args], env=environ, cwd=folder, capture_output=True, text=True, timeout=10)  # type: ignore[list-item]
    ran_path = ran.stdout.removeprefix("ran:") if ran.returncode == 0 and ran.stdout.startswith("ran:") else ""
    seen = Path(ran_path).name if Path(ran_path).parent == folder else None  # run as a program, not read by a shell
    # Whenever env runs one of these programs, it is the one read from the line (env may still
    # fail where the reading names a program: a -C folder that does not exist, a bad signal).
    if seen is not None:
        assert seen == expected, (args, ran.stderr)


def test_env_finds_its_program_on_the_path_the_plugin_gets(tmp_path: Path) -> None:
    # execConfig.env sets PATH for the plugin: env looks its program up there, and so does the gate.
    evil = tmp_path / "evil"
    impostor(evil)
    plugin = script_plugin(tmp_path, "x", shebang=f"#!{ENV} sh")
    sh = shutil.which("sh")
    policy = pinned(tmp_path, (plugin, None), (ENV, None), (sh, None))  # type: ignore[arg-type]
    provider = entry("p", str(plugin))
    provider["execConfig"]["env"] = [{"name": "PATH", "value": f"{evil}{os.pathsep}/usr/bin:/bin"}]
    error = refusal_of(config(tmp_path, policy, provider), "p")
    assert f"its interpreter sh (from #! via {ENV}) is not in pluginPolicy.allowlist" in str(error)


# -- env's program as the kernel finds it (issue 28, item 1) ------------------------------------


@pytest.mark.parametrize("how", ["argument", "PATH entry", "-S PATH="])
def test_env_cannot_reach_past_the_allowlist_through_a_symlink_and_dotdot(tmp_path: Path, how: str) -> None:
    from tests.test_plugin_policy import symlink_maze

    allowed, other = symlink_maze(tmp_path)
    sneaky_folder = f"{tmp_path}/allowed/lnk/.."
    args = {
        "argument": [f"{sneaky_folder}/x"],
        "PATH entry": [f"PATH={sneaky_folder}:/usr/bin:/bin", "x"],
        "-S PATH=": ["-S", f"PATH={sneaky_folder}:/usr/bin:/bin x"],
    }[how]
    policy = pinned(tmp_path, (ENV, None), (allowed, None), (SH, None), (os.path.realpath(SH), None))  # type: ignore[arg-type]
    error = refusal_of(config(tmp_path, policy, entry("p", ENV, *args)), "p")  # type: ignore[arg-type]
    assert "is not in pluginPolicy.allowlist" in str(error)
