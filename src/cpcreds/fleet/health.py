"""A ClusterProfile's ``ControlPlaneHealthy`` condition, as the fleet's health gate and serve's
status page read it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..logs import redact_text

__all__ = ["control_plane_healthy", "is_healthy", "CONDITION"]

#: The condition a cluster manager sets on a ClusterProfile (KEP-4322) when its control plane answers.
CONDITION = "ControlPlaneHealthy"


def _condition(profile: Mapping[str, Any]) -> Mapping[str, Any] | None:
    status = profile.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    if not isinstance(conditions, list):
        return None
    for condition in conditions:
        if isinstance(condition, Mapping) and condition.get("type") == CONDITION:
            return condition
    return None


def control_plane_healthy(profile: Mapping[str, Any]) -> dict[str, str] | None:
    """The profile's ``ControlPlaneHealthy`` condition (status, reason, message), if it has one,
    redacted and cut to 500 characters per field: fit to show."""
    condition = _condition(profile)
    if condition is None:
        return None
    picked = {k: condition.get(k) for k in ("status", "reason", "message", "lastTransitionTime")}
    return {k: redact_text(v)[:500] for k, v in picked.items() if isinstance(v, str)}


def is_healthy(profile: Mapping[str, Any]) -> bool:
    """Whether the profile's ``ControlPlaneHealthy`` condition is ``True`` (what
    multicluster-runtime's cluster-inventory-api provider waits for); no condition is not healthy."""
    condition = _condition(profile)
    return condition is not None and condition.get("status") == "True"
