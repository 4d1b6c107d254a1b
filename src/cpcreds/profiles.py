"""Reading ClusterProfiles from files (YAML or JSON; one object, several documents, or a List)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import yaml

from .api import YAML_LOADER
from .errors import ProfileError

__all__ = ["load_profiles", "select_profile", "profile_ref"]



def profile_ref(profile: dict[str, Any]) -> str:
    meta = profile.get("metadata") or {}
    if not isinstance(meta, dict):
        return "<unnamed>"
    name = meta.get("name") or "<unnamed>"
    return f"{meta['namespace']}/{name}" if meta.get("namespace") else str(name)


def load_profiles(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every ClusterProfile in a file (``-`` is stdin): a single object, multi-document YAML, or
    a ``kind: List`` / ``ClusterProfileList`` with ``items``."""
    source = os.fspath(path)
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProfileError(f"{source}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{source}: cannot read: {exc}") from None
    label = "<stdin>" if source == "-" else source
    try:
        documents = [json.loads(text)] if text.lstrip().startswith("{") else list(yaml.load_all(text, Loader=YAML_LOADER))
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ProfileError(f"{label}: not valid YAML or JSON{where}") from None
    profiles: list[dict[str, Any]] = []
    for doc in documents:
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise ProfileError(f"{label}: expected a ClusterProfile object, found a {type(doc).__name__}")
        kind = doc.get("kind")
        if kind == "List" or (isinstance(kind, str) and kind.endswith("List")):
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise ProfileError(f"{label}: items of a {kind} must be a list")
            for index, item in enumerate(items):
                if not isinstance(item, dict):
                    raise ProfileError(f"{label}: items[{index}] is not an object")
                profiles.append(item)
        else:
            profiles.append(doc)
    for index, profile in enumerate(profiles):
        kind = profile.get("kind", "ClusterProfile")
        if kind != "ClusterProfile":
            raise ProfileError(f"{label}: object {index} is a {kind!r}, not a ClusterProfile")
    if not profiles:
        raise ProfileError(f"{label}: no ClusterProfile found")
    return profiles


def select_profile(profiles: list[dict[str, Any]], name: str | None, source: str) -> dict[str, Any]:
    """The one profile named ``name`` (``name`` or ``namespace/name``), or the only one."""
    if name is None:
        if len(profiles) == 1:
            return profiles[0]
        names = ", ".join(profile_ref(p) for p in profiles)
        raise ProfileError(f"{source} holds {len(profiles)} ClusterProfiles ({names}); pick one with --name")
    matches = [p for p in profiles if name in (profile_ref(p), (p.get("metadata") or {}).get("name"))]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        names = ", ".join(profile_ref(p) for p in profiles)
        raise ProfileError(f"{source}: no ClusterProfile named {name!r}; found {names}")
    raise ProfileError(f"{source}: {len(matches)} ClusterProfiles are named {name!r}; use namespace/name")
