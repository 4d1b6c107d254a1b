"""The provider config ``cpcreds serve`` runs and the engine made from it, replaced together when
the config reloads (SIGHUP, or the file's content changing): a config that does not load leaves
the running one in place, and the status board says why until one does.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ..config import MAX_CONFIG_BYTES, ProviderConfig, load_config
from ..config.documents import DocumentError, read_bounded
from ..engine import CredentialEngine
from ..errors import CredentialError
from ..logs import get_logger, redact_text
from ..providers.registry import ProviderRegistry
from .probe import Prober

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from ..fleet.core import Fleet
    from .hooks import ServeHooks
    from .settings import ServeSettings
    from .status import StatusBoard

__all__ = ["RunningConfig"]

_log = get_logger("cpcreds.serve")

#: The engine's cache bound under serve (a runaway inventory stops growing memory here).
_MAX_ENTRIES = 1_000_000


class RunningConfig:
    """:attr:`config` and :attr:`engine` (None before :meth:`new_engine`). Each engine counts into
    ``metrics`` (engines of reloads share the series) and gets the hooks' prober; ``registry``
    builds its providers (None: the default one, through which a reload is also checked)."""

    def __init__(
        self,
        settings: ServeSettings,
        config: ProviderConfig,
        *,
        registry: ProviderRegistry | None,
        metrics: CollectorRegistry,
        hooks: ServeHooks,
        board: StatusBoard,
        out: TextIO,
    ) -> None:
        self.settings, self.config, self.registry, self.metrics = settings, config, registry, metrics
        self.hooks, self.board, self.out = hooks, board, out
        self.engine: CredentialEngine | None = None
        self._seen: bytes | None = None

    def new_engine(self, config: ProviderConfig) -> CredentialEngine:
        """An engine for ``config``, which becomes the running one (the previous engine is the
        caller's to close)."""
        settings = self.settings
        engine = CredentialEngine(
            config,
            registry=self.registry,
            prometheus_registry=self.metrics,  # metrics are per registry: engines of reloads share them
            # Every profile stays cached: the fleet, not LRU eviction, decides what is dropped.
            max_entries=_MAX_ENTRIES,
            max_concurrent_fetches=settings.concurrency,
            max_fetches_per_provider=settings.concurrency,
        )
        self.hooks.prober = Prober(engine, path=settings.probe_path, timeout=settings.probe_timeout) if settings.probe_path else None
        self.engine, self.config = engine, config
        return engine

    def note_file(self) -> None:
        """Take note of the config file's content, for :meth:`file_changed` to compare with."""
        self._seen = _signature(Path(self.config.source))

    def file_changed(self) -> bool:
        """Whether the config file's content differs from the last look (and note it)."""
        now = _signature(Path(self.config.source))
        changed, self._seen = now != self._seen, now
        return changed

    async def reload(self, why: str, fleet: Fleet | None) -> bool:
        """Re-read the provider config; on success, ``fleet`` resolves and fetches every profile
        again through a new engine. A config that does not load leaves the running one in place
        (and says why)."""
        problem = None
        try:
            config = load_config(self.config.source)
            if self.registry is None:
                ProviderRegistry().create_all(config)
        except CredentialError as exc:
            problem = str(exc)
        board = self.board
        if problem is not None:
            _log.error("config reload failed; keeping the running config", why=why, error=problem)
            self.out.write(f"cpcreds serve: config reload failed, keeping the running config: {problem}\n")
            self.out.flush()
            # Shown on the page and in /v1/clusters until a config loads: the banner scrolls away.
            board.config_error = redact_text(f"reload failed ({why}), running the previous config: {problem}")
            board.last_reload = (time.time(), why, board.config_error)
            return False
        board.config_error = None
        board.last_reload = (time.time(), why, None)
        old_engine = self.engine
        engine = self.new_engine(config)
        if fleet is not None:
            await fleet.use_engine(engine)
            if fleet.ownership is not None:
                for key in fleet.ownership.unowned():  # their plans may differ under the new config
                    self.hooks.write_unowned(key)
        if old_engine is not None:
            await old_engine.aclose()
        _log.info("config reloaded", why=why, providers=len(config.providers))
        return True


def _signature(path: Path) -> bytes | None:
    """A digest of the config file's content: an edit within the file system's timestamp
    granularity that keeps the size (``3600`` -> ``1800``) still counts as a change. None when
    it cannot be read; read through :func:`read_bounded`, so a FIFO put at the path cannot block
    the event loop (the change is seen, and the reload then says what is wrong)."""
    try:
        return hashlib.sha256(read_bounded(path, MAX_CONFIG_BYTES)).digest()
    except (OSError, DocumentError):
        return None
