"""Supervising one child process: the process runner shared by the KEP-541 exec provider, the
KEP-2133 kubelet-plugin runner and the signal handling.

:func:`run` starts a program and sees it through, with the safety client-go's runner lacks:

- the program runs in a process group of its own, so that a timeout kills it *with its
  children*; an interactive one stays in ours to keep the terminal. When this process has a
  controlling terminal, the group is a session of its own too, so the program cannot read or
  stop on that terminal; without one (a service, a controller), a process group is all it
  needs: a new session also makes a scheduler group (autogroup) on Linux, which costs every
  run tens of microseconds;
- every run has a deadline; on expiry the whole group is killed;
- stdout is bounded (a program printing 60 MB is stopped, not fed into our memory) and only the
  tail of stderr is kept;
- the exit is noticed through a pidfd where there is one (race-free even while a grandchild holds
  stdout open), else by polling ``waitid`` ever less often. A program that needs no input is
  first waited for by its pidfd alone, for up to :data:`_QUIET_SECONDS`: a fast plugin (a
  cached token) is then woken for once, at its exit, instead of once per write and once per
  closed pipe, each wake-up of an idle CPU costing tens of microseconds; its output waits in
  the pipes meanwhile. A program that fills a pipe (64 KiB) that early is held up until the
  quiet phase ends, then read as it writes. Once the program has exited,
  whatever it left in its group is killed, and what is in the pipes is read without waiting for
  an end-of-file a stray grandchild could hold back;
- every running group is known (:class:`Groups` per owner, and process-wide), so that an owner
  can stop its own runs and a SIGTERM handler or the exit can stop them all
  (:func:`terminate_all`).

It knows nothing of credentials: it returns an :class:`Outcome` (or raises ``OSError`` when the
program cannot be started) and each caller words what that means.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import select
import shutil
import signal
import subprocess
import threading
import time
from typing import Any

__all__ = ["Groups", "Outcome", "run", "terminate_all", "find_executable", "process_environment"]

_READ_CHUNK = 65536
#: Without a pidfd, the exit is looked for after 1 ms, then ever less often, up to every 20 ms:
#: a fast program is noticed at once, a slow one costs few wake-ups.
_FIRST_TICK = 0.001
_LAST_TICK = 0.02
#: How long a program that needs no input is waited for by its pidfd alone before its pipes are
#: watched too (see the module's docstring): the most a program that fills a pipe at once is
#: held up, and longer than a cached-token plugin takes.
_QUIET_SECONDS = 0.01

# Process groups of every supervised program of this process, for terminate_all().
_RUNNING_GROUPS: set[int] = set()
_groups_lock = threading.Lock()


class Outcome:
    """How one run ended: ``exit_code`` (negative: killed by that signal; -1 also when we killed
    it), ``stdout`` (complete unless ``overflowed``), the kept tail of stderr, the duration, and
    whether we stopped it: ``timed_out`` (the deadline passed) or ``overflowed`` (stdout went
    past its bound). Either way its process group was killed."""

    __slots__ = ("exit_code", "stdout", "stderr_tail", "duration", "timed_out", "overflowed")

    def __init__(
        self, exit_code: int, stdout: bytes, stderr_tail: bytes, duration: float, *, timed_out: bool = False, overflowed: bool = False
    ) -> None:
        self.exit_code, self.stdout, self.stderr_tail, self.duration = exit_code, stdout, stderr_tail, duration
        self.timed_out, self.overflowed = timed_out, overflowed


class Groups:
    """The process groups of one owner's running programs (an exec provider, a kubelet-plugin
    runner), so that closing the owner stops only its own. Thread-safe."""

    __slots__ = ("_pgids",)

    def __init__(self) -> None:
        self._pgids: set[int] = set()

    def _add(self, pgid: int) -> None:
        with _groups_lock:
            self._pgids.add(pgid)
            _RUNNING_GROUPS.add(pgid)

    def _discard(self, pgid: int) -> None:
        with _groups_lock:
            self._pgids.discard(pgid)
            _RUNNING_GROUPS.discard(pgid)

    def kill_all(self) -> None:
        """Kill the group of every program of this owner that is running now."""
        with _groups_lock:
            pgids = list(self._pgids)
        for pgid in pgids:
            _kill_group(pgid)


def terminate_all() -> None:
    """Kill the process group of every program this process is supervising.

    For a signal handler (SIGTERM, SIGHUP) and at exit: the programs run in sessions of their own,
    so they do not get the signals sent to our process group, and would otherwise outlive us."""
    with _groups_lock:
        pgids = list(_RUNNING_GROUPS)
    for pgid in pgids:
        _kill_group(pgid)


def find_executable(command: str) -> str | None:
    """What runs for ``command``: itself when it contains a ``/``, else its match on *this
    process's* ``PATH`` (as Go's ``exec.Command`` looks it up), or None. The program's
    environment, which a profile may add to, never chooses what runs."""
    if "/" in command:
        return command
    return shutil.which(command, path=os.environ.get("PATH", os.defpath))


def process_environment() -> dict[bytes, bytes]:
    """A copy of the process environment, already encoded as the child needs it.

    ``dict(os.environ)`` decodes every variable only for subprocess to encode it again, which
    costs more than the rest of our per-run work together; CPython keeps the encoded form.
    """
    data = getattr(os.environ, "_data", None)
    if isinstance(data, dict):
        return dict(data)
    return {os.fsencode(k): os.fsencode(v) for k, v in os.environ.items()}


def run(
    executable: str,
    argv: list[str],
    env: dict[bytes, bytes],
    *,
    deadline: float,
    max_stdout: int,
    stderr_tail: int,
    interactive: bool = False,
    stdin: bytes | None = None,
    pass_fds: tuple[int, ...] = (),
    use_pidfd: bool = True,
    groups: Groups | None = None,
) -> Outcome:
    """Run ``executable`` (``argv[0]`` as the name it is given) once and see it through (see the
    module's docstring), bounded by ``deadline`` (``time.monotonic()`` seconds).

    ``stdin`` is written to the program's standard input, which is then closed; without it,
    stdin is ``/dev/null`` (or the terminal when ``interactive``; stderr then stays the
    terminal too, for prompts). ``pass_fds`` are descriptors the program inherits under the same
    numbers; they must be the caller's own, as they are made inheritable for the spawn.
    ``groups`` records the run's process group while it runs. Raises ``OSError`` when the
    program cannot be started; ``KeyboardInterrupt`` or any other exception while it runs kills
    it before propagating."""
    child = None
    if not interactive and _SPAWN.usable:
        child = _spawn(executable, argv, env, with_stdin=stdin is not None, pass_fds=pass_fds)
    if child is None:
        child = _popen(executable, argv, env, interactive, with_stdin=stdin is not None, pass_fds=pass_fds)
    pgid = None if interactive else child.pid
    owner = groups if groups is not None else Groups()
    if pgid is not None:
        owner._add(pgid)
    try:
        return _collect(child, pgid, deadline, stdin, max_stdout, stderr_tail, use_pidfd)
    finally:
        child.close_pipes()
        if pgid is not None:
            owner._discard(pgid)


def _collect(
    proc: _Child, pgid: int | None, deadline: float, stdin: bytes | None, max_stdout: int, stderr_tail: int, use_pidfd: bool
) -> Outcome:
    started = time.monotonic()
    stdout, stderr = bytearray(), bytearray()
    # Our ends are read without blocking: after the exit, what is in a pipe is read without
    # waiting for an end-of-file that a grandchild which left the group could hold back.
    # (Set while the program starts: this costs it nothing.)
    os.set_blocking(proc.stdout_fd, False)
    if proc.stderr_fd is not None:
        os.set_blocking(proc.stderr_fd, False)
    pidfd = _open_pidfd(proc.pid) if use_pidfd else None
    try:
        exited = False
        if pidfd is not None and stdin is None:
            quiet = select.poll()
            quiet.register(pidfd, select.POLLIN)
            exited = bool(quiet.poll(max(0.0, min(deadline - time.monotonic(), _QUIET_SECONDS)) * 1000))
        if not exited:
            stop = _watch(proc, pidfd, deadline, stdin, stdout, stderr, max_stdout, stderr_tail)
            if stop is not None:
                _kill(proc, pgid)
                return Outcome(-1, bytes(stdout), bytes(stderr), time.monotonic() - started, **{stop: True})
        # The program has exited (and is not reaped yet, so its group ID cannot have been
        # reused): anything left in its group is an orphan; stop it. Everything the program
        # wrote is in the pipes now.
        if pgid is not None:
            _kill_group(pgid)
        if proc.stdin_fd is not None:
            proc.close_stdin()
        if not _drain(proc.stdout_fd, stdout, deadline, limit=max_stdout):
            _kill(proc, pgid)
            return Outcome(-1, bytes(stdout), bytes(stderr), time.monotonic() - started, overflowed=True)
        if proc.stderr_fd is not None:
            _drain(proc.stderr_fd, stderr, deadline, tail=stderr_tail)
        exit_code = proc.wait()  # it has exited: reaping cannot block
    finally:
        if pidfd is not None:
            os.close(pidfd)
        if proc.returncode is None:  # an error or Ctrl-C above: the program must not outlive the run
            _kill(proc, pgid)
    return Outcome(exit_code, bytes(stdout), bytes(stderr), time.monotonic() - started)


def _drain(fd: int, buffer: bytearray, deadline: float, *, limit: int = -1, tail: int = -1) -> bool:
    """Read what the exited program left in the pipe ``fd`` (it does not block) into
    ``buffer``, keeping only its last ``tail`` bytes (-1: all); False once ``buffer`` holds more
    than ``limit`` bytes (-1: no limit). An escaped grandchild that keeps writing is read only
    until ``deadline``."""
    while True:
        try:
            chunk = os.read(fd, _READ_CHUNK)
        except BlockingIOError:  # nothing more now; a grandchild holds the pipe open
            return True
        buffer += chunk
        if tail >= 0:
            del buffer[: max(0, len(buffer) - tail)]
        elif 0 <= limit < len(buffer):
            return False
        # A pipe read returns everything the pipe holds, up to the size asked for: a shorter
        # answer (end-of-file included) means the pipe is empty, and the program wrote nothing
        # more. Only an escaped grandchild could; it is not waited for.
        if len(chunk) < _READ_CHUNK or time.monotonic() >= deadline:
            return True


def _watch(
    proc: _Child,
    pidfd: int | None,
    deadline: float,
    stdin: bytes | None,
    stdout: bytearray,
    stderr: bytearray,
    max_stdout: int,
    stderr_tail: int,
) -> str | None:
    """Wait for the program's exit while feeding its stdin and reading its output as it comes:
    None once it has exited, else why it must be stopped (``"timed_out"``, ``"overflowed"``)."""
    buffers = {proc.stdout_fd: stdout}
    if proc.stderr_fd is not None:
        buffers[proc.stderr_fd] = stderr
    # poll(), not a selectors object: no epoll descriptor to create and close on every run.
    poller = select.poll()
    for fd in buffers:
        poller.register(fd, select.POLLIN)
    pending = memoryview(stdin) if stdin is not None else None
    if proc.stdin_fd is not None:
        # Written as the program reads, so a request larger than the pipe cannot block us.
        os.set_blocking(proc.stdin_fd, False)
        poller.register(proc.stdin_fd, select.POLLOUT)
    if pidfd is not None:
        poller.register(pidfd, select.POLLIN)
    tick = _FIRST_TICK  # without a pidfd: how long to wait before looking for the exit again
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "timed_out"
        exited = False
        for fd, _ in poller.poll((remaining if pidfd is not None else min(remaining, tick)) * 1000):
            if fd == pidfd:
                exited = True
            elif fd == proc.stdin_fd:
                assert pending is not None
                try:
                    written = os.write(fd, pending)
                except BlockingIOError:
                    continue
                except OSError:  # it exited or closed stdin without reading it all
                    written = len(pending)
                pending = pending[written:]
                if not pending:
                    poller.unregister(fd)
                    proc.close_stdin()
            else:
                buffer = buffers[fd]
                try:
                    chunk = os.read(fd, _READ_CHUNK)
                except BlockingIOError:
                    continue
                if not chunk:
                    poller.unregister(fd)
                    continue
                buffer += chunk
                if buffer is stderr:
                    del stderr[: max(0, len(stderr) - stderr_tail)]
                elif len(stdout) > max_stdout:
                    return "overflowed"
        if exited:
            return None
        if pidfd is None:
            if _has_exited(proc):
                return None
            tick = min(tick * 2, _LAST_TICK)


def _kill(proc: _Child, pgid: int | None) -> None:
    if pgid is not None:
        _kill_group(pgid)
    else:
        proc.kill()
    proc.wait()


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _open_pidfd(pid: int) -> int | None:
    # A pidfd becomes readable when the process exits: the only race-free way to notice the
    # program is gone while a child of it still holds stdout open.
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _has_exited(proc: _Child) -> bool:
    """Whether the program has exited, leaving it unreaped (WNOWAIT) where the system allows, so
    that its process group ID stays reserved until we have killed what is left in the group."""
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except (AttributeError, ChildProcessError, OSError):
        return proc.poll() is not None


class _Child:
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


class _PopenChild(_Child):
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


class _SpawnSupport:
    # posix_spawn: the environment is encoded in C and the child is started with a vfork-like
    # clone, about 0.1 ms less per run than subprocess.Popen(env=...) here. Turned off for good
    # the first time the platform says it cannot start a new session this way.
    usable = hasattr(os, "posix_spawn") and hasattr(os, "POSIX_SPAWN_DUP2")
    #: Whether this process has a controlling terminal, looked up on the first run (a child of
    #: fork inherits the answer with the terminal; a process that gives its terminal up later
    #: keeps starting sessions, which is only slower).
    terminal: bool | None = None


def _new_session() -> bool:
    """Whether a program must get a session of its own (see the module's docstring): when this
    process has a controlling terminal."""
    terminal = _SpawnSupport.terminal
    if terminal is None:
        try:
            fd = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:  # ENXIO: no controlling terminal
            terminal = False
        else:
            os.close(fd)
            terminal = True
        _SpawnSupport.terminal = terminal
    return terminal


_SPAWN = _SpawnSupport()


def _spawn(
    executable: str, argv: list[str], env: dict[bytes, bytes], *, with_stdin: bool = False, pass_fds: tuple[int, ...] = ()
) -> _Child | None:
    """Start a non-interactive plugin in a process group of its own (a session, with a terminal:
    :func:`_new_session`) with os.posix_spawn: stdin /dev/null (or
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
    if min(fds) <= 2 or any(fd <= 2 for fd in pass_fds):
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
    inherited = [fd for fd in pass_fds if not os.get_inheritable(fd)]
    try:
        for fd in inherited:
            # dup2 onto itself does not clear close-on-exec everywhere; the flag is set for the
            # spawn only, on descriptors that are the caller's own for this run.
            os.set_inheritable(fd, True)
        if _new_session():
            pid = os.posix_spawn(executable, argv, env, file_actions=actions, setsid=True)
        else:
            pid = os.posix_spawn(executable, argv, env, file_actions=actions, setpgroup=0)
    except NotImplementedError:
        _SpawnSupport.usable = False
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
    return _Child(pid, out_r, err_r, in_w)


def _popen(
    executable: str,
    argv: list[str],
    env: dict[bytes, bytes],
    interactive: bool,
    *,
    with_stdin: bool = False,
    pass_fds: tuple[int, ...] = (),
) -> _Child:
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
        start_new_session=not interactive and _new_session(),
        process_group=None if interactive or _new_session() else 0,
        pass_fds=pass_fds,
    )
    return _PopenChild(proc)


# A program started by a daemon thread (a refresh ahead of expiry) must not outlive the process.
atexit.register(terminate_all)
