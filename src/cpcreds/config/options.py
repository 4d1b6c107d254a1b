"""A provider's options declared once, read without pydantic: :class:`Options` and :func:`option`.

A provider's ``options:`` (a config entry's mapping, or a console script's ``--flags``) are read on
every plugin run, so reading them must be cheap: this module imports nothing beyond the standard
library, and a subclass of :class:`Options` is a plain class. One declaration gives the reading
(conversion, checks, errors worded as cpcreds words config errors, naming the option and never
quoting its value), ``--help`` (type, default, description) and the "did you mean" for an
unknown option::

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
a ``typing.Literal`` or :class:`enum.Enum` of values, and any of them ``| None``. Strings convert
as flags need (``"5"`` to 5, ``"true"`` to True), as pydantic's lax mode does.
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

__all__ = ["Options", "option", "Duration", "OptionError", "OptionSpec", "REQUIRED"]


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
    may add options."""

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
            values[spec.attribute] = _read_value(spec, value)
        for spec in specs:
            if spec.attribute not in values and spec.required:
                raise OptionError(spec.shown[0], "is required")
        instance = object.__new__(cls)
        instance.__dict__.update((spec.attribute, values.get(spec.attribute, spec.default)) for spec in specs)
        try:
            instance.check_options()
        except OptionError:
            raise
        except ValueError as exc:
            raise OptionError(None, str(exc)) from None
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


def _read_value(spec: OptionSpec, value: Any) -> Any:
    # Raised outside the except block: nothing of a converter's exception (which may quote the
    # value) is chained to ours.
    problem = None
    try:
        if spec.parse is not None:
            value = spec.parse(value)
        elif value is not None or not _optional(spec.annotation):
            value = _convert(spec, _plain(spec.annotation), value)
        if value is not None and spec.check is not None:
            value = spec.check(value)
        return value
    except OptionError:
        raise
    except ValueError as exc:
        problem = " ".join(str(exc).split()) or "is not valid"
    raise OptionError(spec.shown[0], problem)


def _optional(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in typing.get_args(annotation)


def _plain(annotation: Any) -> Any:
    """The annotation without ``| None``."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        rest = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        return rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]
    return annotation


def _is_path_type(kind: Any) -> bool:
    """``kind`` is a :class:`pathlib.PurePath` class. Asked without importing :mod:`pathlib`
    (~4 ms of a plugin's start): an option annotated with a path class exists only once the
    provider's module imported it."""
    pathlib = sys.modules.get("pathlib")
    return pathlib is not None and isinstance(kind, type) and issubclass(kind, pathlib.PurePath)


_TRUE = frozenset({"true", "True", "TRUE", "1", "yes", "on", "t", "y"})
_FALSE = frozenset({"false", "False", "FALSE", "0", "no", "off", "f", "n"})


def _convert(spec: OptionSpec, kind: Any, value: Any) -> Any:
    """``value`` as ``kind``, within the spec's bounds; ``ValueError`` worded without the value."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (list, tuple):
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)):
            raise ValueError(f"must be a list of strings, not {type_name(value)}")
        if any(not isinstance(item, str) for item in items):
            raise ValueError("must be a list of strings")
        _bounds(spec, len(items), "item(s)")
        for item in items:
            _match(spec, item)
        return tuple(items) if origin is tuple else list(items)
    if kind is str:
        if not isinstance(value, str):
            raise ValueError(f"must be a string, not {type_name(value)}")
        _bounds(spec, len(value), "characters")
        _match(spec, value)
        return value
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value in _TRUE | _FALSE:
            return value in _TRUE
        if type(value) is int and value in (0, 1):
            return bool(value)
        raise ValueError(f"must be true or false, not {type_name(value)}")
    if kind is Duration:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ValueError(f"must be a duration such as 30s, 2m or 1h30m, not {type_name(value)}")
        from .._durations import parse_duration

        try:
            seconds = parse_duration(value) if isinstance(value, str) else float(value)
        except ValueError:  # its message quotes the value; ours does not
            raise ValueError("must be a duration such as 30s, 2m or 1h30m") from None
        if not math.isfinite(seconds):
            raise ValueError("must be a duration such as 30s, 2m or 1h30m, not an endless number")
        _bounds(spec, seconds, "")
        return seconds
    if kind in (int, float):
        number = _number(kind, value)
        _bounds(spec, number, "")
        return number
    if _is_path_type(kind):
        if not isinstance(value, (str, sys.modules["pathlib"].PurePath)):
            raise ValueError(f"must be a path, not {type_name(value)}")
        if not str(value):
            raise ValueError("must not be empty")
        return kind(value)
    choices = _choices(kind)
    if choices is not None:
        for choice in choices:
            if value == (choice.value if isinstance(choice, enum.Enum) else choice) and type(value) is not bool:
                return choice
        got = repr(value) if isinstance(value, str) and len(value) <= 40 and value.isprintable() else type_name(value)
        raise ValueError(f"must be one of {', '.join(_choice_text(choice) for choice in choices)} (got {got})")
    raise TypeError(f"option {spec.attribute}: cpcreds options cannot read the type {kind!r}; give it a parse=")


def _number(kind: type, value: Any) -> int | float:
    word = "a whole number" if kind is int else "a number"
    if isinstance(value, bool):
        raise ValueError(f"must be {word}, not {type_name(value)}")
    if isinstance(value, str):
        try:
            return kind(value.strip())
        except ValueError:
            raise ValueError(f"must be {word}, not a string") from None
    if kind is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, int) or (kind is float and isinstance(value, float)):
        return kind(value)
    raise ValueError(f"must be {word}, not {type_name(value)}")


def _bounds(spec: OptionSpec, amount: float, unit: str) -> None:
    if spec.min is None and spec.max is None:
        return
    # Written as 'not within' so that NaN (which compares false to everything) is out of bounds.
    low = spec.min is not None and not amount >= spec.min
    high = spec.max is not None and not amount <= spec.max
    if not (low or high):
        return
    shown = _duration_text if _plain(spec.annotation) is Duration else (lambda n: f"{n:g}")
    suffix = f" {unit}" if unit else ""
    if spec.min is not None and spec.max is not None:
        raise ValueError(f"must be between {shown(spec.min)} and {shown(spec.max)}{suffix}")
    if low:
        raise ValueError(f"must be at least {shown(spec.min)}{suffix}")
    raise ValueError(f"must be at most {shown(spec.max)}{suffix}")


def _duration_text(seconds: float) -> str:
    """Go's spelling without its zero tails (``12h``, ``1m``, ``1h30m``): as a user writes it."""
    from .._durations import format_duration

    text = format_duration(seconds)
    if text.endswith("m0s") and text[:-3][-1:].isdigit():
        text = text[:-2]
    if text.endswith("h0m"):
        text = text[:-2]
    return text


def _match(spec: OptionSpec, text: str) -> None:
    if spec.pattern is not None and spec.pattern.fullmatch(text) is None:
        # The pattern is the provider author's, not the user's value: safe to show.
        raise ValueError(f"must match the pattern {spec.pattern.pattern} (got a string of {len(text)} characters)")


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

