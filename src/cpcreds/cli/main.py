"""The ``cpcreds`` command line: parse, read the settings, configure logging, run the command.

Errors a user can cause (bad config, bad profile, failing plugin) print one line on stderr and exit
1; usage errors print one line naming the ``--help`` to read and exit 2. A traceback is shown only
for cpcreds' own bugs, and only with ``CPCREDS_LOG_LEVEL=debug``. ``cpcreds`` alone prints the
help and exits 0, as ``kubectl`` does.

kubectl's hit path never comes here (:mod:`cpcreds._entry` answers it from the disk cache); a
command imports its own module (:data:`cpcreds.cli.parser.HANDLERS`) only when it runs.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import CredentialError
from ..logs import configure_logging, configure_logging_when_used, redact_text
from .parser import COMMANDS, build_parser

if TYPE_CHECKING:
    from ..config.settings import Settings

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``cpcreds`` command; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
    first = argv[0].partition("=")[0] if argv else ""
    if first.startswith("-") and first not in ("-h", "--help", "--version"):
        takes = [name for name, command in parser.commands.items() if any(first in a.option_strings for a in command.parser.options)]
        if takes:  # "cpcreds --config x get-credential": argparse would call x.yaml an unknown command
            parser.error(f"{first} is an option of {', '.join(takes)}; put it after the command: cpcreds {takes[0]} {first} ...")
    args, extras = parser.parse_known_args(argv)
    if extras:
        command = parser.commands.get(args.command)
        (command.parser if command is not None else parser).unrecognized(extras)
    if args.command is None:  # like kubectl: the help, on stdout, and success
        parser.print_help()
        return 0
    args.argv = tuple(argv)  # get-credential's disk cache key is computed from the words as given
    settings: Settings | SettingsOnRead
    if args.command == "get-credential" and not _settings_given(os.environ):
        # kubectl runs get-credential; with no CPCREDS_* variable the settings are their declared
        # defaults and cannot be wrong, so they are read (pydantic-settings, with the asyncio it
        # imports) only if the run needs one: --no-cache and --config need none, a log event
        # its level.
        settings = SettingsOnRead()
        configure_logging_when_used(lambda: (settings.log_level, settings.log_format))
    else:
        try:
            settings = _read_settings()
        except CredentialError as exc:  # names the variable: "CPCREDS_LOG_LEVEL: must be ..."
            sys.stderr.write(f"cpcreds: error: {redact_text(' '.join(str(exc).split()))}\n")
            return 1
        # A stdlib handler (structlog waits for an event); get-credential, which kubectl runs on
        # every command and which usually logs nothing, imports logging only when something logs.
        configure_logging(settings.log_level, settings.log_format, on_first_use=args.command == "get-credential")
    from ..exec.signals import exit_on_termination  # the exec provider's: commands that run no plugin do not need it

    # kubectl (or a shell, or systemd) may stop us with SIGTERM/SIGHUP mid-run: the plugin, in
    # its own session, would not get the signal; kill it and exit 143/129 through SystemExit.
    exit_on_termination()
    module, _, function = args.handler.partition(":")
    try:
        handler = getattr(importlib.import_module(f"{__package__}.{module}"), function)
        return int(handler(args, settings))
    except CredentialError as exc:  # the library's messages carry no secret; they are shown as they are
        sys.stderr.write(f"cpcreds: error: {' '.join(str(exc).split())}\n")
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:  # a cpcreds bug: say so, show a traceback only when asked
        if settings.log_level == "debug":
            raise
        detail = redact_text(" ".join(f"{type(exc).__name__}: {exc}".split()))
        sys.stderr.write(f"cpcreds: internal error: {detail} (rerun with CPCREDS_LOG_LEVEL=debug for details)\n")
        return 1


def _read_settings() -> Settings:
    from ..config.settings import Settings

    return Settings()


def _settings_given(environ: Mapping[str, str]) -> bool:
    """Whether a variable may set a setting: its name starts with ``CPCREDS_`` in any case, as
    the settings' declaration reads names (the declaration decides what each one means)."""
    return any(name[:8].upper() == "CPCREDS_" for name in environ)


class SettingsOnRead:
    """The process :class:`~cpcreds.config.settings.Settings`, read from their declaration on the
    first attribute a command reads, for a run in which no variable can set one (so reading
    them cannot fail and the command's output is the same whenever they are read)."""

    __slots__ = ("_settings",)

    def __init__(self) -> None:
        self._settings: Settings | None = None

    def __getattr__(self, name: str) -> Any:
        if self._settings is None:
            self._settings = _read_settings()
        return getattr(self._settings, name)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
