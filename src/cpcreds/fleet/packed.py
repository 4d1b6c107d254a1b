"""ClusterProfiles held packed: their compact JSON text, deflated against a preset dictionary of
the ClusterProfile's own field names, decoded where they are read.

A fleet holds every profile of its inventory for as long as it stands (to see a change, to write
a kubeconfig, to answer the status page), yet reads one only when it changes or is asked for.
Parsed, a profile is a handful of dicts and lists; as compact JSON it is one bytes object, and
most of that text is the same keys and values in every profile of an inventory (``apiVersion``,
``metadata``, ``lastTransitionTime``, ``ControlPlaneHealthy``, the exec extension's name...).
Deflated with zlib against :data:`_DICTIONARY`, a ClusterProfile with its keys and usual values,
a profile shaped as cluster managers publish them keeps a quarter of its JSON text's size, and a
read costs a few microseconds more than ``json.loads`` alone (bench/README.md, "Packed profiles",
has the figures and the commands). So the folder and hub sources, the KEP-4322 index and every
:class:`~cpcreds.FleetCluster` hold a :class:`PackedProfile`, and code that reads many fields
calls :func:`unpacked` once.

Only data JSON carries unchanged is packed: a program's profile may hold a tuple, a datetime or
a mapping with non-string keys, and such a profile is held as it is (:func:`packed` returns it),
so what a reader gets back is always what the source had.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["PackedProfile", "packed", "unpacked"]

_ENCODE = json.JSONEncoder(ensure_ascii=True, check_circular=False, allow_nan=True, separators=(",", ":")).encode
_DECODE = json.JSONDecoder().decode
_SCALARS = frozenset({str, int, float, bool, type(None)})
#: What every profile's text is deflated against: a ClusterProfile (v1alpha1 and v1alpha2 field
#: names, the usual condition types and reasons, the exec extension) with empty values. Changing
#: it changes every packed profile's bytes; they are never written out, so only this process's
#: profiles must agree (a pickled profile carries its text, see ``__reduce__``).
_DICTIONARY = _ENCODE(
    {
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {
            "annotations": {},
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "generation": 1,
            "labels": {"x-k8s.io/cluster-manager": "", "inventory-member-id": ""},
            "managedFields": [],
            "name": "",
            "namespace": "",
            "resourceVersion": "",
            "uid": "",
        },
        "spec": {"clusterManager": {"name": ""}, "displayName": ""},
        "status": {
            "accessProviders": [
                {
                    "cluster": {
                        "certificate-authority-data": "",
                        "extensions": [{"extension": {}, "name": "client.authentication.k8s.io/exec"}],
                        "server": "https://",
                    },
                    "name": "",
                }
            ],
            "conditions": [
                {"lastTransitionTime": "", "message": "", "observedGeneration": 1, "reason": "", "status": "True", "type": "ControlPlaneHealthy"},
                {"lastTransitionTime": "", "message": "", "observedGeneration": 1, "reason": "Joined", "status": "True", "type": "Joined"},
            ],
            "properties": [{"lastObservedTime": "", "name": "id.k8s.io", "value": ""}],
            "version": {"kubernetes": "v1."},
        },
    }
).encode("ascii")
# A 2 KiB window (wbits -11) holds the dictionary and a usual profile; memLevel 4 keeps setting
# up a compressor cheap (a fleet packs every profile of its inventory when it starts). Raw
# deflate: no header or checksum, the bytes never leave the process.
_WBITS, _MEM_LEVEL, _LEVEL = -11, 4, 6


def _deflate(text: bytes) -> bytes:
    compressor = zlib.compressobj(_LEVEL, zlib.DEFLATED, _WBITS, _MEM_LEVEL, zlib.Z_DEFAULT_STRATEGY, _DICTIONARY)
    return compressor.compress(text) + compressor.flush()


def _inflate(data: bytes) -> bytes:
    decompressor = zlib.decompressobj(_WBITS, _DICTIONARY)
    return decompressor.decompress(data) + decompressor.flush()


class PackedProfile(Mapping[str, Any]):
    """A ClusterProfile as its compact JSON text, deflated (``data``), read as a read-only mapping.

    Every read decodes it: call :meth:`unpack` once (a new dict each time, the caller's to
    change) rather than reading field after field. Two packed profiles are equal when their
    texts are (or, when only the order of keys differs, their decoded dicts are); a packed
    profile equals a dict with the same content."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    @classmethod
    def of_text(cls, text: str) -> PackedProfile:
        """The packed form of a profile's JSON text (ASCII, as :func:`packed` writes it)."""
        return cls(_deflate(text.encode("ascii")))

    @property
    def text(self) -> str:
        """The profile's compact JSON text."""
        return _inflate(self.data).decode("ascii")

    def unpack(self) -> dict[str, Any]:
        """The profile as a new dict (the caller may keep or change it)."""
        return _DECODE(_inflate(self.data).decode("ascii"))  # type: ignore[no-any-return]

    def mentions(self, text: str) -> bool:
        """Whether ``text`` (ASCII, no character JSON escapes) occurs in the profile's JSON text:
        False means no key or string value of the profile contains it. Cheaper than decoding."""
        return text.encode("ascii") in _inflate(self.data)

    def __getitem__(self, key: str) -> Any:
        return self.unpack()[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.unpack().get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self.unpack()

    def __iter__(self) -> Iterator[str]:
        return iter(self.unpack())

    def __len__(self) -> int:
        return len(self.unpack())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PackedProfile):
            return self.data == other.data or self.unpack() == other.unpack()
        if isinstance(other, Mapping):
            return self.unpack() == (other if isinstance(other, dict) else dict(other.items()))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # a mapping: equal to dicts, which do not hash

    def __reduce__(self) -> tuple[Any, ...]:
        return (PackedProfile.of_text, (self.text,))

    def __repr__(self) -> str:
        return f"PackedProfile({self.unpack()!r})"


def _plain_json(value: Any) -> bool:
    """Whether ``value`` is made only of what JSON carries unchanged: dicts with string keys,
    lists, strings, numbers, booleans and None (not tuples, dates, bytes, subclasses)."""
    kind = type(value)
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or not _plain_json(item):
                return False
        return True
    if kind is list:
        for item in value:
            if not _plain_json(item):
                return False
        return True
    return kind in _SCALARS


def packed(profile: Mapping[str, Any], *, plain: bool = False) -> Mapping[str, Any]:
    """``profile`` packed (a :class:`PackedProfile`), or ``profile`` itself when it is already
    packed or holds something JSON would not give back as it is (see the module's docstring).
    ``plain``: the caller knows ``profile`` is plain JSON data (dicts with string keys, lists,
    strings, numbers, booleans, None: what cpcreds' loaders and ``json.loads`` return), so it is
    not walked to check."""
    if type(profile) is PackedProfile:
        return profile
    try:
        if not plain and not _plain_json(profile):
            return profile
        return PackedProfile.of_text(_ENCODE(profile))
    except (RecursionError, ValueError, TypeError):  # too deep, an int too long for text, or
        return profile  # (``plain`` wrongly said) not JSON data: held as it is


def unpacked(profile: Mapping[str, Any]) -> dict[str, Any]:
    """A packed profile decoded into a new dict; any other profile as it is (a dict) or copied
    into a dict (another mapping, at its top level)."""
    if type(profile) is PackedProfile:
        return profile.unpack()
    return profile if isinstance(profile, dict) else dict(profile.items())
