"""Where the ``cpcreds`` command and ``python -m cpcreds`` start.

kubectl runs ``cpcreds get-credential`` before every request, so that command is first looked up
in the disk cache (:mod:`cpcreds.cli.diskcache`) with nothing else of cpcreds imported: no pydantic, no
``kubernetes``, no provider registry, no ``re``. A hit prints the cached answer and exits. Every
other command, and every miss, runs :func:`cpcreds.cli.main.main`, which also fills the cache.
"""

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["main"]


def main(argv: "Sequence[str] | None" = None) -> int:
    """Entry point of the ``cpcreds`` command; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["get-credential"]:
            answer = _cached_answer(argv[1:])
            if answer is not None:
                return _write(answer)
    except KeyboardInterrupt:
        return 130
    from .cli.main import main as cli_main

    return cli_main(argv)


def _cached_answer(args: "list[str]") -> "bytes | None":
    from .cli import diskcache

    if diskcache.cache_setting(os.environ) is not True:  # off, or a value the full path will refuse
        return None
    key = diskcache.cache_key(args, os.environ)
    return None if key is None else diskcache.lookup(key, os.environ)


def _write(answer: bytes) -> int:
    view = memoryview(answer)
    try:
        while view:
            view = view[os.write(1, view) :]
    except OSError:  # stdout closed (the reader went away): exit 1 without a word, as the full path does
        return 1
    return 0
