"""YAML is read by PyYAML (its C loader where present) through ``_parse``'s bounded builder.

What PyYAML refuses is refused (a key over 1,024 characters, whatever its style; whatever the
loader's scanner or parser rejects), and what it reads is read to the same value (``_parse``'s
own stricter rules aside: duplicate keys, tags, non-string keys, non-finite numbers, which
documents written by ``yaml.safe_dump`` never hold). Checked over generated documents written by
``yaml.safe_dump`` in every style, over hand-written layouts with slips of the hand, over
YAML-shaped text and arbitrary text, and over every YAML file in this repository.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cpcreds.config.documents import DocumentError, load_document, load_documents

ROOT = Path(__file__).resolve().parents[1]
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
REFUSED = object()


#: PyYAML parsed the text but builds no value for it (a YAML 1.1 type cpcreds reads as Go does,
#: such as a lone ``<<``): the syntax is accepted; the value is ``_parse``'s to decide.
UNBUILT = object()


def reference(text: str) -> Any:
    try:
        return list(yaml.load_all(text, Loader=LOADER))
    except yaml.constructor.ConstructorError:
        return UNBUILT
    except yaml.YAMLError:
        return REFUSED


def ours(text: str) -> Any:
    try:
        return load_documents(text, source="t", syntax="yaml")
    except DocumentError:
        return REFUSED


def check(text: str, *, same_value: bool = False) -> bool:
    """Whether ``text`` was read; fails if PyYAML refuses what was read, or (``same_value``)
    reads it to another value."""
    expected, got = reference(text), ours(text)
    if expected is REFUSED:
        assert got is REFUSED, f"read what PyYAML refuses: {text!r}"
        return False
    if same_value and got is not REFUSED and expected is not UNBUILT:
        assert got == expected and _types(got) == _types(expected), text
    return got is not REFUSED


def _types(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _types(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_types(item) for item in value]
    return type(value).__name__


@pytest.mark.parametrize(
    "text",
    [
        "k" * 1025 + ": v\n",
        '"' + "k" * 1025 + '": v\n',
        "- " + "k" * 1025 + ": v\n",
        "{" + "k" * 1025 + ": v}\n",
        "a:\n  '" + "k" * 1100 + "': v\n",
    ],
    ids=["plain", "quoted", "list item", "flow mapping", "single-quoted, nested"],
)
def test_a_key_longer_than_pyyaml_allows_is_refused(text: str) -> None:
    assert reference(text) is REFUSED
    with pytest.raises(DocumentError):
        load_document(text, source="c.yaml")


def test_a_flow_scalar_is_read_as_pyyaml_reads_it() -> None:
    # `?` inside a flow scalar: libyaml (PyYAML's C loader) reads it, PyYAML's pure-Python
    # parser refuses it; cpcreds does what the loader it runs on does.
    text = "args: [--token?, x]\n"
    check(text, same_value=True)


# -- documents as tools write them -----------------------------------------------------------------

_tricky = st.sampled_from(
    ["", " ", "a b", "a: b", "a:b", "a #b", "a#b", "#a", "- a", "-a", "--a", "-", "?", ":", "a:", "yes", "No", "on", "~",
     "null", "1", "-1", "0x1f", "0o7", "017", "1_000", "1.5", "1e3", "1.0e+3", ".inf", "1:20", "2024-01-01", "'", '"', "a'b",
     'a"b', "[a]", "{a: 1}", "a, b", "a]", "<<", "=", "!x", "&a", "*a", "|", ">", "%", "@", "`", "https://h:6443/p",
     "client.authentication.k8s.io/v1", "10s", "DEMO_MODE", "a\\b", " a", "a ", "x" * 90, "é", "\t", "a\nb"]
)  # fmt: skip
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(10**20), 10**20), st.floats(allow_nan=False, allow_infinity=False),
                     _tricky, st.text(max_size=12))  # fmt: skip
_keys = st.one_of(_tricky, st.text(min_size=1, max_size=10))
_documents = st.recursive(
    _scalars, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_keys, inner, max_size=4)), max_leaves=20
)
_styles = st.fixed_dictionaries(
    {"default_flow_style": st.sampled_from([False, None, True]), "indent": st.sampled_from([2, 4]),
     "sort_keys": st.booleans(), "width": st.sampled_from([20, 80, 10_000]), "allow_unicode": st.booleans()}
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(document=st.one_of(st.dictionaries(_keys, _documents, min_size=1, max_size=5), st.lists(_documents, min_size=1, max_size=5)),
       style=_styles, commented=st.booleans())  # fmt: skip
def test_what_yaml_safe_dump_writes_reads_the_same(document: Any, style: dict[str, Any], commented: bool) -> None:
    text = yaml.safe_dump(document, **style)
    if commented:  # a comment line before each line and after each value
        text = "".join(f"# c\n{line}  # c: [x]\n" if line.strip() else "\n" for line in text.split("\n"))
    check(text, same_value=True)


# -- documents written by hand: every layout the subset reads, then a slip of the hand ---------------

_words = st.sampled_from(["a", "b", "name", "demo", "x-y", "k.io/v1", "10s", "1", "-2", "0x1F", "1.5", "yes", "Off", "~", "null", "",
                          "a b", "a:b", "https://h:6443", "--flag", "it's", "a#b", "a,b", "<<", "=", "é", "a: b", "a #b", "- a", "[a]"])  # fmt: skip
_hand_documents = st.recursive(
    _words, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_words, inner, max_size=3)), max_leaves=12
)


def _scalar(word: str, rnd: Any) -> str:
    return rnd.choice([word, word, word, f"'{word}'", f'"{word}"'])


def _flow(value: Any, rnd: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_scalar(k, rnd)}: {_flow(v, rnd)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_flow(v, rnd) for v in value) + "]"
    return _scalar(value, rnd)


def _render(value: Any, indent: int, rnd: Any, out: list[str]) -> None:
    pad, step = " " * indent, rnd.choice([1, 2, 4])
    comment = lambda: rnd.choice(["", "", " # c", "  #c: [x"])  # noqa: E731
    if isinstance(value, dict):
        for key, item in value.items():
            head = f"{pad}{_scalar(key, rnd)}:"
            if isinstance(item, (dict, list)) and item and rnd.random() < 0.7:
                out.append(head + comment())
                inner = indent if isinstance(item, list) and rnd.random() < 0.5 else indent + step
                _render(item, inner, rnd, out)
            else:
                out.append(f"{head} {_flow(item, rnd)}{comment()}")
    else:
        for item in value:
            if isinstance(item, dict) and item and rnd.random() < 0.7:
                sub: list[str] = []
                _render(item, indent + 2, rnd, sub)
                out.append(f"{pad}- {sub[0].lstrip(' ')}")
                out.extend(sub[1:])
            elif isinstance(item, (dict, list)) and item and rnd.random() < 0.5:
                out.append(f"{pad}-{comment()}")
                _render(item, indent + step, rnd, out)
            else:
                out.append(f"{pad}- {_flow(item, rnd)}{comment()}")
        if rnd.random() < 0.1:
            out.insert(rnd.randrange(len(out) + 1), rnd.choice(["", "# note", "   # note"]))


def _slip(lines: list[str], rnd: Any) -> None:
    at = rnd.randrange(len(lines))
    line = lines[at]
    kind = rnd.randrange(4)
    if kind == 0:
        lines[at] = " " + line
    elif kind == 1 and line.startswith(" "):
        lines[at] = line[1:]
    elif kind == 2:
        lines.insert(at, line)
    else:
        where = rnd.randrange(len(line) + 1)
        lines[at] = line[:where] + rnd.choice([":", " ", "#", "-", "'", '"', "[", "}", ",", "\\", "&a ", "*a"]) + line[where:]


# (Checked once with 12,000 examples of each generator; the suite keeps a few hundred for speed.)
@settings(max_examples=300, deadline=None)
@given(document=st.one_of(st.dictionaries(_words, _hand_documents, min_size=1, max_size=4), st.lists(_hand_documents, min_size=1, max_size=4)),
       rnd=st.randoms(use_true_random=False), slips=st.sampled_from([0, 0, 1, 2]))  # fmt: skip
def test_hand_written_layouts_read_the_same(document: Any, rnd: Any, slips: int) -> None:
    lines: list[str] = []
    _render(document, 0, rnd, lines)
    for _ in range(slips):
        _slip(lines, rnd)
    check("\n".join(lines) + "\n")


# -- text shaped like YAML, from tricky pieces -------------------------------------------------------

_piece = st.sampled_from(
    ["---\n", "a", "b", "key", "- ", "-", ": ", ":", " ", "  ", "#", " # c", "'", "''", '"', '\\"', "[", "]", "{", "}", ", ", ",",
     "1", "yes", "~", "&x ", "*x", "!t ", "|", ">", "---", "...", "%", "?", "<<", ".inf", "0x", "1e9", "é", "\t", "\r"]
)  # fmt: skip
_line = st.tuples(st.sampled_from(["", " ", "  ", "   ", "    "]), st.lists(_piece, max_size=6)).map(lambda t: t[0] + "".join(t[1]))


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(_line, min_size=1, max_size=8))
@example(lines=["a:", "- b", "c: d"])
@example(lines=["- a: 1", "  b: [x, {y: '1'}]", "- c"])
@example(lines=["---", "a: 1"])
@example(lines=["---", "---", "a: 1"])
@example(lines=["---", "a: 1", "---", "b: 2"])
@example(lines=["&x : &x "])  # an anchor defined twice: PyYAML's composer refuses it
@example(lines=["a: &x 1", "---", "b: &x 2"])  # once per document is fine
def test_yaml_shaped_text_pyyaml_refuses_is_refused(lines: list[str]) -> None:
    check("\n".join(lines) + "\n")


@settings(max_examples=500, deadline=None)
@given(text=st.text(alphabet=st.sampled_from("ab1 -:#[]{},'\"\n!&*|>?~.\\"), max_size=60))
def test_arbitrary_text_pyyaml_refuses_is_refused(text: str) -> None:
    check(text)


# -- the files of this repository -------------------------------------------------------------------

_FILES = sorted(
    path for pattern in ("*.yaml", "*.yml") for path in ROOT.rglob(pattern)
    if not any(part.startswith(".") or part in ("node_modules", "build") for part in path.relative_to(ROOT).parts)
)  # fmt: skip


def test_every_yaml_file_here_is_read() -> None:
    assert _FILES
    for path in _FILES:
        check(path.read_text(encoding="utf-8", errors="replace"))


def test_errors_are_worded_by_the_reader_not_the_parser() -> None:
    with pytest.raises(DocumentError, match=r"^c\.yaml: duplicate key 'a' \(first at line 1\) at line 2$"):
        load_document("a: 1\na: 2\n", source="c.yaml")
    with pytest.raises(DocumentError, match="a tab character is used for indentation"):
        load_document("a:\n\tb: 1\n", source="c.yaml")
    with pytest.raises(DocumentError, match=r"^c\.yaml: a number that is not finite .* at line 2$"):
        load_document("a: 1\nb: .inf\n", source="c.yaml")
