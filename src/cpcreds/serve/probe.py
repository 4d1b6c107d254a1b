"""Probing a cluster's API server with its credential: ``GET /version`` (or another path)
through the official ``kubernetes`` client, as a controller would reach it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from ..engine import CredentialEngine
from ..errors import CredentialError
from ..logs import redact_text
from .clusterview import ProbeResult

__all__ = ["Prober"]


class Prober:
    """Probes clusters through ``engine``'s adapters; each probe runs in a worker thread and is
    bounded by ``timeout`` seconds."""

    def __init__(self, engine: CredentialEngine, *, path: str = "/version", timeout: float = 5.0) -> None:
        self.engine, self.path, self.timeout = engine, path, timeout

    async def __call__(self, profile: Mapping[str, Any]) -> ProbeResult:
        return await asyncio.to_thread(self.probe, profile)

    def probe(self, profile: Mapping[str, Any]) -> ProbeResult:
        started, at = time.perf_counter(), time.time()
        status: int | None = None
        error: str | None = None
        try:
            with self.engine.api_client(profile) as api:
                response = api.call_api(
                    "GET",
                    api.configuration.host.rstrip("/") + self.path,
                    header_params={"Accept": "application/json"},
                    _request_timeout=self.timeout,
                )
                status = response.status
                response.read()
        except CredentialError as exc:
            error = f"no credential: {exc}"
        except Exception as exc:  # noqa: BLE001 - any transport failure is "unreachable", with its reason
            status = getattr(exc, "status", None) or None
            error = redact_text(f"{type(exc).__name__}: {' '.join(str(exc).split())}")[:300]
        latency = time.perf_counter() - started
        if error is None and status is not None and not 200 <= status < 300:
            error = f"HTTP {status}"
        return ProbeResult(ok=error is None, status=status, latency_seconds=latency, at=at, error=error)
