"""Reading a credential file (a token, a certificate chain, a key) bounded and without blocking:
:func:`read_credential_file`, used by the ``file`` provider and offered to providers by
:mod:`cpcreds.sdk`.

A module of its own, importing only :mod:`cpcreds.config.documents`: a one-shot plugin that reads a key
file (``cpcreds-gcp``) must not load the ``file`` provider's module, which brings the plan
types, the config module and pluggy's hook marker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..config.documents import DocumentError, read_bounded

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["read_credential_file", "MAX_FILE_BYTES"]

#: Largest file read (a token, or a certificate chain or key, is a few KiB).
MAX_FILE_BYTES = 1024 * 1024


def read_credential_file(path: Path, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The text of a regular file of at most ``max_bytes``; ``ValueError`` says why not.

    Only regular files (or symlinks to them, as in projected volumes) are read: a device
    (``/dev/zero``), a FIFO or a socket is refused before any read (:func:`read_bounded` opens
    without blocking), so nothing can make a fetch hang or grow without bound.
    ``FileNotFoundError`` is left to the caller.
    """
    try:
        data = read_bounded(path, max_bytes)
    except IsADirectoryError:
        raise ValueError("is a directory") from None
    except DocumentError as exc:
        reason = f"is larger than {max_bytes // 1024} KiB" if exc.kind == "too-large" else exc.reason
        raise ValueError(reason) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    raise ValueError("is not UTF-8 text")
