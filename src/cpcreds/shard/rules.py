"""What makes a Lease count in a shard group: the one name each identity's Lease has, the holder
a Lease must name to be a member's, and the longest duration a peer may declare.

**Lease names.** The Lease of identity ``I`` in group ``G`` is named ``G-I`` when that is a valid
Lease name exactly as written (a lowercase DNS-1123 subdomain of at most 253 characters) and does
not end like a hashed name; otherwise it is ``P-H``, where ``P`` is a readable prefix (``G-I``
lowercased, each run of other characters made one ``-``, cut to 46 characters) and ``H`` is the
first 80 bits of the BLAKE2b hash of the exact ``G`` and ``I``, in lowercase base32 (16
characters of ``a-z2-7``). "Ends like a hashed name" is ``-`` and 16 such characters. So:

- names of the first kind never end like a hashed name and names of the second kind always do,
  so the two kinds never meet;
- within the first kind, one group's names differ wherever its identities do;
- within the second, they differ unless 80 bits of BLAKE2b collide.

Lowercasing alone (the rule before) gave ``Pod-A`` and ``pod-a`` one Lease, and two replicas
sharing a Lease each overwrote the other's holder and took it for their own: both served
everything. Two replicas given the *same* identity still share a Lease by construction; the
holder's instance annotation tells them apart (:mod:`cpcreds.shard.ownlease`).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import secrets
import socket
import string
from typing import Any

from ..errors import ConfigError

__all__ = ["lease_name", "check_identity", "default_identity", "declared_duration", "DNS_LABEL"]

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_HASHED = re.compile(r"-[a-z2-7]{16}")
_PREFIX = 46  # prefix + "-" + 16 characters of hash: 63, a name that fits a DNS label


def lease_name(group: str, identity: str) -> str:
    """The name of ``identity``'s Lease in ``group`` (the rule above; any text is accepted)."""
    plain = f"{group}-{identity}"
    if len(plain) <= 253 and _SUBDOMAIN.fullmatch(plain) and not _HASHED.fullmatch(plain[-17:]):
        return plain
    # NUL never occurs in a group (a label value), so (group, identity) -> bytes is one-to-one;
    # surrogatepass encodes every str, lone surrogates included.
    digest = hashlib.blake2b(f"{group}\0{identity}".encode("utf-8", "surrogatepass"), digest_size=10).digest()
    suffix = base64.b32encode(digest).decode().lower()
    prefix = re.sub(r"[^a-z0-9]+", "-", plain.lower()).strip("-")[:_PREFIX].strip("-")
    return f"{prefix}-{suffix}" if prefix else suffix


def check_identity(identity: str) -> str:
    """``identity`` if a replica may use it (1-253 printable characters), else :class:`ConfigError`.

    It is written as the Lease's ``holderIdentity`` and shown in logs, ``/readyz`` and
    ``/v1/clusters``: no control character, and never empty (an empty holder means released)."""
    if not isinstance(identity, str) or not 0 < len(identity) <= 253 or not identity.isprintable():
        raise ConfigError(f"shard identity {identity!r:.80} must be 1-253 printable characters", field="identity")
    return identity


def default_identity() -> str:
    """The pod name (``POD_NAME``, else the host name) made a DNS label, plus ``-`` and five
    random characters: a pod restarted under the same name joins as a new member."""
    base = os.environ.get("POD_NAME") or socket.gethostname() or "cpcreds"
    base = re.sub(r"[^a-z0-9-]+", "-", base.lower()).strip("-")[:40].strip("-") or "cpcreds"
    suffix = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(5))
    return f"{base}-{suffix}"


def declared_duration(value: Any, cap: float) -> float:
    """How long a Lease declaring ``leaseDurationSeconds: value`` is judged alive after a change,
    at most ``cap`` (this group's own setting, as its members write it).

    A peer may not keep itself, or a dead replica, alive longer than the group's setting: a
    leftover Lease declaring an hour would leave a share unserved for an hour. A value that is
    not an int32 above 0, as the API server validates it (10**400 would overflow ``float()``),
    is judged as ``cap``."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**31:
        return min(float(value), cap)
    return cap
