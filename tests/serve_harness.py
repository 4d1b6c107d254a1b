"""Running ``cpcreds serve``'s Service in a thread of the test process (in-process providers from
tests/fakes/mint.py), with helpers to read its endpoints and wait for its state."""

from __future__ import annotations

import asyncio
import io
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from cpcreds import ProviderRegistry, load_config
from cpcreds.serve.service import Service
from cpcreds.serve.settings import ServeSettings
from tests.fakes import mint


class RunningService:
    def __init__(self, service: Service, thread: threading.Thread, loop: asyncio.AbstractEventLoop, out: io.StringIO) -> None:
        self.service, self.thread, self.loop, self.out = service, thread, loop, out

    @property
    def url(self) -> str:
        assert self.service.http is not None
        return self.service.http.url

    def get(self, path: str) -> tuple[int, str, str]:
        """(status, content type, body) of GET path."""
        try:
            with urllib.request.urlopen(self.url + path, timeout=10) as response:
                return response.status, response.headers["Content-Type"], response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.headers["Content-Type"], exc.read().decode()

    def clusters(self) -> dict[str, dict[str, Any]]:
        status, _, body = self.get("/v1/clusters")
        assert status == 200
        return {c["key"]: c for c in json.loads(body)["clusters"]}

    def wait_ready(self, timeout: float = 20.0) -> None:
        fleet = self.service.fleet
        assert fleet is not None
        assert fleet.wait_synced(timeout), "serve's first sync did not finish"

    def until(self, condition: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
        """Wait for an observable condition of the running service (polled every 20 ms)."""
        deadline = time.monotonic() + timeout
        pause = threading.Event()
        while True:
            value = condition()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            pause.wait(0.02)

    def reload(self) -> bool:
        return asyncio.run_coroutine_threadsafe(self.service.reload("test"), self.loop).result(30)

    def stop(self) -> None:
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.service.stop)
            self.thread.join(15)
        assert not self.thread.is_alive(), "serve did not stop"


def write_profiles(folder: Path, profiles: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in profiles.items():
        (folder / name).write_text(yaml.safe_dump(content) if not isinstance(content, str) else content)


@pytest.fixture
def start_serve(tmp_path: Path) -> Iterator[Callable[..., RunningService]]:
    """start_serve(providers, profiles={file: profile}, **settings) -> RunningService. Each
    service shows a registry of its own (several run in this process); ``default_registry=True``
    gives it prometheus_client's REGISTRY, as ``cpcreds serve`` has."""
    running: list[RunningService] = []

    def start(
        providers: list[dict[str, Any]], profiles: dict[str, Any] | None = None, *, serve_section: dict[str, Any] | None = None, default_registry: bool = False, **settings: Any
    ) -> RunningService:
        config_path = tmp_path / "providers.yaml"
        document: dict[str, Any] = {"providers": providers}
        if serve_section is not None:
            document["serve"] = serve_section
        config_path.write_text(yaml.safe_dump(document))
        profiles_dir = tmp_path / "profiles"
        write_profiles(profiles_dir, profiles or {})
        flags = {"config": str(config_path), "listen": "127.0.0.1:0", "scan_interval": 0.05, **settings}
        if "hub_kubeconfig" not in settings:
            flags["profiles_dir"] = str(profiles_dir)
        config = load_config(config_path)
        service = Service(
            ServeSettings.load(flags, config.serve),
            config,
            registry=ProviderRegistry(entry_points=False, plugins=(mint,)),
            out=io.StringIO(),
            prometheus_registry=None if default_registry else CollectorRegistry(),
        )
        started = threading.Event()
        box: dict[str, Any] = {}

        def main() -> None:
            async def go() -> None:
                box["loop"] = asyncio.get_running_loop()
                await service.run(on_started=lambda _: started.set())

            try:
                asyncio.run(go())
            except BaseException as exc:  # noqa: BLE001 - surfaced by the test through box
                box["error"] = exc
                started.set()

        thread = threading.Thread(target=main, daemon=True)
        thread.start()
        assert started.wait(20), "serve did not start"
        if "error" in box:
            raise box["error"]
        handle = RunningService(service, thread, box["loop"], service.out)  # type: ignore[arg-type]
        running.append(handle)
        return handle

    yield start
    for handle in running:
        handle.stop()
