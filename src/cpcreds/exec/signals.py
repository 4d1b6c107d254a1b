"""SIGTERM and SIGHUP for processes that run plugins: stop the plugins first, then exit cleanly.

Exec plugins run in sessions of their own (so a timeout can kill a plugin with its children), so
a signal sent to our process group does not reach them. Python's default action for SIGTERM and
SIGHUP ends the process on the spot, without exit handlers: the plugin would be orphaned and the
adapters' key files left on disk. The CLI and ``cpcreds serve`` install :func:`exit_on_termination`;
a library never does (signal handlers belong to the application).
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

from .process import terminate_all

__all__ = ["exit_on_termination"]


def _terminate(signum: int, _frame: FrameType | None) -> None:
    terminate_all()
    # SystemExit unwinds the main thread (its plugin run kills what is left of the group) and
    # runs the exit handlers (certificate files); 128 + N is the shell's convention.
    raise SystemExit(128 + signum)


def exit_on_termination() -> None:
    """Make SIGTERM and SIGHUP kill running plugins and exit with 143 / 129. Main thread only."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _terminate)
