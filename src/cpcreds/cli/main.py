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
import sys
from collections.abc import Sequence

from ..errors import CredentialError
from ..logs import configure_logging, redact_text
from ..config.settings import Settings
from .parser import COMMANDS, build_parser

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
    try:
        settings = Settings()
    except CredentialError as exc:  # names the variable: "CPCREDS_LOG_LEVEL: must be ..."
        sys.stderr.write(f"cpcreds: error: {redact_text(' '.join(str(exc).split()))}\n")
        return 1
    # A stdlib handler (structlog waits for an event); get-credential, which kubectl runs on every
    # command and which usually logs nothing, imports logging only when something logs.
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
