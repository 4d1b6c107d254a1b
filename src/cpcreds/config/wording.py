"""Pydantic's error structure in cpcreds' words: one rule for every schema (the provider config,
ClusterProfiles, provider options, settings, plugin answers).

Problems are worded from each error's ``loc``, ``type`` and ``ctx`` — never from pydantic's own
message text, and never quoting the value given (a value may be a secret pasted in the wrong
field): what was given instead is named by its JSON type ("not a number"), a limit by the
model's bound, a choice by the allowed values.
"""

from __future__ import annotations

import typing
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .._show import quoted, type_name

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

__all__ = ["describe_validation_error", "field_problem", "read_with", "word_error", "format_loc", "did_you_mean", "CHOICE_TYPES", "BOUND_TYPES"]


def did_you_mean(key: Any, known: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for a mistyped key close to one of ``known``, else ``""``."""
    if not isinstance(key, str):
        return ""
    import difflib  # only for a mistyped key

    known = list(known)
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    if not close:
        lowered = {name.lower(): name for name in known}
        close = [lowered[key.lower()]] if key.lower() in lowered else []
    return f"; did you mean {close[0]!r}?" if close else ""


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and hasattr(annotation, "model_fields"):  # a pydantic model
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _model_at(model: type[BaseModel] | None, loc: tuple[Any, ...]) -> type[BaseModel] | None:
    for part in loc:
        if model is None:
            return None
        if isinstance(part, int):
            continue
        match = next((f for n, f in model.model_fields.items() if part in (n, f.alias)), None)
        model = _model_in(match.annotation) if match is not None else None
    return model


def _known_fields(model: type[BaseModel] | None) -> list[str]:
    if model is None:
        return []
    return [f.alias or name for name, f in model.model_fields.items()]


def format_loc(loc: tuple[Any, ...]) -> str:
    """A pydantic ``loc`` as a field path: ``providers[0].execConfig.args[2]``; a key that is
    not a short printable name is shown quoted and cut short."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part == "[key]":
            text += " (a key)"
        else:
            shown = str(part)
            if not (0 < len(shown) <= 64 and shown.isprintable()):
                shown = quoted(part, 60)
            text += ("." if text else "") + shown
    return text


_TYPE_MESSAGES = {
    "string_type": "must be a string",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "int_parsing_size": "must be a whole number",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "finite_number": "must be a finite number",
    "tuple_type": "must be a list",
    "list_type": "must be a list",
    "set_type": "must be a list",
    "iterable_type": "must be a list",
    "dict_type": "must be a mapping",
    "mapping_type": "must be a mapping",
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
    "dataclass_type": "must be a mapping",
    "bytes_type": "must be a string",
    "path_type": "must be a path",
    "none_required": "must be null",
}

#: Error types that mean "not one of the allowed values" (the allowed values are the schema's).
CHOICE_TYPES = frozenset({"literal_error", "enum"})

# Limits a value broke; the limit is the model's, never the value given.
_BOUND_MESSAGES = {
    "string_too_long": "must be at most {bound} characters",
    "string_too_short": "must be at least {bound} characters",
    "too_short": "must have at least {bound} item(s)",
    "too_long": "must have at most {bound} item(s)",
    "greater_than": "must be greater than {bound}",
    "greater_than_equal": "must be at least {bound}",
    "less_than": "must be less than {bound}",
    "less_than_equal": "must be at most {bound}",
}
#: Error types that mean "outside a bound" (the bound is in ``ctx``).
BOUND_TYPES = frozenset(_BOUND_MESSAGES)
_BOUND_KEYS = ("max_length", "min_length", "gt", "ge", "lt", "le")


def _choices_text(expected: Any) -> str:
    # ctx "expected" is pydantic's list of the allowed values ("'a' or 'b'"); the values are the
    # schema's, never the input's. Shown without quotes, comma-separated, as cpcreds lists choices.
    text = str(expected)
    parts = [part.strip() for chunk in text.split(" or ") for part in chunk.split(",")]
    return ", ".join(part.strip("'\"") for part in parts if part)


def word_error(err: dict[str, Any]) -> str:
    """One pydantic error (an item of ``ValidationError.errors()``) as a problem in cpcreds'
    words, without its place (see :func:`format_loc`) and without the value."""
    kind = err.get("type", "")
    value = err.get("input")
    context = err.get("ctx") or {}
    if kind == "missing":
        return "is required"
    if kind in CHOICE_TYPES:
        return f"must be one of {_choices_text(context.get('expected', 'the allowed values'))}"
    if kind == "string_too_short" and context.get("min_length") == 1:
        return "must not be empty"
    if kind == "string_pattern_mismatch":
        # The pattern is the schema's, not the user's value: safe to show.
        length = len(value) if isinstance(value, str) else 0
        return f"must match the pattern {context.get('pattern', '')} (got a string of {length} characters)"
    if kind in _BOUND_MESSAGES:
        bound = next((context[k] for k in _BOUND_KEYS if k in context), "the limit")
        return _BOUND_MESSAGES[kind].format(bound=bound)
    if kind == "string_unicode":
        return "contains a lone surrogate (not valid Unicode text)"
    if kind in ("value_error", "assertion_error"):
        # A validator's ValueError: its text is the schema author's wording, written without
        # the value (cpcreds' validators and the SDK's contract both say so).
        error = context.get("error")
        return " ".join(str(error).split()) or "is not valid" if error is not None else "is not valid"
    if kind in _TYPE_MESSAGES:
        return f"{_TYPE_MESSAGES[kind]}, not {type_name(value)}"
    if kind.startswith("cpcreds_"):
        # Our own PydanticCustomError types: the template is ours and takes only ctx, never input.
        return str(err.get("msg", "is not valid"))
    return f"is not valid ({type_name(value)})"


def describe_validation_error(
    exc: ValidationError, model: type[BaseModel] | None = None, *, extra_known: Iterable[str] = ()
) -> list[tuple[str, str]]:
    """Pydantic's errors in cpcreds' words: ``[(field path, problem), ...]``.

    Never quotes a value; problems name the type of what was given, a bound, or the allowed
    values. An unknown key gets a "did you mean" from the known fields of ``model`` at that place.
    """
    problems: list[tuple[str, str]] = []
    for err in exc.errors(include_url=False, include_input=True, include_context=True):
        loc = tuple(err.get("loc", ()))
        kind = err.get("type", "")
        value = err.get("input")
        if "[key]" in loc:
            where = format_loc(loc[: loc.index("[key]")])
            problems.append((where, f"has a key that is not a string ({type_name(value)})"))
            continue
        if kind == "invalid_key":
            problems.append((format_loc(loc[:-1]), f"has a key that is {type_name(value)}, not a string"))
            continue
        where = format_loc(loc)
        if kind == "extra_forbidden":
            known = _known_fields(_model_at(model, loc[:-1]))
            if not loc[:-1]:
                known += list(extra_known)
            message = "is not a known field" + did_you_mean(loc[-1] if loc else None, known)
        else:
            message = word_error(err)
        problems.append((where, message))
    return problems


def read_with(model: type[BaseModel], raw: Any) -> tuple[Any, list[tuple[str, str]]]:
    """``raw`` read by the pydantic ``model``: ``(the instance, [])``, or ``(None, problems)``
    worded by :func:`describe_validation_error`. Returned, not raised: pydantic's error quotes the
    input, which may be a secret, so the caller raises its own error outside any except block."""
    from pydantic import ValidationError  # loaded already: the caller holds a pydantic model

    problems: list[tuple[str, str]] = []
    try:
        return model.model_validate(raw), []
    except ValidationError as exc:
        problems = describe_validation_error(exc, model)
    except (TypeError, ValueError, OverflowError, RecursionError):  # a value pydantic cannot even look at
        problems = [("", "holds a value that cannot be read")]
    return None, problems


def field_problem(what: str, problems: list[tuple[str, str]]) -> str:
    """``"<what>: field <where> <problem>"`` for the first of ``problems`` (from
    :func:`read_with`), or ``what`` alone when there is none."""
    if not problems:
        return what
    where, problem = problems[0]
    return f"{what}: field {where} {problem}" if where else f"{what}: {problem}"
