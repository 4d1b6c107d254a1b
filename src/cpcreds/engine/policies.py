"""When to fetch again: refresh ahead of expiry, and back off after a failure. Pure arithmetic."""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["RefreshPolicy", "BackoffPolicy", "jittered"]

#: The jitter's own source. Not the random module's shared generator: a library's background
#: threads drawing from it would change the sequence an application seeded for itself (and
#: hypothesis flags exactly that). Drawn from the system, so a child of fork does not repeat its
#: parent's jitter, which is there to spread replicas apart.
_JITTER = random.SystemRandom()


def jittered(value: float, jitter: float) -> float:
    """``value`` scaled by a random factor in ``[1 - jitter, 1]``: never later, only earlier."""
    return value * (1.0 - jitter * _JITTER.random())


@dataclass(frozen=True)
class RefreshPolicy:
    """When to refresh ahead of expiry: the last ``fraction`` of a credential's lifetime, at least
    ``min_window`` and at most ``max_window`` seconds, and never more than half its lifetime (so a
    very short-lived credential is not refreshed on every call)."""

    fraction: float = 0.1
    min_window: float = 30.0
    max_window: float = 300.0

    def refresh_at(self, fetched_at: float, expires_at: float) -> float:
        lifetime = max(0.0, expires_at - fetched_at)
        window = min(max(self.fraction * lifetime, self.min_window), self.max_window, lifetime / 2)
        return expires_at - window


@dataclass(frozen=True)
class BackoffPolicy:
    """Delay before retrying a failed plan: ``initial * factor**(failures-1)``, capped at
    ``maximum``, each delay scaled by a random factor in ``[1 - jitter, 1]``."""

    initial: float = 1.0
    maximum: float = 60.0
    factor: float = 2.0
    jitter: float = 0.2

    def delay(self, failures: int) -> float:
        base = min(self.maximum, self.initial * self.factor ** max(0, failures - 1))
        return jittered(base, self.jitter)
