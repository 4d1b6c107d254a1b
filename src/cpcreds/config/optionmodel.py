"""The pydantic model an :class:`~.options.Options` class is read by, generated from its
declaration: each option's type with the checks it asks for (bounds, pattern, ``parse=``,
``check=``), and pydantic's first error worded as an :class:`~.options.OptionError` that names the
option and never quotes its value. pydantic is imported by the first read, not by the declaration."""

from __future__ import annotations

import math
import re
import typing
from collections.abc import Callable
from typing import Any

from .._show import type_name
from .optionspec import Duration, OptionError, OptionSpec, choice_text, choices, is_optional, is_path_type, is_sequence, without_none
from .wording import BOUND_TYPES, CHOICE_TYPES, word_error

__all__ = ["build_model", "validated"]


def validated(model: Any, values: dict[str, Any]) -> Any:
    """``model`` validated from ``values``, or the :class:`OptionError` of its first error
    (returned, so that the caller raises it outside this except block: pydantic's error holds
    the input, which may be a secret)."""
    from pydantic import ValidationError

    errors: list[dict[str, Any]] = []
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=True, include_context=True)
    except (TypeError, OverflowError, RecursionError):  # a value pydantic cannot even look at
        errors = [{"type": "cpcreds_unreadable", "loc": (), "msg": "holds a value that cannot be read"}]
    return _option_error(model, errors[0] if errors else {"type": "value_error", "loc": ()})


def _option_error(model: Any, err: dict[str, Any]) -> OptionError:
    loc = tuple(err.get("loc", ()))
    spec: OptionSpec | None = model.__cpcreds_specs__.get(loc[0]) if loc else None
    if spec is None:
        return OptionError(None, word_error(err))
    context = err.get("ctx") or {}
    error = context.get("error")
    if isinstance(error, OptionError):  # a parse= or check= raised one: it is worded already
        return error
    kind = err.get("type", "")
    if kind in BOUND_TYPES or kind == "finite_number" and (spec.min is not None or spec.max is not None):
        unit = " item(s)" if kind in ("too_short", "too_long") else " characters" if kind.startswith("string_too") else ""
        return OptionError(spec.shown[0], _bounds_text(spec, unit))
    if kind in CHOICE_TYPES:
        allowed = choices(without_none(spec.annotation)) or []
        return OptionError(spec.shown[0], f"must be one of {', '.join(choice_text(choice) for choice in allowed)}")
    if len(loc) > 1 and isinstance(loc[1], int) and kind in ("string_type", "string_unicode"):
        return OptionError(spec.shown[0], "must be a list of strings")
    if kind in ("list_type", "tuple_type") and is_sequence(without_none(spec.annotation)):
        return OptionError(spec.shown[0], f"must be a list of strings, not {type_name(err.get('input'))}")
    return OptionError(spec.shown[0], word_error(err))


def _bounds_text(spec: OptionSpec, unit: str) -> str:
    shown = _duration_text if without_none(spec.annotation) is Duration else (lambda n: f"{n:g}")
    if spec.min is not None and spec.max is not None:
        return f"must be between {shown(spec.min)} and {shown(spec.max)}{unit}"
    if spec.min is not None:
        return f"must be at least {shown(spec.min)}{unit}"
    return f"must be at most {shown(spec.max)}{unit}"


def _custom(kind: str, message: str, context: dict[str, Any] | None = None) -> Exception:
    """A pydantic error of our own type (``cpcreds_<kind>``): its message is ours, worded from
    ``context`` (the schema's values), never from the input."""
    from pydantic_core import PydanticCustomError

    return PydanticCustomError(f"cpcreds_{kind}", message, context)


def _read_duration(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise _custom("duration_type", f"must be a duration such as 30s, 2m or 1h30m, not {type_name(value)}")
    from .durations import duration_or_none

    seconds = duration_or_none(value) if isinstance(value, str) else float(value)
    if seconds is None:
        raise _custom("duration_parsing", "must be a duration such as 30s, 2m or 1h30m")
    if not math.isfinite(seconds):
        raise _custom("duration_parsing", "must be a duration such as 30s, 2m or 1h30m, not an endless number")
    return seconds


def _one_string_is_one_item(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


def _not_empty_path(value: Any) -> Any:
    if isinstance(value, str) and not value:
        raise _custom("path_empty", "must not be empty")
    return value


def _pattern_check(pattern: re.Pattern[str]) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        for text in [value] if isinstance(value, str) else value:
            if pattern.fullmatch(text) is None:
                # The pattern is the provider author's, not the user's value: safe to show.
                template = "must match the pattern {pattern} (got a string of {length} characters)"
                raise _custom("pattern", template, {"pattern": pattern.pattern, "length": len(text)})
        return value

    return check


def _user_function(function: Callable[[Any], Any], skip_none: bool) -> Callable[[Any], Any]:
    def call(value: Any) -> Any:
        if skip_none and value is None:
            return None
        return function(value)

    return call


def _field_type(spec: OptionSpec) -> Any:
    """The pydantic annotation of one option: its type with the checks its declaration asks for."""
    from pydantic import AfterValidator, BeforeValidator, Field, Strict

    annotation = spec.annotation
    if spec.parse is not None:
        # parse= replaces the reading by type; check= still runs on what it returns.
        validators: list[Any] = [BeforeValidator(_user_function(spec.parse, skip_none=False))]
        if spec.check is not None:
            validators.append(AfterValidator(_user_function(spec.check, skip_none=True)))
        return typing.Annotated[Any, *validators]
    optional = is_optional(annotation)
    kind = without_none(annotation)
    metadata: list[Any] = []
    bounded = spec.min is not None or spec.max is not None
    if kind is Duration:
        base: Any = float
        metadata.append(BeforeValidator(_read_duration))
        if bounded:
            metadata.append(Field(ge=spec.min, le=spec.max, allow_inf_nan=False))
    elif kind is str:
        base = str
        metadata.append(Strict())
        if bounded:
            metadata.append(Field(min_length=_whole(spec.min), max_length=_whole(spec.max)))
    elif is_sequence(kind):
        item = typing.get_args(kind)[0] if typing.get_args(kind) else str
        item = typing.Annotated[item, Strict()] if item is str else item
        base = tuple[item, ...] if typing.get_origin(kind) is tuple else list[item]
        metadata.append(BeforeValidator(_one_string_is_one_item))
        if bounded:
            metadata.append(Field(min_length=_whole(spec.min), max_length=_whole(spec.max)))
    elif kind in (int, float):
        base = kind
        metadata.append(BeforeValidator(_no_bool_whole_number if kind is int else _no_bool_number))
        if bounded:
            metadata.append(Field(ge=spec.min, le=spec.max, **({"allow_inf_nan": False} if kind is float else {})))
    elif is_path_type(kind):
        base = kind
        metadata.append(BeforeValidator(_not_empty_path))
    else:
        base = kind
    if spec.pattern is not None:
        metadata.append(AfterValidator(_pattern_check(spec.pattern)))
    if spec.check is not None:
        metadata.append(AfterValidator(_user_function(spec.check, skip_none=True)))
    field: Any = typing.Annotated[base, *metadata] if metadata else base
    return field | None if optional else field


def _whole(bound: float | None) -> int | None:
    return None if bound is None else int(bound)


def _no_bool_number(value: Any) -> Any:
    # A YAML true is not a number: pydantic's lax mode would read it as 1.
    if isinstance(value, bool):
        raise _custom("number_type", "must be a number, not a boolean")
    return value


def _no_bool_whole_number(value: Any) -> Any:
    if isinstance(value, bool):
        raise _custom("number_type", "must be a whole number, not a boolean")
    return value


def build_model(name: str, specs: list[OptionSpec]) -> Any:
    from pydantic import ConfigDict, create_model

    fields: dict[str, Any] = {}
    for spec in specs:
        default = ... if spec.required else spec.default
        fields[spec.attribute] = (_field_type(spec), default)
    model = create_model(  # type: ignore[call-overload]
        f"{name}Model",
        __config__=ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True, validate_default=False),
        **fields,
    )
    model.__cpcreds_specs__ = {spec.attribute: spec for spec in specs}
    return model


def _duration_text(seconds: float) -> str:
    """Go's spelling without its zero tails (``12h``, ``1m``, ``1h30m``): as a user writes it."""
    from .durations import format_duration

    text = format_duration(seconds)
    if text.endswith("m0s") and text[:-3][-1:].isdigit():
        text = text[:-2]
    if text.endswith("h0m"):
        text = text[:-2]
    return text
