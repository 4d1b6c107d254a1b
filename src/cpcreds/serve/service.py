"""``cpcreds serve``: a :class:`~cpcreds.Fleet` (the inventory source, KEP-4322 deduplication,
shard ownership and the keeping of every credential) plus the HTTP endpoints and the kubeconfig
writer, with reload (SIGHUP, config file change) and graceful shutdown (SIGTERM/SIGINT within
``shutdownTimeout``).

How one profile flows: a source reports it to the fleet, which resolves it through the engine
and keeps its credential fresh (its own loop is serve's: :meth:`~cpcreds.Fleet.run`); the
fleet's hooks (:class:`~cpcreds.serve.hooks.ServeHooks`) copy each change of a cluster to the status board, which the
HTTP thread reads, and each change of its plan to the kubeconfig writer. Serve engages every
credentialed profile whatever its health (it shows the ``ControlPlaneHealthy`` condition). With
``--shard`` the fleet acts only on the profiles this replica owns (docs/sharding.md); serve still
writes every profile's kubeconfig (they hold no credential).
"""

from __future__ import annotations

import asyncio
import errno
import signal
import sys
from collections.abc import Callable
from typing import Any, TextIO

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.registry import Collector

from ..config import ProviderConfig
from ..engine import CredentialEngine
from ..errors import ConfigError
from ..fleet.core import Fleet
from ..fleet.inventory import DirectorySource, FolderSource
from ..logs import get_logger
from ..providers.registry import ProviderRegistry
from .hooks import ServeHooks
from .collection import FirstSyncCollection
from .folders import DEFAULT_PROFILES_DIR, ServeFolders
from .kubeconfigs import MERGED_NAME, KubeconfigWriter
from .metrics import ServeCollector, ShardCollector
from .reloading import RunningConfig
from .settings import ServeSettings, parse_listen
from .sharding import hub_options, make_shard
from .shardstatus import ShardStatus
from .status import StatusBoard

__all__ = ["Service", "DEFAULT_PROFILES_DIR"]

# Through logging (stderr, redacted), never structlog's default printer (stdout, unredacted).
_log = get_logger("cpcreds.serve")


class Service:
    """One ``cpcreds serve`` process. ``run()`` returns the exit code."""

    def __init__(
        self,
        settings: ServeSettings,
        config: ProviderConfig,
        *,
        registry: ProviderRegistry | None = None,
        out: TextIO | None = None,
        prometheus_registry: CollectorRegistry | None = None,
    ) -> None:
        self.settings = settings
        self.registry = registry
        self.out = out or sys.stderr
        #: What /metrics shows: prometheus_client's REGISTRY unless a registry is given. The
        #: engines (of every reload) and the fleet count into it; serve's own series are in it
        #: while run() runs.
        self.metrics: CollectorRegistry = REGISTRY if prometheus_registry is None else prometheus_registry
        self._collectors: list[Collector] = []
        self.board = StatusBoard(source=settings.source)
        self._stop = asyncio.Event()
        self._reload = asyncio.Event()
        #: The fleet that keeps every profile's credential (made when run() starts).
        self.fleet: Fleet | None = None
        #: The profiles folder and the kubeconfig folder (:attr:`writer`), checked when run() starts.
        self.folders = ServeFolders(settings, config.source, self.board, self.out)
        self._hooks = ServeHooks(self)
        self._running = RunningConfig(
            settings, config, registry=registry, metrics=self.metrics, hooks=self._hooks, board=self.board, out=self.out
        )
        self._collection = FirstSyncCollection()
        self.http = None
        self.exit_code = 0
        self.shard: Any = None

    @property
    def writer(self) -> KubeconfigWriter | None:
        """The kubeconfig writer (with ``--kubeconfig-dir``; made when run() starts)."""
        return self.folders.writer

    @property
    def config(self) -> ProviderConfig:
        """The provider config running now (a reload replaces it)."""
        return self._running.config

    @property
    def engine(self) -> CredentialEngine | None:
        """The engine of the running config (made when run() starts; a reload replaces it)."""
        return self._running.engine

    # -- wiring ------------------------------------------------------------------------------

    def _new_fleet(self, engine: CredentialEngine) -> Fleet:
        settings = self.settings
        if settings.source == "hub":
            from ..fleet.hub import HubSource

            source: Any = HubSource(hub_options(settings))
        else:
            directory = self.folders.directory or DirectorySource(self.folders.profiles_dir)
            source = FolderSource(directory, settings.scan_interval, on_scan=self.folders.folder_state)
        return Fleet(
            engine,
            source=source,
            # serve keeps every profile's credential whatever its health, and shows the condition.
            require_healthy=False,
            dedupe=settings.dedupe,
            concurrency=settings.concurrency,
            jitter=settings.refresh_jitter,
            shard=self.shard,
            hooks=self._hooks,
            prometheus_registry=self.metrics,  # the fleet's series, its shard's too
        )

    # -- running -----------------------------------------------------------------------------

    async def run(self, *, on_started: Callable[[Service], None] | None = None) -> int:
        settings = self.settings
        loop = asyncio.get_running_loop()
        self._collection.begin()  # rare young collections while the first sync builds (collection.py)
        self.folders.check()
        self.folders.describe()
        engine = self._running.new_engine(self.config)
        host, port = parse_listen(settings.listen)
        from .http import ConnectionLimits, StatusServer

        try:
            self.http = StatusServer(
                host,
                port,
                self.board,
                self.metrics,
                healthy=lambda: not self._stop.is_set(),
                limits=ConnectionLimits(settings.http_idle_timeout, settings.http_header_timeout, settings.http_max_connections),
            )
        except OSError as exc:
            hint = "; another process is using it (or pick a free port: --listen 127.0.0.1:0)" if exc.errno == errno.EADDRINUSE else ""
            raise ConfigError(f"cannot listen on {settings.listen}: {exc.strerror or exc}{hint}", source="serve settings") from None
        self.http.start()
        if settings.shard:
            self.shard = make_shard(settings, self.http.address)
        self.fleet = fleet = self._new_fleet(engine)
        self._show_metric(ServeCollector(self.board, per_profile=settings.per_profile_metrics))
        if self.shard is not None:
            self._show_shard(fleet)
        for signum, event in ((signal.SIGTERM, self._stop), (signal.SIGINT, self._stop), (signal.SIGHUP, self._reload)):
            try:
                loop.add_signal_handler(signum, event.set)
            except (RuntimeError, ValueError, NotImplementedError):  # not the main thread (tests) or no signals
                pass
        self._announce()
        if on_started is not None:
            on_started(self)
        running = loop.create_task(fleet.run(), name="cpcreds-serve-fleet")
        tasks = [loop.create_task(self._housekeeping(), name="cpcreds-serve-housekeeping")]
        try:
            while not self._stop.is_set():
                stop = loop.create_task(self._stop.wait())
                reload = loop.create_task(self._reload.wait())
                done, _ = await asyncio.wait({stop, reload, running, *tasks}, return_when=asyncio.FIRST_COMPLETED)
                stop.cancel()
                reload.cancel()
                for task in (running, *tasks):
                    if task in done and task.exception() is not None:
                        raise task.exception()  # type: ignore[misc]
                if self._reload.is_set() and not self._stop.is_set():
                    self._reload.clear()
                    await self.reload("SIGHUP")
        finally:
            await self._shutdown(running, tasks)
            for collector in self._collectors:  # another serve in this process may show its own
                self.metrics.unregister(collector)
            self._collectors.clear()
            self._collection.end()
        return self.exit_code

    def _show_shard(self, fleet: Fleet) -> None:
        shard = self.shard
        self.board.shard = ShardStatus(shard, fleet.ownership)
        self._show_metric(ShardCollector(self.board.shard, lambda: len(fleet)))
        self.out.write(f"cpcreds serve: shard member {shard.identity} of group {shard.group} (Leases in {shard.namespace}), status URL {shard.status_url}\n")
        self.out.flush()

    def _show_metric(self, collector: Collector) -> None:
        try:
            self.metrics.register(collector)
        except ValueError:  # prometheus_client's "Duplicated timeseries"
            raise ConfigError("the metrics registry already shows another cpcreds serve's series", source="serve") from None
        self._collectors.append(collector)

    def stop(self) -> None:
        """Ask the service to shut down (thread-safe only through ``loop.call_soon_threadsafe``)."""
        self._stop.set()

    def _announce(self) -> None:
        assert self.http is not None
        lines = [f"cpcreds serve: status page {self.http.url}/  (also /v1/clusters, /metrics, /healthz, /readyz)"]
        if self.settings.source == "directory":
            lines.append(f"cpcreds serve: watching ClusterProfile files in {self.folders.profiles_dir}")
        else:
            lines.append("cpcreds serve: watching ClusterProfiles on the hub")
        if self.writer is not None:
            lines.append(f"cpcreds serve: kubeconfigs in {self.writer.directory} (all clusters: {self.writer.directory / MERGED_NAME})")
        self.out.write("\n".join(lines) + "\n")
        self.out.flush()
        _log.info("serving", url=self.http.url, source=self.settings.source)

    async def _housekeeping(self) -> None:
        """Once a second: the merged kubeconfig, the config file's change, first-sync progress."""
        self._running.note_file()
        terminal = hasattr(self.out, "isatty") and self.out.isatty()
        shown_ready = False
        fleet = self.fleet
        assert fleet is not None
        while True:
            await asyncio.sleep(1.0 if fleet.synced else 0.25)
            if self.writer is not None and (fleet.synced or self._hooks.listed):
                self.writer.flush()
            if self.settings.watch_config and self._running.file_changed():
                await self.reload("the config file changed")
            if not fleet.synced and terminal:
                done, total = fleet.progress
                self.out.write(f"\rcpcreds serve: first sync {done}/{total} profiles")
                self.out.flush()
            elif fleet.synced and not shown_ready:
                shown_ready = True
                self._collection.synced()
                counts = self.board.counts()
                summary = ", ".join(f"{n} {state}" for state, n in counts.items() if n) or "no profiles"
                self.out.write(("\r" if terminal else "") + f"cpcreds serve: ready: {summary}\n")
                self.out.flush()
                _log.info("first sync done", **counts)

    async def reload(self, why: str) -> bool:
        """Re-read the provider config; on success, the fleet resolves and fetches every profile
        again through a new engine. A config that does not load leaves the running one in place
        (and says why)."""
        return await self._running.reload(why, self.fleet)

    async def _shutdown(self, running: asyncio.Task[None], tasks: list[asyncio.Task[Any]]) -> None:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        timeout = self.settings.shutdown_timeout
        if self.engine is not None:
            self.engine.close()  # kills running plugins and releases every waiter at once
        # The fleet ends its tasks, then stops the shard: the Lease released, peers take over.
        running.cancel()
        try:
            await asyncio.wait_for(asyncio.gather(running, return_exceptions=True), timeout)
        except asyncio.TimeoutError:
            _log.warning("shutdown: some fetches did not stop in time", timeout=timeout)
        if self.writer is not None:
            self.writer.flush()
        if self.http is not None:
            self.http.stop()
        _log.info("stopped")
