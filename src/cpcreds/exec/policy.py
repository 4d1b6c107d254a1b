"""The plugin policy: which exec plugins may run, and which bytes run for a pinned one.

Spelled and matched as client-go 1.35 does (``ExecProvider.PluginPolicy``): ``AllowAll``,
``DenyAll`` or ``Allowlist``; an allowlist entry matches when its ``command`` and the plugin's
command resolve to the same path (a name without ``/`` is looked up on the controller's
``PATH``, a path is made absolute; no globbing, and a symlink is compared by its own name, as in
client-go). A ``..`` is resolved as the kernel resolves it, after the symlinks before it
(:func:`~cpcreds.exec.envline.kernel_path`), never as text: ``allowed/lnk/../x`` is wherever ``lnk``
leads, and that path, not the text, is what runs.

cpcreds adds two things:

- **pinning**: an entry with ``sha256`` lets the command run only when its bytes hash to that
  digest, and then the sealed copy that was hashed is what runs (:mod:`cpcreds.exec.pinning`);
- **interpreters**: a script plugin (``#!``) runs its interpreter, so under ``Allowlist`` the
  interpreter must be allowed too (and ``/usr/bin/env python3`` means ``env`` and ``python3``).
  A pinned interpreter is run from its own sealed copy, with the script handed to it by
  descriptor, so nothing in the chain is opened by path after it was hashed.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..config.documents import open_regular
from ..config import AllowlistEntry, PluginPolicy
from .envline import EnvCommand, EnvLineError, kernel_path, parse_env_args
from ..errors import PluginNotAllowed
from .pinning import PinnedRun, PinStore, default_store

__all__ = ["PluginGate", "Admission", "PinEntry", "pin_entries", "resolve_command", "read_interpreter"]

#: The kernel reads at most this much of a ``#!`` line (Linux: 256 bytes since 5.1).
_SHEBANG_MAX = 256
#: How many interpreters deep a #! chain may go (Linux follows at most 4 more).
_MAX_INTERPRETERS = 4


def _shown(path: str) -> str:
    # A path read from a file's #! line may hold anything but a newline: terminal escapes and
    # other controls are shown escaped, never written to a terminal or log as they are.
    return path if path.isprintable() else repr(path)


def resolve_command(command: str) -> str | None:
    """Where ``command`` is, as the policy compares it: a path made absolute as the kernel walks
    it (:func:`~cpcreds.exec.envline.kernel_path`), or a bare name's match on this process's ``PATH``
    (whose entries may hold ``..`` too); None when a bare name is not found."""
    if "\x00" in command:
        return None  # no file has such a name; the kernel would stop at the NUL
    if "/" not in command:
        found = shutil.which(command, path=os.environ.get("PATH", os.defpath))
        if found is None:
            return None
        command = found
    return kernel_path(command)


def _text_environ(env: Mapping[Any, Any] | None) -> Mapping[str, str]:
    """``env`` with str keys and values (the exec runner builds bytes); None: this process's."""
    if env is None:
        return os.environ
    return {os.fsdecode(key): os.fsdecode(value) for key, value in env.items()}


def read_interpreter(head: bytes) -> tuple[str, str | None] | None:
    """The interpreter and its optional argument from the start of a file, as the kernel reads a
    ``#!`` line (one argument: everything after the interpreter, trimmed), or None."""
    if not head.startswith(b"#!"):
        return None
    line = head[2:_SHEBANG_MAX].split(b"\n", 1)[0].strip(b" \t\r")
    if not line:
        return None
    parts = line.replace(b"\t", b" ").split(b" ", 1)
    interpreter = os.fsdecode(parts[0])
    argument = os.fsdecode(parts[1].strip()) if len(parts) > 1 and parts[1].strip() else None
    return interpreter, argument


def _read_head(path: str) -> bytes:
    """The start of a file, where a ``#!`` line would be; empty when it cannot be read. Only a
    regular file is read, opened without blocking: a FIFO at the path cannot hang us. (A pinned
    plugin's #! line is read from its sealed copy instead: the line that will be obeyed.)"""
    try:
        fd = open_regular(path)
        try:
            return os.read(fd, _SHEBANG_MAX)
        finally:
            os.close(fd)
    except (OSError, ValueError):  # ValueError: not a regular file, or a NUL in a path from a #! line
        return b""  # unreadable but maybe executable: exec decides, as it would without a policy


@dataclass
class Admission:
    """What the gate decided for one run: the executable to start and the argv, the descriptors
    the process must inherit, and what to release once it has exited."""

    executable: str
    argv: list[str]
    pinned: tuple[PinnedRun, ...] = field(default=())
    #: Digest of the plugin's bytes when it was pinned (for logs).
    sha256: str | None = None

    @property
    def pass_fds(self) -> tuple[int, ...]:
        """The sealed copies' descriptors, which the process inherits under their numbers."""
        return tuple(run.fd for run in self.pinned if run.fd is not None)

    def release(self) -> None:
        for run in self.pinned:
            run.release()


class PluginGate:
    """Applies one :class:`~cpcreds.config.PluginPolicy` to exec runs. Thread-safe.

    ``admit`` either returns how to run the plugin or raises :class:`PluginNotAllowed`, whose
    message names the command (as configured and as resolved), the policy and, for a pinned
    command, both digests; nothing has run then."""

    def __init__(self, policy: PluginPolicy | None = None, *, pins: PinStore | None = None) -> None:
        self.policy = policy or PluginPolicy()
        self.pins = pins if pins is not None else default_store()
        #: True when every plugin may run as is: the runner skips the gate entirely.
        self.allows_all = self.policy.policy_type == "AllowAll"
        # Entries naming a path resolve the same way every time; bare names follow PATH, which
        # may change, so they are looked up at each decision.
        entries = self.policy.allowlist or ()
        self._by_path = [(kernel_path(e.command), e) for e in entries if "/" in e.command]
        self._by_name = [e for e in entries if "/" not in e.command]

    def admit(
        self, provider: str, command: str, executable: str, argv: Sequence[str], env: Mapping[Any, Any] | None = None
    ) -> Admission:
        """Decide one run of ``command`` (found at ``executable``) with ``argv`` and the
        environment ``env`` (str or bytes keys and values; default: this process's): what
        ``env`` in the chain runs is looked up on that environment's ``PATH``."""
        policy = self.policy
        if policy.policy_type == "AllowAll":
            return Admission(executable, list(argv))
        if policy.policy_type == "DenyAll":
            raise self._refuse(provider, command, 'policy set to "DenyAll"', "denied")
        resolved = kernel_path(executable)
        pinned: list[PinnedRun] = []
        try:
            admission = self._walk(provider, command, resolved, list(argv), pinned, env)
            if not pinned:  # nothing pinned: the kernel follows the #! chain itself
                # The path that was checked is the one started: no ``..`` left for the kernel to
                # read differently.
                return Admission(resolved, list(argv))
            return admission
        except BaseException:
            for done in pinned:
                done.release()
            raise

    # -- pieces ----------------------------------------------------------------------------

    def _walk(
        self, provider: str, command: str, resolved: str, argv: list[str], pinned: list[PinnedRun], env: Mapping[Any, Any] | None
    ) -> Admission:
        """Check the plugin and every program its ``#!`` chain leads to (as the kernel follows
        it, up to :data:`_MAX_INTERPRETERS` deep), and through ``env`` the program env would run
        (its options read as GNU env reads them, its ``PATH`` the one the plugin gets).

        When nothing in the chain is pinned, the plugin is started by path and the kernel does
        the rest. When something is, cpcreds does what the kernel (and env) would, with every
        pinned file already open and sealed: the last program runs from its copy (or by path)
        and each script is handed to the next as ``/dev/fd/N`` of its copy. An env that does
        more than find its program (``-i``, ``-u``, ``NAME=VALUE``, ``-C``, signal options) is
        run itself, so nothing after it may be pinned: that is refused."""
        path, what = resolved, None  # what: how refusals name this link ("its interpreter X")
        entries = self._entries_for(path)
        if not entries:
            raise self._refuse(provider, command, f"{path} is not in pluginPolicy.allowlist", "not_allowlisted")
        #: (executable, argv, env's changes) once an env with options of its own must run itself.
        fixed: tuple[str, list[str], str] | None = None
        first_sha256: str | None = None
        for depth in range(_MAX_INTERPRETERS + 1):
            if fixed is not None and all(entry.sha256 for entry in entries):
                raise self._refuse(
                    provider, command, f"{what} is pinned, but env must run it by name to apply {fixed[2]}: drop those options or the pin", "interpreter"
                )
            run = self._pinned(provider, command, path, entries, what) if fixed is None else None
            if run is not None:
                pinned.append(run)
            if depth == 0:
                first_sha256 = run.sha256 if run is not None else None
            if os.path.basename(path) == "env":
                line = self._env_line(provider, command, argv, env, what)
                via = _shown(argv[0])
                what = f"its interpreter {_shown(line.program)} (from #! via {via})" if depth else f"{_shown(line.program)} (run by {via})"
                target = line.find_program(_text_environ(env))
                if target is None:
                    raise self._refuse(provider, command, f"{what} is not on PATH", "interpreter")
                if line.only_finds_program:
                    # env's whole job is the lookup: done here, so a pinned program runs from its copy.
                    if run is not None:
                        pinned.remove(run)
                        run.release()
                    argv = [line.program, *line.args]
                elif fixed is None:
                    fixed = (run.executable if run is not None else path, argv, line.changes())
                path, entries = target, self._entries_for(target)
                if not entries:
                    raise self._refuse(provider, command, f"{what} is not in pluginPolicy.allowlist", "interpreter")
                continue
            interpreter = read_interpreter(run.head if run is not None else _read_head(path))
            if interpreter is None:
                break
            script = self._reference(path, run)
            interpreter_path, argument = interpreter
            next_path = resolve_command(interpreter_path) if "/" in interpreter_path else None
            what = f"its interpreter {_shown(interpreter_path)} (from #!)"
            if next_path is None:
                raise self._refuse(provider, command, f"{what} cannot be run: a #! interpreter must be a path", "interpreter")
            argv = [interpreter_path, *([argument] if argument else []), script, *argv[1:]]
            path, entries = next_path, self._entries_for(next_path)
            if not entries:
                raise self._refuse(provider, command, f"{what} is not in pluginPolicy.allowlist", "interpreter")
        else:
            raise self._refuse(provider, command, f"its #! chain is deeper than {_MAX_INTERPRETERS} interpreters", "interpreter")
        if fixed is not None:
            return Admission(fixed[0], fixed[1], tuple(pinned), first_sha256)
        executable = run.executable if run is not None else path
        return Admission(executable, argv, tuple(pinned), first_sha256)

    def _env_line(self, provider: str, command: str, argv: list[str], env: Mapping[Any, Any] | None, what: str | None) -> EnvCommand:
        try:
            return parse_env_args(argv[1:], _text_environ(env))
        except EnvLineError as exc:
            problem = str(exc)
        subject = f"{what}: " if what else ""
        raise self._refuse(provider, command, f"{subject}{_shown(argv[0])} {problem}", "interpreter")

    @staticmethod
    def _reference(path: str, run: PinnedRun | None) -> str:
        # How the next interpreter is told where the script is: the sealed copy's descriptor
        # (inherited by the process), the private file copy, or the path itself when unpinned.
        if run is None:
            return path
        return f"/dev/fd/{run.fd}" if run.fd is not None else run.executable

    def _entries_for(self, resolved: str) -> list[AllowlistEntry]:
        found = [entry for path, entry in self._by_path if path == resolved]
        found += [entry for entry in self._by_name if resolve_command(entry.command) == resolved]
        return found

    def _pinned(
        self, provider: str, command: str, resolved: str, entries: list[AllowlistEntry], what: str | None = None
    ) -> PinnedRun | None:
        """The sealed copy to run when every matching entry pins a digest; None when one of them
        allows the command unpinned."""
        digests = {entry.sha256 for entry in entries}
        if None in digests:
            return None
        problem = None
        try:
            run = self.pins.open_copy(resolved)
        except (OSError, ValueError) as exc:
            problem = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        if problem is not None:
            raise self._refuse(provider, command, f"cannot hash {_shown(resolved)}: {problem}", "unreadable")
        if run.sha256 not in digests:
            run.release()
            wanted = ", ".join(sorted(d for d in digests if d))
            subject = f"{what}: {_shown(resolved)}" if what else _shown(resolved)
            raise self._refuse(
                provider, command, f"{subject} has sha256 {run.sha256}, but pluginPolicy pins {wanted}", "digest_mismatch"
            )
        return run

    def _refuse(self, provider: str, command: str, reason: str, decision: str) -> PluginNotAllowed:
        return PluginNotAllowed(
            f'exec: plugin "{command}" not allowed: {reason}', provider=provider, command=command, reason=reason, decision=decision
        )


@dataclass(frozen=True)
class PinEntry:
    """One allowlist entry ``cpcreds pin`` proposes: the resolved command, the sha256 of its
    bytes now (None for an interpreter that is itself a script, see :func:`pin_entries`), and
    why it is needed (the provider, or the script whose interpreter it is)."""

    command: str
    sha256: str | None
    needed_by: str


def pin_entries(commands: Sequence[tuple[str, str]]) -> list[PinEntry]:
    """Allowlist entries pinning ``commands`` (``(command, needed_by)`` pairs) as they are on this
    machine now, followed by the interpreters their ``#!`` lines name (``env``'s program too).
    Each path once, in order. Raises ``LookupError`` naming a command that cannot be found, and
    ``OSError`` for one that cannot be read."""
    from .pinning import sha256_file

    entries: list[PinEntry] = []
    seen: set[str] = set()
    run_by_env: dict[str, str] = {}
    queue = list(commands)
    while queue:
        command, needed_by = queue.pop(0)
        resolved = resolve_command(command)
        if resolved is None or not os.path.isfile(resolved):
            raise LookupError(f"{command} ({needed_by}): not found" + (" on PATH" if "/" not in command else ""))
        if resolved in seen:
            continue
        seen.add(resolved)
        interpreter = read_interpreter(_read_head(resolved))
        # An interpreter that is itself a script (a pyenv or asdf shim) is allowed by path, not
        # pinned: run from a sealed copy it would see itself as /dev/fd/N, and shims find the
        # program to run from their own name.
        shim = interpreter is not None and needed_by.startswith("interpreter of ")
        # A program env runs with options of its own (-i, NAME=VALUE, ...) is run by env, by
        # name: the gate refuses to pin it, so it is allowed by path.
        by_env = resolved in run_by_env
        note = " (a script: not pinned)" if shim else f" (env {run_by_env[resolved]} before running it: not pinned)" if by_env else ""
        entries.append(PinEntry(resolved, None if shim or by_env else sha256_file(resolved), needed_by + note))
        if interpreter is not None:
            path, argument = interpreter
            queue.append((path, f"interpreter of {resolved}"))
            if os.path.basename(path) == "env":
                through = f"interpreter of {resolved}, through {path}"
                try:
                    line = parse_env_args([*([argument] if argument else []), resolved], os.environ)
                except EnvLineError as exc:
                    raise LookupError(f"{_shown(resolved)} ({needed_by}): its #! line's env {exc}") from None
                program = line.find_program(os.environ)
                if program is None:
                    raise LookupError(f"{_shown(line.program)} ({through}): not found on PATH")
                if not line.only_finds_program:
                    run_by_env.setdefault(program, f"applies {line.changes()}")
                queue.append((program, through))
    return entries
