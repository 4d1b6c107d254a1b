"""This replica's own Lease: written, renewed, released, and never taken from a live holder.

Modelled on client-go's leader election (``tryAcquireOrRenew``): a Lease held by someone else is
taken only once its record has not changed for its (capped) duration, as seen on this machine's
clock, or once its holder is emptied; every write carries the ``resourceVersion`` last read, so of
two replicas racing for one Lease exactly one wins. "Someone else" includes another process with
this very identity: each :class:`OwnLease` writes a random instance token in the annotation
``shard.cpcreds.io/instance``, and a Lease naming our identity with another token is not ours.
Two replicas given one identity (or any two whose identities share a Lease) would otherwise each
overwrite the other's holder and both serve every key, silently; here one holds the Lease and the
other is :attr:`OwnLease.contended`: not fresh, serving nothing, saying so.
"""

from __future__ import annotations

import json
import math
import secrets
import time
from collections import Counter
from typing import Any

from ..fleet.hub import HubProblem
from ..logs import get_logger
from .leases import COORDINATION, LeaseAPI, message, micro_time
from .rules import declared_duration

__all__ = ["OwnLease", "LeaseHeld", "GROUP_LABEL", "STATUS_ANNOTATION", "INSTANCE_ANNOTATION"]

_log = get_logger("cpcreds.shard")

#: The label every Lease of a shard group carries (its value: the group), what peers list by.
GROUP_LABEL = "shard.cpcreds.io/group"
#: The annotation holding a replica's status URL (where a request for its profiles is sent).
STATUS_ANNOTATION = "shard.cpcreds.io/status-url"
#: The annotation holding the writing process's random token: tells apart two replicas that write
#: one Lease under one identity.
INSTANCE_ANNOTATION = "shard.cpcreds.io/instance"
#: How many times one renewal re-reads the Lease after a 409 before waiting for the next tick.
_CONFLICT_RETRIES = 3


class LeaseHeld(HubProblem):
    """This replica's Lease is held by another live holder: not renewed, not taken."""


class OwnLease:
    """The Lease ``name`` in ``namespace`` as this replica (``identity``) writes it; ``counts``
    is the Shard's ``renewals`` counter. Used from one thread at a time (the renewer, then
    :meth:`release` once it has ended)."""

    def __init__(self, *, namespace: str, name: str, group: str, identity: str, status_url: str, lease_duration: float, counts: Counter[str]) -> None:
        self.namespace, self.name, self.group, self.identity = namespace, name, group, identity
        self.status_url, self.counts = status_url, counts
        self.duration = math.ceil(lease_duration)  # what this group's members write, and the cap on others
        self.instance = secrets.token_hex(8)
        #: Why this replica may not hold its Lease now (another live holder has it), else ``""``.
        self.contended = ""
        self.current: dict[str, Any] | None = None  # the Lease as last written or read
        self._rival = ""  # the other holder's record as last read
        self._rival_since = -math.inf  # monotonic time that record was first read

    def renew(self, api: LeaseAPI, deadline: float) -> None:
        """Write the Lease once (create, renew, or take it when free), before ``deadline``
        (monotonic); re-read and retry on 409. :class:`LeaseHeld` while another holds it."""
        for _ in range(_CONFLICT_RETRIES + 1):
            timeout = deadline - time.monotonic()
            if timeout <= 0:
                raise HubProblem("the renewal did not finish within the renew deadline")
            if self.current is None:
                status, body = api.get(self.name, timeout)
                if status == 404:
                    status, body = api.create(self.body(None), max(0.001, deadline - time.monotonic()))
                    if status == 201:
                        self._hold(body, "created")
                        return
                    if status == 409:  # created meanwhile (by a peer, or an attempt of ours that timed out)
                        self.counts["conflict"] += 1
                        continue
                if status != 200:
                    raise HubProblem(f"HTTP {status}: {message(body)}")
                self._may_take(body)
                self.current = body
                continue
            status, body = api.replace(self.name, self.body(self.current), timeout)
            if status == 200:
                self._hold(body, "renewed")
                return
            if status in (404, 409):  # deleted as departed, or written by someone since we read it
                self.counts["conflict"] += 1
                self.current = None
                continue
            raise HubProblem(f"HTTP {status}: {message(body)}")
        raise HubProblem(f"the Lease kept changing under this replica ({_CONFLICT_RETRIES + 1} conflicts in a row)")

    def release(self, api: LeaseAPI, deadline: float) -> None:
        """Empty the holder if the Lease is still ours (one attempt, re-read once on 409): a
        Lease another replica holds is not ours to release."""
        for _ in range(2):
            if self.current is None:
                status, body = api.get(self.name, max(0.001, deadline - time.monotonic()))
                if status != 200:
                    return  # never created, or deleted already: nothing to release
                self.current = body
            if not self._mine(self.current):
                return
            status, _ = api.replace(self.name, self.body(self.current, holder=""), max(0.001, deadline - time.monotonic()))
            if status == 200:
                self.counts["released"] += 1
                return
            self.current = None

    def body(self, current: dict[str, Any] | None, *, holder: str | None = None) -> dict[str, Any]:
        now = micro_time(time.time())
        spec = dict((current or {}).get("spec") or {})
        holder = self.identity if holder is None else holder
        if current is not None and not self._mine(current) and spec.get("holderIdentity"):
            # Taken over from another holder: a transition, as client-go counts them.
            transitions = spec.get("leaseTransitions")
            spec["leaseTransitions"] = (transitions if isinstance(transitions, int) and 0 <= transitions < 2**31 - 1 else 0) + 1
            spec["acquireTime"] = now
        if spec.get("holderIdentity") != holder or not spec.get("acquireTime"):
            spec["acquireTime"] = now
        spec.update(holderIdentity=holder, renewTime=now, leaseDurationSeconds=self.duration)
        annotations = {INSTANCE_ANNOTATION: self.instance}
        if self.status_url:
            annotations[STATUS_ANNOTATION] = self.status_url
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace, "labels": {GROUP_LABEL: self.group}, "annotations": annotations}
        if current is not None:
            metadata["resourceVersion"] = (current.get("metadata") or {}).get("resourceVersion")
        return {"apiVersion": COORDINATION, "kind": "Lease", "metadata": metadata, "spec": spec}

    def _mine(self, lease: dict[str, Any]) -> bool:
        spec, annotations = _spec(lease), _annotations(lease)
        return spec.get("holderIdentity") == self.identity and annotations.get(INSTANCE_ANNOTATION) == self.instance

    def _hold(self, body: dict[str, Any], result: str) -> None:
        self.current = body
        self.counts[result] += 1
        if self.contended:
            _log.warning("shard Lease held by this replica again", lease=self.name)
        self.contended, self._rival, self._rival_since = "", "", -math.inf

    def _may_take(self, lease: dict[str, Any]) -> None:
        """Return if this replica may write ``lease`` (ours, released, or its record unchanged for
        its capped duration); else note the rival and raise :class:`LeaseHeld`."""
        spec = _spec(lease)
        holder = spec.get("holderIdentity") if isinstance(spec.get("holderIdentity"), str) else ""
        if not holder or self._mine(lease):
            return
        now = time.monotonic()
        record = json.dumps([spec, _annotations(lease).get(INSTANCE_ANNOTATION)], sort_keys=True, default=str)
        if record != self._rival:
            self._rival, self._rival_since = record, now
        if now - self._rival_since >= declared_duration(spec.get("leaseDurationSeconds"), self.duration):
            _log.warning("shard Lease taken over from a holder that stopped renewing it", lease=self.name, holder=holder[:100])
            return
        who = "another process with this replica's identity" if holder == self.identity else "a replica whose identity maps to this Lease"
        text = (
            f"this replica's Lease {self.namespace}/{self.name} is held by another replica (holder {holder[:100]!r}: {who}); "
            "this replica serves nothing until that holder releases it or stops renewing it"
        )
        if text != self.contended:
            _log.warning("shard Lease held by another replica; not serving", lease=self.name, holder=holder[:100], same_identity=holder == self.identity)
        self.contended = text
        raise LeaseHeld(text)


def _spec(lease: dict[str, Any]) -> dict[str, Any]:
    spec = lease.get("spec")
    return spec if isinstance(spec, dict) else {}


def _annotations(lease: dict[str, Any]) -> dict[str, Any]:
    metadata = lease.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    return annotations if isinstance(annotations, dict) else {}
