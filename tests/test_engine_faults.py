"""The engine under cancellation, hung providers, shutdown, Ctrl-C and fork (issue 6).

Real plugins (the fake exec plugin, run as a process), real event loops, real threads; nothing of
cpcreds is patched. Gates are files the fake plugin waits for, or events an in-process provider
waits on: a test opens them, it never sleeps in their place.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from cpcreds import (
    Credential,
    CredentialEngine,
    CredentialError,
    EngineClosed,
    ExecProvider,
    PluginExecutionError,
    PluginOutputError,
    ProviderRegistry,
    ProviderTimeout,
    hookimpl,
    resolve,
)
from cpcreds.engine import BackoffPolicy
from tests.fakes.builders import access_provider, cluster_profile, config_of, exec_entry
from tests.fakes.processes import alive

ROOT = Path(__file__).resolve().parents[1]
#: Retry at once after a failure: these tests look at what the next call does, not at backoff.
NO_BACKOFF = BackoffPolicy(initial=0.0, maximum=0.0)


def runs(count_file: Path) -> int:
    return len(count_file.read_text().splitlines()) if count_file.exists() else 0


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


def profile(name: str = "spoke-1", provider: str = "fake", **fields: Any) -> dict[str, Any]:
    return cluster_profile(name, access_provider(provider, f"https://{name}.test", **fields))


def wait_for(condition: Any, what: str, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.001)  # polling an observable condition, bounded


@pytest.fixture
def metrics() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def make_engine(metrics: CollectorRegistry) -> Any:
    engines: list[CredentialEngine] = []

    def make(*entries: dict[str, Any], plugins: tuple[Any, ...] = (), **kwargs: Any) -> CredentialEngine:
        kwargs.setdefault("prometheus_registry", metrics)
        engine = CredentialEngine(config_of(*entries), registry=ProviderRegistry(entry_points=False, plugins=plugins), **kwargs)
        engines.append(engine)
        return engine

    yield make
    for engine in engines:
        engine.close()


# -- in-process providers a test controls -------------------------------------------------------


class Gate:
    """A provider (sync or async) that answers once the test opens the gate, counting calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.opened = threading.Event()
        self.entered = threading.Event()
        self.async_opened: asyncio.Event | None = None

    def get_credential(self, plan: Any) -> Credential:
        self.calls += 1
        self.entered.set()
        self.opened.wait(30)
        return Credential(token=f"gate-{self.calls}")


class AsyncGate(Gate):
    async def aget_credential(self, plan: Any) -> Credential:
        self.calls += 1
        self.entered.set()
        while not self.opened.is_set():
            await asyncio.sleep(0.001)  # an observable condition, bounded by the test
        return Credential(token=f"async-gate-{self.calls}")


class GatePlugin:
    def __init__(self, gate: Gate) -> None:
        self.gate = gate

    @hookimpl
    def cpcreds_register_providers(self, register: Any) -> None:
        register("gate", lambda options: self.gate)


def gate_entry(name: str = "fake", timeout: str = "30s") -> dict[str, Any]:
    return {"name": name, "type": "gate", "timeout": timeout}


# -- 1. one caller's cancellation is that caller's alone ----------------------------------------


@pytest.mark.asyncio
async def test_cancelled_async_caller_leaves_other_waiters_and_the_cache_intact(make_engine, tmp_path: Path) -> None:
    gate, count = tmp_path / "gate", tmp_path / "runs"
    engine = make_engine(exec_entry("fake", "--count-file", str(count), "--wait-for", str(gate)))
    p = profile()
    impatient = asyncio.create_task(asyncio.wait_for(engine.aget_credential(p), 0.05))
    patient = asyncio.create_task(engine.aget_credential(p))
    in_thread: list[Any] = []
    thread = threading.Thread(target=lambda: in_thread.append(engine.get_credential(p)))
    thread.start()
    with pytest.raises(asyncio.TimeoutError):
        await impatient
    gate.touch()
    credential = await patient
    await asyncio.to_thread(thread.join, 30)
    assert in_thread == [credential]
    assert await engine.aget_credential(p) is credential  # cached: a hit, no new run
    assert runs(count) == 1


@pytest.mark.asyncio
async def test_task_group_abort_does_not_break_the_plan(make_engine, tmp_path: Path) -> None:
    gate, count = tmp_path / "gate", tmp_path / "runs"
    engine = make_engine(exec_entry("fake", "--count-file", str(count), "--wait-for", str(gate)))
    p = profile()

    async def fail_soon() -> None:
        await asyncio.sleep(0)
        raise RuntimeError("a sibling failed")

    with pytest.raises(ExceptionGroup):
        async with asyncio.TaskGroup() as group:
            group.create_task(engine.aget_credential(p))
            group.create_task(fail_soon())
    gate.touch()
    credential = await engine.aget_credential(p)
    assert credential.token == "fake-token" and runs(count) == 1


@pytest.mark.asyncio
async def test_cancelled_aapi_client_caller_leaves_the_plan_usable(make_engine, spoke: Any, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    engine = make_engine(exec_entry("fake", "--token", "spoke-token", "--wait-for", str(gate)))
    p = cluster_profile("spoke-1", access_provider("fake", spoke.url, ca_pem=spoke.ca_pem))
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(engine.aapi_client(p), 0.05)
    gate.touch()
    from kubernetes.aio import client as aclient

    api = await engine.aapi_client(p)
    try:
        namespaces = await aclient.CoreV1Api(api).list_namespace()
        assert namespaces.items
    finally:
        await api.close()


@pytest.mark.asyncio
async def test_storm_of_impatient_callers_leaves_every_plan_answering_with_exact_run_counts(make_engine, tmp_path: Path) -> None:
    # 1,000 callers over 100 plans, each caller with a random deadline of 50-500 ms, 30 % of the
    # plans failing. Every plan runs its plugin exactly once; afterwards every plan answers at once
    # (its credential, or its error while backing off), never CancelledError.
    counts = tmp_path / "counts"
    counts.mkdir()
    engine = make_engine(
        exec_entry("fake", provideClusterInfo=True, profileSourcedCLIArgsPolicy="Append"),
        backoff=BackoffPolicy(initial=600, maximum=600),
    )
    failing = set(random.Random(7).sample(range(100), 30))
    fleet = [
        cluster_profile(
            f"c{i}",
            access_provider(
                "fake",
                f"https://c{i}.test",
                additional_args=["--count-file", str(counts / f"c{i}"), *(["--exit-code", "3"] if i in failing else [])],
            ),
        )
        for i in range(100)
    ]
    rng = random.Random(11)

    async def impatient(p: dict[str, Any]) -> None:
        try:
            await asyncio.wait_for(engine.aget_credential(p), rng.uniform(0.05, 0.5))
        except (asyncio.TimeoutError, PluginExecutionError):
            pass

    await asyncio.gather(*(impatient(fleet[i % 100]) for i in range(1000)))
    for index, p in enumerate(fleet):
        if index in failing:
            with pytest.raises(PluginExecutionError):
                await asyncio.wait_for(engine.aget_credential(p), 60)
        else:
            credential = await asyncio.wait_for(engine.aget_credential(p), 60)
            assert credential.token == "fake-token"
        assert runs(counts / f"c{index}") == 1, f"plan c{index} ran {runs(counts / f'c{index}')} times"
    # Again, now that everything has settled: all answered from the cache or the backoff.
    for index, p in enumerate(fleet):
        started = time.monotonic()
        try:
            await engine.aget_credential(p)
        except PluginExecutionError:
            assert index in failing
        # Not waited for: a plugin run would be counted below, a backoff lasts ten minutes.
        assert time.monotonic() - started < 1.0
    assert sum(runs(counts / f"c{i}") for i in range(100)) == 100


# -- 2. an async provider runs in its own task ---------------------------------------------------


@pytest.mark.asyncio
async def test_async_provider_survives_its_first_caller_being_cancelled(make_engine, metrics: CollectorRegistry) -> None:
    gate = AsyncGate()
    engine = make_engine(gate_entry(), plugins=(GatePlugin(gate),))
    p = profile()
    first = asyncio.create_task(engine.aget_credential(p))
    await asyncio.to_thread(gate.entered.wait, 10)
    second = asyncio.create_task(engine.aget_credential(p))
    await asyncio.sleep(0)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    gate.opened.set()
    credential = await second
    assert credential.token == "async-gate-1" and gate.calls == 1
    assert await engine.aget_credential(p) is credential
    assert sample(metrics, "cpcreds_credential_requests_total", provider="fake", result="success") == 1
    assert sample(metrics, "cpcreds_credential_cache_lookups_total", provider="fake", result="backoff") == 0


# -- 3. a hung in-process provider cannot starve others ----------------------------------------


def _stuck_and_fine(make_engine: Any, hung: Gate, healthy: Gate, *, max_concurrent_fetches: int) -> Any:
    """An engine with provider "stuck" (``hung``, 100 ms timeout) and "fine" (``healthy``, 5 s)."""

    class TwoGates:
        @hookimpl
        def cpcreds_register_providers(self, register: Any) -> None:
            register("hung", lambda options: hung)
            register("healthy", lambda options: healthy)

    return make_engine(
        {"name": "stuck", "type": "hung", "timeout": "100ms"},
        {"name": "fine", "type": "healthy", "timeout": "5s"},
        plugins=(TwoGates(),),
        max_concurrent_fetches=max_concurrent_fetches,
    )


def test_hung_in_process_provider_does_not_starve_healthy_providers(make_engine) -> None:
    hung, healthy = Gate(), Gate()
    healthy.opened.set()

    engine = _stuck_and_fine(make_engine, hung, healthy, max_concurrent_fetches=4)
    # More timed-out calls than there are slots: abandoned calls hold no slot.
    for index in range(10):
        with pytest.raises(ProviderTimeout):
            engine.get_credential(profile(f"stuck-{index}", provider="stuck"))
    started = time.monotonic()
    assert engine.get_credential(profile("ok", provider="fine")).token == "gate-1"
    assert time.monotonic() - started < 1.0
    hung.opened.set()


def test_hung_calls_hold_no_pool_thread_and_idle_threads_are_reused(make_engine) -> None:
    """asyncio callers' fetches run in the engine's thread pool (sized to its concurrency): hung
    in-process calls beyond the pool's size never queue a healthy fetch behind them, and a healthy
    fleet's fetches reuse idle threads instead of starting one per fetch."""
    ran_in: set[threading.Thread] = set()

    class Healthy(Gate):
        def get_credential(self, plan: Any) -> Credential:
            ran_in.add(threading.current_thread())
            return super().get_credential(plan)

    hung, healthy = Gate(), Healthy()
    healthy.opened.set()

    engine = _stuck_and_fine(make_engine, hung, healthy, max_concurrent_fetches=2)

    async def main() -> None:
        stuck = await asyncio.gather(*(engine.aget_credential(profile(f"stuck-{i}", provider="stuck")) for i in range(10)), return_exceptions=True)
        assert all(isinstance(outcome, ProviderTimeout) for outcome in stuck), stuck
        started = time.monotonic()
        assert (await engine.aget_credential(profile("ok-0", provider="fine"))).token.startswith("gate-")
        assert time.monotonic() - started < 1.0
        for index in range(1, 50):  # one at a time: each finds the previous fetch's threads idle
            await engine.aget_credential(profile(f"ok-{index}", provider="fine"))
        assert len(ran_in) <= 4  # the pool keeps two idle threads per concurrent fetch

    asyncio.run(main())
    hung.opened.set()


def test_provider_is_never_called_twice_at_once_for_one_plan(make_engine) -> None:
    gate = Gate()
    engine = make_engine(gate_entry(timeout="100ms"), plugins=(GatePlugin(gate),), backoff=NO_BACKOFF)
    p = profile()
    with pytest.raises(ProviderTimeout, match="did not answer within 0.1s"):
        engine.get_credential(p)
    # The abandoned call still runs: the next fetch waits for it instead of calling again, and
    # says so when its own deadline passes first.
    with pytest.raises(ProviderTimeout, match="an earlier call, abandoned after its timeout, is still running"):
        engine.get_credential(p)
    assert gate.calls == 1
    gate.opened.set()
    wait_for(lambda: engine._workers.abandoned_calls() == 0, "the abandoned call to finish")
    assert engine.get_credential(p).token == "gate-2"  # a finished abandoned call is not reused
    assert gate.calls == 2


def test_asyncio_callers_abandon_a_hung_call_at_its_deadline_and_never_call_twice(make_engine) -> None:
    """An asyncio caller's in-process call starts with no thread leading it; it is still
    abandoned at its deadline, and the next fetch of its plan waits for it instead of calling."""
    gate = Gate()
    engine = make_engine(gate_entry(timeout="100ms"), plugins=(GatePlugin(gate),), backoff=NO_BACKOFF)
    p = profile()

    async def main() -> None:
        started = time.monotonic()
        with pytest.raises(ProviderTimeout, match="did not answer within 0.1s"):
            await engine.aget_credential(p)
        assert time.monotonic() - started < 2.0
        with pytest.raises(ProviderTimeout, match="an earlier call, abandoned after its timeout, is still running"):
            await engine.aget_credential(p)

    asyncio.run(main())
    assert gate.calls == 1
    gate.opened.set()
    wait_for(lambda: engine._workers.abandoned_calls() == 0, "the abandoned call to finish")
    assert asyncio.run(engine.aget_credential(p)).token == "gate-2"


def test_abandoned_call_answering_in_time_serves_the_next_fetch(make_engine) -> None:
    gate = Gate()
    engine = make_engine(gate_entry(timeout="200ms"), plugins=(GatePlugin(gate),), backoff=NO_BACKOFF)
    p = profile()
    with pytest.raises(ProviderTimeout):
        engine.get_credential(p)
    opener = threading.Timer(0.05, gate.opened.set)  # opens while the next fetch waits
    opener.start()
    assert engine.get_credential(p).token == "gate-1"
    assert gate.calls == 1
    opener.join()


def test_interpreter_exits_while_an_abandoned_call_runs(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import threading, time
        from prometheus_client import CollectorRegistry
        from cpcreds import CredentialEngine, ProviderRegistry, ProviderTimeout, hookimpl
        from tests.fakes.builders import access_provider, cluster_profile, config_of

        class Forever:
            def get_credential(self, plan):
                threading.Event().wait()

        class Plugin:
            @hookimpl
            def cpcreds_register_providers(self, register):
                register("forever", lambda options: Forever())

        engine = CredentialEngine(config_of({"name": "p", "type": "forever", "timeout": "100ms"}),
                                  registry=ProviderRegistry(entry_points=False, plugins=(Plugin(),)),
                                  prometheus_registry=CollectorRegistry())
        try:
            engine.get_credential(cluster_profile("c", access_provider("p")))
        except ProviderTimeout:
            print("timed out", flush=True)
        """
    )
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "timed out"
    assert time.monotonic() - started < 10  # interpreter start-up included; a hang would be 30 s


# -- 4. no head-of-line blocking ----------------------------------------------------------------


@pytest.mark.asyncio
async def test_hanging_plugins_of_other_clusters_do_not_delay_a_healthy_one(make_engine, tmp_path: Path) -> None:
    engine = make_engine(
        exec_entry("fake", provideClusterInfo=True, profileSourcedCLIArgsPolicy="Append", timeout="20s"),
    )
    hanging = [
        asyncio.create_task(engine.aget_credential(profile(f"hung-{i}", additional_args=["--hang"]))) for i in range(8)
    ]
    await asyncio.sleep(0.05)  # let the eight start first (not synchronisation: order only)
    started = time.monotonic()
    credential = await engine.aget_credential(profile("healthy"))
    took = time.monotonic() - started
    assert credential.token == "fake-token"
    assert took < 2.0, f"the healthy cluster waited {took:.2f}s behind hanging plugins"
    engine.close()  # kills the hanging plugins and releases their waiters
    for task in hanging:
        with pytest.raises(EngineClosed):
            await task


def test_time_queued_for_a_slot_counts_against_the_timeout(make_engine, tmp_path: Path) -> None:
    engine = make_engine(exec_entry("slow", "--hang", timeout="5s"), exec_entry("fake", timeout="400ms"), max_concurrent_fetches=1)
    blocker = threading.Thread(target=lambda: pytest.raises(CredentialError, engine.get_credential, profile("hung", provider="slow")))
    blocker.start()
    wait_for(lambda: engine._workers._running == 1, "the hanging fetch to hold the only slot")
    started = time.monotonic()
    with pytest.raises(ProviderTimeout, match="no fetch slot became free"):
        engine.get_credential(profile("queued"))
    assert time.monotonic() - started < 0.4 + 0.3  # its own 400 ms, not the blocker's 5 s on top
    engine.close()
    blocker.join(10)


def test_concurrency_limits_are_validated(make_engine) -> None:
    with pytest.raises(ValueError):
        make_engine(exec_entry("fake"), max_concurrent_fetches=0)


# -- 5. close() ends everything ----------------------------------------------------------------


def test_close_releases_waiting_threads_and_tasks_within_a_second(make_engine, tmp_path: Path, metrics: CollectorRegistry) -> None:
    count = tmp_path / "runs"
    engine = make_engine(exec_entry("fake", "--count-file", str(count), "--hang", timeout="60s"))
    p = profile()
    outcomes: list[BaseException] = []

    def thread_caller() -> None:
        try:
            engine.get_credential(p)
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertion
            outcomes.append(exc)

    async def task_callers() -> None:
        results = await asyncio.gather(*(engine.aget_credential(p) for _ in range(3)), return_exceptions=True)
        outcomes.extend(results)  # type: ignore[arg-type]

    threads = [threading.Thread(target=thread_caller) for _ in range(3)]
    threads.append(threading.Thread(target=asyncio.run, args=(task_callers(),)))
    for thread in threads:
        thread.start()
    wait_for(lambda: runs(count) == 1, "the plugin to start")
    started = time.monotonic()
    engine.close()
    for thread in threads:
        thread.join(5)
    assert time.monotonic() - started < 1.0
    assert len(outcomes) == 6 and all(isinstance(o, EngineClosed) for o in outcomes), outcomes
    assert str(outcomes[0]) == "engine closed: this CredentialEngine was closed"
    with pytest.raises(EngineClosed):
        engine.get_credential(p)
    assert sample(metrics, "cpcreds_credential_requests_total", provider="fake", result="plugin_execution_error") == 0


def test_fetch_finishing_after_close_stores_and_counts_nothing(make_engine, metrics: CollectorRegistry) -> None:
    gate = Gate()
    engine = make_engine(gate_entry(), plugins=(GatePlugin(gate),))
    caller = threading.Thread(target=lambda: pytest.raises(EngineClosed, engine.get_credential, profile()))
    caller.start()
    assert gate.entered.wait(10)
    engine.close()
    caller.join(5)
    gate.opened.set()
    wait_for(lambda: engine._workers.abandoned_calls() == 0 and not caller.is_alive(), "the late answer")
    assert sample(metrics, "cpcreds_credential_requests_total", provider="fake", result="success") == 0
    assert metrics.get_sample_value("cpcreds_credential_requests_total", {"provider": "fake", "result": "success"}) is None
    assert sample(metrics, "cpcreds_credential_cache_entries") == 0


@pytest.mark.asyncio
async def test_async_with_closes_the_engine_and_its_async_provider_tasks(metrics: CollectorRegistry) -> None:
    gate = AsyncGate()
    engine = CredentialEngine(
        config_of(gate_entry()), registry=ProviderRegistry(entry_points=False, plugins=(GatePlugin(gate),)), prometheus_registry=metrics
    )
    async with engine:
        waiting = asyncio.create_task(engine.aget_credential(profile()))
        await asyncio.to_thread(gate.entered.wait, 10)
    assert engine.closed
    with pytest.raises(EngineClosed):
        await waiting


def test_interpreter_exit_does_not_wait_for_a_background_refresh(tmp_path: Path) -> None:
    count = tmp_path / "runs"
    script = textwrap.dedent(
        f"""
        import time
        from prometheus_client import CollectorRegistry
        from cpcreds import CredentialEngine, ProviderRegistry
        from tests.fakes.builders import access_provider, cluster_profile, config_of, exec_entry

        offset = [0.0]
        engine = CredentialEngine(
            config_of(exec_entry("fake", "--count-file", {str(count)!r}, "--hang-after", "1", "--expires-in", "600")),
            registry=ProviderRegistry(entry_points=False), prometheus_registry=CollectorRegistry(),
            clock=lambda: time.time() + offset[0])
        profile = cluster_profile("c", access_provider("fake"))
        engine.get_credential(profile)
        offset[0] = 590  # inside the refresh window: the next call starts a background refresh
        engine.get_credential(profile)
        deadline = time.monotonic() + 20
        while open({str(count)!r}).read().count("run") < 2 and time.monotonic() < deadline:
            time.sleep(0.001)
        print("refreshing", flush=True)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "refreshing"
    printed = time.monotonic()
    assert proc.wait(10) == 0, proc.stderr.read() if proc.stderr else ""
    assert time.monotonic() - printed < 1.0
    assert runs(count) == 2


# -- 6. Ctrl-C and SystemExit pass through -------------------------------------------------------


def test_keyboard_interrupt_during_a_plugin_run_reaches_the_caller_and_is_not_cached(tmp_path: Path) -> None:
    record, count, gate = tmp_path / "seen.json", tmp_path / "runs", tmp_path / "gate"
    script = textwrap.dedent(
        f"""
        import json, os, signal, threading, time
        from prometheus_client import CollectorRegistry
        from cpcreds import CredentialEngine, ProviderRegistry
        from tests.fakes.builders import access_provider, cluster_profile, config_of, exec_entry

        registry = CollectorRegistry()
        engine = CredentialEngine(
            config_of(exec_entry("fake", "--count-file", {str(count)!r}, "--record", {str(record)!r}, "--wait-for", {str(gate)!r})),
            registry=ProviderRegistry(entry_points=False), prometheus_registry=registry)
        profile = cluster_profile("c", access_provider("fake"))

        def interrupt():
            while not os.path.exists({str(record)!r}):
                time.sleep(0.001)
            os.kill(os.getpid(), signal.SIGINT)

        threading.Thread(target=interrupt).start()
        try:
            engine.get_credential(profile)
            print("no interrupt")
        except KeyboardInterrupt:
            outcome = "KeyboardInterrupt"
        open({str(gate)!r}, "w").close()
        started = time.monotonic()
        token = engine.get_credential(profile).token      # not cached as an error, no backoff
        failures = registry.get_sample_value("cpcreds_credential_requests_total",
                                             {{"provider": "fake", "result": "plugin_execution_error"}})
        print(json.dumps({{"outcome": outcome, "token": token, "failures": failures}}))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"outcome": "KeyboardInterrupt", "token": "fake-token", "failures": None}
    assert runs(count) == 2  # the interrupted run (killed) and the one after it


def _run_script(script: str) -> tuple[int, str, str]:
    """Run ``script`` in a Python of its own; (exit code, stdout, stderr). A script still running
    after a minute (a deadlock) is killed, and so is the process group of any plugin it printed
    the number of."""
    try:
        done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    except subprocess.TimeoutExpired as exc:
        output = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        for word in output.split():
            if word.isdigit():
                with contextlib.suppress(OSError):
                    os.killpg(int(word), signal.SIGKILL)
        raise
    return done.returncode, done.stdout, done.stderr


def test_a_termination_handler_landing_while_a_run_is_recorded_stops_the_plugin_and_exits() -> None:
    # A service's SIGTERM handler (terminate_running_plugins, then exit, as docs/exec-protocol.md
    # says) runs in the main thread between two bytecodes: here, while that thread holds the lock
    # the handler needs, recording the group of the plugin it has just started.
    script = textwrap.dedent(
        """
        import os, signal
        from prometheus_client import CollectorRegistry
        from cpcreds import CredentialEngine, ProviderRegistry
        from cpcreds.exec.provider import terminate_running_plugins
        from tests.fakes.builders import access_provider, cluster_profile, config_of, exec_entry
        from tests.fakes.processes import at_lock_release

        def on_term(signum, frame):
            terminate_running_plugins()
            os._exit(143)

        def land(frame):
            print(frame.f_locals["pgid"], flush=True)  # the plugin leads its group
            signal.getsignal(signal.SIGTERM)(signal.SIGTERM, frame)

        signal.signal(signal.SIGTERM, on_term)
        engine = CredentialEngine(config_of(exec_entry("fake", "--hang")), registry=ProviderRegistry(entry_points=False),
                                  prometheus_registry=CollectorRegistry())
        at_lock_release("_add", land)
        engine.get_credential(cluster_profile("c", access_provider("fake")))
        print("not stopped", flush=True)
        """
    )
    code, out, err = _run_script(script)
    assert code == 143, err
    wait_for(lambda: not alive(int(out.split()[0])), "the plugin to be killed", seconds=10)


def test_ctrl_c_right_after_the_plugin_started_kills_it_before_reaching_the_caller() -> None:
    # Ctrl-C between the plugin's start and the wait that would kill it on the way out.
    script = textwrap.dedent(
        """
        from prometheus_client import CollectorRegistry
        from cpcreds import CredentialEngine, ProviderRegistry
        from tests.fakes.builders import access_provider, cluster_profile, config_of, exec_entry
        from tests.fakes.processes import alive, at_lock_release

        def land(frame):
            global plugin
            plugin = frame.f_locals["pgid"]
            print(plugin, flush=True)
            raise KeyboardInterrupt  # what the default SIGINT handler raises there

        engine = CredentialEngine(config_of(exec_entry("fake", "--hang")), registry=ProviderRegistry(entry_points=False),
                                  prometheus_registry=CollectorRegistry())
        at_lock_release("_add", land, released=True)
        try:
            engine.get_credential(cluster_profile("c", access_provider("fake")))
        except KeyboardInterrupt:
            print("interrupted", "alive" if alive(plugin) else "gone", flush=True)
        """
    )
    code, out, err = _run_script(script)
    assert code == 0, err
    assert out.split()[1:] == ["interrupted", "gone"]


def test_a_forked_child_leaves_its_parents_plugins_running(tmp_path: Path) -> None:
    # A child of fork inherits the engine and the exit handlers; closing the one and running the
    # others are its own business, never a kill of the parent's running plugins.
    pidfile = tmp_path / "plugin-child.pid"
    script = textwrap.dedent(
        f"""
        import os, sys, threading, time, warnings
        from prometheus_client import CollectorRegistry
        from cpcreds import CredentialEngine, ProviderRegistry
        from tests.fakes.builders import access_provider, cluster_profile, config_of, exec_entry
        from tests.fakes.processes import alive

        engine = CredentialEngine(config_of(exec_entry("fake", "--child-pidfile", {str(pidfile)!r}, "--hang", timeout="60s")),
                                  registry=ProviderRegistry(entry_points=False), prometheus_registry=CollectorRegistry())
        profile = cluster_profile("c", access_provider("fake"))
        threading.Thread(target=lambda: engine.get_credential(profile), daemon=True).start()
        while not os.path.exists({str(pidfile)!r}):
            time.sleep(0.002)  # polling an observable condition; the test's timeout bounds it
        watched = int(open({str(pidfile)!r}).read())  # in the plugin's group: alive while it is
        print(watched, flush=True)
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() with a thread running, on purpose
        child = os.fork()
        if child == 0:
            engine.close()
            sys.exit(0)  # the exit handlers run in the child too
        os.waitpid(child, 0)
        print("alive" if alive(watched) else "gone", flush=True)
        engine.close()
        """
    )
    code, out, err = _run_script(script)
    assert code == 0, err
    assert out.split()[1:] == ["alive"]
    wait_for(lambda: not alive(int(out.split()[0])), "the parent's close to kill its plugin", seconds=10)


# -- 7. an answer that has already expired is a failure -----------------------------------------


def test_already_expired_answer_is_a_failure_with_backoff(make_engine, tmp_path: Path, metrics: CollectorRegistry) -> None:
    count = tmp_path / "runs"
    engine = make_engine(exec_entry("fake", "--count-file", str(count), "--expiration", "2020-01-01T00:00:00Z"))
    for _ in range(50):
        with pytest.raises(PluginOutputError, match="expired at 2020-01-01T00:00:00Z"):
            engine.get_credential(profile())
    assert runs(count) == 1
    assert sample(metrics, "cpcreds_credential_requests_total", provider="fake", result="plugin_output_error") == 1
    assert sample(metrics, "rest_client_exec_plugin_call_total", code="1", call_status="plugin_execution_error") == 1
    assert sample(metrics, "rest_client_exec_plugin_call_total", code="0", call_status="no_error") == 0


# -- 8. exec without pidfd, and grandchildren that leave the group ------------------------------


@pytest.mark.parametrize("use_pidfd", [True, False], ids=["pidfd", "no-pidfd"])
def test_plugin_exit_is_noticed_while_its_child_holds_stdout(tmp_path: Path, use_pidfd: bool) -> None:
    pidfile = tmp_path / "child.pid"
    plan = resolve(config_of(exec_entry("fake", "--child-pidfile", str(pidfile), "--linger-child", timeout="10s")), profile())
    provider = ExecProvider(use_pidfd=use_pidfd)
    started = time.perf_counter()
    credential = provider.get_credential(plan)
    assert credential.token == "fake-token"
    overhead = time.perf_counter() - started
    assert overhead < 2.0  # the plugin's own start-up plus at most ~20 ms of polling, never the 10 s timeout
    wait_for(lambda: not alive(int(pidfile.read_text())), "the lingering child to be killed", seconds=5)


@pytest.mark.parametrize("use_pidfd", [True, False], ids=["pidfd", "no-pidfd"])
def test_grandchild_that_left_the_group_cannot_turn_an_answer_into_a_timeout(tmp_path: Path, use_pidfd: bool) -> None:
    pidfile = tmp_path / "child.pid"
    plan = resolve(
        config_of(exec_entry("fake", "--child-pidfile", str(pidfile), "--linger-child", "--setsid-child", timeout="10s")), profile()
    )
    started = time.monotonic()
    try:
        assert ExecProvider(use_pidfd=use_pidfd).get_credential(plan).token == "fake-token"
        assert time.monotonic() - started < 2.0
    finally:
        os.kill(int(pidfile.read_text()), signal.SIGKILL)  # it left our reach on purpose


# -- 10. a plan is a value -----------------------------------------------------------------------


def test_profile_with_uid_and_generation_but_no_resource_version_is_resolved_again_when_it_changes(make_engine) -> None:
    engine = make_engine(exec_entry("fake", provideClusterInfo=True))
    p = profile()
    p["metadata"].update(uid="u-1", generation=1)
    first = engine.resolve(p)
    p["status"]["accessProviders"][0]["cluster"]["server"] = "https://moved.test"  # a status update
    second = engine.resolve(p)
    assert first.cluster.server == "https://spoke-1.test" and second.cluster.server == "https://moved.test"


def test_hostile_metadata_shapes_never_break_the_fast_path(make_engine) -> None:
    engine = make_engine(exec_entry("fake"))
    for meta in ({"uid": ["x"], "resourceVersion": "1"}, {"uid": "u", "resourceVersion": {"a": 1}}, {"uid": 1, "resourceVersion": 2}):
        p = profile()
        p["metadata"].update(meta)
        try:
            assert engine.get_credential(p).token == "fake-token"
        except CredentialError:
            pass  # a profile the parser refuses is an error of ours, never a TypeError


@pytest.mark.parametrize(
    ("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)], ids=["Ctrl-C", "SIGTERM", "SIGHUP"]
)
def test_ctrl_c_and_termination_signals_to_the_cli_kill_the_plugin_group_first(tmp_path: Path, signum: int, code: int) -> None:
    record, pidfile = tmp_path / "seen.json", tmp_path / "child.pid"
    config = tmp_path / "providers.yaml"
    config.write_text(json.dumps({"providers": [exec_entry("fake", "--record", str(record), "--child-pidfile", str(pidfile), "--hang")]}))
    prof = tmp_path / "profile.json"
    prof.write_text(json.dumps(profile()))
    cli = Path(sys.executable).with_name("cpcreds")
    proc = subprocess.Popen([str(cli), "get-credential", "--config", str(config), "--profile", str(prof)], stderr=subprocess.PIPE, text=True)
    wait_for(lambda: record.exists() and pidfile.exists(), "the plugin to start")
    proc.send_signal(signum)
    assert proc.wait(10) == code
    # The child is in the plugin's process group: it dying means the group was killed.
    wait_for(lambda: not alive(int(pidfile.read_text())), "the plugin's group to be killed", seconds=5)
