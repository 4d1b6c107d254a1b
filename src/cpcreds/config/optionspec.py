"""One declared option (:class:`OptionSpec`, the error naming it, :data:`REQUIRED`, the
:class:`Duration` marker) and what its annotation says: the helpers the generated model
(:mod:`.optionmodel`) and ``--help`` share, and ``--help``'s words for a type and a default.
Standard library only: ``--help`` and a provider's module describe an option without pydantic."""

from __future__ import annotations

import enum
import re
import sys
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = [
    "REQUIRED",
    "Duration",
    "OptionError",
    "OptionSpec",
    "annotation_text",
    "choice_text",
    "choices",
    "default_text",
    "is_optional",
    "is_path_type",
    "is_sequence",
    "type_text",
    "without_none",
]


class OptionError(ValueError):
    """An option is wrong: ``option`` is the name it is known by (``None`` when the problem is
    between options), ``problem`` says what is wrong without quoting the value."""

    def __init__(self, option: str | None, problem: str) -> None:
        self.option = option
        self.problem = problem
        super().__init__(f"option {option}: {problem}" if option else f"options: {problem}")


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: The default of an option that must be given.
REQUIRED: Any = _Required()


class OptionSpec:
    """One declared option: what :func:`~.options.option` returns, completed with its name and type when
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


class Duration(float):
    """Annotate an option ``Duration`` (or ``Duration | None``) to read a Go duration (``30s``,
    ``1h30m``) or a number of seconds; the value read is a plain ``float`` of seconds."""


def is_optional(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in typing.get_args(annotation)


def without_none(annotation: Any) -> Any:
    """The annotation without ``| None``."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        rest = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        return rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]
    return annotation


def is_sequence(kind: Any) -> bool:
    return typing.get_origin(kind) in (list, tuple)


def is_path_type(kind: Any) -> bool:
    """``kind`` is a :class:`pathlib.PurePath` class (asked without importing :mod:`pathlib`: an
    option annotated with a path class exists only once the provider's module imported it)."""
    pathlib = sys.modules.get("pathlib")
    return pathlib is not None and isinstance(kind, type) and issubclass(kind, pathlib.PurePath)


def choices(kind: Any) -> list[Any] | None:
    if typing.get_origin(kind) is typing.Literal:
        return list(typing.get_args(kind))
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return list(kind)
    return None


def choice_text(choice: Any) -> str:
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
    allowed = choices(annotation)
    if allowed is not None:
        return "one of " + ", ".join(choice_text(choice) for choice in allowed)
    if origin in (list, tuple, set, frozenset) or (isinstance(origin, type) and issubclass(origin, Sequence) and origin is not str):
        item = annotation_text(args[0]) if args else "value"
        return f"list of {item}s (repeat the flag)" if " " not in item else f"list (repeat the flag) of: {item}"
    if origin is dict or (isinstance(origin, type) and issubclass(origin, Mapping)) or annotation is dict:
        return "mapping"
    if annotation in _SIMPLE_TYPES:
        return _SIMPLE_TYPES[annotation]
    if isinstance(annotation, type):
        if is_path_type(annotation):
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
