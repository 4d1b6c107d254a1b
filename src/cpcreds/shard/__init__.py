"""Split a fleet across replicas: one ``coordination.k8s.io/v1`` Lease per replica on the hub,
and rendezvous (highest-random-weight) hashing of ``namespace/name`` over the live ones.

Modules: :mod:`~cpcreds.shard.rendezvous` (the assignment: pure, stable across processes),
:mod:`~cpcreds.shard.leases` (the Lease wire: MicroTimes, requests through the official
``kubernetes`` client's ``ApiClient``), :mod:`~cpcreds.shard.connection` (Lease requests through
the fleet's hub connector), :mod:`~cpcreds.shard.rules` (which Lease is whose: one name per
identity, the holder it must name, the longest duration a peer may declare),
:mod:`~cpcreds.shard.ownlease` (the Lease lock: this replica's Lease renewed, released, never
taken from a live holder), and the parts of membership, each a thread: the
:mod:`~cpcreds.shard.renewer`, the peer :mod:`~cpcreds.shard.watcher`, the
:mod:`~cpcreds.shard.judge` (who is alive: :class:`Membership`) and the
:mod:`~cpcreds.shard.cleaner`, sharing what they have seen (:mod:`~cpcreds.shard.seen`);
:mod:`~cpcreds.shard.membership` holds :class:`Shard`, the façade that wires them (self-fencing,
the public API), and :mod:`~cpcreds.shard.overlap` counts what a handover lets overlap.
``docs/sharding.md`` says how they fit together. Nothing is imported until it is used.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["Shard", "Membership", "Assignment", "owner", "assign", "lease_name", "STATUS_URL"]

#: What a status URL may be (announced in a Lease, redirected to): ``http(s)://HOST[:PORT]``, no
#: path, no white space or control character (a peer's annotation ends up in a Location header).
STATUS_URL = re.compile(r"https?://[A-Za-z0-9.\-\[\]:]+")

_HOMES = {
    "Shard": "membership",
    "Membership": "membership",
    "Assignment": "rendezvous",
    "owner": "rendezvous",
    "assign": "rendezvous",
    "lease_name": "rules",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"{__name__}.{home}"), name)
