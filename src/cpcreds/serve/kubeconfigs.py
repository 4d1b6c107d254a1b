"""Kubeconfigs for kubectl, k9s or Argo CD: one per profile and one merged, each user an exec
entry that runs ``cpcreds get-credential`` for that profile. No credential is written: each file
holds the cluster's endpoint and CA (public data from the profile) and a command line.

Layout of ``--kubeconfig-dir``::

    kubeconfig                  every profile's context (merged)
    <namespace>.<name>.yaml     one context (file names: see :func:`file_stem`)
    profiles/<namespace>.<name>.json  the profile as serve saw it (what get-credential reads)

Files are 0600 in 0700 folders, written atomically (a reader never sees half a file), and
removed when their profile goes. The folders are opened without following a symbolic link, and
every file is made, replaced and removed relative to its folder's descriptor: a ``profiles`` (or
a file) that someone made a link to another folder is refused, never written, chmod-ed or
unlinked through. As ssh does with its folders, serve uses no folder that another user owns or
that group or others may write (:class:`UnsafeFolder`): whoever may write there could plant such
a link, or a kubeconfig that runs their command.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import yaml

from ..config.access import AccessPlan
from ..adapters.kubeconfig import KubeconfigContext, build_kubeconfig, context_name

__all__ = ["KubeconfigWriter", "ErrorListener", "UnsafeFolder", "file_stem", "MERGED_NAME"]

MERGED_NAME = "kubeconfig"
# A namespace is a DNS label (no dots); a name a DNS subdomain (dots allowed); neither has "_".
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
#: Longest readable stem: with ``.yaml`` or ``.json`` and the writer's temporary-file affixes it
#: stays well under the 255 bytes a file name may have.
_MAX_STEM = 200


def file_stem(key: str) -> str:
    """The file name (without suffix) of a profile's kubeconfig and snapshot, from its key
    (``namespace/name``, or ``name`` without a namespace). Injective (two profiles never share
    files), stable (the same key always gives the same stem) and safe as a file name (only
    ``[a-z0-9._-]``, never a leading dot, at most 200 characters):

    - ``namespace.name``: both Kubernetes-style (the namespace has no dot, so the first dot splits);
    - ``name`` for a profile without a namespace and a name without dots;
    - ``_name`` for one without a namespace whose name has dots (``a.b`` is not ``a/b``);
    - ``profile_<digest>`` for anything else (upper case, spaces, too long...).

    ``_`` is in no Kubernetes name, so the four forms cannot meet.
    """
    namespace, slash, name = key.rpartition("/")
    if slash and _NAMESPACE.fullmatch(namespace) and _NAME.fullmatch(name):
        stem = f"{namespace}.{name}"
    elif not slash and _NAME.fullmatch(name):
        stem = f"_{name}" if "." in name else name
    else:
        stem = ""
    if stem and len(stem) <= _MAX_STEM:
        return stem
    return "profile_" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class UnsafeFolder(OSError):
    """A folder serve will not write in: a symbolic link, owned by another user, or writable by
    group or others. ``strerror`` says which, in one line."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.EPERM, message)


_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _open_folder(name: str | Path, shown: Path, *, dir_fd: int | None = None, make: bool) -> int:
    """A descriptor of the folder ``name`` (in ``dir_fd``), made 0700 if missing and ``make``;
    :class:`UnsafeFolder` when it is a link or others may write it. Its read bits for others are
    taken away (the files name every cluster)."""
    try:
        fd = os.open(name, _DIRECTORY_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        if not make:
            raise
        os.mkdir(name, 0o700, dir_fd=dir_fd)
        fd = os.open(name, _DIRECTORY_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            try:
                link = stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
            except OSError:
                link = False
            if link:
                raise UnsafeFolder(f"{shown} is a symbolic link; serve writes only in a real folder") from None
        raise
    try:
        info = os.fstat(fd)
        if info.st_uid not in (os.geteuid(), 0):
            raise UnsafeFolder(f"{shown} is owned by another user (uid {info.st_uid}); serve writes only in its own folder")
        if info.st_mode & 0o022:
            raise UnsafeFolder(f"{shown} is writable by group or others (mode {stat.S_IMODE(info.st_mode):04o}); make it 0700")
        if info.st_mode & 0o077 and info.st_uid == os.geteuid():
            os.fchmod(fd, 0o700)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_at(dir_fd: int, name: str, text: str) -> None:
    """Write ``text`` to ``name`` in the folder ``dir_fd`` atomically with mode 0600: a new file
    (never an existing one, never through a link) renamed over ``name`` (a link there is
    replaced, not followed)."""
    for _ in range(100):
        temporary = f".{name}.{os.urandom(6).hex()}.tmp"
        try:
            fd = os.open(temporary, _FILE_FLAGS, 0o600, dir_fd=dir_fd)
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(errno.EEXIST, "no free temporary file name")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as stream:
            stream.write(text)  # no fsync: the files are rebuilt at every start; rename is what makes them atomic
        os.replace(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(temporary, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        raise


def _unlink_at(dir_fd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)  # a link is removed itself, its target stays
    except FileNotFoundError:
        pass


#: ``on_error(key, problem)``: the profile's files cannot be written (``problem``), or are again
#: (None). Key ``""`` is the folder itself and the merged kubeconfig.
ErrorListener = Callable[[str, "str | None"], None]


def _reason(path: Path, exc: OSError) -> str:
    return f"cannot write {path}: {exc.strerror or type(exc).__name__}"


class KubeconfigWriter:
    """Keeps ``directory`` in step with the profiles' plans (see the module docstring).

    Writing never raises after start: a file that cannot be written (the folder removed or
    replaced by a file, a full disk) is reported to ``on_error`` and tried again at every
    :meth:`flush`, the folders made again first. Credentials do not depend on these files.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        config_path: str | os.PathLike[str],
        *,
        command: str | None = None,
        on_error: ErrorListener | None = None,
    ) -> None:
        """``OSError`` if the folders cannot be made (``directory`` is a file, say)."""
        self.directory = Path(directory).resolve()
        self.profiles_dir = self.directory / "profiles"
        self.config_path = Path(config_path).resolve()
        self.command = command or sys.executable
        self.on_error = on_error
        self._contexts: dict[str, KubeconfigContext] = {}
        #: Profiles whose files still have to be written (plan, profile) or removed (None).
        self._pending: dict[str, tuple[AccessPlan, Mapping[str, Any]] | None] = {}
        self._failing: set[str] = set()
        self._dirty = True
        self._make_folders()

    def _make_folders(self) -> None:
        with self._folder(make=True) as top:
            os.close(_open_folder("profiles", self.profiles_dir, dir_fd=top, make=True))

    @contextmanager
    def _folder(self, *, make: bool) -> Iterator[int]:
        """The kubeconfig folder's descriptor, opened afresh for each change: a folder removed
        and made again (or replaced by a link) is seen at the next one."""
        if make:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = _open_folder(self.directory, self.directory, make=make)
        try:
            yield fd
        finally:
            os.close(fd)

    @contextmanager
    def _profiles_folder(self, top: int, *, make: bool) -> Iterator[int]:
        fd = _open_folder("profiles", self.profiles_dir, dir_fd=top, make=make)
        try:
            yield fd
        finally:
            os.close(fd)

    def _report(self, key: str, problem: str | None) -> None:
        if (problem is not None) == (key in self._failing):
            return
        if problem is None:
            self._failing.discard(key)
        else:
            self._failing.add(key)
        if self.on_error is not None:
            self.on_error(key, problem)

    def update(self, key: str, plan: AccessPlan | None, profile: Mapping[str, Any] | None) -> None:
        """Write (``plan`` given) or remove (``plan`` None) the files of one profile."""
        wanted = (plan, profile) if plan is not None and profile is not None else None
        self._pending.pop(key, None)
        try:
            self._write(key, wanted)
        except OSError as exc:
            self._pending[key] = wanted
            self._report(key, _reason(self.directory / f"{file_stem(key)}.yaml", exc))
        else:
            self._report(key, None)

    def _write(self, key: str, wanted: tuple[AccessPlan, Mapping[str, Any]] | None) -> None:
        stem = file_stem(key)
        single, snapshot = f"{stem}.yaml", f"{stem}.json"
        if wanted is None:
            if self._contexts.pop(key, None) is not None:
                self._dirty = True
            with ExitStack() as stack:
                try:
                    top = stack.enter_context(self._folder(make=False))
                    _unlink_at(top, single)
                    _unlink_at(stack.enter_context(self._profiles_folder(top, make=False)), snapshot)
                except (FileNotFoundError, NotADirectoryError):  # gone already, or its folder is
                    pass
            return
        plan, profile = wanted
        with self._folder(make=False) as top:
            with self._profiles_folder(top, make=False) as profiles:
                _write_at(profiles, snapshot, json.dumps(profile, sort_keys=True))
            args = ("-m", "cpcreds", "get-credential", "--config", str(self.config_path), "--profile", str(self.profiles_dir / snapshot))
            context = KubeconfigContext(name=context_name(profile), plan=plan, command=self.command, args=args)
            _write_at(top, single, yaml.safe_dump(build_kubeconfig([context]), sort_keys=False))
        self._contexts[key] = context
        self._dirty = True

    def flush(self) -> bool:
        """Retry the files that could not be written, then rewrite the merged kubeconfig if
        anything changed since the last flush. True when the merged kubeconfig was written."""
        if self._pending or "" in self._failing:
            try:
                self._make_folders()
            except OSError as exc:
                self._report("", _reason(self.directory, exc))
                return False
            for key, wanted in list(self._pending.items()):
                self.update(key, *(wanted or (None, None)))
        if not self._dirty:
            return False
        contexts = [self._contexts[key] for key in sorted(self._contexts)]
        merged = self.directory / MERGED_NAME
        try:
            with self._folder(make=False) as top:
                _write_at(top, MERGED_NAME, yaml.safe_dump(build_kubeconfig(contexts), sort_keys=False))
        except OSError as exc:
            self._report("", _reason(merged, exc))
            return False
        self._report("", None)
        self._dirty = False
        return True

    def clear(self) -> None:
        """Remove every file this writer wrote (not the folders)."""
        for key in list(self._contexts):
            self.update(key, None, None)
        try:
            with self._folder(make=False) as top:
                _unlink_at(top, MERGED_NAME)
        except (FileNotFoundError, NotADirectoryError):
            pass
        except OSError as exc:
            self._report("", _reason(self.directory, exc))
