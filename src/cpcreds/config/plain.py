"""Data given in Python made plain and safe to share: :func:`plain_copy` checks JSON-like data
against the loader's bounds and (by default) makes it read-only, so a mapping held by a frozen
:class:`~cpcreds.AccessPlan` cannot be changed under the cache that keys on it; :func:`thaw`
gives a mutable copy back."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .._show import quoted
from .bounds import DEFAULT_MAX_DEPTH, MAX_INT_DIGITS

__all__ = ["plain_copy", "thaw"]

class _ReadOnlyDict(dict):  # type: ignore[type-arg]
    """A ``dict`` that cannot be changed; ``json.dumps`` and ``==`` treat it as a dict."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("this mapping is read-only (it belongs to an AccessPlan); copy it to change it")

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _refuse  # type: ignore[assignment]

    def __copy__(self) -> dict[Any, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[Any, Any]:
        return thaw(self)

    def __reduce__(self) -> Any:
        return (dict, (dict(self),))

    def __repr__(self) -> str:
        return dict.__repr__(self)


class _ReadOnlyList(list):  # type: ignore[type-arg]
    """A ``list`` that cannot be changed; ``json.dumps`` and ``==`` treat it as a list."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("this list is read-only (it belongs to an AccessPlan); copy it to change it")

    __setitem__ = __delitem__ = __iadd__ = __imul__ = append = extend = insert = pop = remove = clear = sort = reverse = _refuse  # type: ignore[assignment]

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return thaw(self)

    def __reduce__(self) -> Any:
        return (list, (list(self),))

    def __repr__(self) -> str:
        return list.__repr__(self)


_INT_LIMIT = 10**MAX_INT_DIGITS
_INT_BITS = int(MAX_INT_DIGITS * 3.32)  # below this, an int surely has fewer digits


def thaw(value: Any) -> Any:
    """A mutable deep copy of plain data (read-only collections become ``dict``/``list``)."""
    if isinstance(value, dict):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(item) for item in value]
    return value


def plain_copy(value: Any, *, max_depth: int = DEFAULT_MAX_DEPTH, max_nodes: int = 100_000, read_only: bool = True) -> Any:
    """A deep copy of JSON-like data given in Python, checked and (by default) read-only.

    Accepts mappings with string keys, lists and tuples, strings, integers (at most
    :data:`MAX_INT_DIGITS` digits), finite floats, booleans and ``None``. Anything else, a cycle,
    more than ``max_depth`` levels or ``max_nodes`` values raises ``ValueError`` whose message
    names the path (``a.b[2]``) and the type found, never the value. Mappings become read-only
    ``dict`` subclasses and lists read-only ``list`` subclasses (``json.dumps`` and ``==`` see
    plain dicts and lists); with ``read_only=False``, plain ``dict`` and ``list``.
    """
    make_dict = _ReadOnlyDict if read_only else dict
    make_list = _ReadOnlyList if read_only else list
    count = 0

    def copy(item: Any, path: str, depth: int) -> Any:
        nonlocal count
        count += 1
        if count > max_nodes:
            raise ValueError(f"holds more than {max_nodes} values")
        if item is None or isinstance(item, (bool, str)):
            return item
        if isinstance(item, int):
            if item.bit_length() > _INT_BITS and abs(item) >= _INT_LIMIT:
                raise ValueError(f"{_at(path)}an integer has more than {MAX_INT_DIGITS} digits")
            return int(item)
        if isinstance(item, float):
            if not math.isfinite(item):
                raise ValueError(f"{_at(path)}a number that is not finite is not allowed")
            return item
        if depth >= max_depth:
            raise ValueError(f"is nested more than {max_depth} levels deep (or refers to itself)")
        if isinstance(item, Mapping):
            out = {}
            for key, sub in item.items():
                if not isinstance(key, str):
                    raise ValueError(f"{_at(path)}a key is {_kind(key)}, not a string")
                shown = key if 0 < len(key) <= 64 and key.isprintable() and "." not in key else _quoted(key)
                out[key] = copy(sub, f"{path}.{shown}" if path else shown, depth + 1)
            return make_dict(out)
        if isinstance(item, (list, tuple)):
            return make_list(copy(sub, f"{path}[{index}]", depth + 1) for index, sub in enumerate(item))
        raise ValueError(f"{path or 'the value'} is {_kind(item)}, which JSON cannot hold")

    return copy(value, "", 0)


def _quoted(key: str) -> str:
    return quoted(key, 40)


def _at(path: str) -> str:
    return f"at {path}: " if path else ""


def _kind(value: Any) -> str:
    name = type(value).__name__
    return f"an {name}" if name[:1] in "aeiou" else f"a {name}"
