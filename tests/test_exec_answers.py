"""Plugin answers read directly: the usual ExecCredential is decoded without the pydantic model,
and must give exactly what the model gives (the credential, or the same error)."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cpcreds import API_VERSION_V1, CredentialError, ExecProvider, resolve
from cpcreds.config import documents as _parse
from cpcreds.config import jsonreader
from cpcreds.config.wire import ExecCredential
from cpcreds.exec import answer as exec_module
from cpcreds.exec.provider import RunResult
from tests.fakes.builders import access_provider, cluster_profile, config_of, exec_entry

PLAN = resolve(config_of(exec_entry("fake")), cluster_profile("c", access_provider("fake")))


def decoded(document: Any, *, validate: bool = False) -> Any:
    """The credential's fields, or the error's type and message; ``validate`` forces the model."""
    original = exec_module._plain_status
    if validate:
        exec_module._plain_status = lambda document: None
    try:
        credential = ExecProvider().decode(PLAN, RunResult(0, json.dumps(document).encode(), b"", 0.0))
    except CredentialError as exc:
        return type(exc).__name__, str(exc)
    finally:
        exec_module._plain_status = original
    return credential.token, credential.client_certificate_data, credential.client_key_data, credential.expiration_timestamp


class _Odd:
    """Values pydantic would convert, or refuse, where the direct reading defers to it."""

    values = (None, 1, 1.5, True, [], {}, "x")


def _mostly(good: st.SearchStrategy, *odd: object) -> st.SearchStrategy:
    """``good``, or one in twenty times one of the ``odd`` values (7: not an end of the range,
    which hypothesis draws far more often)."""
    return st.integers(0, 19).flatmap(lambda draw: st.sampled_from(odd) if draw == 7 else good)


def _rarely_with(base: st.SearchStrategy, key: str, value: object) -> st.SearchStrategy:
    """``base`` (a dict), one in twenty times with ``key: value`` added."""
    return st.tuples(base, st.integers(0, 19)).map(lambda drawn: {**drawn[0], key: value} if drawn[1] == 7 else drawn[0])


_timestamps = st.one_of(
    st.sampled_from(["2099-01-01T00:00:00Z", "2099-06-30T12:00:00.123456789+02:00", "2000-01-01T00:00:00Z", "", "2099-13-01T00:00:00Z", "tomorrow"]),
    st.datetimes().map(lambda moment: moment.isoformat() + "Z"),
)
_text = st.one_of(st.text(max_size=8), st.sampled_from(["", "tok\nen", "a\x00b", "\ud800"]))
_status = _rarely_with(
    st.fixed_dictionaries(
        {},
        optional={
            "token": _mostly(_text, *_Odd.values),
            "expirationTimestamp": _mostly(st.one_of(_timestamps, st.none()), 1, [], True),
            "clientCertificateData": _mostly(st.sampled_from(["", "not a certificate"]), *_Odd.values),
            "clientKeyData": _mostly(st.sampled_from(["", "not a key"]), *_Odd.values),
            "extra": st.integers(),
        },
    ),
    "client_key_data",
    "x",
)
_spec = st.fixed_dictionaries(
    {},
    optional={
        "interactive": _mostly(st.booleans(), None, 0, "false"),
        "cluster": _mostly(st.none(), {"server": "https://a"}, {}, "x"),
        "extra": _text,
    },
)
_answers = _rarely_with(
    st.fixed_dictionaries(
        {"apiVersion": _mostly(st.just(API_VERSION_V1), "client.authentication.k8s.io/v1beta1"), "kind": _mostly(st.just("ExecCredential"), "Other")},
        optional={
            "status": _mostly(_status, None, [], "x"),
            "spec": _mostly(_spec, None, [], "x"),
            "metadata": st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
        },
    ),
    "api_version",
    API_VERSION_V1,
)


@settings(max_examples=int(os.environ.get("CPCREDS_HYPOTHESIS_EXAMPLES", "300")), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=_answers)
def test_an_answer_read_directly_gives_what_the_model_gives(document: dict[str, Any]) -> None:
    direct = exec_module._plain_status(document)
    event("read directly" if direct is not None else "validated")
    if direct is not None:
        status = ExecCredential.model_validate(document).status
        assert status is not None
        assert direct == (status.expiration_timestamp, status.token, status.client_certificate_data, status.client_key_data)
    assert decoded(document) == decoded(document, validate=True)


@pytest.mark.parametrize(
    "document",
    [
        {"apiVersion": API_VERSION_V1, "kind": "ExecCredential", "status": {"token": "t"}},
        {"apiVersion": API_VERSION_V1, "kind": "ExecCredential", "spec": {"interactive": False}, "status": {"token": "t", "expirationTimestamp": "2099-01-01T00:00:00Z"}},
    ],
)
def test_the_usual_answers_are_read_directly(document: dict[str, Any]) -> None:
    assert exec_module._plain_status(document) is not None
    assert decoded(document) == decoded(document, validate=True)


def test_the_direct_reading_knows_every_field_of_the_answer_models() -> None:
    # A field added to a model must be checked by the direct reading too (or send it to pydantic).
    from cpcreds.config.wire import ExecCredentialSpec, ExecCredentialStatus

    def aliases(model: Any) -> set[str]:
        return {info.alias or name for name, info in model.model_fields.items()}

    assert aliases(ExecCredential) == {"apiVersion", "kind", "spec", "status"}
    assert aliases(ExecCredentialSpec) == {"cluster", "interactive"}
    assert aliases(ExecCredentialStatus) == {"expirationTimestamp", *exec_module._STATUS_TEXT}


# -- the bounded JSON loader's shortcuts ----------------------------------------------------------


def _load_json_as_before(text: str, max_depth: int) -> Any:
    """The loader's JSON reading without its shortcuts: a depth scan, then json.loads."""
    if jsonreader.json_depth(text) > max_depth:
        raise _parse.DocumentError(f"is nested more than {max_depth} levels deep", source="answer", kind="too-deep")
    problem = None
    try:
        return json.loads(text, object_pairs_hook=jsonreader._json_object, parse_int=jsonreader._json_int, parse_float=jsonreader._json_float, parse_constant=jsonreader._json_constant)
    except json.JSONDecodeError as exc:
        reason, line = f"not valid JSON: {exc.msg} (column {exc.colno})", exc.lineno
    except jsonreader._JsonProblem as exc:
        problem = exc
    if problem is None:
        raise _parse.DocumentError(reason, source="answer", line=line, kind="syntax")
    if problem.kind == "duplicate-key" and problem.key is not None:
        raise _parse.DocumentError(f"duplicate key {jsonreader.show_key(problem.key)}", source="answer", line=jsonreader.line_of_duplicate(text, problem.key), kind="duplicate-key")
    raise _parse.DocumentError(problem.reason, source="answer", kind=problem.kind)


def _read(load: Any, text: str, max_depth: int) -> Any:
    try:
        return "value", load(text, max_depth)
    except _parse.DocumentError as exc:
        return "error", str(exc), exc.kind, exc.line


_json_pieces = st.lists(
    st.sampled_from(['{', '}', '[', ']', '"a"', '"b"', ':', ',', '1', '1e999', 'NaN', 'true', 'null', ' ', '\n', '\ufeff', '"\\u00e9"', '"', "1" * 4400]),
    max_size=24,
).map("".join)


@given(text=st.one_of(_json_pieces, st.recursive(st.one_of(st.none(), st.integers(), st.text(max_size=3)), lambda inner: st.dictionaries(st.text(max_size=2), inner, max_size=3), max_leaves=10).map(json.dumps)), max_depth=st.sampled_from([1, 2, 100]))
def test_the_json_loader_reads_as_before_its_shortcuts(text: str, max_depth: int) -> None:
    assert _read(lambda t, d: jsonreader.load_json(t, "answer", d), text, max_depth) == _read(_load_json_as_before, text, max_depth)


def test_text_is_decoded_as_utf_8_sig_was() -> None:
    for data in (b"\xef\xbb\xbf{}", b"{}", b"\xef\xbb\xbf\xef\xbb\xbf{}", b"\n\xff", b"\xef\xbb\xbf\n\n\xff", "é".encode()):
        try:
            expected: Any = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            expected = "error"
        try:
            got: Any = _parse._text(data, "answer", 100)
        except _parse.DocumentError as exc:
            assert exc.kind == "encoding"
            got = "error"
        assert got == expected


def _document(data: bytes, max_depth: int) -> Any:
    try:
        return "value", _parse.load_document(data, source="answer", max_depth=max_depth)
    except _parse.DocumentError as exc:
        return "error", str(exc), exc.kind, exc.line


def _document_through_the_general_path(data: bytes, max_depth: int) -> Any:
    try:
        documents = _parse.load_documents(data, source="answer", limits=_parse.Limits(max_depth=max_depth))
    except _parse.DocumentError as exc:
        return "error", str(exc), exc.kind, exc.line
    if len(documents) > 1:
        return "error", f"answer: holds {len(documents)} documents; expected one", "documents", None
    return "value", documents[0] if documents else None


@given(text=st.one_of(_json_pieces, st.text(max_size=12)).map(lambda text: "{" + text), max_depth=st.sampled_from([1, 2, 100]), encoding=st.sampled_from(["utf-8", "utf-16", "latin-1"]))
def test_a_document_starting_like_an_object_reads_as_through_the_general_path(text: str, max_depth: int, encoding: str) -> None:
    data = text.encode(encoding, "surrogatepass" if encoding.startswith("utf") else "replace")
    assert _document(data, max_depth) == _document_through_the_general_path(data, max_depth)
