"""Looking at processes a test started indirectly (plugins and their children)."""

from __future__ import annotations

import os


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
