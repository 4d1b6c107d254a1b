"""Starting one supervised program in a process group of its own, and killing it: the half of
:mod:`.process` that talks to the system. :func:`spawn` uses ``os.posix_spawn`` (the environment is
encoded in C and the child starts with a vfork-like clone); :func:`popen` uses ``subprocess.Popen``
for interactive runs and wherever posix_spawn cannot serve. Both give a :class:`Child`.

A program started by :func:`spawn` starts with every signal at its default action, as client-go's
plugins start from a Go program, with one exception Go makes too: SIGHUP or SIGINT that this
process ignores (``nohup``, a shell's background job) stays ignored. So SIGPIPE and SIGXFSZ, which
Python ignores for itself, are not passed on: a plugin's ``cmd | head -1`` ends quietly. One
started by :func:`popen` (interactive runs) gets subprocess's rule: SIGPIPE and SIGXFSZ at their
default, any other signal this process ignores still ignored.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from typing import Any

__all__ = ["Child", "SpawnSupport", "kill", "kill_group", "popen", "spawn"]


def kill(proc: Child, pgid: int | None) -> None:
    if pgid is not None:
        kill_group(pgid)
    else:
        proc.kill()
    proc.wait()


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass



class Child:
    """A running plugin: its pid, our ends of its stdout/stderr pipes, its exit code once reaped.

    The interface of ``subprocess.Popen`` that the runner uses (pid, returncode, poll, wait, kill),
    for a process started with ``os.posix_spawn``."""

    __slots__ = ("pid", "returncode", "stdout_fd", "stderr_fd", "stdin_fd")

    def __init__(self, pid: int, stdout_fd: int, stderr_fd: int | None, stdin_fd: int | None = None) -> None:
        self.pid, self.stdout_fd, self.stderr_fd, self.stdin_fd = pid, stdout_fd, stderr_fd, stdin_fd
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped by someone else (a SIGCHLD handler)
                self.returncode = -1
            else:
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self) -> int:
        if self.returncode is None:
            try:
                _, status = os.waitpid(self.pid, 0)
            except ChildProcessError:
                self.returncode = -1
            else:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:  # once reaped, the pid may belong to someone else
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)

    def close_stdin(self) -> None:
        """Close our end of the plugin's stdin (end of the request); idempotent."""
        if self.stdin_fd is not None:
            fd, self.stdin_fd = self.stdin_fd, None
            os.close(fd)

    def close_pipes(self) -> None:
        self.close_stdin()
        for fd in (self.stdout_fd, self.stderr_fd):
            if fd is not None:
                os.close(fd)


class PopenChild(Child):
    """The same for a ``subprocess.Popen`` (interactive runs, or where posix_spawn cannot serve)."""

    __slots__ = ("_proc",)

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        stdin_fd = proc.stdin.fileno() if proc.stdin is not None else None
        super().__init__(proc.pid, proc.stdout.fileno(), proc.stderr.fileno() if proc.stderr is not None else None, stdin_fd)
        self._proc = proc

    def close_stdin(self) -> None:
        if self.stdin_fd is not None and self._proc.stdin is not None:
            self.stdin_fd = None
            self._proc.stdin.close()

    def poll(self) -> int | None:
        self.returncode = self._proc.poll()
        return self.returncode

    def wait(self) -> int:
        self.returncode = self._proc.wait()
        return self.returncode

    def kill(self) -> None:
        self._proc.kill()

    def close_pipes(self) -> None:
        self.close_stdin()
        for pipe in (self._proc.stdout, self._proc.stderr):
            if pipe is not None:
                pipe.close()


class SpawnSupport:
    # posix_spawn over subprocess.Popen: the environment is encoded in C and the child starts
    # with a vfork-like clone, so a cold fetch stays close to a bare subprocess.run of the plugin
    # (bench/README.md). Turned off for good the first time the platform says it cannot start a
    # new session this way.
    usable = hasattr(os, "posix_spawn") and hasattr(os, "POSIX_SPAWN_DUP2")
    #: Whether this process has a controlling terminal, looked up on the first run (a child of
    #: fork inherits the answer with the terminal; a process that gives its terminal up later
    #: keeps starting sessions, which is only slower).
    terminal: bool | None = None


#: The signals :func:`spawn` sets to their default action in the program (``setsigdef``): every
#: one but SIGHUP and SIGINT, which the C library leaves ignored when this process ignores them
#: and sets to their default otherwise (see the module's docstring). Naming the rest also spares
#: the child one query per signal (glibc looks up only those not named) while the parent waits
#: for its exec.
SIGNALS_TO_DEFAULT = tuple(sorted(set(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP, signal.SIGHUP, signal.SIGINT}))


def new_session() -> bool:
    """Whether a program must get a session of its own (see the module's docstring): when this
    process has a controlling terminal."""
    terminal = SpawnSupport.terminal
    if terminal is None:
        try:
            fd = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:  # ENXIO: no controlling terminal
            terminal = False
        else:
            os.close(fd)
            terminal = True
        SpawnSupport.terminal = terminal
    return terminal


def spawn(
    executable: str, argv: list[str], env: dict[bytes, bytes], *, with_stdin: bool = False, pass_fds: tuple[int, ...] = ()
) -> Child | None:
    """Start a non-interactive plugin in a process group of its own (a session, with a terminal:
    :func:`new_session`) with os.posix_spawn: stdin /dev/null (or
    a pipe of ours with ``with_stdin``), stdout and stderr our pipes, and ``pass_fds`` kept
    under their own numbers. None where posix_spawn cannot do it (the caller uses Popen).

    Only what is inheritable reaches the plugin: Python opens every descriptor non-inheritable
    (PEP 446), as Go does, so the pipes below are the plugin's only descriptors besides stdio
    (and ``pass_fds``)."""
    fds: list[int] = []
    try:
        out_r, out_w = os.pipe()
        fds += (out_r, out_w)
        err_r, err_w = os.pipe()
        fds += (err_r, err_w)
        in_r = in_w = None
        if with_stdin:
            in_r, in_w = os.pipe()
            fds += (in_r, in_w)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    if min(fds) <= 2 or (pass_fds and min(pass_fds) <= 2):
        # Our own stdio is closed and a pipe end took its number: dup2 onto itself would keep
        # close-on-exec set. subprocess knows how to shuffle these; let it.
        for fd in fds:
            os.close(fd)
        return None
    actions: list[tuple[Any, ...]] = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0) if in_r is None else (os.POSIX_SPAWN_DUP2, in_r, 0),
        (os.POSIX_SPAWN_DUP2, out_w, 1),
        (os.POSIX_SPAWN_DUP2, err_w, 2),
    ]
    inherited = [fd for fd in pass_fds if not os.get_inheritable(fd)] if pass_fds else pass_fds
    try:
        for fd in inherited:
            # dup2 onto itself does not clear close-on-exec everywhere; the flag is set for the
            # spawn only, on descriptors that are the caller's own for this run.
            os.set_inheritable(fd, True)
        if new_session():
            pid = os.posix_spawn(executable, argv, env, file_actions=actions, setsid=True, setsigdef=SIGNALS_TO_DEFAULT)
        else:
            pid = os.posix_spawn(executable, argv, env, file_actions=actions, setpgroup=0, setsigdef=SIGNALS_TO_DEFAULT)
    except NotImplementedError:
        SpawnSupport.usable = False
        for fd in fds:
            os.close(fd)
        return None
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    finally:
        for fd in inherited:
            os.set_inheritable(fd, False)
    os.close(out_w)
    os.close(err_w)
    if in_r is not None:
        os.close(in_r)
    return Child(pid, out_r, err_r, in_w)


def popen(
    executable: str,
    argv: list[str],
    env: dict[bytes, bytes],
    interactive: bool,
    *,
    with_stdin: bool = False,
    pass_fds: tuple[int, ...] = (),
) -> Child:
    if with_stdin:
        stdin: Any = subprocess.PIPE
    else:
        stdin = None if interactive else subprocess.DEVNULL
    proc = subprocess.Popen(
        argv,
        executable=executable,
        env=env,
        stdin=stdin,
        stdout=subprocess.PIPE,
        # Interactive plugins prompt on stderr, so it stays the user's terminal, as in client-go.
        stderr=None if interactive else subprocess.PIPE,
        # Its own process group makes the plugin and all its children one group we can kill
        # (a session of its own too, with a terminal); an interactive plugin must stay in our
        # group to keep the terminal.
        start_new_session=not interactive and new_session(),
        process_group=None if interactive or new_session() else 0,
        pass_fds=pass_fds,
    )
    return PopenChild(proc)
