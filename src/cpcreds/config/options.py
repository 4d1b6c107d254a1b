"""A provider's options declared once: :class:`Options` and :func:`option`, read by a pydantic
model generated from the declaration.

One declaration gives the reading (conversion, checks, and errors worded from pydantic's error
structure, naming the option and never quoting its value), ``--help`` (type, default,
description) and the "did you mean" for an unknown option::

    class VaultOptions(Options):
        \"\"\"What --help says about the provider.\"\"\"

        address: str = option(description="The Vault server's URL.", pattern=r"https://\\S+")
        role: str = option("cpcreds", description="The role to log in as.")
        ttl: Duration | None = option(None, min=60, max=86400, description="The token's lifetime.")
        mount_path: str = option("kubernetes", names=("mountPath",), description="...")

    VaultOptions.read({"address": "https://vault:8200", "ttl": "30m"}).ttl == 1800.0

Types (from the annotation): ``str``, ``int``, ``float``, ``bool``, :class:`pathlib.Path`,
:data:`Duration` (Go's duration grammar or a number of seconds, read as float seconds),
``list[str]``/``tuple[str, ...]`` (a list of strings, or one string as one item: a flag given once),
a ``typing.Literal`` or :class:`enum.Enum` of values, any of them ``| None``, and whatever else
pydantic reads. Strings convert as flags need (``"5"`` to 5, ``"true"`` to True): pydantic's lax
mode. :meth:`Options.pydantic_model` is the generated model.
"""

from __future__ import annotations

import enum
import math
import re
import sys
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .._show import type_name
from .wording import BOUND_TYPES, CHOICE_TYPES, did_you_mean, word_error

__all__ = ["Options", "option", "Duration", "OptionError", "OptionSpec", "REQUIRED", "did_you_mean"]


class OptionError(ValueError):
    """An option is wrong: ``option`` is the name it is known by (``None`` when the problem is
    between options), ``problem`` says what is wrong without quoting the value."""

    def __init__(self, option: str | None, problem: str) -> None:
        self.option = option
        self.problem = problem
        super().__init__(f"option {option}: {problem}" if option else f"options: {problem}")


class Duration(float):
    """Annotate an option ``Duration`` (or ``Duration | None``) to read a Go duration (``30s``,
    ``1h30m``) or a number of seconds; the value read is a plain ``float`` of seconds."""


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: The default of an option that must be given.
REQUIRED: Any = _Required()


class OptionSpec:
    """One declared option: what :func:`option` returns, completed with its name and type when
    the class is read (attribute names are the Python spelling, ``names`` the config's)."""

    __slots__ = ("default", "names", "description", "parse", "check", "min", "max", "pattern", "attribute", "annotation")

    def __init__(
        self,
        default: Any,
        names: tuple[str, ...],
        description: str,
        parse: Callable[[Any], Any] | None,
        check: Callable[[Any], Any] | None,
        min: float | None,  # noqa: A002 - the word a provider author expects
        max: float | None,  # noqa: A002
        pattern: str | None,
    ) -> None:
        self.default, self.names, self.description = default, names, description
        self.parse, self.check, self.min, self.max = parse, check, min, max
        self.pattern = re.compile(pattern) if pattern is not None else None
        self.attribute = ""
        self.annotation: Any = None

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def shown(self) -> list[str]:
        """The spellings ``--help`` shows: the config's first."""
        return list(self.names) or [self.attribute]

    @property
    def spellings(self) -> set[str]:
        """Every key that sets this option: the shown spellings and the Python name."""
        return {*self.shown, self.attribute}


def option(
    default: Any = REQUIRED,
    *,
    names: Iterable[str] = (),
    description: str = "",
    parse: Callable[[Any], Any] | None = None,
    check: Callable[[Any], Any] | None = None,
    min: float | None = None,  # noqa: A002
    max: float | None = None,  # noqa: A002
    pattern: str | None = None,
) -> Any:
    """Declare an option of an :class:`Options` class (as the value of an annotated attribute).

    ``default``: the value when the option is not given (:data:`REQUIRED` when it must be; it is
    taken as is, not read). ``names``: the keys a config or flag spells it with (``secretName``),
    the first shown by ``--help``; the attribute name is always accepted too. ``description``:
    what ``--help`` says. ``parse(value)``: replaces the reading by type (it receives what was
    given and returns the value; the annotation then only names the type for ``--help``).
    ``check(value)``: runs on the value read and returns it (possibly changed). Either raises
    ``ValueError`` whose text, without the value, is the problem shown. ``min``/``max``: bounds
    of a number or a duration (in seconds) or of a list's or string's length; ``pattern``: a
    regular expression the whole string (each item of a list) must match."""
    return OptionSpec(default, tuple(names), description, parse, check, min, max, pattern)


class Options:
    """Base of a provider's options: subclass it, annotate each option and give it a default or
    an :func:`option`. Instances are immutable; read one with :meth:`read` (a mapping, as a config
    entry's ``options:`` or :func:`~cpcreds.sdk.parse_option_flags` give it) or with keyword
    arguments (``GcpOptions(scopes=...)``). An unknown key is an :class:`OptionError` with a
    "did you mean". Override :meth:`check_options` for a rule between options. Subclasses inherit and
    may add options. The values are checked by one pydantic model per class
    (:meth:`pydantic_model`), generated from the declaration the first time it is read."""

    __options__: typing.ClassVar[dict[str, OptionSpec]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        declared = dict(getattr(cls, "__options__", {}))
        for attribute, annotation in cls.__dict__.get("__annotations__", {}).items():
            if "ClassVar" in str(annotation):
                continue  # a constant of the class, not an option
            value = cls.__dict__.get(attribute, REQUIRED)
            spec = value if isinstance(value, OptionSpec) else OptionSpec(value, (), "", None, None, None, None, None)
            spec.attribute = attribute
            declared[attribute] = spec
            if attribute in cls.__dict__:
                delattr(cls, attribute)  # the instance holds the value
        cls.__options__ = declared
        cls.__resolved__ = False
        cls.__model__ = None

    @classmethod
    def declared(cls) -> list[OptionSpec]:
        """The declared options, in order (base classes' first), with their types resolved."""
        if not cls.__dict__.get("__resolved__"):
            hints = typing.get_type_hints(cls, localns={"Duration": Duration})
            for spec in cls.__options__.values():
                spec.annotation = hints[spec.attribute]
            cls.__resolved__ = True
        return list(cls.__options__.values())

    @classmethod
    def pydantic_model(cls) -> Any:
        """The pydantic model that reads these options (fields under their Python names, unknown
        keys forbidden), built once per class."""
        model = cls.__dict__.get("__model__")
        if model is None:
            model = _build_model(cls.__name__, cls.declared())
            cls.__model__ = model
        return model

    @classmethod
    def read(cls, given: Mapping[str, Any]) -> typing.Self:
        """The options in ``given``; :class:`OptionError` for the first that is wrong."""
        if not isinstance(given, Mapping):
            raise OptionError(None, f"must be a mapping, not {type_name(given)}")
        specs = cls.declared()
        by_spelling = {spelling: spec for spec in specs for spelling in spec.spellings}
        values: dict[str, Any] = {}
        for key, value in given.items():
            spec = by_spelling.get(key) if isinstance(key, str) else None
            if spec is None:
                shown = key if isinstance(key, str) and len(key) <= 64 and key.isprintable() else f"a key ({type_name(key)})"
                raise OptionError(shown, "is not a known field" + did_you_mean(key, [s.shown[0] for s in specs]))
            if spec.attribute in values:
                raise OptionError(spec.shown[0], "is given twice (under two spellings)")
            values[spec.attribute] = value
        model = cls.pydantic_model()
        error = _validated(model, values)
        if isinstance(error, OptionError):
            raise error
        instance = object.__new__(cls)
        instance.__dict__.update((spec.attribute, getattr(error, spec.attribute)) for spec in specs)
        problem = None
        try:
            instance.check_options()
        except OptionError:
            raise
        except ValueError as exc:
            problem = str(exc)
        if problem is not None:  # raised outside the except block: nothing chains to it
            raise OptionError(None, problem)
        return instance

    def __init__(self, **given: Any) -> None:
        self.__dict__.update(self.read(given).__dict__)

    def check_options(self) -> None:
        """A rule between options, run once each was read: raise ``ValueError`` (shown as
        ``options: <text>``). Nothing by default."""

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.__dict__ == self.__dict__

    def __hash__(self) -> int:
        return hash(tuple((key, repr(value)) for key, value in self.__dict__.items()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{key}={value!r}' for key, value in self.__dict__.items())})"


# -- the generated model -----------------------------------------------------------------------------


def _validated(model: Any, values: dict[str, Any]) -> Any:
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
        choices = _choices(_plain(spec.annotation)) or []
        return OptionError(spec.shown[0], f"must be one of {', '.join(_choice_text(choice) for choice in choices)}")
    if len(loc) > 1 and isinstance(loc[1], int) and kind in ("string_type", "string_unicode"):
        return OptionError(spec.shown[0], "must be a list of strings")
    if kind in ("list_type", "tuple_type") and _is_sequence(_plain(spec.annotation)):
        return OptionError(spec.shown[0], f"must be a list of strings, not {type_name(err.get('input'))}")
    return OptionError(spec.shown[0], word_error(err))


def _bounds_text(spec: OptionSpec, unit: str) -> str:
    shown = _duration_text if _plain(spec.annotation) is Duration else (lambda n: f"{n:g}")
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
    from .durations import parse_duration

    seconds: float | None = None
    if isinstance(value, str):
        try:
            seconds = parse_duration(value)
        except ValueError:  # its message quotes the value; ours does not
            seconds = None
        if seconds is None:
            raise _custom("duration_parsing", "must be a duration such as 30s, 2m or 1h30m")
    else:
        seconds = float(value)
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
    optional = _optional(annotation)
    kind = _plain(annotation)
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
    elif _is_sequence(kind):
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
    elif _is_path_type(kind):
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


def _build_model(name: str, specs: list[OptionSpec]) -> Any:
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


def _optional(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in typing.get_args(annotation)


def _plain(annotation: Any) -> Any:
    """The annotation without ``| None``."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        rest = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        return rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]
    return annotation


def _is_sequence(kind: Any) -> bool:
    return typing.get_origin(kind) in (list, tuple)


def _is_path_type(kind: Any) -> bool:
    """``kind`` is a :class:`pathlib.PurePath` class (asked without importing :mod:`pathlib`: an
    option annotated with a path class exists only once the provider's module imported it)."""
    pathlib = sys.modules.get("pathlib")
    return pathlib is not None and isinstance(kind, type) and issubclass(kind, pathlib.PurePath)


def _duration_text(seconds: float) -> str:
    """Go's spelling without its zero tails (``12h``, ``1m``, ``1h30m``): as a user writes it."""
    from .durations import format_duration

    text = format_duration(seconds)
    if text.endswith("m0s") and text[:-3][-1:].isdigit():
        text = text[:-2]
    if text.endswith("h0m"):
        text = text[:-2]
    return text


def _choices(kind: Any) -> list[Any] | None:
    if typing.get_origin(kind) is typing.Literal:
        return list(typing.get_args(kind))
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return list(kind)
    return None


def _choice_text(choice: Any) -> str:
    return str(choice.value if isinstance(choice, enum.Enum) else choice)


# -- what --help shows -------------------------------------------------------------------------------


def type_text(spec: OptionSpec) -> str:
    """The option's type as ``--help`` words it (``string``, ``duration``, ``list of strings ...``)."""
    return annotation_text(spec.annotation)


_SIMPLE_TYPES = {str: "string", bool: "true or false", int: "whole number", float: "number", bytes: "string"}


def annotation_text(annotation: Any) -> str:
    """An annotation in ``--help``'s words; also used for a pydantic model's fields."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is Duration:
        return "duration"
    if origin is typing.Annotated:
        return annotation_text(args[0])
    if origin in (typing.Union, types.UnionType):
        return " or ".join(dict.fromkeys(annotation_text(arg) for arg in args if arg is not type(None)))
    choices = _choices(annotation)
    if choices is not None:
        return "one of " + ", ".join(_choice_text(choice) for choice in choices)
    if origin in (list, tuple, set, frozenset) or (isinstance(origin, type) and issubclass(origin, Sequence) and origin is not str):
        item = annotation_text(args[0]) if args else "value"
        return f"list of {item}s (repeat the flag)" if " " not in item else f"list (repeat the flag) of: {item}"
    if origin is dict or (isinstance(origin, type) and issubclass(origin, Mapping)) or annotation is dict:
        return "mapping"
    if annotation in _SIMPLE_TYPES:
        return _SIMPLE_TYPES[annotation]
    if isinstance(annotation, type):
        if _is_path_type(annotation):
            return "path"
        pydantic = sys.modules.get("pydantic")
        if pydantic is not None and issubclass(annotation, pydantic.BaseModel):
            return "mapping"
    return getattr(annotation, "__name__", None) or str(annotation)


def default_text(required: bool, value: Any, kind: str) -> str:
    """``required``, ``default: unset`` or ``default: <value>`` as ``--help`` shows it."""
    if required:
        return "required"
    if value is None:
        return "default: unset"
    if isinstance(value, bool):
        shown = "true" if value else "false"
    elif isinstance(value, (int, float)):
        shown = f"{value:g}s" if kind == "duration" else f"{value:g}"
    elif isinstance(value, (list, tuple, set, frozenset)):
        shown = ",".join(str(item) for item in value) if value else "none"
    elif isinstance(value, enum.Enum):
        shown = str(value.value)
    else:
        shown = str(value)
    return f"default: {shown}"

