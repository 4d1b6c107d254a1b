"""Reading ClusterProfiles from files (YAML or JSON; one object, several documents, or a List)."""

from __future__ import annotations

import os
import sys
from typing import Any

from .documents import Limits, load_or_raise, read_or_raise
from .._show import type_name as json_type_name
from ..errors import ProfileError

__all__ = ["load_profiles", "select_profile", "profile_ref", "MAX_PROFILE_FILE_BYTES"]

#: The bounds on a ClusterProfile file (or stdin): at most 16 MiB (a List of a few thousand
#: profiles), nesting 100 deep, 1,000 YAML aliases and 2,000,000 values once they are expanded.
PROFILE_LIMITS = Limits(max_bytes=16 * 1024 * 1024, max_depth=100, max_aliases=1000, max_nodes=2_000_000)
MAX_PROFILE_FILE_BYTES = PROFILE_LIMITS.max_bytes


def _read(source: str) -> bytes:
    if source != "-":
        return read_or_raise(source, lambda reason: ProfileError(f"{source}: {reason}"), max_bytes=MAX_PROFILE_FILE_BYTES)
    reason: str
    try:
        stream = getattr(sys.stdin, "buffer", None)
        data = stream.read(MAX_PROFILE_FILE_BYTES + 1) if stream is not None else sys.stdin.read(MAX_PROFILE_FILE_BYTES + 1)
    except (OSError, ValueError) as exc:  # ValueError: stdin closed
        reason = f"cannot read: {exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__}"
    else:
        data = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
        if len(data) <= MAX_PROFILE_FILE_BYTES:
            return data
        reason = f"is larger than {MAX_PROFILE_FILE_BYTES // (1024 * 1024)} MiB"
    # Raised outside the except block so that no OSError hangs off the ProfileError.
    raise ProfileError(f"<stdin>: {reason}")


def _name_part(value: Any) -> str | None:
    # Names in messages: Kubernetes names are short and printable; anything else is not shown.
    if isinstance(value, str) and 0 < len(value) <= 253 and value.isprintable():
        return value
    return None


def profile_ref(profile: Any) -> str:
    """``namespace/name`` (or ``name``, or ``<unnamed>``) of a profile dict, for messages."""
    meta = profile.get("metadata") if isinstance(profile, dict) else None
    if not isinstance(meta, dict):
        return "<unnamed>"
    name = _name_part(meta.get("name")) or "<unnamed>"
    namespace = _name_part(meta.get("namespace"))
    return f"{namespace}/{name}" if namespace else name


def load_profiles(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every ClusterProfile in a file (``-`` is stdin): a single object, multi-document YAML, or
    a ``kind: List`` / ``ClusterProfileList`` with ``items``."""
    source = os.fspath(path)
    data = _read(source)
    label = "<stdin>" if source == "-" else source
    documents = load_or_raise(
        data,
        ProfileError,
        source=label,
        syntax="json" if label.endswith(".json") else "auto",
        limits=PROFILE_LIMITS,
        message="{source}: {detail}",
        many=True,
    )
    profiles: list[dict[str, Any]] = []
    for doc in documents:
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise ProfileError(f"{label}: expected a ClusterProfile object, found {json_type_name(doc)}")
        kind = doc.get("kind")
        if kind == "List" or (isinstance(kind, str) and kind.endswith("List")):
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise ProfileError(f"{label}: items of a List must be a list")
            for index, item in enumerate(items):
                if not isinstance(item, dict):
                    raise ProfileError(f"{label}: items[{index}] is not an object")
                profiles.append(item)
        else:
            profiles.append(doc)
    for index, profile in enumerate(profiles):
        kind = profile.get("kind", "ClusterProfile")
        if kind != "ClusterProfile":
            shown = f"a {kind!r}" if isinstance(kind, str) and len(kind) <= 60 and kind.isprintable() else f"of kind {json_type_name(kind)}"
            raise ProfileError(f"{label}: object {index} is {shown}, not a ClusterProfile")
    if not profiles:
        raise ProfileError(f"{label}: no ClusterProfile found")
    return profiles


def _metadata(profile: Any) -> dict[str, Any]:
    meta = profile.get("metadata") if isinstance(profile, dict) else None
    return meta if isinstance(meta, dict) else {}


def select_profile(profiles: list[dict[str, Any]], name: str | None, source: str) -> dict[str, Any]:
    """The one profile named ``name`` (``name`` or ``namespace/name``), or the only one."""
    if name is None:
        if len(profiles) == 1:
            return profiles[0]
        names = ", ".join(profile_ref(p) for p in profiles)
        raise ProfileError(f"{source} holds {len(profiles)} ClusterProfiles ({names}); pick one with --name")
    matches = [p for p in profiles if name in (profile_ref(p), _name_part(_metadata(p).get("name")))]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        names = ", ".join(profile_ref(p) for p in profiles)
        raise ProfileError(f"{source}: no ClusterProfile named {name!r}; found {names}")
    raise ProfileError(f"{source}: {len(matches)} ClusterProfiles are named {name!r}; use namespace/name")
