"""Frozen dataclasses whose :mod:`dataclasses` machinery is built only when someone asks for it.

``import dataclasses`` costs an exec plugin ~8 ms (it imports :mod:`inspect`, which imports
:mod:`ast`, :mod:`dis`, :mod:`tokenize` ...), a fifth of a one-shot plugin's whole run. The base
types every run builds (:class:`~cpcreds.Credential`, :class:`~cpcreds.AccessPlan`,
:class:`~cpcreds.kep.ExecCluster`, ...) are declared with :func:`frozen_record` instead: it
writes the same ``__init__`` (same signature, defaults, ``__post_init__`` call), ``__repr__``,
``__eq__``, ``__hash__``, ``__match_args__`` and frozen ``__setattr__``/``__delattr__`` as
``@dataclass(frozen=True, ...)`` would, and the class's ``__dataclass_fields__`` and
``__dataclass_params__`` are made by :mod:`dataclasses` itself on first access. So
``dataclasses.is_dataclass``, ``fields``, ``replace`` and ``asdict`` work on these classes as on
any frozen dataclass (tests/test_imports.py compares them with real dataclasses); a run that never
calls them never imports :mod:`dataclasses`. Assigning to a field raises
``dataclasses.FrozenInstanceError``, as a frozen dataclass does.

Instances keep a ``__dict__`` (as a dataclass without ``slots=True`` does): fast paths fill it
directly, and a field with a plain default stays a class attribute; ``slots=True`` makes a new
slotted class, as a dataclass does. ``__init__`` is compiled from source when the class is made
(so its signature and a wrong call's ``TypeError`` are a dataclass's), ``__eq__`` and
``__hash__`` on their first call (as fast as a dataclass's, and free for a run that never
compares); the other methods are closures over the field names. One difference: assigning any name to an instance of
a slotted record raises ``FrozenInstanceError``, where Python 3.11's slotted frozen dataclass
raises a ``TypeError`` from its ``super()`` call.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from reprlib import recursive_repr
from typing import Any, Callable, TypeVar

__all__ = ["frozen_record", "record_field"]

_T = TypeVar("_T", bound=type)


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<missing>"


class _Factory:
    """The default an ``__init__`` shows for a field with a ``default_factory`` (dataclasses
    shows ``<factory>`` too)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"


_MISSING: Any = _Missing()
_FACTORY: Any = _Factory()


class _FieldSpec:
    __slots__ = ("default", "default_factory", "init", "repr", "compare", "hash")

    def __init__(self, default: Any, default_factory: Any, init: bool, repr: bool, compare: bool, hash: bool | None) -> None:
        self.default, self.default_factory, self.init, self.repr, self.compare, self.hash = default, default_factory, init, repr, compare, hash


def record_field(
    *,
    default: Any = _MISSING,
    default_factory: Callable[[], Any] | Any = _MISSING,
    init: bool = True,
    repr: bool = True,
    compare: bool = True,
    hash: bool | None = None,
) -> Any:
    """:func:`dataclasses.field` for a :func:`frozen_record` (its ``default``, ``default_factory``,
    ``init``, ``repr``, ``compare`` and ``hash``)."""
    if default is not _MISSING and default_factory is not _MISSING:
        raise ValueError("cannot specify both default and default_factory")
    return _FieldSpec(default, default_factory, init, repr, compare, hash)


class _Declared(tuple):  # type: ignore[type-arg]
    """(name, annotation, spec) per field, in order; and the decorator's parameters."""

    kw_only: bool
    eq: bool
    repr: bool
    slots: bool


class _LazyDataclass:
    """``__dataclass_fields__`` / ``__dataclass_params__`` of a record: made by
    :func:`dataclasses.dataclass` on a twin class with the same fields on first access, then
    stored on the class in place of this descriptor."""

    __slots__ = ("_attribute", "_record")

    def __init__(self, attribute: str, record: type) -> None:
        self._attribute, self._record = attribute, record

    def __get__(self, instance: Any, owner: type) -> Any:
        # Made for the record class itself, also when asked through a subclass.
        record = self._record
        twin = _twin(record)
        for attribute in ("__dataclass_fields__", "__dataclass_params__"):
            type.__setattr__(record, attribute, twin.__dict__[attribute])
        return twin.__dict__[self._attribute]


def _twin(cls: type) -> type:
    import dataclasses  # asked for by dataclasses.fields/replace/asdict/is_dataclass: load it now

    declared: _Declared = cls.__dict__["__record__"]
    namespace: dict[str, Any] = {
        "__annotations__": {name: annotation for name, annotation, _ in declared},
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        "__doc__": cls.__doc__,
    }
    for name, _, spec in declared:
        given: dict[str, Any] = {"init": spec.init, "repr": spec.repr, "compare": spec.compare, "hash": spec.hash}
        if spec.default is not _MISSING:
            given["default"] = spec.default
        if spec.default_factory is not _MISSING:
            given["default_factory"] = spec.default_factory
        namespace[name] = dataclasses.field(**given)
    return dataclasses.dataclass(frozen=True, kw_only=declared.kw_only, eq=declared.eq, repr=declared.repr)(type(cls.__name__, (), namespace))


def _frozen_error(message: str) -> Exception:
    import dataclasses  # only when code assigns to a field, which is a bug

    return dataclasses.FrozenInstanceError(message)


def frozen_record(*, kw_only: bool = False, eq: bool = True, repr: bool = True, slots: bool = False) -> Callable[[_T], _T]:
    """``@dataclass(frozen=True, kw_only=kw_only, eq=eq, repr=repr, slots=slots)`` without
    importing :mod:`dataclasses` (see the module's docstring). Fields are the class's own
    annotations, with a default or a :func:`record_field`; ``__init__``, ``__repr__`` and
    ``__eq__`` the class defines itself are kept, as a dataclass keeps them. With ``slots``, the
    class returned is a new one with ``__slots__``, as a dataclass's is."""

    def decorate(cls: _T) -> _T:
        declared = _Declared(
            (name, annotation, _spec_of(cls, name, slots))
            for name, annotation in cls.__dict__.get("__annotations__", {}).items()
            if "ClassVar" not in str(annotation)
        )
        declared.kw_only, declared.eq, declared.repr, declared.slots = kw_only, eq, repr, slots
        if slots:
            namespace = dict(cls.__dict__)
            namespace["__slots__"] = tuple(name for name, _, _ in declared)
            namespace.pop("__dict__", None)
            namespace.pop("__weakref__", None)
            qualname = cls.__qualname__
            cls = type(cls)(cls.__name__, cls.__bases__, namespace)
            cls.__qualname__ = qualname
        _build(cls, declared)
        return cls

    return decorate


def _spec_of(cls: type, name: str, slots: bool) -> _FieldSpec:
    value = cls.__dict__.get(name, _MISSING)
    spec = value if isinstance(value, _FieldSpec) else _FieldSpec(value, _MISSING, True, True, True, None)
    # As a dataclass leaves them: a plain default stays a class attribute (not beside a slot of
    # the same name), anything else goes.
    if spec.default is not _MISSING and not slots:
        setattr(cls, name, spec.default)
    elif name in cls.__dict__:
        delattr(cls, name)
    return spec


def _build(cls: type, declared: _Declared) -> None:
    methods: dict[str, Any] = {}
    if "__init__" not in cls.__dict__:
        methods["__init__"] = _init(cls, declared)
    if declared.repr and "__repr__" not in cls.__dict__:
        methods["__repr__"] = _repr([name for name, _, spec in declared if spec.repr])
    compared = [name for name, _, spec in declared if spec.compare]
    if declared.eq and "__eq__" not in cls.__dict__:
        mine, others = ("(" + "".join(f"{who}.{name}," for name in compared) + ")" for who in ("self", "other"))
        methods["__eq__"] = _compiled_on_first_call(
            cls, "__eq__", ["def __eq__(self, other):", "  if other.__class__ is self.__class__:", f"    return {mine} == {others}", "  return NotImplemented"]
        )
    # frozen and eq: hashable by the compared fields (or those marked hash=True), unless the class
    # wrote its own __hash__.
    if declared.eq and cls.__dict__.get("__hash__") is None:
        hashed = "(" + "".join(f"self.{name}," for name, _, spec in declared if (spec.compare if spec.hash is None else spec.hash)) + ")"
        methods["__hash__"] = _compiled_on_first_call(cls, "__hash__", ["def __hash__(self):", f"  return hash({hashed})"])
    names = tuple(name for name, _, _ in declared)
    if declared.slots:  # pickle and copy: a frozen slotted instance is restored through object's setattr
        values = _getter(names)

        def __getstate__(self: Any) -> list[Any]:
            return list(values(self))

        def __setstate__(self: Any, state: list[Any]) -> None:
            for name, value in zip(names, state):
                object.__setattr__(self, name, value)

        methods.update((method, function) for method, function in (("__getstate__", __getstate__), ("__setstate__", __setstate__)) if method not in cls.__dict__)
    fields = frozenset(names)

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in fields:
            raise _frozen_error(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in fields:
            raise _frozen_error(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    methods.update(__setattr__=__setattr__, __delattr__=__delattr__)
    for method, function in methods.items():
        function.__qualname__ = f"{cls.__qualname__}.{method}"
        setattr(cls, method, function)
    if "__match_args__" not in cls.__dict__:
        cls.__match_args__ = () if declared.kw_only else tuple(name for name, _, spec in declared if spec.init)  # type: ignore[attr-defined]
    cls.__record__ = declared  # type: ignore[attr-defined]
    cls.__dataclass_fields__ = _LazyDataclass("__dataclass_fields__", cls)  # type: ignore[attr-defined]
    cls.__dataclass_params__ = _LazyDataclass("__dataclass_params__", cls)  # type: ignore[attr-defined]


def _init(cls: type, declared: _Declared) -> Any:
    """``__init__`` as dataclasses writes it (compiled source, so that its signature, its
    defaults and its ``TypeError`` for a wrong call are a dataclass's): defaults bound at
    definition, factories called per call, then ``__post_init__``."""
    namespace: dict[str, Any] = {"_FACTORY": _FACTORY, "_set": object.__setattr__}
    # Through object.__setattr__, as a dataclass sets them (a slot's descriptor, or the instance's
    # attributes). Not through self.__dict__: on CPython 3.11+ that turns the instance's inline
    # attribute values into a real dict, and every later read of a field is ~2x slower.
    assign = "  _set(self, {name!r}, {value})"
    positional, keyword, body = [], [], []
    for name, _, spec in declared:
        if spec.init:
            if spec.default is not _MISSING:
                namespace[f"_dflt_{name}"] = spec.default
                parameter = f"{name}=_dflt_{name}"
            elif spec.default_factory is not _MISSING:
                namespace[f"_fact_{name}"] = spec.default_factory
                parameter = f"{name}=_FACTORY"
                body.append(f"  if {name} is _FACTORY: {name} = _fact_{name}()")
            else:
                parameter = name
            (keyword if declared.kw_only else positional).append(parameter)
            body.append(assign.format(name=name, value=name))
        elif spec.default_factory is not _MISSING:
            namespace[f"_fact_{name}"] = spec.default_factory
            body.append(assign.format(name=name, value=f"_fact_{name}()"))
        elif spec.default is not _MISSING and declared.slots:
            namespace[f"_dflt_{name}"] = spec.default
            body.append(assign.format(name=name, value=f"_dflt_{name}"))
        # (else not in __init__: a plain default is read from the class attribute, as a dataclass does)
    parameters = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    post = ["  self.__post_init__()"] if hasattr(cls, "__post_init__") else []
    exec("\n".join([f"def __init__({parameters}):", *body, *post, "  pass"]), namespace)  # noqa: S102 - our own source, as dataclasses does
    function = namespace["__init__"]
    function.__annotations__ = {**{name: annotation for name, annotation, spec in declared if spec.init}, "return": None}
    return function


def _compiled_on_first_call(cls: type, method: str, lines: list[str]) -> Callable[..., Any]:
    """``method`` of ``cls`` as a dataclass writes it (``lines`` of source), compiled when it is
    first called and then set on ``cls`` in its place: an import pays nothing for a method most
    runs never call (compiling costs ~0.05 ms a method), and a hot ``==`` or ``hash()`` runs the
    compiled method, as fast as a dataclass's."""

    def first_call(self: Any, *args: Any) -> Any:
        namespace: dict[str, Any] = {}
        exec("\n".join(lines), namespace)  # noqa: S102 - our own source, as dataclasses does
        function = namespace[method]
        function.__qualname__ = f"{cls.__qualname__}.{method}"
        type.__setattr__(cls, method, function)  # two threads may both compile: equal methods
        return function(self, *args)

    return first_call


def _getter(names: Sequence[str]) -> Callable[[Any], tuple[Any, ...]]:
    """The tuple of ``names``' values of an instance (what a dataclass compares and hashes)."""
    if len(names) >= 2:
        return attrgetter(*names)  # type: ignore[return-value]
    if names:
        name = names[0]
        return lambda self: (getattr(self, name),)
    return lambda self: ()


def _repr(names: Sequence[str]) -> Callable[[Any], str]:
    @recursive_repr()
    def __repr__(self: Any) -> str:
        return f"{self.__class__.__qualname__}({', '.join(f'{name}={getattr(self, name)!r}' for name in names)})"

    return __repr__
