"""Hostile ``env`` lines and environments: reading what ``env`` would run answers an
:class:`EnvCommand` or one printable :class:`EnvLineError` line, in bounded time and memory,
whatever ``-S`` strings and ``${NAME}`` values say (values that hold ``-S${NAME}${NAME}``
doubled at each split: seconds of CPU and unbounded memory before)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpcreds import PluginNotAllowed
from cpcreds.exec.envline import EnvCommand, EnvLineError, parse_env_args
from tests.test_plugin_policy import V1, config, digest, pinned, refusal_of

ENV = shutil.which("env", path="/usr/bin:/bin")

_PIECES = ["-S", "-S${X}", "${X}", "${Y}", "${X}${X}", " ", "'", '"', "\\_", "\\c", "#", "-i", "-u", "A=1", "sh", "--", "-", "\\t", "a" * 50]
_pieces = st.lists(st.sampled_from(_PIECES) | st.text(max_size=5), max_size=10).map("".join)


def _bounded(args: list[str], environ: dict[str, str]) -> EnvCommand | None:
    started = time.monotonic()
    try:
        command = parse_env_args(args, environ)
    except EnvLineError as exc:
        text = str(exc)
        assert text.isprintable() and len(text) < 1000, text[:200]
        command = None
    assert time.monotonic() - started < 2.0
    return command


@settings(max_examples=200, deadline=None)
@given(args=st.lists(_pieces, min_size=1, max_size=4), x=_pieces, y=_pieces, pad=st.integers(0, 5000))
def test_any_line_and_environment_is_read_or_refused_in_bounded_time(args: list[str], x: str, y: str, pad: int) -> None:
    command = _bounded(args, {"X": x + "a" * pad, "Y": y})
    if command is not None:
        assert sum(map(len, command.args)) + len(command.program) <= 16 * 128 * 1024 + sum(map(len, args))


@pytest.mark.parametrize("pad", [10, 20_000, 120_000])
def test_a_value_that_doubles_at_each_split_is_refused_at_once(pad: int) -> None:
    with pytest.raises(EnvLineError, match="more than execve takes"):
        parse_env_args(["-S${X}"], {"X": "-S${X}${X}" + "a" * pad})
    with pytest.raises(EnvLineError, match="more than execve takes"):
        parse_env_args(["-S" + "${X} " * 1000, "sh"], {"X": "b" * 4000})


@pytest.mark.skipif(ENV is None, reason="needs env")
def test_a_profile_env_doubling_an_env_line_is_refused_by_the_policy_in_bounded_time(tmp_path: Path) -> None:
    assert ENV is not None
    policy = pinned(tmp_path, (ENV, digest(ENV)))
    entry = {"name": "p", "execConfig": {"apiVersion": V1, "command": ENV, "args": ["-S${X}"], "env": [{"name": "X", "value": "-S${X}${X}" + "a" * 2000}]}}
    started = time.monotonic()
    error = refusal_of(config(tmp_path, policy, entry), "p")
    assert time.monotonic() - started < 5
    assert isinstance(error, PluginNotAllowed) and "execve" in str(error) and "\n" not in str(error) and len(str(error)) < 2000

