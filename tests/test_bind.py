"""``engine.bind(profile)``: a profile's handle on the engine (issue 19), sync and asyncio.

Real exec plugin subprocesses (tests/fakes/exec_plugin.py), the real ``kubernetes`` client and
the spoke fake; what is checked is what a caller sees (credentials, which plan answered, errors)
and how many times the plugin ran.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as kclient
from prometheus_client import CollectorRegistry

import cpcreds
from cpcreds import AllProvidersFailed, Binding, CredentialEngine, EngineClosed, PluginExecutionError, ProviderRegistry
from tests.fakes.builders import access_provider, cluster_profile, config_of, exec_entry
from tests.fakes.spoke import SpokeServer

PROVIDER = "fleet"


@pytest.fixture
def make_engine() -> Iterator[Callable[..., CredentialEngine]]:
    engines: list[CredentialEngine] = []

    def make(*entries: dict[str, Any], **top: Any) -> CredentialEngine:
        config = cpcreds.ProviderConfig.from_dict({"providers": list(entries), **top}, source="bind-test.yaml") if top else config_of(*entries)
        engine = CredentialEngine(config, registry=ProviderRegistry(entry_points=False), prometheus_registry=CollectorRegistry())
        engines.append(engine)
        return engine

    yield make
    for engine in engines:
        engine.close()


def runs(count_file: Path) -> int:
    return len(count_file.read_text().splitlines()) if count_file.exists() else 0


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 20
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.002)  # polling an observable condition, bounded


def profile(server: str = "https://spoke.test:6443", *providers: str, ca_pem: bytes | None = None) -> dict[str, Any]:
    offered = [access_provider(name, server, ca_pem=ca_pem) for name in (providers or (PROVIDER,))]
    return cluster_profile("spoke-1", *offered, uid="uid-1", resource_version="7")


# -- sync ------------------------------------------------------------------------------------------


def test_bind_answers_from_the_engines_cache(make_engine, tmp_path: Path) -> None:
    count = tmp_path / "runs"
    engine = make_engine(exec_entry(PROVIDER, "--token", "bound-token", "--count-file", str(count)))
    binding = engine.bind(profile())
    assert isinstance(binding, Binding) and isinstance(binding, cpcreds.Binding)
    assert binding.plan == engine.resolve(profile()) and not binding.fails_over
    credential = binding.credential()
    assert credential.token == "bound-token"
    answer = binding.answer()
    assert answer.credential is credential and answer.plan is binding.plan
    assert engine.get_credential(profile()) is credential  # one cache for both
    assert engine.bind(profile()).credential() is credential
    assert runs(count) == 1
    assert "bound-token" not in repr(binding)


def test_bind_raises_what_resolve_raises(make_engine, tmp_path: Path) -> None:
    engine = make_engine(exec_entry(PROVIDER, "--token", "t"))
    with pytest.raises(cpcreds.NoMatchingProvider):
        engine.bind(profile("https://spoke.test", "someone-else"))


def test_invalidate_drops_only_the_credential_still_cached(make_engine, tmp_path: Path) -> None:
    count = tmp_path / "runs"
    engine = make_engine(exec_entry(PROVIDER, "--token", "t", "--token-per-run", "--count-file", str(count)))
    binding = engine.bind(profile())
    first = binding.credential()
    assert binding.invalidate(first) is True  # a 401 with the cached credential: dropped
    assert binding.invalidate(first) is False  # a second 401 for it changes nothing more
    second = binding.credential()
    assert (first.token, second.token) == ("t-1", "t-2")
    assert binding.invalidate(first) is False  # a late 401 never throws away the newer one
    assert binding.credential() is second
    assert runs(count) == 2


def test_a_failing_provider_raises_a_credential_error_and_backs_off(make_engine, tmp_path: Path) -> None:
    count = tmp_path / "runs"
    engine = make_engine(exec_entry(PROVIDER, "--exit-code", "3", "--stderr", "token=hunter2", "--count-file", str(count)))
    binding = engine.bind(profile())
    with pytest.raises(PluginExecutionError) as first:
        binding.credential()
    with pytest.raises(PluginExecutionError):
        binding.credential()  # the last error, at once: the plugin is backing off
    assert runs(count) == 1
    assert "hunter2" not in str(first.value)


def test_a_failover_binding_says_which_plan_answered(make_engine, tmp_path: Path) -> None:
    engine = make_engine(
        exec_entry("a", "--exit-code", "3"),
        exec_entry("b", "--token", "from-b"),
        failover=True,
    )
    binding = engine.bind(profile("https://spoke.test", "a", "b"))
    assert binding.fails_over and binding.plan.provider == "a"
    answer = binding.answer()
    assert (answer.plan.provider, answer.credential.token) == ("b", "from-b")
    assert binding.credential() is answer.credential
    assert [plan.provider for plan in binding.plans] == ["a", "b"]
    assert binding.invalidate(answer.credential) is True  # found in the plan that answered


def test_a_failover_binding_whose_providers_all_fail(make_engine, tmp_path: Path) -> None:
    engine = make_engine(exec_entry("a", "--exit-code", "3"), exec_entry("b", "--exit-code", "4"), failover=True)
    with pytest.raises(AllProvidersFailed):
        engine.bind(profile("https://spoke.test", "a", "b")).credential()


def test_after_close_a_binding_raises_engine_closed(make_engine, tmp_path: Path) -> None:
    engine = make_engine(exec_entry(PROVIDER, "--token", "t"))
    binding = engine.bind(profile())
    binding.credential()
    engine.close()
    with pytest.raises(EngineClosed):
        binding.credential()


class _Resource:
    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def test_on_close_closes_registered_resources_held_weakly(make_engine, tmp_path: Path) -> None:
    engine = make_engine(exec_entry(PROVIDER, "--token", "t"))
    binding = engine.bind(profile())
    kept, cancelled, dropped = _Resource(), _Resource(), _Resource()
    binding.on_close(kept)
    engine.on_close(cancelled)()  # taken off again: its owner closed it first
    binding.on_close(dropped)
    dropped_ref = weakref.ref(dropped)
    del dropped
    gc.collect()
    assert dropped_ref() is None  # the engine did not keep it alive
    engine.close()
    assert (kept.closed, cancelled.closed) == (1, 0)


# -- asyncio ---------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_acredential_single_flights_concurrent_tasks(make_engine, tmp_path: Path) -> None:
    count = tmp_path / "runs"
    engine = make_engine(exec_entry(PROVIDER, "--token", "t", "--token-per-run", "--count-file", str(count)))
    binding = engine.bind(profile())
    credentials = await asyncio.gather(*(binding.acredential() for _ in range(50)))
    assert {c.token for c in credentials} == {"t-1"}
    answer = await binding.aanswer()
    assert answer.credential is credentials[0] and answer.plan is binding.plan
    assert binding.invalidate(answer.credential)
    assert (await binding.acredential()).token == "t-2"
    assert runs(count) == 2


@pytest.mark.asyncio
async def test_cancelling_one_waiter_does_not_cancel_the_shared_fetch(make_engine, tmp_path: Path) -> None:
    count, gate = tmp_path / "runs", tmp_path / "gate"
    engine = make_engine(exec_entry(PROVIDER, "--token", "shared", "--count-file", str(count), "--wait-for", str(gate)))
    binding = engine.bind(profile())
    leader = asyncio.ensure_future(binding.acredential())
    other = asyncio.ensure_future(binding.acredential())
    while runs(count) == 0:  # the plugin is running: both tasks wait on its flight
        await asyncio.sleep(0.002)
    leader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leader
    gate.touch()
    assert (await other).token == "shared"
    assert (await binding.acredential()).token == "shared"
    assert runs(count) == 1


@pytest.mark.asyncio
async def test_a_thread_and_a_task_share_one_fetch(make_engine, tmp_path: Path) -> None:
    count, gate = tmp_path / "runs", tmp_path / "gate"
    engine = make_engine(exec_entry(PROVIDER, "--token", "t", "--token-per-run", "--count-file", str(count), "--wait-for", str(gate)))
    binding = engine.bind(profile())
    got: list[Any] = []
    thread = threading.Thread(target=lambda: got.append(binding.credential()))
    thread.start()  # the thread leads the fetch
    await asyncio.to_thread(wait_for, lambda: runs(count) == 1, "the plugin to start")
    task = asyncio.ensure_future(binding.acredential())  # the task waits on the same flight
    await asyncio.sleep(0)
    gate.touch()
    credential = await task
    await asyncio.to_thread(thread.join)
    assert got == [credential] and credential.token == "t-1"
    assert runs(count) == 1


# -- through the kubernetes adapter, against the spoke -----------------------------------------------


def test_a_401_through_the_adapter_refreshes_the_credential_every_binding_sees(make_engine, spoke: SpokeServer, tmp_path: Path) -> None:
    count = tmp_path / "runs"
    spoke.accept_token("t-2")  # the plugin's first token ("t-1") is already revoked
    engine = make_engine(exec_entry(PROVIDER, "--token", "t", "--token-per-run", "--count-file", str(count)))
    bound = profile(spoke.url, ca_pem=spoke.ca_pem)
    binding = engine.bind(bound)
    rejected = binding.credential()
    assert rejected.token == "t-1"
    with engine.api_client(bound) as api:
        assert kclient.CoreV1Api(api).list_namespace().items  # 401 -> invalidate -> refresh -> 200
    assert [(r.token, r.status) for r in spoke.requests] == [("t-1", 401), ("t-2", 200)]
    assert binding.credential().token == "t-2"  # one cache: the adapter's refresh is everyone's
    assert binding.invalidate(rejected) is False  # a late 401 for t-1 keeps t-2
    assert binding.credential().token == "t-2"
    assert runs(count) == 2
