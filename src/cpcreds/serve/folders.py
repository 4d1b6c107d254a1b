"""serve's two folders: the ClusterProfile files it reads (``--profiles-dir``, with the
directory source) and the kubeconfigs it writes (``--kubeconfig-dir``). Checked at start, where
a folder that cannot be used stops serve (:class:`~cpcreds.serve.settings.UnusableFolder`:
serving "no profiles" as ready would hide the mistake); reported while serving, where the same
troubles make serve not ready (the profiles folder) or show as problems (a kubeconfig file).
"""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from ..fleet.inventory import DirectorySource
from ..logs import get_logger
from .kubeconfigs import KubeconfigWriter, UnsafeFolder
from .settings import ServeSettings, UnusableFolder
from .status import StatusBoard

__all__ = ["ServeFolders", "DEFAULT_PROFILES_DIR"]

_log = get_logger("cpcreds.serve")

#: The directory source's folder when no source is given: next to the provider config.
DEFAULT_PROFILES_DIR = "clusterprofiles"


class ServeFolders:
    """The folders of one serve (``config_source``: the provider config file's path), reported
    on ``board`` and ``out``. :attr:`directory` and :attr:`writer` are set by :meth:`check`."""

    def __init__(self, settings: ServeSettings, config_source: str, board: StatusBoard, out: TextIO) -> None:
        self.settings, self.board, self.out = settings, board, out
        self.config_source = config_source
        #: The profiles folder's source (with ``source: directory``), once checked.
        self.directory: DirectorySource | None = None
        #: The kubeconfig writer (with ``--kubeconfig-dir``), once checked.
        self.writer: KubeconfigWriter | None = None

    @property
    def profiles_dir(self) -> Path:
        """``--profiles-dir``, else ``clusterprofiles`` beside the provider config."""
        if self.settings.profiles_dir is not None:
            return self.settings.profiles_dir
        return Path(self.config_source).resolve().parent / DEFAULT_PROFILES_DIR

    def check(self) -> None:
        """A profiles folder that cannot be listed, or a kubeconfig folder that cannot be made,
        raises :class:`UnusableFolder`. Later, the same troubles are reported while serving
        (see :meth:`folder_state`)."""
        if self.settings.source == "directory":
            self.directory = DirectorySource(self.profiles_dir)
            problem = self.directory.check()
            if problem is not None:
                raise UnusableFolder("profiles_dir", self.profiles_dir, problem)
        if self.settings.kubeconfig_dir is not None:
            try:
                self.writer = KubeconfigWriter(self.settings.kubeconfig_dir, self.config_source, on_error=self.kubeconfig_error)
            except OSError as exc:
                reason = "is not a folder" if isinstance(exc, (FileExistsError, NotADirectoryError)) else f"cannot be made: {exc.strerror or type(exc).__name__}"
                reason = f"refused: {exc.strerror}" if isinstance(exc, UnsafeFolder) else reason
                raise UnusableFolder("kubeconfig_dir", self.settings.kubeconfig_dir, reason) from None

    def describe(self) -> None:
        """Where profiles come from and where kubeconfigs go, for the status page's header."""
        settings, board = self.settings, self.board
        if settings.source == "directory":
            board.source_detail = f"folder {self.profiles_dir}"
        else:
            namespaces = ", ".join(settings.namespaces) or "all"
            where = "in-cluster" if settings.in_cluster else f"kubeconfig {settings.hub_kubeconfig}"
            board.source_detail = f"hub ({where}), namespaces: {namespaces}" + (f", labels: {settings.label_selector}" if settings.label_selector else "")
        board.kubeconfig_dir = str(self.writer.directory) if self.writer is not None else None

    def kubeconfig_error(self, key: str, problem: str | None) -> None:
        """The writer's trouble: a profile's own files on its row; the folder or the merged file
        an inventory problem."""
        if key:
            self.board.set_kubeconfig_error(key, problem)
        else:
            self.board.set_problem(f"kubeconfig folder {self.settings.kubeconfig_dir}", problem or "")

    def folder_state(self, problem: str | None) -> None:
        """Serve is not ready while its profiles folder cannot be listed (the profiles already
        read keep their credentials); said on stderr, the page, /readyz and /v1/clusters."""
        reason = f"the profiles folder {self.profiles_dir}: {problem}" if problem is not None else None
        if reason == self.board.not_ready:
            return
        self.board.not_ready = reason
        if reason is not None:
            self.out.write(f"cpcreds serve: not ready: {reason}\n")
            _log.error("not ready", reason=reason)
        else:
            self.out.write(f"cpcreds serve: ready again: the profiles folder {self.profiles_dir} can be listed\n")
            _log.info("ready again")
        self.out.flush()
