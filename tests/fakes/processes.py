"""Looking at processes a test started indirectly (plugins and their children), and making a
script's own thread meet a signal at a chosen point."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any


def alive(pid: int) -> bool:
    """Whether ``pid`` is a running process. A zombie counts as dead: its parent (a plugin,
    killed too) will not reap it, init does."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def children_get_ctrl_c() -> None:
    """Make every process the tests start take Ctrl-C (SIGINT) the default way.

    A shell starts a background job (``bash scripts/test.sh &``, many CI runners) with SIGINT
    ignored, and an ignored signal stays ignored across fork and exec: the tests' children would
    then shrug off the Ctrl-C the tests send them (Python does not even install its
    KeyboardInterrupt handler when it starts with SIGINT ignored). A signal with a *handler*
    is reset to its default on exec instead, so installing Python's own handler here, in the test
    process, gives every child (``cpcreds serve``, the CLI, plugins, ``python -c``) the default,
    however it is started. Called once, from tests/conftest.py; it changes nothing when the suite
    runs in the foreground, where Python has installed that handler already."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def at_lock_release(function: str, act: Callable[[FrameType], object], *, released: bool = False) -> None:
    """Run ``act(frame)`` in this thread once, where a signal handler could run: at the end of the
    first ``with <lock>:`` block of a function named ``function`` (the lock still held; with
    ``released``, just after it was let go). A signal lands between two bytecodes, so this is
    where a SIGTERM or Ctrl-C meeting that block would run its handler; ``act`` may call the
    installed handler or raise as the default SIGINT handler does. For the scripts the tests run
    in a process of their own (``sys.setprofile`` sees every call of the thread)."""

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        wanted = "c_return" if released else "c_call"
        if event == wanted and getattr(arg, "__name__", "") == "__exit__" and frame.f_code.co_name == function:
            sys.setprofile(None)
            act(frame)

    sys.setprofile(profile)
