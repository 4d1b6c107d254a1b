"""matchImages and auth keys: which patterns apply to an image, exactly as the kubelet decides.

The kubelet compares a pattern with an image in ``URLsMatchStr`` (pkg/credentialprovider): both
are read as URLs without a scheme (Go's ``url.Parse("https://" + s)``), then they match when

- the ports are equal (no port on one side means no port on the other),
- the hosts have the same number of dot-separated parts and each pattern part matches the image
  part as a ``filepath.Match`` glob (``*`` never crosses a dot: ``*.io`` does not match
  ``k8s.gcr.io``; ``app*.k8s.io`` and ``k8s.*`` are fine),
- the pattern's path is a prefix of the image's path (as strings: ``/team`` is a prefix of
  ``/team-b/app`` too, as in the kubelet).

Keys of a plugin's ``auth`` map are patterns of the same kind. The kubelet tidies each one (a
scheme and a leading ``/v1/`` or ``/v2/`` are dropped: ``https://index.docker.io/v1/`` is
``index.docker.io``), sorts them in reverse order, so that longer keys come before the keys they
extend and literal parts before wildcards, and offers the image every key that matches, in that
order; Docker Hub images fall back to an ``index.docker.io`` key. :func:`select_auth` does all
of that.

What is refused, and where: :func:`compile_pattern` raises :class:`PatternError` for what Go's
``url.Parse`` refuses (control characters, characters not allowed in a host name, a port that is
not a number, a bad ``%`` escape) and, stricter than the kubelet, which would only never match
it, for a glob ``filepath.Match`` calls malformed (``[a-``, a trailing ``\\``). Config loading
turns that into a :class:`~cpcreds.ConfigError`; an auth key that is malformed is skipped, as the
kubelet skips it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple, TypeVar

__all__ = [
    "PatternError",
    "ParsedURL",
    "Pattern",
    "parse_schemeless_url",
    "compile_pattern",
    "urls_match",
    "urls_match_str",
    "glob_match",
    "normalize_auth_key",
    "order_auth_keys",
    "select_auth",
    "merge_auth",
    "DEFAULT_REGISTRY_KEY",
]

V = TypeVar("V")

#: The key Docker Hub credentials are filed under (``https://index.docker.io/v1/`` tidied).
DEFAULT_REGISTRY_KEY = "index.docker.io"


class PatternError(ValueError):
    """A matchImages entry or auth key is not a URL Go would parse, or not a valid glob. The
    message says what is wrong, in Go's words where they exist, without quoting the pattern."""


class ParsedURL(NamedTuple):
    """The parts of a schemeless URL that matching looks at."""

    host_parts: tuple[str, ...]
    port: str
    path: str
    host: str  # host[:port] as Go's url.URL.Host has it (unescaped)


# -- Go's net/url, as far as url.Parse("https://" + s) goes ----------------------------------------

_ALNUM = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
# Bytes below 0x80 allowed unescaped in a host (net/url shouldEscape with encodeHost).
_HOST_OK = _ALNUM | frozenset(b"!$&'()*+,;=:[]<>\"-_.~")
_USERINFO_OK = _ALNUM | frozenset(b"-._:~!$&'()*+,;=%@")
_HEX = frozenset(b"0123456789abcdefABCDEF")
_PATH, _HOST, _ZONE, _USERINFO, _FRAGMENT = range(5)


def _unescape(data: bytes, mode: int) -> bytes:
    """net/url's unescape: check and decode %XX; in a host, refuse what may not appear there."""
    if b"%" not in data and (mode not in (_HOST, _ZONE) or all(b >= 0x80 or b in _HOST_OK for b in data)):
        return data
    out = bytearray()
    i = 0
    while i < len(data):
        byte = data[i]
        if byte == 0x25:  # %
            if i + 2 >= len(data) or data[i + 1] not in _HEX or data[i + 2] not in _HEX:
                raise PatternError("invalid URL escape (a % not followed by two hex digits)")
            value = int(data[i + 1 : i + 3], 16)
            if mode == _HOST and value < 0x80 and data[i : i + 3] != b"%25":
                # RFC 3986: in a host, %-encoding is only for non-ASCII bytes (and %25 in a zone).
                raise PatternError("invalid URL escape in the host (only non-ASCII bytes may be %-encoded)")
            if mode == _ZONE and data[i : i + 3] != b"%25" and value != 0x20 and value not in _HOST_OK:
                raise PatternError("invalid URL escape in the IPv6 zone")
            out.append(value)
            i += 3
            continue
        if mode in (_HOST, _ZONE) and byte < 0x80 and byte not in _HOST_OK:
            raise PatternError("invalid character in the host name")
        out.append(byte)
        i += 1
    return bytes(out)


def _valid_optional_port(port: bytes) -> bool:
    return port == b"" or (port[:1] == b":" and all(0x30 <= b <= 0x39 for b in port[1:]))


def _parse_host(host: bytes) -> bytes:
    if host.startswith(b"["):
        end = host.rfind(b"]")
        if end < 0:
            raise PatternError("missing ']' in the host")
        if not _valid_optional_port(host[end + 1 :]):
            raise PatternError("invalid port after the host (a port is digits only)")
        zone = host[:end].find(b"%25")
        if zone >= 0:
            return _unescape(host[:zone], _HOST) + _unescape(host[zone:end], _ZONE) + _unescape(host[end:], _HOST)
    else:
        colon = host.rfind(b":")
        if colon >= 0 and not _valid_optional_port(host[colon:]):
            raise PatternError("invalid port after the host (a port is digits only)")
    return _unescape(host, _HOST)


def _split_host_port(hostport: str) -> tuple[str, str] | None:
    """net.SplitHostPort; None where Go returns an error (the caller then keeps the whole host)."""
    colon = hostport.rfind(":")
    if colon < 0:
        return None
    start, end_search = 0, 0
    if hostport.startswith("["):
        end = hostport.find("]")
        if end < 0:
            return None
        if end + 1 == len(hostport) or end + 1 != colon:
            return None
        host = hostport[1:end]
        start, end_search = 1, end + 1
    else:
        host = hostport[:colon]
        if ":" in host:
            return None
    if "[" in hostport[start:] or "]" in hostport[end_search:]:
        return None
    return host, hostport[colon + 1 :]


def _decode(data: bytes) -> str:
    # Go strings are bytes; surrogateescape keeps bytes that are not UTF-8 comparable and distinct.
    return data.decode("utf-8", "surrogateescape")


def _parse_url(raw: str) -> ParsedURL:
    """Go's ``url.Parse(raw)`` for ``raw`` starting with ``https://`` or ``http://``."""
    data = raw.encode("utf-8", "surrogateescape")
    if any(b < 0x20 or b == 0x7F for b in data):
        raise PatternError("invalid control character in URL")
    data, hash_sign, fragment = data.partition(b"#")
    if hash_sign:
        _unescape(fragment, _FRAGMENT)
    rest = data[data.index(b":") + 1 :]
    if rest.endswith(b"?") and rest.count(b"?") == 1:
        rest = rest[:-1]
    else:
        rest = rest.partition(b"?")[0]
    authority, path = rest[2:], b""
    slash = authority.find(b"/")
    if slash >= 0:
        authority, path = authority[:slash], authority[slash:]
    at = authority.rfind(b"@")
    host = _parse_host(authority[at + 1 :])
    if at >= 0:
        userinfo = authority[:at]
        if any(b >= 0x80 or b not in _USERINFO_OK for b in userinfo):
            raise PatternError("invalid userinfo")
        _unescape(userinfo, _USERINFO)
    host_text = _decode(host)
    split = _split_host_port(host_text)
    name, port = split if split is not None else (host_text, "")
    return ParsedURL(tuple(name.split(".")), port, _decode(_unescape(path, _PATH)), host_text)


def parse_schemeless_url(text: str) -> ParsedURL:
    """The kubelet's ``ParseSchemelessURL``: ``text`` read as ``https://`` + ``text``."""
    return _parse_url("https://" + text)


# -- Go's path/filepath.Match, one host part at a time ---------------------------------------------


def _class_char(pattern: str, i: int) -> tuple[str, int]:
    """filepath.Match's getEsc: one (possibly escaped) character of a [class]."""
    if i >= len(pattern) or pattern[i] in "-]":
        raise PatternError("malformed glob character class")
    if pattern[i] == "\\":
        i += 1
        if i >= len(pattern):
            raise PatternError("malformed glob (a trailing \\)")
    return pattern[i], i + 1


class _Class(NamedTuple):
    """A ``[...]`` of a glob: matches one character in (or, negated, not in) its ranges."""

    negated: bool
    ranges: tuple[tuple[str, str], ...]


#: A glob token: a literal character, ``?`` (:data:`_ANY`), ``*`` (:data:`_STAR`) or a class.
_Token = str | _Class | None
_ANY: None = None
_STAR = _Class(False, (("*", "*"),))  # compared by identity, never as a class


def _glob_tokens(pattern: str) -> tuple[_Token, ...]:
    """The tokens of a filepath.Match pattern; PatternError where filepath.Match returns
    ErrBadPattern (a malformed class, a trailing ``\\``)."""
    out: list[_Token] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "*":
            if not out or out[-1] is not _STAR:  # "**" is "*"
                out.append(_STAR)
            i += 1
        elif char == "?":
            out.append(_ANY)
            i += 1
        elif char == "\\":
            if i + 1 >= len(pattern):
                raise PatternError("malformed glob (a trailing \\)")
            out.append(pattern[i + 1])
            i += 2
        elif char == "[":
            i += 1
            negated = i < len(pattern) and pattern[i] == "^"
            if negated:
                i += 1
            ranges: list[tuple[str, str]] = []
            while True:
                if i < len(pattern) and pattern[i] == "]" and ranges:
                    i += 1
                    break
                low, i = _class_char(pattern, i)
                high = low
                if i < len(pattern) and pattern[i] == "-":
                    high, i = _class_char(pattern, i + 1)
                ranges.append((low, high))  # Go accepts z-a, which never matches
            out.append(_Class(negated, tuple(ranges)))
        else:
            out.append(char)
            i += 1
    return tuple(out)


def _matches_one(token: _Token, char: str) -> bool:
    if token.__class__ is str:
        return token == char
    if token is None:
        return char != "/"
    negated, ranges = token  # type: ignore[misc]
    return any(low <= char <= high for low, high in ranges) != negated


def _match_tokens(tokens: tuple[_Token, ...], name: str) -> bool:
    """Whether ``name`` matches ``tokens`` as Go's ``filepath.Match`` decides it, in
    O(len(name) * len(tokens)) steps whatever the pattern (a regular expression backtracks
    through every ``*``: 40 stars in an auth key from a plugin took minutes).

    Go's algorithm, not its documentation: the pattern is cut into chunks, each a ``*`` and
    the tokens up to the next one; a chunk takes the *first* place it matches (a ``*`` never
    skips a separator) and is never tried again, so ``*[^a]*`` does not match ``./`` (the
    kubelet says so too, and cpcreds must agree with the kubelet)."""
    count, at, i = len(tokens), 0, 0
    while i < count:
        star = tokens[i] is _STAR
        if star:
            i += 1
        end = i
        while end < count and tokens[end] is not _STAR:
            end += 1
        chunk, i, last = tokens[i:end], end, end >= count
        if star and not chunk:  # a trailing '*' takes the rest unless it holds a separator
            return "/" not in name[at:]
        after = _match_chunk(chunk, name, at)
        if after >= 0 and (after == len(name) or not last):
            at = after
            continue
        if star:
            skip = at
            while skip < len(name) and name[skip] != "/":
                skip += 1
                after = _match_chunk(chunk, name, skip)
                if after >= 0 and (after == len(name) or not last):
                    break
            else:
                return False
            at = after
            continue
        return False
    return at == len(name)


def _match_chunk(chunk: tuple[_Token, ...], name: str, at: int) -> int:
    """Where ``name`` goes on after ``chunk`` (star-free tokens, one character each) matched it
    at ``at``, or -1."""
    if len(name) - at < len(chunk):
        return -1
    for offset, token in enumerate(chunk):
        if not _matches_one(token, name[at + offset]):
            return -1
    return at + len(chunk)


def glob_match(pattern: str, name: str) -> bool:
    """Go's ``filepath.Match(pattern, name)``; :class:`PatternError` for a malformed pattern.
    Linear in the name for each token of the pattern, never exponential."""
    return _match_tokens(_glob_tokens(pattern), name)


# -- patterns -------------------------------------------------------------------------------------


class Pattern:
    """A matchImages entry or auth key, parsed once; :meth:`matches` is ``URLsMatch``."""

    __slots__ = ("text", "url", "_parts")

    def __init__(self, text: str, url: ParsedURL) -> None:
        self.text, self.url = text, url
        # A literal part is compared as a string; a glob part through its tokens.
        self._parts = tuple(part if not any(c in part for c in "*?[\\") else _glob_tokens(part) for part in url.host_parts)

    def matches(self, target: ParsedURL) -> bool:
        url = self.url
        if url.port != target.port or len(url.host_parts) != len(target.host_parts) or not target.path.startswith(url.path):
            return False
        for part, name in zip(self._parts, target.host_parts):
            if part.__class__ is str:
                if part != name:
                    return False
            elif not _match_tokens(part, name):  # type: ignore[arg-type]
                return False
        return True

    def __repr__(self) -> str:
        return f"Pattern({self.text!r})"


def compile_pattern(text: str) -> Pattern:
    """Parse a matchImages entry or auth key (schemeless, e.g. ``*.azurecr.io``,
    ``registry.io:8080/path``); :class:`PatternError` if Go would refuse it or a host part is a
    malformed glob."""
    url = parse_schemeless_url(text)
    return Pattern(text, url)  # a malformed glob part raises while its tokens are made


def urls_match(glob: ParsedURL, target: ParsedURL) -> bool:
    """The kubelet's ``URLsMatch``: ports equal, as many host parts, each a glob match, and the
    glob's path a prefix of the target's. :class:`PatternError` for a malformed glob part."""
    if glob.port != target.port or len(glob.host_parts) != len(target.host_parts) or not target.path.startswith(glob.path):
        return False
    return all(glob_match(part, name) for part, name in zip(glob.host_parts, target.host_parts))


def urls_match_str(glob: str, target: str) -> bool:
    """The kubelet's ``URLsMatchStr``: :func:`urls_match` of two schemeless URLs.
    :class:`PatternError` when either does not parse or the glob is malformed."""
    return urls_match(parse_schemeless_url(glob), parse_schemeless_url(target))


# -- auth keys ------------------------------------------------------------------------------------


def normalize_auth_key(key: str) -> str:
    """The key under which the kubelet files an auth entry (``BasicDockerKeyring.Add``): scheme
    dropped, a leading ``/v1`` or ``/v2`` of the path dropped, a bare ``/`` path dropped.
    :class:`PatternError` when Go would not parse it (the kubelet skips such a key)."""
    raw = key if key.startswith(("https://", "http://")) else "https://" + key
    url = _parse_url(raw)
    path = url.path
    if path.startswith(("/v2/", "/v1/")):
        path = path[3:]
    return url.host + path if path and path != "/" else url.host


def order_auth_keys(keys: Iterable[str]) -> list[str]:
    """Keys in the order the kubelet offers them: reverse lexicographic, so ``gcr.io/team``
    comes before ``gcr.io`` and ``a.example.io`` before ``*.example.io``."""
    return sorted(set(keys), reverse=True)


def select_auth(auth: Iterable[tuple[str, V]], repository: str) -> list[tuple[str, V]]:
    """The ``(key, value)`` pairs of ``auth`` (already merged, first occurrence of a key wins)
    that apply to ``repository`` (``registry/path``, as :func:`~.reference.parse_image` gives
    it), best first, as the kubelet's keyring ``Lookup`` offers them.

    Keys are tidied with :func:`normalize_auth_key` (malformed ones skipped), the ones whose
    pattern matches the repository are returned in :func:`order_auth_keys` order; when none
    matches and the image is on Docker Hub, an ``index.docker.io`` key is used."""
    target = parse_schemeless_url(repository)
    filed: dict[str, V] = {}
    for key, value in auth:
        try:
            normal = normalize_auth_key(key)
        except PatternError:
            continue
        filed.setdefault(normal, value)
    chosen: list[tuple[str, V]] = []
    for key in order_auth_keys(filed):
        try:
            if compile_pattern(key).matches(target):
                chosen.append((key, filed[key]))
        except PatternError:
            continue  # a malformed glob never matches (Go's URLsMatchStr error is ignored)
    if not chosen and DEFAULT_REGISTRY_KEY in filed and _is_default_registry_match(repository):
        chosen.append((DEFAULT_REGISTRY_KEY, filed[DEFAULT_REGISTRY_KEY]))
    return chosen


def _is_default_registry_match(image: str) -> bool:
    """The kubelet's isDefaultRegistryMatch: does ``image`` come from Docker Hub?"""
    first, slash, _ = image.partition("/")
    if not first:
        return False
    if not slash or first in ("docker.io", "index.docker.io"):
        return True
    return "." not in first and ":" not in first


def merge_auth(responses: Iterable[Mapping[str, V]]) -> list[tuple[str, V]]:
    """The auth maps of several providers, in config order, as one list of pairs (for
    :func:`select_auth`, where the first occurrence of a tidied key wins: the earlier provider's)."""
    return [(key, value) for auth in responses for key, value in auth.items()]
