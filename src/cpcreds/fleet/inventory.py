"""Where a fleet's ClusterProfiles come from, as changes: profiles added or changed, keys removed.

A *key* is ``namespace/name`` (``name`` for a profile without a namespace). Sources report only
what changed since their last report, so 10,000 unchanged profiles cost nothing per scan.

Every source has one method the fleet drives, ``async run(emit, listed)``: it calls
``emit(change)`` for every :class:`Change` and ``listed()`` once its first full listing is out,
and runs until cancelled. :class:`FolderSource` (a folder of files, rescanned: a
:class:`DirectorySource`), :class:`ProfileFeed` (profiles a program hands over) and
:class:`~cpcreds.fleet.hub.HubSource` (the hub's watch) are the three. A source whose class says
``sends_own_profiles = True`` promises never to change a profile it sent (the three do).
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ProfileError
from ..config.profiles import load_profiles
from .packed import PackedProfile, packed

__all__ = ["Change", "DirectorySource", "FolderSource", "ProfileFeed", "profile_key", "held", "PROFILE_SUFFIXES"]

#: Files of a profiles folder that are read; others (README, editor backups, dotfiles) are not.
PROFILE_SUFFIXES = (".yaml", ".yml", ".json")
#: A full rescan of the folder (a stat per file, catching in-place edits) uses at most about
#: this share of a CPU; in between, the folder's own mtime catches added, removed and renamed files.
_SCAN_CPU_SHARE = 0.01


def profile_key(profile: Mapping[str, Any]) -> str | None:
    """``namespace/name`` of a profile, or None when it has no usable name."""
    meta = profile.get("metadata")
    if not isinstance(meta, Mapping):
        return None
    name, namespace = meta.get("name"), meta.get("namespace") or ""
    if not isinstance(name, str) or not name or not isinstance(namespace, str):
        return None
    # Kubernetes' bounds (253 each): the key is also the profile's kubeconfig context name.
    if not (name + namespace).isprintable() or "/" in name + namespace or len(name) > 253 or len(namespace) > 253:
        return None
    return f"{namespace}/{name}" if namespace else name


#: Fields whose string values repeat across a fleet's profiles (``apiVersion: multicluster...``,
#: a namespace, a provider's or an extension's name), shared by :func:`shared`.
_REPEATED = frozenset({"apiVersion", "kind", "namespace", "name", "type", "status", "reason"})


def shared(value: Any, field: str = "") -> Any:
    """``value`` (a parsed profile: dicts, lists, scalars) rebuilt with every mapping key, and
    the strings of the fields whose values repeat across a fleet, shared between profiles
    (``sys.intern``). A parser shares keys within one document at most; a fleet of 100,000
    profiles would otherwise hold 100,000 copies of ``"accessProviders"`` and of every key."""
    if type(value) is dict:
        return {sys.intern(key) if type(key) is str else key: shared(item, key) for key, item in value.items()}
    if type(value) is list:
        return [shared(item, field) for item in value]
    if type(value) is str and field in _REPEATED and len(value) <= 256:
        return sys.intern(value)
    return value


def held(profile: dict[str, Any]) -> Mapping[str, Any]:
    """How a source holds a profile it parsed with cpcreds' loaders or ``json.loads`` (plain JSON
    data): packed (:mod:`cpcreds.fleet.packed`, far smaller than the parsed dicts), else
    (a profile too deep to encode) parsed, with its keys and repeated values shared (:func:`shared`)."""
    kept = packed(profile, plain=True)
    return kept if type(kept) is PackedProfile else shared(profile)


def _signature(info: os.stat_result) -> int:
    """A file's modification time, size and inode in one int: one object per file held, not a
    tuple of three (a fleet holds one per file); equal exactly when all three are."""
    return (info.st_mtime_ns & _MTIME_BITS) | info.st_size << 96 | info.st_ino << 160  # a time before 1970 is negative


_MTIME_BITS = (1 << 96) - 1


def _inode(signature: int) -> int:
    """The inode a :func:`_signature` was taken of."""
    return signature >> 160


def folder_problem(exc: OSError) -> str:
    """What an ``OSError`` from listing the profiles folder means, for an operator."""
    if isinstance(exc, FileNotFoundError):
        return "no such folder"
    if isinstance(exc, NotADirectoryError):
        return "is not a folder"
    return f"cannot list the folder: {exc.strerror or type(exc).__name__}"


@dataclass
class Change:
    """What changed: profiles to (re)consider by key, keys gone, and per-origin problems (a file
    that cannot be read; empty string: the origin is fine again)."""

    upserts: dict[str, tuple[Mapping[str, Any], str]] = field(default_factory=dict)
    deletes: set[str] = field(default_factory=set)
    problems: dict[str, str] = field(default_factory=dict)
    #: Keys among ``deletes`` whose profile is still there, but another profile of the same
    #: KEP-4322 inventory member now stands for their cluster (see :mod:`cpcreds.fleet.members`).
    superseded: set[str] = field(default_factory=set)
    #: Keys among ``deletes`` whose profile is still there, but another replica of a shard now
    #: owns it (see :mod:`cpcreds.fleet.ownership`).
    moved: set[str] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.upserts or self.deletes or self.problems)


class _One(Mapping[str, Mapping[str, Any]]):
    """The profiles of a file that holds one (most do): ``{key: profile}`` read-only, in a
    fraction of a one-entry dict's memory (a fleet holds one per file)."""

    __slots__ = ("key", "profile")

    def __init__(self, key: str, profile: Mapping[str, Any]) -> None:
        self.key, self.profile = key, profile

    def __getitem__(self, key: str) -> Mapping[str, Any]:
        if key == self.key:
            return self.profile
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        return self.profile if key == self.key else default

    def __iter__(self) -> Iterator[str]:
        yield self.key

    def __len__(self) -> int:
        return 1


@dataclass(slots=True)
class _File:
    signature: int
    profiles: Mapping[str, Mapping[str, Any]]


class DirectorySource:
    """The ClusterProfile files of one folder (not its subfolders), rescanned by :meth:`scan`.

    A file may hold one profile, several YAML documents or a List. A file that cannot be read or
    parsed keeps its previous profiles (a half-written edit must not drop a cluster's credential)
    and is reported in :attr:`Change.problems` until it is fixed or removed. When two files name
    the same profile, the file that sorts first wins.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._files: dict[str, _File] = {}
        # key -> the file that defines it, or the set of them when several do (rare: a set for
        # every key would hold memory for every profile of a large fleet)
        self._holders: dict[str, str | set[str]] = {}
        self._problems: dict[str, str] = {}
        #: How long the last full scan took: full scans are spaced by it.
        self.last_scan_seconds = 0.0

    def folder_signature(self) -> tuple[int, int] | None:
        """The folder's own mtime and inode: they change when a file is added, removed or
        renamed into place (how editors and ``kubectl`` save), so an unchanged signature means
        only in-place edits can have happened since the last scan."""
        try:
            info = os.stat(self.path)
        except OSError:
            return None
        return info.st_mtime_ns, info.st_ino

    @property
    def problems(self) -> dict[str, str]:
        return dict(self._problems)

    @property
    def folder_problem(self) -> str | None:
        """Why the folder itself could not be listed at the last scan (None: it could)."""
        return self._problems.get(os.fspath(self.path))

    def check(self) -> str | None:
        """Why the folder cannot be listed now (missing, a file, unreadable), or None."""
        try:
            with os.scandir(self.path):
                pass
        except OSError as exc:
            return folder_problem(exc)
        return None

    def scan(self, *, full: bool = True) -> Change:
        """Read added and changed files, forget removed ones; return what changed. Not ``full``:
        after the folder itself changed (a file added, removed or renamed into place), a file
        known before is looked at again only if it is another file now (another inode), which
        needs no ``stat`` per file; an edit in place waits for the next full scan."""
        started = time.perf_counter()
        change = Change()
        present = self._listing(change, full)
        touched: set[str] = set()
        for path in sorted(set(self._files) - set(present)):
            gone = self._files.pop(path).profiles
            touched.update(gone)
            self._unhold(path, gone)
            if self._problems.pop(path, None) is not None:
                change.problems[path] = ""
        for path, signature in present.items():
            known = self._files.get(path)
            if known is not None and known.signature == signature:
                continue
            profiles, problem = self._read(path)
            if problem is not None:
                if self._problems.get(path) != problem:
                    change.problems[path] = problem
                self._problems[path] = problem
                if known is not None:
                    known.signature = signature  # reported once per version of the file
                else:
                    self._files[path] = _File(signature, {})
                continue
            if self._problems.pop(path, None) is not None:
                change.problems[path] = ""
            old = known.profiles if known is not None else {}
            self._files[path] = _File(signature, profiles)
            self._unhold(path, old)
            for key in profiles:
                self._hold(key, path)
            touched.update(old)
            touched.update(key for key, profile in profiles.items() if old.get(key) != profile)
        self._settle(touched, change)
        if full:
            self.last_scan_seconds = time.perf_counter() - started
        return change

    async def run(
        self,
        emit: Callable[[Change], None],
        listed: Callable[[], None],
        *,
        scan_interval: float = 1.0,
        on_scan: Callable[[str | None], None] | None = None,
    ) -> None:
        """Scan until cancelled: at once, then whenever the folder's own signature changes (a file
        added, removed or renamed into place; looked at four times every ``scan_interval``
        seconds, and then only the added and replaced files are read: see :meth:`scan`), and in
        full (in-place edits) at most every ``scan_interval`` seconds and at most ~1% of a CPU.
        Scans run in a thread, so the event loop never blocks on the file system. ``on_scan``
        gets :attr:`folder_problem` after every scan; ``listed`` is called after the first."""
        loop = asyncio.get_running_loop()
        seen, last_full, first = None, float("-inf"), True
        while True:
            folder = self.folder_signature()
            spacing = max(scan_interval, self.last_scan_seconds / _SCAN_CPU_SHARE)
            full = loop.time() - last_full >= spacing or folder is None
            if folder != seen or full:
                seen = folder
                if full:
                    last_full = loop.time()
                change = await asyncio.to_thread(self.scan, full=full)
                if change:
                    emit(change)
                # Not kept until the next scan (minutes apart at 100,000 profiles): the first
                # listing's change holds an entry per profile.
                del change
                if on_scan is not None:
                    on_scan(self.folder_problem)
            if first:
                first = False
                listed()
            await asyncio.sleep(scan_interval / 4)

    def _hold(self, key: str, path: str) -> None:
        holders = self._holders.get(key)
        if holders is None:
            self._holders[key] = path
        elif isinstance(holders, str):
            if holders != path:
                self._holders[key] = {holders, path}
        else:
            holders.add(path)

    def _unhold(self, path: str, profiles: Mapping[str, Mapping[str, Any]]) -> None:
        for key in profiles:
            holders = self._holders.get(key)
            if holders is None:
                continue
            if isinstance(holders, str):
                if holders == path:
                    del self._holders[key]
                continue
            holders.discard(path)
            if len(holders) == 1:
                self._holders[key] = next(iter(holders))
            elif not holders:
                del self._holders[key]

    def _listing(self, change: Change, full: bool = True) -> dict[str, int]:
        present: dict[str, int] = {}
        problem = None
        files = self._files
        try:
            with os.scandir(self.path) as entries:
                for entry in entries:
                    if entry.name.startswith(".") or not entry.name.endswith(PROFILE_SUFFIXES):
                        continue
                    if not full:
                        known = files.get(entry.path)
                        # The directory entry names the inode without a stat (Linux's d_ino).
                        if known is not None and _inode(known.signature) == entry.inode():
                            present[entry.path] = known.signature
                            continue
                    try:
                        info = entry.stat()
                    except OSError:
                        continue  # removed between listing and stat
                    if stat.S_ISREG(info.st_mode):
                        present[entry.path] = _signature(info)
        except OSError as exc:
            problem = folder_problem(exc)
        folder = os.fspath(self.path)
        if problem is not None:
            # The folder is gone or unreadable: keep what we have rather than drop the fleet.
            if self._problems.get(folder) != problem:
                change.problems[folder] = problem
            self._problems[folder] = problem
            return {path: known.signature for path, known in self._files.items()}
        if self._problems.pop(folder, None) is not None:
            change.problems[folder] = ""
        return present

    @staticmethod
    def _read(path: str) -> tuple[Mapping[str, Mapping[str, Any]], str | None]:
        problem = None
        try:
            loaded = load_profiles(path)
        except ProfileError as exc:
            problem = str(exc).removeprefix(f"{path}: ")
        if problem is not None:
            return {}, problem
        profiles: dict[str, Mapping[str, Any]] = {}
        for index, profile in enumerate(loaded):
            key = profile_key(profile)
            if key is None:
                return {}, f"object {index} has no usable metadata.name"
            if key in profiles:
                return {}, f"ClusterProfile {key} appears more than once"
            # A file's resourceVersion was copied, not written by an API server: it says nothing
            # about the content, so without it the engine tells versions apart by their content.
            profile["metadata"].pop("resourceVersion", None)
            profiles[key] = held(profile)
        if len(profiles) == 1:
            ((key, profile),) = profiles.items()
            return _One(key, profile), None
        return profiles, None

    def _settle(self, touched: set[str], change: Change) -> None:
        """Decide, for every key whose files changed, which file's profile now stands."""
        for key in touched:
            holders = self._holders.get(key)
            owner = holders if isinstance(holders, str) or holders is None else min(holders)
            if owner is None:
                # A touched key was held by a file before this scan (and so sent): it is gone.
                change.deletes.add(key)
                continue
            change.upserts[key] = (self._files[owner].profiles[key], owner)


class FolderSource:
    """A folder of ClusterProfile files as a fleet's source: rescanned every ``scan_interval``
    seconds; ``on_scan(problem)`` hears after each scan whether the folder could be listed."""

    #: It never changes a profile once sent, so the fleet's engine may keep parts of it as they are.
    sends_own_profiles = True

    def __init__(self, directory: DirectorySource, scan_interval: float, on_scan: Callable[[str | None], None] | None = None) -> None:
        self.directory, self.scan_interval, self.on_scan = directory, scan_interval, on_scan

    async def run(self, emit: Callable[[Change], None], listed: Callable[[], None]) -> None:
        await self.directory.run(emit, listed, scan_interval=self.scan_interval, on_scan=self.on_scan)


class ProfileFeed:
    """An inventory a program fills itself: ClusterProfiles it got elsewhere (another API, a
    message bus, a test), handed over with :meth:`put` and :meth:`delete` from any thread.

    A profile is keyed by ``namespace/name`` like any other; :meth:`put` of an equal profile is
    no change. :meth:`put` raises :class:`~cpcreds.ProfileError` for a profile without a usable
    name or one that refers to itself."""

    #: Its profiles are its own copies, never changed once sent (see :class:`FolderSource`).
    sends_own_profiles = True

    def __init__(self, profiles: list[Mapping[str, Any]] | None = None) -> None:
        self._profiles: dict[str, Mapping[str, Any]] = {}
        self._emit: Callable[[Change], None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()  # puts from any thread; one order of changes
        for profile in profiles or ():
            self.put(profile)

    def put(self, profile: Mapping[str, Any]) -> str:
        """Add or replace ``profile``; returns its key."""
        key = profile_key(profile) if isinstance(profile, Mapping) else None
        if key is None:
            raise ProfileError("a ClusterProfile needs a metadata.name (and a string metadata.namespace, if any)")
        # Packed, the profile is the feed's own copy (a caller's later edit of the dict it
        # passed is not a silent change); what JSON would not carry is copied as it is.
        copied = packed(profile)
        if type(copied) is not PackedProfile:
            try:
                copied = _plain(profile)
            except RecursionError:
                raise ProfileError(f"ClusterProfile {key} is nested too deeply (or refers to itself)") from None
        with self._lock:
            if self._profiles.get(key) != copied:
                self._profiles[key] = copied
                self._send(Change(upserts={key: (copied, "feed")}))
        return key

    def delete(self, key: str) -> None:
        """Remove the profile ``key`` (``namespace/name``); a key not held is no change."""
        with self._lock:
            if self._profiles.pop(key, None) is not None:
                self._send(Change(deletes={key}))

    @property
    def keys(self) -> list[str]:
        return list(self._profiles)

    def _send(self, change: Change) -> None:
        loop, emit = self._loop, self._emit
        if loop is None or emit is None:
            return  # not running: run() starts with everything held
        try:
            loop.call_soon_threadsafe(emit, change)
        except RuntimeError:  # the fleet's loop closed
            pass

    async def run(self, emit: Callable[[Change], None], listed: Callable[[], None]) -> None:
        with self._lock:
            self._loop, self._emit = asyncio.get_running_loop(), emit
            emit(Change(upserts={key: (profile, "feed") for key, profile in self._profiles.items()}))
        listed()
        try:
            await asyncio.Event().wait()
        finally:
            with self._lock:
                self._loop = self._emit = None


def _plain(value: Any) -> Any:
    """A deep copy of JSON-like data (the feed's profiles are its own: a caller's later edit of
    the dict it passed is not a silent change)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
