"""KEP-2133 matching: image references as the kubelet normalises them, matchImages patterns and
auth keys as URLsMatchStr compares them, and the order in which auth keys are offered."""

from __future__ import annotations

import fnmatch
import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpcreds import InvalidImageError
from cpcreds.images.match import (
    PatternError,
    compile_pattern,
    glob_match,
    normalize_auth_key,
    order_auth_keys,
    parse_schemeless_url,
    select_auth,
    urls_match_str,
)
from cpcreds.images.reference import parse_image

# -- matchImages: the KEP's examples and the kubelet's own test table, plus edge cases -----------

MATCHES = [
    # (pattern, image, matches)
    ("123456789.dkr.ecr.us-east-1.amazonaws.com", "123456789.dkr.ecr.us-east-1.amazonaws.com/app", True),
    ("*.azurecr.io", "team.azurecr.io/app", True),
    ("*.azurecr.io", "azurecr.io/app", False),  # same number of parts
    ("gcr.io", "gcr.io/project/app", True),
    ("gcr.io", "eu.gcr.io/project/app", False),
    ("*.*.registry.io", "a.b.registry.io/app", True),
    ("*.*.registry.io", "a.registry.io/app", False),
    ("registry.io:8080/path", "registry.io:8080/path/app", True),
    ("registry.io:8080/path", "registry.io:8080/other/app", False),
    ("registry.io:8080/path", "registry.io/path/app", False),  # the pattern's port must be there
    ("registry.io", "registry.io:8080/app", False),  # and a port the pattern lacks must not
    ("*.k8s.io", "abc.k8s.io/app", True),
    ("*.k8s.io", "abc.def.k8s.io/app", False),  # a glob matches one part only
    ("k8s.*.io", "k8s.abc.io/app", True),
    ("k8s.*", "k8s.io/app", True),
    ("k8s.*", "k8s.abc.io/app", False),
    ("app*.k8s.io", "app1.k8s.io/app", True),
    ("app*.k8s.io", "web.k8s.io/app", False),
    ("*.io", "abc.k8s.io/app", False),  # the KEP: *.io does not match *.k8s.io
    ("*-prod.example.com", "eu-prod.example.com/app", True),
    ("r?.example.com", "r1.example.com/app", False),  # "?" starts a URL query: Go reads the host as "r"
    ("r?.example.com", "r", True),
    ("r[0-3].example.com", "r2.example.com/app", True),
    ("r[0-3].example.com", "r7.example.com/app", False),
    ("gcr.io/team", "gcr.io/team/app", True),
    ("gcr.io/team", "gcr.io/team-b/app", True),  # a string prefix, as the kubelet compares
    ("gcr.io/team/", "gcr.io/team-b/app", False),
    ("gcr.io/team/app", "gcr.io/team", False),
    ("GCR.io", "gcr.io/app", False),  # globs are case-sensitive, as Go's filepath.Match
    ("localhost:5000", "localhost:5000/app", True),
    ("[::1]:5000", "[::1]:5000/app", True),
    ("docker.io/library", "docker.io/library/nginx", True),
]


@pytest.mark.parametrize("pattern, image, expected", MATCHES)
def test_match_images_pattern_matches_as_the_kubelet_does(pattern: str, image: str, expected: bool) -> None:
    assert urls_match_str(pattern, image) is expected
    assert compile_pattern(pattern).matches(parse_schemeless_url(image)) is expected


@pytest.mark.parametrize(
    "pattern, reason",
    [
        ("gcr .io", "invalid character in the host name"),
        ("gcr.io:http", "invalid port"),
        ("gcr.io/%zz", "invalid URL escape"),
        ("gcr.io\x00", "control character"),
        ("a{b}.io", "invalid character in the host name"),
        ("[::1", "missing ']'"),
        ("r[a-.io", "malformed glob"),
        ("r[]x.io", "malformed glob"),
        ("ab\\", "invalid character in the host name"),  # Go refuses "\\" in a host, so globs cannot escape
        ("r[^0-3].io", "invalid character in the host name"),  # and "^": a negated class cannot be written
        ("us er@gcr.io", "invalid userinfo"),
    ],
)
def test_malformed_pattern_is_refused_with_a_reason(pattern: str, reason: str) -> None:
    with pytest.raises(PatternError, match=re.escape(reason)):
        compile_pattern(pattern)


def test_url_parse_keeps_what_go_keeps() -> None:
    url = parse_schemeless_url("user@registry.io:8080/path/app?x=1#frag")
    assert url.host_parts == ("registry", "io") and url.port == "8080" and url.path == "/path/app"
    assert parse_schemeless_url("a:b:1").host_parts == ("a:b:1",)  # too many colons: Go keeps the whole host
    assert parse_schemeless_url("%C3%A9.io").host_parts == ("é", "io")  # non-ASCII may be escaped in a host


# -- Go's filepath.Match, compared with fnmatch where both agree -------------------------------

_GLOB_ALPHABET = "ab.-*?"
_NAME_ALPHABET = "ab.-"


@settings(max_examples=300)
@given(st.text(_GLOB_ALPHABET, max_size=8), st.text(_NAME_ALPHABET, max_size=8))
def test_glob_without_classes_is_shell_glob_matching(pattern: str, name: str) -> None:
    # Without [classes] or escapes, filepath.Match and fnmatch agree on names without "/".
    assert glob_match(pattern, name) == fnmatch.fnmatchcase(name, pattern)


# A glob as pieces: a literal, "?", "*", an escaped character, or a [class] of one or two ranges.
_CHARS = "ab.-/]^\\"
_class_range = st.tuples(st.sampled_from("abz./"), st.sampled_from("abz./"))
_piece = st.one_of(
    st.sampled_from("ab.-/"),
    st.just("?"),
    st.just("*"),
    st.sampled_from(_CHARS).map(lambda c: "\\" + c),
    st.tuples(st.booleans(), st.lists(_class_range, min_size=1, max_size=2)).map(
        lambda t: "[" + ("^" if t[0] else "") + "".join(low if low == high else f"{low}-{high}" for low, high in t[1]) + "]"
    ),
)


def _piece_matches(piece: str, char: str) -> bool:
    if piece == "?":
        return char != "/"
    if piece.startswith("\\"):
        return char == piece[1]
    if piece.startswith("[") and len(piece) > 2:
        body = piece[1:-1]
        negated = body.startswith("^")
        body = body[1:] if negated else body
        ranges, i = [], 0
        while i < len(body):
            if i + 2 < len(body) and body[i + 1] == "-":
                ranges.append((body[i], body[i + 2]))
                i += 3
            else:
                ranges.append((body[i], body[i]))
                i += 1
        return any(low <= char <= high for low, high in ranges) != negated
    return char == piece


def reference_match(pieces: list[str], name: str) -> bool:
    """Go's filepath.Match, transliterated from its source (scanChunk, matchChunk, the loop
    over chunks that takes each chunk's first match and never backtracks), over pieces."""

    def match_chunk(chunk: list[str], s: str) -> str | None:
        if len(s) < len(chunk) or not all(_piece_matches(p, c) for p, c in zip(chunk, s)):
            return None
        return s[len(chunk) :]

    while pieces:
        star = False
        while pieces and pieces[0] == "*":
            star, pieces = True, pieces[1:]
        cut = next((i for i, p in enumerate(pieces) if p == "*"), len(pieces))
        chunk, pieces = pieces[:cut], pieces[cut:]
        if star and not chunk:
            return "/" not in name
        rest = match_chunk(chunk, name)
        if rest is not None and (not rest or pieces):
            name = rest
            continue
        if star:
            for i in range(len(name)):
                if name[i] == "/":
                    break
                rest = match_chunk(chunk, name[i + 1 :])
                if rest is not None:
                    if not pieces and rest:
                        continue
                    name = rest
                    break
            else:
                return False
            if rest is not None and (pieces or not rest):
                continue
        return False
    return not name


def test_a_chunk_takes_its_first_match_as_go_does() -> None:
    # Go's documentation would match (first '*' takes '.', the class takes '/'); its code, which
    # the kubelet runs, does not: the class chunk takes its first match and is never retried.
    assert glob_match("*[^a]*", "./") is False
    assert glob_match("*[^a]*", "b") is True


@settings(max_examples=500)
@given(st.lists(_piece, max_size=7), st.text("ab.-/z", max_size=8))
def test_glob_matches_as_filepath_match_does(pieces: list[str], name: str) -> None:
    assert glob_match("".join(pieces), name) == reference_match(pieces, name)


def test_many_stars_match_in_linear_time() -> None:
    # A regular expression backtracks through every '*': 20 stars took 3 s, 40 never ended.
    started = time.perf_counter()
    for stars in (20, 40, 400):
        assert not glob_match("*" * stars + "x", "a" * 200)
        assert not glob_match("a*" * stars + "b", "a" * 200)
        assert glob_match("*a" * stars, "a" * 500)
        assert not urls_match_str("*" * stars + "x.io", "a" * 200 + ".io")
    assert time.perf_counter() - started < 1.0


@given(st.text(max_size=12))
def test_literal_pattern_matches_only_itself(name: str) -> None:
    escaped = "".join("\\" + c for c in name)
    assert glob_match(escaped, name)
    assert not glob_match(escaped, name + "x")


_LABEL = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,6}[a-z0-9])?", fullmatch=True)


@given(st.lists(_LABEL, min_size=1, max_size=4), st.lists(_LABEL, min_size=1, max_size=3), st.data())
def test_a_pattern_with_wildcard_parts_matches_hosts_of_the_same_shape(labels: list[str], path: list[str], data: st.DataObject) -> None:
    host = ".".join(labels)
    image = f"{host}/{'/'.join(path)}"
    starred = [("*" if data.draw(st.booleans()) else label) for label in labels]
    assert urls_match_str(".".join(starred), image)
    assert urls_match_str(f"{host}/{path[0]}", image)  # a path prefix
    assert not urls_match_str(".".join(["*", *starred]), image)  # one part more
    assert not urls_match_str(f"{host}:5000", image)  # a port the image lacks


@given(st.text(max_size=40))
def test_pattern_parsing_never_fails_other_than_with_a_pattern_error(text: str) -> None:
    try:
        pattern = compile_pattern(text)
    except PatternError:
        return
    pattern.matches(parse_schemeless_url("registry.example.io/app"))


# -- image references ------------------------------------------------------------------------

REFERENCES = [
    # (image, repository, registry, tag, digest)
    ("nginx", "docker.io/library/nginx", "docker.io", None, None),
    ("nginx:1.27", "docker.io/library/nginx", "docker.io", "1.27", None),
    ("library/nginx", "docker.io/library/nginx", "docker.io", None, None),
    ("bitnami/redis:7", "docker.io/bitnami/redis", "docker.io", "7", None),
    ("docker.io/nginx", "docker.io/library/nginx", "docker.io", None, None),
    ("index.docker.io/team/app", "docker.io/team/app", "docker.io", None, None),
    ("localhost/app", "localhost/app", "localhost", None, None),
    ("localhost:5000/a/b:dev", "localhost:5000/a/b", "localhost:5000", "dev", None),
    ("gcr.io/project/app@sha256:" + "a" * 64, "gcr.io/project/app", "gcr.io", None, "sha256:" + "a" * 64),
    ("gcr.io/project/app:1.0@sha256:" + "b" * 64, "gcr.io/project/app", "gcr.io", "1.0", "sha256:" + "b" * 64),
    ("Registry.Example:443/app", "Registry.Example:443/app", "Registry.Example:443", None, None),
    ("[::1]:5000/app", "[::1]:5000/app", "[::1]:5000", None, None),
    ("r.io/a__b/c-d/e.f", "r.io/a__b/c-d/e.f", "r.io", None, None),
]


@pytest.mark.parametrize("image, repository, registry, tag, digest", REFERENCES)
def test_image_is_normalised_as_the_kubelet_sends_it(image: str, repository: str, registry: str, tag: str | None, digest: str | None) -> None:
    reference = parse_image(image)
    assert (reference.repository, reference.registry, reference.tag, reference.digest) == (repository, registry, tag, digest)


@pytest.mark.parametrize(
    "image",
    ["", "gcr.io/Project/app", "gcr.io/app:", "gcr.io//app", "gcr.io/app@sha256:abc", "a" * 64, "gcr.io/app:" + "t" * 129,
     "r.io/" + "a" * 260, "gcr.io/app name", "gcr.io/app\n", "-x/app", "x" * 2000, "gcr.io/app:tág"],
)
def test_not_an_image_reference_is_an_invalid_image_error(image: str) -> None:
    with pytest.raises(InvalidImageError):
        parse_image(image)


@given(st.text(max_size=80))
def test_any_string_parses_or_is_an_invalid_image_error(text: str) -> None:
    try:
        reference = parse_image(text)
    except InvalidImageError as exc:
        assert "\n" not in str(exc)
        return
    assert reference.repository == f"{reference.registry}/{reference.path}"
    assert parse_image(reference.repository).repository == reference.repository  # normalising is idempotent
    parse_schemeless_url(reference.repository)  # every reference is a URL the matcher reads


# -- auth keys -------------------------------------------------------------------------------


def test_auth_keys_are_tidied_as_the_kubelet_files_them() -> None:
    assert normalize_auth_key("https://index.docker.io/v1/") == "index.docker.io"
    assert normalize_auth_key("http://registry.io:5000/v2/team") == "registry.io:5000/team"
    assert normalize_auth_key("gcr.io/") == "gcr.io"
    assert normalize_auth_key("*.pkg.dev/p") == "*.pkg.dev/p"


def test_auth_keys_are_ordered_longer_before_shorter_and_literal_before_wildcard() -> None:
    keys = ["*.gcr.io", "gcr.io", "eu.gcr.io", "gcr.io/team", "gcr.io/team/app", "*.gcr.io/team"]
    assert order_auth_keys(keys) == ["gcr.io/team/app", "gcr.io/team", "gcr.io", "eu.gcr.io", "*.gcr.io/team", "*.gcr.io"]


def test_only_the_keys_that_match_the_image_are_offered_best_first() -> None:
    auth = [("gcr.io", "registry"), ("gcr.io/team", "team"), ("gcr.io/other", "other"), ("*.gcr.io", "wild"), ("quay.io", "quay")]
    assert select_auth(auth, "gcr.io/team/app") == [("gcr.io/team", "team"), ("gcr.io", "registry")]
    assert select_auth(auth, "eu.gcr.io/team/app") == [("*.gcr.io", "wild")]
    assert select_auth(auth, "ghcr.io/team/app") == []


def test_the_first_of_two_entries_for_one_key_wins() -> None:
    auth = [("gcr.io", "first"), ("https://gcr.io/v2/", "second")]
    assert select_auth(auth, "gcr.io/app") == [("gcr.io", "first")]


def test_docker_hub_images_fall_back_to_the_index_docker_io_key() -> None:
    auth = [("https://index.docker.io/v1/", "hub"), ("gcr.io", "gcr")]
    assert select_auth(auth, parse_image("nginx").repository) == [("index.docker.io", "hub")]
    assert select_auth(auth, "gcr.io/app") == [("gcr.io", "gcr")]


def test_malformed_auth_keys_are_skipped() -> None:
    auth = [("gcr .io", "bad"), ("gcr[.io", "bad glob"), ("gcr.io", "good")]
    assert select_auth(auth, "gcr.io/app") == [("gcr.io", "good")]


@given(st.lists(st.sampled_from(["gcr.io", "*.gcr.io", "gcr.io/team", "eu.gcr.io", "*.io", "gcr.*", "gcr.io/t"]), max_size=7, unique=True))
def test_selected_keys_all_match_and_keep_the_kubelet_order(keys: list[str]) -> None:
    chosen = [key for key, _ in select_auth([(key, key) for key in keys], "gcr.io/team/app")]
    assert chosen == sorted(chosen, reverse=True)
    assert set(chosen) == {key for key in keys if urls_match_str(key, "gcr.io/team/app")}
