"""The plugin policy: which exec plugins may run, and which bytes run for a pinned one.

Spelled and matched as client-go 1.35 does (``ExecProvider.PluginPolicy``): ``AllowAll``,
``DenyAll`` or ``Allowlist``; an allowlist entry matches when its ``command`` and the plugin's
command resolve to the same path (a name without ``/`` is looked up on the controller's
``PATH``, a path is made absolute; no globbing, symlinks are not followed, as in client-go).

cpcreds adds two things:

- **pinning**: an entry with ``sha256`` lets the command run only when its bytes hash to that
  digest, and then the sealed copy that was hashed is what runs (:mod:`cpcreds.pinning`);
- **interpreters**: a script plugin (``#!``) runs its interpreter, so under ``Allowlist`` the
  interpreter must be allowed too (and ``/usr/bin/env python3`` means ``env`` and ``python3``).
  A pinned interpreter is run from its own sealed copy, with the script handed to it by
  descriptor, so nothing in the chain is opened by path after it was hashed.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field

from ._parse import open_regular
from .config import AllowlistEntry, PluginPolicy
from .errors import PluginNotAllowed
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
    """Where ``command`` is, as the policy compares it: a path made absolute and normalised, or
    a bare name's match on this process's ``PATH``; None when a bare name is not found."""
    if "\x00" in command:
        return None  # no file has such a name; the kernel would stop at the NUL
    if "/" not in command:
        found = shutil.which(command, path=os.environ.get("PATH", os.defpath))
        if found is None:
            return None
        command = found
    return os.path.normpath(os.path.abspath(command))


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
        self._by_path = [(os.path.normpath(os.path.abspath(e.command)), e) for e in entries if "/" in e.command]
        self._by_name = [e for e in entries if "/" not in e.command]

    def admit(self, provider: str, command: str, executable: str, argv: Sequence[str]) -> Admission:
        """Decide one run of ``command`` (found at ``executable``) with ``argv``."""
        policy = self.policy
        if policy.policy_type == "AllowAll":
            return Admission(executable, list(argv))
        if policy.policy_type == "DenyAll":
            raise self._refuse(provider, command, 'policy set to "DenyAll"', "denied")
        resolved = os.path.normpath(os.path.abspath(executable))
        pinned: list[PinnedRun] = []
        try:
            admission = self._walk(provider, command, resolved, list(argv), pinned)
            if not pinned:  # nothing pinned: the kernel follows the #! chain itself
                return Admission(executable, list(argv))
            return admission
        except BaseException:
            for done in pinned:
                done.release()
            raise

    # -- pieces ----------------------------------------------------------------------------

    def _walk(self, provider: str, command: str, resolved: str, argv: list[str], pinned: list[PinnedRun]) -> Admission:
        """Check the plugin and every interpreter its ``#!`` chain leads to (as the kernel follows
        it, up to :data:`_MAX_INTERPRETERS` deep; ``env PROGRAM`` leads to PROGRAM on PATH).

        When nothing in the chain is pinned, the plugin is started by path and the kernel does
        the rest. When something is, cpcreds does what the kernel would, with every pinned file
        already open and sealed: the last interpreter runs from its copy (or by path) and each
        script is handed to the next as ``/dev/fd/N`` of its copy."""
        path, what = resolved, None  # what: how refusals name this link ("its interpreter X")
        entries = self._entries_for(path)
        if not entries:
            raise self._refuse(provider, command, f"{path} is not in pluginPolicy.allowlist", "not_allowlisted")
        run = self._pinned(provider, command, path, entries)
        first = run
        if run is not None:
            pinned.append(run)
        for _ in range(_MAX_INTERPRETERS + 1):
            interpreter = read_interpreter(run.head if run is not None else _read_head(path))
            if interpreter is None:
                break
            if _ == _MAX_INTERPRETERS:
                raise self._refuse(provider, command, f"its #! chain is deeper than {_MAX_INTERPRETERS} interpreters", "interpreter")
            script = self._reference(path, run)
            interpreter_path, argument = interpreter
            next_path = resolve_command(interpreter_path) if "/" in interpreter_path else None
            what = f"its interpreter {_shown(interpreter_path)} (from #!)"
            if next_path is None:
                raise self._refuse(provider, command, f"{what} cannot be run: a #! interpreter must be a path", "interpreter")
            argv = [interpreter_path, *([argument] if argument else []), script, *argv[1:]]
            if os.path.basename(next_path) == "env" and argument and not argument.startswith("-") and " " not in argument:
                # `#!/usr/bin/env python3`: env runs python3 from PATH. Both must be allowed; if
                # python3 is pinned, cpcreds starts it itself, as env would have, from its copy.
                env_entries = self._entries_for(next_path)
                if not env_entries:
                    raise self._refuse(provider, command, f"{what} is not in pluginPolicy.allowlist", "interpreter")
                env_run = self._pinned(provider, command, next_path, env_entries)
                if env_run is not None:
                    env_run.release()  # env itself is checked but never run when its program is pinned
                target = resolve_command(argument)
                what = f"its interpreter {_shown(argument)} (from #! via {_shown(interpreter_path)})"
                if target is None:
                    raise self._refuse(provider, command, f"{what} is not on PATH", "interpreter")
                target_entries = self._entries_for(target)
                if not target_entries:
                    raise self._refuse(provider, command, f"{what} is not in pluginPolicy.allowlist", "interpreter")
                if env_run is not None or all(e.sha256 for e in target_entries):
                    argv = [argument, script, *argv[3:]]  # env's own work, done here
                    next_path, entries = target, target_entries
                else:
                    entries = env_entries  # unpinned: env runs and finds the program itself
            else:
                entries = self._entries_for(next_path)
                if not entries:
                    raise self._refuse(provider, command, f"{what} is not in pluginPolicy.allowlist", "interpreter")
            path = next_path
            run = self._pinned(provider, command, path, entries, what)
            if run is not None:
                pinned.append(run)
        executable = run.executable if run is not None else path
        return Admission(executable, argv, tuple(pinned), first.sha256 if first is not None else None)

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
        entries.append(PinEntry(resolved, None if shim else sha256_file(resolved), needed_by + (" (a script: not pinned)" if shim else "")))
        if interpreter is not None:
            path, argument = interpreter
            queue.append((path, f"interpreter of {resolved}"))
            if os.path.basename(path) == "env" and argument and not argument.startswith("-"):
                queue.append((argument.split()[0], f"interpreter of {resolved}, through {path}"))
    return entries
