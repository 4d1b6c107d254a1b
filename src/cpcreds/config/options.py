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
mode. :meth:`Options.pydantic_model` is the generated model (:mod:`.optionmodel`, which imports pydantic
on the first read); the declared option and ``--help``'s words for it are in :mod:`.optionspec`.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .._show import type_name
from .optionmodel import build_model, validated
from .optionspec import REQUIRED, Duration, OptionError, OptionSpec
from .wording import did_you_mean

__all__ = ["Options", "option", "Duration", "OptionError", "OptionSpec", "REQUIRED", "did_you_mean"]


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
            model = build_model(cls.__name__, cls.declared())
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
        error = validated(model, values)
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

