"""cpcreds.sdk's ``__all__`` is a promise (docs/sdk.md): its names and their signatures are
snapshotted in tests/sdk_api.txt, so any change to the public surface is a visible diff.

To change the surface deliberately, regenerate the snapshot and commit it with the change:
``CPCREDS_UPDATE_SDK_SNAPSHOT=1 .venv/bin/python -m pytest tests/test_sdk_api.py``.
"""

from __future__ import annotations

import inspect
import os
import re
from pathlib import Path

import cpcreds.sdk as sdk

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = Path(__file__).with_name("sdk_api.txt")
DOCS = ROOT / "docs" / "sdk.md"


def _signature(obj: object) -> str:
    try:
        return str(inspect.signature(obj))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""


def describe(name: str) -> list[str]:
    """One line for ``name``, and for a class one line per public method or property."""
    obj = getattr(sdk, name)
    if inspect.isclass(obj):
        lines = [f"class {name}{_signature(obj)}"]
        for member, value in sorted(vars(obj).items()):
            if member.startswith("_"):
                continue
            if isinstance(value, property):
                lines.append(f"  {name}.{member}: property")
            elif isinstance(value, (classmethod, staticmethod)):
                lines.append(f"  {name}.{member}{_signature(value.__func__)}")
            elif inspect.isfunction(value):
                lines.append(f"  {name}.{member}{_signature(value)}")
        return lines
    if type(obj).__module__ in ("typing", "types", "collections.abc"):  # a type alias (Callable[...]):
        return [f"{name}: {type(obj).__name__}"]  # its signature reads differently on each Python
    if callable(obj) and not isinstance(obj, (str, int, float, tuple)) and _signature(obj):
        return [f"def {name}{_signature(obj)}"]
    return [f"{name} = {obj!r}" if isinstance(obj, (str, int, float, tuple)) else f"{name}: {type(obj).__name__}"]


def snapshot() -> str:
    return "\n".join(line for name in sdk.__all__ for line in describe(name)) + "\n"


def test_the_sdk_surface_is_the_snapshot() -> None:
    current = snapshot()
    if os.environ.get("CPCREDS_UPDATE_SDK_SNAPSHOT") == "1":
        SNAPSHOT.write_text(current)
    assert current == SNAPSHOT.read_text(), "cpcreds.sdk changed: see this file's docstring to accept the change deliberately"


def test_every_name_resolves_and_is_listed_once() -> None:
    assert len(set(sdk.__all__)) == len(sdk.__all__)
    for name in sdk.__all__:
        assert getattr(sdk, name) is not None
    assert set(sdk.__all__) <= set(dir(sdk))


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        sdk.NotAName  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "NotAName" in str(exc)
    else:
        raise AssertionError("no AttributeError")


def test_the_docs_page_describes_every_name() -> None:
    listed = set(re.findall(r"^\| `([A-Za-z_][A-Za-z0-9_]*)", DOCS.read_text(), re.MULTILINE))
    assert listed == set(sdk.__all__)
