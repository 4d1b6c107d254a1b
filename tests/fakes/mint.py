"""``mint``: a fast in-process provider for tests of the engine's users (serve, benchmarks).

Registers provider type ``mint``. Each call mints ``mint-<clusterName>-<n>`` (n counts calls per
cluster), valid ``lifetime`` seconds (option, default 3600; 0: no expiry). A profile whose exec
extension says ``fail: true`` fails; ``token`` there overrides the minted value (a spoke's
accepted token). Stdlib and cpcreds only, so the module can also be installed as a
distribution for a ``cpcreds serve`` subprocess (see :func:`install`).
"""

from __future__ import annotations

import threading
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from cpcreds.sdk import Credential, ProviderError, hookimpl

#: Calls per cluster name, across every MintProvider of the process.
calls: Counter[str] = Counter()
_lock = threading.Lock()


class MintProvider:
    def __init__(self, options: Any) -> None:
        unknown = set(options) - {"lifetime"}
        if unknown:
            raise ValueError(f"unknown option(s) {sorted(unknown)}")
        self.lifetime = float(options.get("lifetime", 3600))

    def get_credential(self, plan: Any) -> Credential:
        config = plan.cluster.config if isinstance(plan.cluster.config, dict) else {}
        name = str(config.get("clusterName", "unnamed"))
        with _lock:
            calls[name] += 1
            count = calls[name]
        if config.get("fail"):
            raise ProviderError(f"mint refuses cluster {name}", provider=plan.provider)
        expiry = datetime.now(timezone.utc) + timedelta(seconds=self.lifetime) if self.lifetime else None
        return Credential(token=str(config.get("token") or f"mint-{name}-{count}"), expiration_timestamp=expiry)


@hookimpl
def cpcreds_register_providers(register: Any) -> None:
    register("mint", MintProvider)


def install(site: Path) -> Path:
    """Install this module as distribution ``cpcreds-mint`` under ``site`` (for PYTHONPATH)."""
    from .distributions import installed_distribution

    return installed_distribution(
        site, dist="cpcreds-mint", module="cpcreds_mint", body=Path(__file__).read_text(encoding="utf-8"), entry_points={"mint": "cpcreds_mint"}
    )
