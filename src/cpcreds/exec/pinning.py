"""Pinned executables: hash a plugin's bytes and run exactly those bytes.

Checking a file's digest and then running it by path leaves a window in which the path can be
pointed elsewhere, or the file rewritten, between the check and the ``exec``. Here the bytes are
copied once into a private, sealed copy, hashed as they are copied, and the copy is what runs:

- on Linux, a ``memfd`` sealed against writing, growing and shrinking (``F_SEAL_WRITE``,
  ``F_SEAL_GROW``, ``F_SEAL_SHRINK``, ``F_SEAL_SEAL``): nobody, not even this process, can
  change its bytes after the hash; the plugin is started as ``/proc/self/fd/N``;
- elsewhere, a file in a folder that only this process's user can enter (``mkdtemp``, 0700),
  written by us and made read-only (0500) before hashing it: another user cannot touch it;
  the same user can (as they can attach a debugger to us), which is the limit on those systems.

A copy is kept while the source file is unchanged: same device, inode, size, mtime and ctime
(``fstat`` of the descriptor the bytes were read from, before and after the copy). Later runs
of an unchanged executable are not hashed again. Copies are few (one per pinned executable) and
bounded (:data:`MAX_PINNED`); replacing an executable drops its old copy.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
import weakref
from collections import OrderedDict
from typing import NamedTuple

__all__ = ["PinStore", "PinnedCopy", "PinnedRun", "default_store", "MAX_EXECUTABLE_BYTES", "MAX_PINNED", "sha256_file"]

#: Largest executable cpcreds pins (a Go plugin is 10-100 MB; a 2 GiB "plugin" is a mistake).
MAX_EXECUTABLE_BYTES = 1 << 30
#: How many pinned copies are kept at most (each holds the executable's bytes in memory on Linux).
MAX_PINNED = 32
_CHUNK = 1 << 20

try:  # Linux: sealed anonymous memory
    import fcntl

    _SEALS = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
    _HAVE_MEMFD = hasattr(os, "memfd_create") and hasattr(fcntl, "F_ADD_SEALS") and os.path.isdir("/proc/self/fd")
except ImportError:  # pragma: no cover - Windows
    _HAVE_MEMFD = False


class _Key(NamedTuple):
    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int


def _key(st: os.stat_result) -> _Key:
    return _Key(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class PinnedCopy:
    """A sealed copy of an executable, and the sha256 of its bytes. Owned by a :class:`PinStore`;
    callers get their own descriptor for it from :meth:`PinStore.open_copy`."""

    __slots__ = ("sha256", "size", "head", "_fd", "_path", "_folder", "_owner")

    def __init__(self, sha256: str, size: int, head: bytes, fd: int | None, path: str | None, folder: str | None) -> None:
        self.sha256, self.size, self._fd, self._path, self._folder = sha256, size, fd, path, folder
        #: The first bytes of the copy (a ``#!`` line is read from here, never from the path).
        self.head = head
        self._owner = os.getpid()  # a forked child must not remove its parent's file copy

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)
        if self._folder is not None:
            folder, self._folder = self._folder, None
            if os.getpid() == self._owner:
                import shutil  # only file copies (systems without memfd) have a folder

                shutil.rmtree(folder, ignore_errors=True)

    def __repr__(self) -> str:
        return f"PinnedCopy(sha256={self.sha256!r}, size={self.size})"


class PinnedRun:
    """What to start for one run: the path to exec, the descriptor the child must inherit
    (None for a file copy), and the digest of the bytes at that path. :meth:`release` it once
    the process has started."""

    __slots__ = ("executable", "fd", "sha256", "head", "_unkept")

    def __init__(self, executable: str, fd: int | None, sha256: str, head: bytes = b"", unkept: PinnedCopy | None = None) -> None:
        self.executable, self.fd, self.sha256, self.head, self._unkept = executable, fd, sha256, head, unkept

    def release(self) -> None:
        """Close this run's descriptor (the started process has its own) and drop a copy the
        store did not keep. A file copy must outlive the process reading it as a script: the
        runner calls this after the process has exited."""
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)
        if self._unkept is not None:
            unkept, self._unkept = self._unkept, None
            unkept.close()

    def __repr__(self) -> str:
        return f"PinnedRun({self.executable!r}, sha256={self.sha256!r})"


class PinStore:
    """Sealed copies of pinned executables, keyed by the source file's identity. Thread-safe.

    ``use_memfd=False`` uses the portable private-file copy even on Linux (it is what runs on
    systems without ``memfd_create``)."""

    def __init__(self, *, max_pinned: int = MAX_PINNED, use_memfd: bool = True) -> None:
        self.max_pinned = max_pinned
        self.use_memfd = use_memfd and _HAVE_MEMFD
        self._copies: OrderedDict[tuple[str, _Key], PinnedCopy] = OrderedDict()
        self._by_path: dict[str, _Key] = {}
        self._lock = threading.Lock()
        self.hashed = 0  # how many times bytes were read and hashed (for tests and benchmarks)
        _stores.add(self)

    def open_copy(self, path: str) -> PinnedRun:
        """The sealed copy of ``path`` (made now, or kept from an earlier call while ``path`` is
        unchanged), ready to run. With a memfd, ``fd`` is a new descriptor of the caller's that
        must be closed after the spawn; it keeps the copy alive while the caller runs it even if
        the store drops it meanwhile.

        Raises ``OSError`` when ``path`` cannot be read, ``ValueError`` when it is not a regular
        file or is larger than :data:`MAX_EXECUTABLE_BYTES`."""
        # The kept copy is looked up by the file's identity from stat(): what runs is the sealed
        # copy, which hashes to its digest whatever happens to the path meanwhile; stat only
        # tells whether that copy is still the file as it is now.
        try:
            now = os.stat(path)
        except OSError:
            now = None
        if now is not None:
            known = (path, _key(now))
            with self._lock:
                copy = self._copies.get(known)
                if copy is not None:
                    self._copies.move_to_end(known)
                    return self._run_of(copy)
        # O_NONBLOCK: opening a FIFO planted at the path must not block us; it is refused below.
        source = os.open(path, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NONBLOCK", 0))
        try:
            st = os.fstat(source)
            if not stat.S_ISREG(st.st_mode):
                raise ValueError("is not a regular file")
            if st.st_size > MAX_EXECUTABLE_BYTES:
                raise ValueError(f"is larger than {MAX_EXECUTABLE_BYTES} bytes")
            key = (path, _key(st))
            copy = self._copy(source, path)
            unchanged = _key(os.fstat(source)) == key[1]
        finally:
            os.close(source)
        with self._lock:
            run = self._run_of(copy)  # a descriptor of the caller's before the store may drop it
            if unchanged:
                if key in self._copies:  # another thread copied it meanwhile; keep one
                    run._unkept = copy
                    return run
                stale = self._by_path.get(path)
                if stale is not None:
                    old = self._copies.pop((path, stale), None)
                    if old is not None:
                        old.close()
                self._copies[key] = copy
                self._by_path[path] = key[1]
                while len(self._copies) > self.max_pinned:
                    (old_path, old_key), old = self._copies.popitem(last=False)
                    if self._by_path.get(old_path) == old_key:
                        del self._by_path[old_path]
                    old.close()
                return run
        # Written while we read it: the copy is consistent with its digest, but it is not the
        # file as it now is, so it serves this run only and is not kept.
        run._unkept = copy
        return run

    def _run_of(self, copy: PinnedCopy) -> PinnedRun:
        if copy._fd is not None:
            fd = os.dup(copy._fd)
            return PinnedRun(f"/proc/self/fd/{fd}", fd, copy.sha256, copy.head)
        assert copy._path is not None
        return PinnedRun(copy._path, None, copy.sha256, copy.head)

    def _copy(self, source: int, path: str) -> PinnedCopy:
        self.hashed += 1
        if self.use_memfd:
            return _memfd_copy(source, path)
        return _file_copy(source, path)

    def close(self) -> None:
        """Drop every copy (runs that hold their own descriptors finish unaffected)."""
        with self._lock:
            copies = list(self._copies.values())
            self._copies.clear()
            self._by_path.clear()
        for copy in copies:
            copy.close()


#: How much of the start of a copy is kept for its ``#!`` line.
HEAD_BYTES = 256


def _copy_and_hash(source: int, target: int) -> tuple[str, int, bytes]:
    import hashlib  # here, not at the top: it loads OpenSSL, which only a pin check needs, not every plugin run

    digest = hashlib.sha256()
    buffer = bytearray(_CHUNK)
    view = memoryview(buffer)
    total = 0
    head = b""
    while True:
        n = os.readv(source, [buffer])
        if not n:
            break
        if total < HEAD_BYTES:
            head += bytes(view[: min(n, HEAD_BYTES - total)])
        total += n
        if total > MAX_EXECUTABLE_BYTES:
            raise ValueError(f"is larger than {MAX_EXECUTABLE_BYTES} bytes")
        chunk = view[:n]
        digest.update(chunk)
        while chunk:
            written = os.write(target, chunk)
            chunk = chunk[written:]
    return digest.hexdigest(), total, head


#: MFD_EXEC (Linux 6.3): the memfd is meant to be executed. Said explicitly, the kernel neither
#: warns about it nor refuses it under vm.memfd_noexec=1; older kernels reject the flag (EINVAL).
_MFD_EXEC = getattr(os, "MFD_EXEC", 0x0010)
_memfd_flags = [os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING | _MFD_EXEC] if _HAVE_MEMFD else []


def _memfd_create(name: str) -> int:
    flags = _memfd_flags[0]
    try:
        return os.memfd_create(name, flags)
    except OSError as exc:
        if exc.errno != errno.EINVAL or not flags & _MFD_EXEC:
            raise
    _memfd_flags[0] = flags & ~_MFD_EXEC  # a kernel before 6.3
    return os.memfd_create(name, _memfd_flags[0])


def _memfd_copy(source: int, path: str) -> PinnedCopy:
    fd = _memfd_create("cpcreds-pinned:" + os.path.basename(path)[:200])
    try:
        digest, size, head = _copy_and_hash(source, fd)
        # Sealed after the last byte and before anyone can run it: the bytes hashed are the
        # bytes that will ever be in it.
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
    except BaseException:
        os.close(fd)
        raise
    return PinnedCopy(digest, size, head, fd, None, None)


def _file_copy(source: int, path: str) -> PinnedCopy:
    import shutil
    import tempfile  # imported here: on Linux (memfd) this is never used

    folder = tempfile.mkdtemp(prefix="cpcreds-pinned-")  # 0700: only our user can enter it
    target_path = os.path.join(folder, os.path.basename(path) or "plugin")
    try:
        target = os.open(target_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0), 0o700)
        try:
            digest, size, head = _copy_and_hash(source, target)
            os.fchmod(target, 0o500)
        finally:
            os.close(target)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return PinnedCopy(digest, size, head, None, target_path, folder)


_default_store: PinStore | None = None
_default_lock = threading.Lock()
_stores: weakref.WeakSet[PinStore] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    # Another thread of the parent may have held a lock at fork time; the child has only this
    # thread. The copies stay usable: a memfd is inherited, a file copy is still there.
    global _default_lock
    _default_lock = threading.Lock()
    for store in list(_stores):
        store._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def default_store() -> PinStore:
    """The process-wide store: engines and providers share one copy per pinned executable, and a
    new engine (a reload of ``cpcreds serve``) does not hash an unchanged executable again."""
    global _default_store
    with _default_lock:
        if _default_store is None:
            _default_store = PinStore()
        return _default_store


def sha256_file(path: str) -> str:
    """The sha256 of a file's bytes, as hex (what ``cpcreds pin`` prints)."""
    import hashlib

    from ..config.documents import DocumentError, open_regular

    try:
        fd = open_regular(path)  # without blocking: a FIFO swapped in cannot hang `cpcreds pin`
    except DocumentError:
        raise OSError(errno.EINVAL, "is not a regular file", path) from None
    with os.fdopen(fd, "rb") as stream:
        return hashlib.file_digest(stream, "sha256").hexdigest()
