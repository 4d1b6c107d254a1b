"""The credential cache of ``cpcreds get-credential`` on disk, as gke-gcloud-auth-plugin, kubelogin
and the AWS CLI keep theirs: kubectl runs the command before every request, and the answer of the
last run is good until shortly before its credential expires.

Where: ``$XDG_CACHE_HOME/cpcreds`` (an absolute ``XDG_CACHE_HOME``; else ``~/.cache/cpcreds``),
mode 0700, one file per cache key, mode 0600, each written to a temporary file and renamed into
place, so that a reader sees the old file or the new one, never a part. A file is a header line
(:data:`MAGIC`, the serve-until time, a check digest), a line describing the entry for ``cpcreds
cache list`` (JSON written by :mod:`cpcreds.cli.cachelist`: the cluster, the provider, the kind of
credential and its expiry, never the credential), and the answer.

The key (:func:`cache_key`) is a BLAKE2b digest of everything that decides the answer: the
command's arguments, the path and content of the provider config file and of the profile file,
the environment (all of it except the variables in :data:`NOT_IN_KEY`, which describe the terminal
or the shell; so ``KUBERNETES_EXEC_INFO``, ``PATH`` and every ``CPCREDS_*`` are in it), and the
working directory when a provider is given on the command line (its command may be relative).
A changed config or profile is a different key: the old answer is never served for it.

A file is trusted only when it is a regular file (not a link), owned by this user, mode 0600, at
most :data:`MAX_FILE_BYTES`, in a directory owned by this user that no one else may enter, and its
header's check digest matches the key, the serve-until time, the description and the answer.
Anything else is a miss, and the next answer replaces the file.

This module runs on every kubectl command: it imports only modules the interpreter has already
loaded at start-up, and ``_blake2``.
"""

import os
import stat
import time

from ..config.switches import cache_setting

# A private module on purpose: hashlib, the public way to blake2b, loads OpenSSL's libcrypto first,
# the largest share of a hit's cost over a bare interpreter start (bench/README.md); CPython has no
# public module that gives blake2b without it. Where _blake2 is missing, hashlib is used.
try:
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - an interpreter built without it
    from hashlib import blake2b

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "CacheKey",
    "cache_key",
    "cache_dir",
    "cache_setting",
    "lookup",
    "store",
    "clear",
    "UntrustedCacheDir",
    "read_file",
    "split_file",
    "profile_tag",
    "checked_dir",
    "NOT_IN_KEY",
    "MAGIC",
    "SUFFIX",
    "MAX_FILE_BYTES",
]

#: First field of every file's header; a new layout gets a new name, and old files are misses.
MAGIC = b"cpcreds-credential-cache-2"
#: What every layout's name starts with (``cache list`` tells an older layout from a stranger).
MAGIC_FAMILY = b"cpcreds-credential-cache-"
#: Largest cache file read or written (an answer with a client certificate is a few KiB).
MAX_FILE_BYTES = 1024 * 1024
#: Largest config or profile file hashed for a key (the profile loader's own bound).
MAX_INPUT_BYTES = 16 * 1024 * 1024
SUFFIX = ".cred"
#: A temporary file older than this is a writer's leftover (it crashed) and is removed.
STALE_TEMPORARY_SECONDS = 600

#: Environment variables left out of the key: they describe the terminal, the shell or the
#: directory a command runs in, change between terminals and with ``cd``, and do not choose an
#: identity. Every other variable is in the key, since an exec plugin sees the whole environment.
NOT_IN_KEY = frozenset(
    {
        "_", "PWD", "OLDPWD", "SHLVL", "COLUMNS", "LINES", "PS1", "PS2", "PS4", "PROMPT_COMMAND",
        "TERM", "COLORTERM", "TERM_PROGRAM", "TERM_PROGRAM_VERSION", "TERM_SESSION_ID", "WINDOWID",
        "VTE_VERSION", "ITERM_SESSION_ID", "WT_SESSION", "TMUX_PANE", "STY", "WINDOW",
        "SSH_CLIENT", "SSH_CONNECTION", "SSH_TTY", "GPG_TTY",
    }
)  # fmt: skip

# get-credential's options that take a value, as argparse spells them in full; what each one is.
_VALUE_OPTIONS = {
    "--config": "config",
    "--clusterprofile-provider-file": "config",
    "--clusterprofile-access-provider": "flag",
    "--profile": "profile",
    "--name": "name",
    "--api-version": "api-version",
    "--output": "output",
    "-o": "output",
}


class UntrustedCacheDir(Exception):
    """The cache directory exists but is not this user's (or is not a directory)."""


class CacheKey:
    """What :func:`cache_key` computed: the file ``name`` in the cache directory, the ``digest``,
    and the inputs it came from (``argv``, ``cwd``, and ``config``/``profile`` as real paths)."""

    __slots__ = ("name", "digest", "argv", "cwd", "config", "profile")

    def __init__(self, name: str, digest: bytes, argv: "tuple[str, ...]", cwd: "str | None", config: "str | None", profile: str) -> None:
        self.name, self.digest, self.argv, self.cwd, self.config, self.profile = name, digest, argv, cwd, config, profile

    def __repr__(self) -> str:
        return f"CacheKey({self.name!r})"


def cache_dir(environ: "Mapping[str, str]") -> "str | None":
    """``$XDG_CACHE_HOME/cpcreds``, else ``~/.cache/cpcreds``; None without a usable home."""
    base = environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # the XDG spec: a relative path is invalid and is ignored
        home = environ.get("HOME") or os.path.expanduser("~")
        if not os.path.isabs(home):
            return None
        base = os.path.join(home, ".cache")
    return os.path.join(base, "cpcreds")


def profile_tag(real_path: str) -> str:
    # The first part of a file's name, so that `cache clear --profile FILE` finds that file's entries.
    return blake2b(os.fsencode(real_path), digest_size=8, person=b"cpcreds-profile").hexdigest()


def _update(digest: "blake2b", *parts: bytes) -> None:
    for part in parts:  # length-prefixed: no two different inputs feed the same bytes
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)


def _read_input(path: str) -> "bytes | None":
    """A regular file's content, or None (missing, not a regular file, too large, unreadable):
    then nothing is cached, and the full path says what is wrong with the file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO must not block us
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_INPUT_BYTES:
            return None
        return _read_fd(fd, MAX_INPUT_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)


def _read_fd(fd: int, limit: int) -> "bytes | None":
    chunks, size = [], 0
    while True:
        chunk = os.read(fd, limit + 1 - size)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return None


def cache_key(argv: "Sequence[str]", environ: "Mapping[str, str]", cwd: "str | None" = None) -> "CacheKey | None":
    """The key of ``cpcreds get-credential ARGV`` (the arguments after the command) in
    ``environ``, or None when this invocation is not cached: an option not spelled in full as
    ``--option VALUE`` or ``--option=VALUE`` (abbreviations, ``--help``, ``--no-cache``), a profile
    on standard input, or a config or profile file that cannot be read (the full path reports it).
    """
    config: "str | None" = None
    profile: "str | None" = None
    flags = False
    index = 0
    while index < len(argv):
        option, equals, value = argv[index].partition("=") if argv[index].startswith("--") else (argv[index], "", "")
        what = _VALUE_OPTIONS.get(option)
        if what is None:
            return None
        if not equals:
            index += 1
            if index == len(argv):
                return None
            value = argv[index]
        index += 1
        if what == "config":
            config = value
        elif what == "profile":
            profile = value
        elif what == "flag":
            flags = True
    if config is None:
        config = environ.get("CPCREDS_CONFIG") or None
    if not profile or profile == "-" or config == "" or (config is None and not flags):
        return None  # stdin, or no config at all: the full path reads or refuses it
    digest = blake2b(digest_size=32, person=b"cpcreds-cred-v1")
    _update(digest, b"argv", *(os.fsencode(arg) for arg in argv))
    if flags:  # a command given on the command line may be relative to the working directory
        cwd = cwd if cwd is not None else os.getcwd()
        _update(digest, b"cwd", os.fsencode(cwd))
    else:
        cwd = None
    _update(digest, b"env")
    for name, value in sorted(environ.items()):
        if name not in NOT_IN_KEY:
            _update(digest, os.fsencode(name), os.fsencode(value))
    real_config = None
    if config is not None:
        real_config = os.path.realpath(config)  # the config loader resolves relative commands against it
        content = _read_input(real_config)
        if content is None:
            return None
        _update(digest, b"config", os.fsencode(real_config), content)
    real_profile = os.path.realpath(profile)
    content = _read_input(real_profile)
    if content is None:
        return None
    _update(digest, b"profile", os.fsencode(real_profile), content)
    name = f"{profile_tag(real_profile)}-{digest.hexdigest()}{SUFFIX}"
    return CacheKey(name, digest.digest(), tuple(argv), cwd, real_config, real_profile)


def _check(key: CacheKey, serve_until: int, body: bytes) -> bytes:
    # ``body`` is everything after the header: the description line and the answer.
    digest = blake2b(digest_size=32, person=b"cpcreds-check-v1")
    _update(digest, key.digest, b"%d" % serve_until, body)
    return digest.hexdigest().encode()


def _trusted_dir(path: str) -> bool:
    try:
        info = os.stat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and not info.st_mode & 0o077


def checked_dir(directory: "str | None") -> "tuple[bool, str]":
    """Whether the cache directory exists, and what makes it one get-credential does not read
    ("" when nothing does). :class:`UntrustedCacheDir` when it is no directory of this user's,
    which cpcreds neither reads nor writes."""
    if directory is None:
        raise UntrustedCacheDir("no cache directory: set XDG_CACHE_HOME or HOME")
    try:
        info = os.stat(directory)
    except FileNotFoundError:
        return False, ""
    if not stat.S_ISDIR(info.st_mode):
        raise UntrustedCacheDir(f"{directory}: not a directory")
    if info.st_uid != os.geteuid():
        raise UntrustedCacheDir(f"{directory}: owned by user {info.st_uid}, not by this user; cpcreds does not use it")
    if info.st_mode & 0o077:
        return True, f"others may enter it (mode {stat.S_IMODE(info.st_mode):04o}): get-credential reads none of it until its next answer makes it 0700"
    return True, ""


def _file_problem(info: "os.stat_result") -> str:
    """Why a cache file of this status is not trusted, or "" (see the module's docstring)."""
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    if info.st_uid != os.geteuid():
        return f"owned by user {info.st_uid}, not by this user"
    if stat.S_IMODE(info.st_mode) != 0o600:
        return f"mode {stat.S_IMODE(info.st_mode):04o}, not 0600"
    if info.st_nlink > 1:  # 0: replaced since we opened it, which is fine; 2+: linked from elsewhere
        return "another hard link to it exists"
    if info.st_size > MAX_FILE_BYTES:
        return "larger than 1 MiB"
    return ""


def read_file(path: str) -> "bytes | str":
    """The content of the cache file at ``path`` when it is one cpcreds may trust (a regular file,
    not followed through a link, this user's, mode 0600, one link, at most
    :data:`MAX_FILE_BYTES`), else a few words saying why not. Its content is not checked here."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO must not block us
    except OSError as exc:
        return "a symbolic link" if os.path.islink(path) else f"cannot be opened ({exc.strerror or type(exc).__name__})"
    try:
        problem = _file_problem(os.fstat(fd))
        if problem:
            return problem
        data = _read_fd(fd, MAX_FILE_BYTES)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or type(exc).__name__})"
    finally:
        os.close(fd)
    return "larger than 1 MiB" if data is None else data


def split_file(data: bytes) -> "tuple[int, bytes, bytes] | None":
    """A cache file's content as (serve-until time, check digest, body), or None when its header
    is not this layout's. The body is the description line and the answer."""
    header, newline, body = data.partition(b"\n")
    fields = header.split(b" ")
    # At most 20 digits: int() refuses thousands of them, and no time of use has more.
    if not newline or len(fields) != 3 or fields[0] != MAGIC or not fields[1].isdigit() or len(fields[1]) > 20:
        return None
    return int(fields[1]), fields[2], body


def lookup(key: CacheKey, environ: "Mapping[str, str]", now: "float | None" = None) -> "bytes | None":
    """The cached answer for ``key`` (the exact bytes the full path printed), or None."""
    directory = cache_dir(environ)
    if directory is None or not _trusted_dir(directory):
        return None
    data = read_file(os.path.join(directory, key.name))
    if type(data) is not bytes:
        return None
    parts = split_file(data)
    if parts is None:
        return None
    serve_until, check, body = parts
    if serve_until <= (time.time() if now is None else now):
        return None
    if check != _check(key, serve_until, body):
        return None
    _, newline, answer = body.partition(b"\n")
    return answer if newline else None


def _prepare_dir(directory: str) -> bool:
    """Create the directory (0700) or make an existing one of ours 0700; False if it is not ours."""
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        info = os.stat(directory)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            return False
        if info.st_mode & 0o077:
            os.chmod(directory, 0o700)
    except OSError:
        return False
    return True


def store(
    key: CacheKey, answer: bytes, serve_until: float, environ: "Mapping[str, str]", now: "float | None" = None, about: bytes = b"{}"
) -> bool:
    """Write ``answer`` (the bytes printed) for ``key``, to be served until ``serve_until`` (Unix
    time), replacing the file atomically; ``about`` is the one-line description ``cpcreds cache
    list`` shows (:func:`cpcreds.cli.cachelist.describe`). Nothing is written, and False
    returned, when ``serve_until`` has passed, the answer is too large, ``about`` is not one
    line, the directory is not ours or not writable, or the config or profile file changed since
    ``key`` was computed (the answer may come from the old content or the new one)."""
    now = time.time() if now is None else now
    until = int(serve_until)
    if until <= now or len(answer) + len(about) > MAX_FILE_BYTES - 256 or b"\n" in about:
        return False
    again = cache_key(key.argv, environ, key.cwd)
    if again is None or again.digest != key.digest:
        return False
    directory = cache_dir(environ)
    if directory is None or not _prepare_dir(directory):
        return False
    _prune(directory, now)
    body = b"%s\n%s" % (about, answer)
    data = b"%s %d %s\n%s" % (MAGIC, until, _check(key, until, body), body)
    final = os.path.join(directory, key.name)
    temporary = os.path.join(directory, f".{key.name}.{os.urandom(6).hex()}.tmp")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return False
    try:
        try:
            os.fchmod(fd, 0o600)  # a umask may have taken bits off; lookup wants exactly 0600
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.utime(fd, (until, until))  # the mtime says when the file is of no use (see _prune)
        finally:
            os.close(fd)
        os.replace(temporary, final)
    except OSError:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        return False
    return True


def _prune(directory: str, now: float) -> None:
    """Remove files whose serve-until time (their mtime) has passed, and writers' leftovers."""
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                    if entry.name.endswith(SUFFIX) and info.st_mtime <= now:
                        os.unlink(entry.path)
                    elif entry.name.endswith(".tmp") and entry.name.startswith(".") and info.st_ctime < now - STALE_TEMPORARY_SECONDS:
                        os.unlink(entry.path)
                except OSError:
                    continue
    except OSError:
        return


def clear(environ: "Mapping[str, str]", profile: "str | None" = None) -> "tuple[str, int]":
    """Remove every cached answer, or only those of the profile file ``profile``; returns the
    directory and how many were removed. :class:`UntrustedCacheDir` if the directory is not ours,
    ``OSError`` if it cannot be read or a file cannot be removed."""
    directory = cache_dir(environ)
    exists, _ = checked_dir(directory)
    assert directory is not None  # checked_dir raised otherwise
    if not exists:
        return directory, 0
    tag = profile_tag(os.path.realpath(profile)) + "-" if profile is not None else ""
    removed = 0
    with os.scandir(directory) as entries:
        for entry in entries:
            is_answer = entry.name.endswith(SUFFIX) and entry.name.startswith(tag)
            is_temporary = not tag and entry.name.startswith(".") and entry.name.endswith(".tmp")
            if not (is_answer or is_temporary):
                continue
            try:
                os.unlink(entry.path)
            except FileNotFoundError:  # another cpcreds removed it meanwhile
                continue
            removed += is_answer
    return directory, removed
