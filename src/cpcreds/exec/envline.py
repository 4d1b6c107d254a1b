"""What GNU ``env`` would run, read from its arguments without running it.

A ``#!/usr/bin/env ...`` line hands the program's name to ``env``, which may change the
environment (``-i``, ``-u NAME``, ``NAME=VALUE``, so also ``PATH``), the directory (``-C DIR``)
and split one argument into many (``-S``, as a ``#!`` line needs for more than one word) before
it looks the program up on ``PATH`` and execs it. The plugin policy must check *that* program,
so this module reads ``env``'s arguments exactly as coreutils' ``env.c`` does: ``getopt_long``
with ``+C:iS:u:v0`` (stop at the first operand), its long options (unique prefixes accepted),
``-S``'s quoting, escapes and ``${NAME}`` expansion, a lone ``-``, then the assignments. Anything
``env`` itself would refuse is an :class:`EnvLineError`; nothing here guesses.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["EnvCommand", "EnvLineError", "parse_env_args", "kernel_path", "DEFAULT_PATH"]

#: The search path of glibc's ``execvp`` when ``PATH`` is unset (``confstr(_CS_PATH)``).
DEFAULT_PATH = "/bin:/usr/bin"

_SPACES = " \t\n\v\f\r"
#: Long option -> (short equivalent or own key, argument: "none" | "required" | "optional").
_LONG = {
    "ignore-environment": ("i", "none"),
    "null": ("0", "none"),
    "unset": ("u", "required"),
    "chdir": ("C", "required"),
    "default-signal": ("default-signal", "optional"),
    "ignore-signal": ("ignore-signal", "optional"),
    "block-signal": ("block-signal", "optional"),
    "list-signal-handling": ("list-signal-handling", "none"),
    "debug": ("v", "none"),
    "split-string": ("S", "required"),
    "help": ("help", "none"),
    "version": ("version", "none"),
}
_VARNAME = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: How many ``-S`` strings one line may expand (each may hold another): a bound, not env's.
_MAX_SPLITS = 16
#: Characters of arguments ``-S`` may expand to: Linux's ``execve`` takes at most 128 KiB in one
#: argument (MAX_ARG_STRLEN) and env's program gets no more, so a line expanding past it
#: (``${NAME}`` values holding ``-S${NAME}${NAME}`` double at each split) runs nothing.
_MAX_ARG = 128 * 1024
_MAX_ARGV = 16 * _MAX_ARG


def kernel_path(path: str, cwd: str | None = None) -> str:
    """``path`` made absolute (from ``cwd``, default this process's) the way the kernel walks it.

    A ``..`` steps back from wherever the components before it led, symlinks followed: in
    ``allowed/lnk/../x`` with ``lnk`` a link to ``other/sub``, the kernel opens ``other/x``,
    while a text normalisation (``os.path.normpath``) says ``allowed/x``. So everything up to
    the last ``..`` is resolved on disk; the components after it are kept as written (``.`` and
    repeated slashes dropped), so a symlink there is compared by its own name, as client-go
    compares allowlist entries."""
    absolute = os.path.join(os.getcwd() if cwd is None else cwd, path)
    parts = absolute.split("/")
    if ".." not in parts or "\x00" in absolute:  # no file has a NUL in its name: nothing runs
        return os.path.normpath(absolute)
    last = len(parts) - 1 - parts[::-1].index("..")
    head = os.path.realpath("/".join(parts[: last + 1]))
    return os.path.normpath(os.path.join(head, *parts[last + 1 :]))


class EnvLineError(ValueError):
    """``env`` would refuse these arguments (or run no program): the reason, worded for a user.

    The reason may quote a piece of the ``#!`` line; anything unprintable in it (a tab, an
    escape) is shown escaped, so the message stays one printable line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason if reason.isprintable() else "".join(c if c.isprintable() else ascii(c)[1:-1] for c in reason))


@dataclass(frozen=True)
class EnvCommand:
    """What ``env`` would do: the program (as written, before the ``PATH`` lookup) and its
    arguments, and every change it makes first. :attr:`only_finds_program` is True when the
    program's lookup is all ``env`` does (so running the program directly is the same)."""

    program: str
    args: tuple[str, ...]
    ignore_environment: bool = False
    unset: tuple[str, ...] = ()
    assignments: tuple[str, ...] = ()
    chdir: str | None = None
    #: Options that change nothing but signal handling or diagnostics, as given (``-v``, ...).
    other_options: tuple[str, ...] = field(default=())

    @property
    def only_finds_program(self) -> bool:
        return not (self.ignore_environment or self.unset or self.assignments or self.chdir is not None or self.other_options)

    def changes(self) -> str:
        """The changes ``env`` makes before running the program, for messages."""
        shown = (["-i"] if self.ignore_environment else []) + [f"-u {name}" for name in self.unset]
        shown += [assignment.split("=", 1)[0] + "=..." for assignment in self.assignments]
        shown += ([f"-C {self.chdir}"] if self.chdir is not None else []) + list(self.other_options)
        return " ".join(shown)

    def search_path(self, environ: Mapping[str, str]) -> str:
        """The ``PATH`` ``execvp`` searches: the environment ``env`` was given, after its changes."""
        path: str | None = None if self.ignore_environment or "PATH" in self.unset else environ.get("PATH")
        for assignment in self.assignments:
            name, value = assignment.split("=", 1)
            if name == "PATH":
                path = value
        return DEFAULT_PATH if path is None else path

    def find_program(self, environ: Mapping[str, str], cwd: str | None = None) -> str | None:
        """Where ``execvp`` would find the program: an absolute path as the kernel resolves it
        (:func:`kernel_path`), or None.
        Relative names and ``PATH`` entries count from ``-C``'s folder (or ``cwd``)."""
        base = os.path.join(cwd if cwd is not None else os.getcwd(), self.chdir or "")
        if "/" in self.program:
            return kernel_path(self.program, base)
        for folder in self.search_path(environ).split(":"):
            candidate = kernel_path(os.path.join(folder or ".", self.program), base)
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
        return None


def _split_string(text: str, environ: Mapping[str, str], budget: int) -> list[str]:
    """``-S``'s string as ``env`` splits it (coreutils ``build_argv``), in at most ``budget``
    characters (else :class:`EnvLineError`)."""
    args: list[list[str]] = []  # each argument's pieces, joined once at the end
    sep = True  # the last character seen separates arguments
    sq = dq = False
    i = 0
    size = length = 0  # characters in all, and in the argument being built

    def start() -> None:
        nonlocal sep, length
        if sep:
            args.append([])
            sep, length = False, 0

    def add(text: str) -> None:
        nonlocal size, length
        start()
        size, length = size + len(text), length + len(text)
        if length > _MAX_ARG or size > budget:
            raise EnvLineError(f"-S expands to more than execve takes ({_MAX_ARG // 1024} KiB in one argument, {_MAX_ARGV // 1024} KiB in all)")
        args[-1].append(text)

    while i < len(text):
        char = text[i]
        if char == "'" and not dq:
            sq = not sq
            start()
            i += 1
            continue
        if char == '"' and not sq:
            dq = not dq
            start()
            i += 1
            continue
        if char in _SPACES and not (sq or dq):
            sep = True
            while i < len(text) and text[i] in _SPACES:
                i += 1
            continue
        if char == "#" and sep:
            return ["".join(arg) for arg in args]  # a '#' starting an argument ends the string
        if char == "\\" and not (sq and text[i + 1 : i + 2] not in ("\\", "'")):
            i += 1
            escaped = text[i : i + 1]
            if escaped in ('"', "#", "$", "'", "\\"):
                add(escaped)
            elif escaped == "_":
                if dq:
                    add(" ")
                else:
                    sep = True
            elif escaped == "c":
                if dq:
                    raise EnvLineError("'\\c' must not appear in a double-quoted -S string")
                return ["".join(arg) for arg in args]
            elif escaped and escaped in "fnrtv":
                add({"f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}[escaped])
            elif not escaped:
                raise EnvLineError("invalid backslash at end of string in -S")
            else:
                raise EnvLineError(f"invalid sequence '\\{escaped}' in -S")
            i += 1
            continue
        if char == "$" and not sq:
            match = _VARNAME.match(text, i)
            if match is None:
                raise EnvLineError("only ${VARNAME} expansion is supported in -S")
            value = environ.get(match.group(1))
            if value is not None:  # set but empty still starts an argument, as in env.c
                add(value)
            i = match.end()
            continue
        add(char)
        i += 1
    if sq or dq:
        raise EnvLineError("no terminating quote in -S string")
    return ["".join(arg) for arg in args]


def _long_option(arg: str) -> tuple[str, str, str | None]:
    """(key, argument kind, value given with '=') of ``--name[=value]``, prefixes allowed."""
    name, eq, value = arg[2:].partition("=")
    if name in _LONG:
        found = [name]
    else:
        found = [candidate for candidate in _LONG if candidate.startswith(name)]
    if len(found) != 1:
        raise EnvLineError(f"{'ambiguous' if found else 'unrecognized'} option '--{name}'")
    key, kind = _LONG[found[0]]
    if kind == "none" and eq:
        raise EnvLineError(f"option '--{found[0]}' doesn't allow an argument")
    return key, kind, value if eq else None


def parse_env_args(args: Sequence[str], environ: Mapping[str, str]) -> EnvCommand:
    """What ``env ARGS...`` would do, given the environment it starts with (``-S``'s
    ``${NAME}`` reads it). Raises :class:`EnvLineError` when ``env`` would refuse the
    arguments, or run no program (print the environment, ``--help``, ``--version``)."""
    rest = list(args)
    ignore = False
    unset: list[str] = []
    other: list[str] = []
    chdir: str | None = None
    null = False
    splits = 0
    i = 0
    while i < len(rest):
        arg = rest[i]
        if arg == "--":
            i += 1
            break
        if not arg.startswith("-") or arg == "-":
            break  # '+' in env's getopt string: options end at the first operand
        i += 1
        if arg.startswith("--"):
            key, kind, value = _long_option(arg)
            if kind == "required" and value is None:
                if i >= len(rest):
                    raise EnvLineError(f"option '{arg}' requires an argument")
                value = rest[i]
                i += 1
            options = [(key, value)]
        else:
            options = []
            j = 1
            while j < len(arg):
                letter = arg[j]
                j += 1
                if letter in "CSu":
                    value = arg[j:]
                    if not value:
                        if i >= len(rest):
                            raise EnvLineError(f"option requires an argument -- '{letter}'")
                        value = rest[i]
                        i += 1
                    options.append((letter, value))
                    break
                if letter not in "iv0":
                    hint = " (use -S to pass options in #! lines)" if letter in _SPACES else ""
                    raise EnvLineError(f"invalid option -- {letter!r}{hint}")
                options.append((letter, None))
        for key, value in options:
            if key == "i":
                ignore = True
            elif key == "u":
                assert value is not None
                if not value or "=" in value:
                    raise EnvLineError(f"cannot unset {value!r}")
                unset.append(value)
            elif key == "C":
                chdir = value
            elif key == "0":
                null = True
            elif key == "S":
                assert value is not None
                splits += 1
                if splits > _MAX_SPLITS:
                    raise EnvLineError(f"more than {_MAX_SPLITS} -S strings")
                # env rebuilds its argv from the split string and what follows the option, and
                # parses that again from the start (options before -S keep their effect).
                following = rest[i:]
                rest = _split_string(value, environ, _MAX_ARGV - sum(map(len, following))) + following
                i = 0
            elif key in ("help", "version", "list-signal-handling"):
                if key != "list-signal-handling":
                    raise EnvLineError(f"--{key} runs no program")
                other.append("--" + key)
            elif key == "v":
                other.append("-v")
            else:
                other.append(f"--{key}" + (f"={value}" if value is not None else ""))
    if i < len(rest) and rest[i] == "-":
        ignore = True
        i += 1
    assignments: list[str] = []
    while i < len(rest) and "=" in rest[i]:
        assignments.append(rest[i])
        i += 1
    if i >= len(rest):
        raise EnvLineError("names no program (env would print the environment)")
    if null:
        raise EnvLineError("cannot specify --null (-0) with a command")
    if not rest[i]:
        raise EnvLineError("names an empty program")
    return EnvCommand(rest[i], tuple(rest[i + 1 :]), ignore, tuple(unset), tuple(assignments), chdir, tuple(other))
