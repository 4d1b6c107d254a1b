"""Supervising one child process: the process runner shared by the KEP-541 exec provider, the
KEP-2133 kubelet-plugin runner and the signal handling.

:func:`run` starts a program and sees it through, with the safety client-go's runner lacks:

- the program runs in a process group of its own, so that a timeout kills it *with its
  children*; an interactive one stays in ours to keep the terminal. When this process has a
  controlling terminal, the group is a session of its own too, so the program cannot read or
  stop on that terminal; without one (a service, a controller), a process group is all it
  needs: a new session also makes a scheduler group (autogroup) on Linux, work every run
  would pay for nothing;
- every run has a deadline; on expiry the whole group is killed;
- stdout is bounded (a program printing 60 MB is stopped, not fed into our memory) and only the
  tail of stderr is kept;
- the exit is noticed through a pidfd where there is one (race-free even while a grandchild holds
  stdout open), else by polling ``waitid`` ever less often. A program that needs no input is
  first waited for by its pidfd alone, for up to :data:`_QUIET_SECONDS`: a fast plugin (a
  cached token) is then woken for once, at its exit, instead of once per write and once per
  closed pipe (each wake-up of an idle CPU is slow, and so is the Python right after it); its
  output waits in the pipes meanwhile. (Waking for the first thing written too, to decode an
  answer while the plugin goes on to its exit, made a cold fetch slower, not faster:
  bench/README.md.) A program that fills a pipe (64 KiB) that early is held up until the quiet
  phase ends, then read as it writes. Once the program has exited, whatever
  it left in its group is killed, and what is in the pipes is read without waiting for
  an end-of-file a stray grandchild could hold back;
- every running group is known (:class:`Groups` per owner, and process-wide), so that an owner
  can stop its own runs and a SIGTERM handler or the exit can stop them all
  (:func:`terminate_all`).

Starting the program and killing its group are in :mod:`.spawn`. It knows nothing of
credentials: it returns an :class:`Outcome` (or raises ``OSError`` when the program cannot be
started) and each caller words what that means.
"""

from __future__ import annotations

import atexit
import os
import select
import shutil
import threading
import time

from .spawn import Child, SpawnSupport, kill, kill_group, popen, spawn

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
# Reentrant: terminate_all runs in signal handlers, and a handler runs in the main thread between
# two bytecodes, possibly while that thread holds this lock (recording a run's group).
_groups_lock = threading.RLock()
#: This process's ID, renewed in a child of fork (see Groups).
_owner_pid = os.getpid()


def _forget_parent_groups() -> None:
    # In a child of fork: the running programs are the parent's, to stop when *it* ends or is
    # told to; the child's exit handlers and SIGTERM must not kill them.
    global _groups_lock, _owner_pid
    _groups_lock = threading.RLock()  # the parent's may have been held at fork time
    _RUNNING_GROUPS.clear()
    _owner_pid = os.getpid()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_parent_groups)


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
    runner), so that closing the owner stops only its own. Thread-safe. In a child of ``fork``
    the groups recorded before are the parent's: the child's copy forgets them, so that closing
    an inherited owner never stops the parent's programs."""

    __slots__ = ("_pgids", "_pid")

    def __init__(self) -> None:
        self._pgids: set[int] = set()
        self._pid = _owner_pid  # the process whose groups _pgids holds

    def _mine(self) -> set[int]:
        # Lock held. A module global is compared, not os.getpid() called: this runs on every run.
        if self._pid != _owner_pid:
            self._pgids, self._pid = set(), _owner_pid
        return self._pgids

    def _add(self, pgid: int) -> None:
        with _groups_lock:
            self._mine().add(pgid)
            _RUNNING_GROUPS.add(pgid)

    def _discard(self, pgid: int) -> None:
        with _groups_lock:
            self._mine().discard(pgid)
            _RUNNING_GROUPS.discard(pgid)

    def kill_all(self) -> None:
        """Kill the group of every program of this owner that is running now."""
        with _groups_lock:
            pgids = list(self._mine())
        for pgid in pgids:
            kill_group(pgid)


def terminate_all() -> None:
    """Kill the process group of every program this process is supervising.

    For a signal handler (SIGTERM, SIGHUP) and at exit: the programs run in sessions of their own,
    so they do not get the signals sent to our process group, and would otherwise outlive us."""
    with _groups_lock:
        pgids = list(_RUNNING_GROUPS)
    for pgid in pgids:
        kill_group(pgid)


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
    # os.environ's private _data is that encoded form: no public name hands it over whole
    # (os.environb copies it item by item through Python code); getattr, for where it is absent.
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
    if not interactive and SpawnSupport.usable:
        child = spawn(executable, argv, env, with_stdin=stdin is not None, pass_fds=pass_fds)
    if child is None:
        child = popen(executable, argv, env, interactive, with_stdin=stdin is not None, pass_fds=pass_fds)
    pgid = None if interactive else child.pid
    owner = groups if groups is not None else Groups()
    try:
        if pgid is not None:
            owner._add(pgid)
        return _collect(child, pgid, deadline, stdin, max_stdout, stderr_tail, use_pidfd)
    finally:
        if child.returncode is None:
            # Interrupted (Ctrl-C, a signal handler's SystemExit) before _collect took charge of
            # the program, which kills it on every other way out: it must not outlive the run.
            kill(child, pgid)
        child.close_pipes()
        if pgid is not None:
            owner._discard(pgid)


def _collect(
    proc: Child,
    pgid: int | None,
    deadline: float,
    stdin: bytes | None,
    max_stdout: int,
    stderr_tail: int,
    use_pidfd: bool,
) -> Outcome:
    started = time.monotonic()
    stdout, stderr = bytearray(), bytearray()
    # Our ends are read without blocking: after the exit, what is in a pipe is read without
    # waiting for an end-of-file that a grandchild which left the group could hold back.
    os.set_blocking(proc.stdout_fd, False)
    if proc.stderr_fd is not None:
        os.set_blocking(proc.stderr_fd, False)
    pidfd = _open_pidfd(proc.pid) if use_pidfd else None
    try:
        exited = False
        if pidfd is not None and stdin is None:
            exited = _quiet_wait(pidfd, deadline)
        if not exited:
            stop = _watch(proc, pidfd, deadline, stdin, stdout, stderr, max_stdout, stderr_tail)
            if stop is not None:
                kill(proc, pgid)
                return Outcome(-1, bytes(stdout), bytes(stderr), time.monotonic() - started, **{stop: True})
        # The program has exited (and is not reaped yet, so its group ID cannot have been
        # reused): anything left in its group is an orphan; stop it. Everything the program
        # wrote is in the pipes now.
        if pgid is not None:
            kill_group(pgid)
        if proc.stdin_fd is not None:
            proc.close_stdin()
        if not _drain(proc.stdout_fd, stdout, deadline, limit=max_stdout):
            kill(proc, pgid)
            return Outcome(-1, bytes(stdout), bytes(stderr), time.monotonic() - started, overflowed=True)
        if proc.stderr_fd is not None:
            _drain(proc.stderr_fd, stderr, deadline, tail=stderr_tail)
        exit_code = proc.wait()  # it has exited: reaping cannot block
    finally:
        if pidfd is not None:
            os.close(pidfd)
        if proc.returncode is None:  # an error or Ctrl-C above: the program must not outlive the run
            kill(proc, pgid)
    return Outcome(exit_code, bytes(stdout), bytes(stderr), time.monotonic() - started)


def _quiet_wait(pidfd: int, deadline: float) -> bool:
    """The quiet phase (see the module's docstring): True once the program has exited, False
    when it goes on past it."""
    quiet = select.poll()
    quiet.register(pidfd, select.POLLIN)
    return bool(quiet.poll(max(0.0, min(deadline - time.monotonic(), _QUIET_SECONDS)) * 1000))


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
    proc: Child,
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



def _open_pidfd(pid: int) -> int | None:
    # A pidfd becomes readable when the process exits: the only race-free way to notice the
    # program is gone while a child of it still holds stdout open.
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _has_exited(proc: Child) -> bool:
    """Whether the program has exited, leaving it unreaped (WNOWAIT) where the system allows, so
    that its process group ID stays reserved until we have killed what is left in the group."""
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except (AttributeError, ChildProcessError, OSError):
        return proc.poll() is not None


# A program started by a daemon thread (a refresh ahead of expiry) must not outlive the process.
atexit.register(terminate_all)
