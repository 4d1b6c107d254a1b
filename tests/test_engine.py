"""CredentialEngine: cache, single-flight, refresh ahead, invalidate, backoff, metrics, secrets."""

from __future__ import annotations

import asyncio
import io
import logging
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest

from cpcreds import (
    ClusterProfile,
    Credential,
    CredentialEngine,
    CredentialError,
    PluginExecutionError,
    ProviderRegistry,
    hookimpl,
    resolve,
)
from cpcreds.engine import BackoffPolicy, RefreshPolicy
from cpcreds.logs import configure_logging
from tests.fakes.builders import access_provider, cluster_profile, config_of, exec_entry

SECRET = "tok-SECRET-4f9a1c"


def runs(count_file: Path) -> int:
    return len(count_file.read_text().splitlines()) if count_file.exists() else 0


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


class Clock:
    """A wall clock a test can move forward (the engine's documented ``clock`` parameter).

    With ``share`` (a path), the fake plugin's ``--clock-offset-file`` sees the same offset, so
    the expiry it answers is in the simulated time, as a real plugin's is in real time."""

    def __init__(self, share: Path | None = None) -> None:
        self._offset = 0.0
        self.share = share

    @property
    def offset(self) -> float:
        return self._offset

    @offset.setter
    def offset(self, value: float) -> None:
        self._offset = value
        if self.share is not None:
            self.share.write_text(str(value))

    def plugin_args(self) -> tuple[str, ...]:
        assert self.share is not None
        return ("--clock-offset-file", str(self.share))

    def __call__(self) -> float:
        return time.time() + self._offset


@pytest.fixture
def metrics() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def make_engine(metrics: CollectorRegistry) -> Iterator[Any]:
    engines: list[CredentialEngine] = []

    def make(*entries: dict[str, Any], **kwargs: Any) -> CredentialEngine:
        kwargs.setdefault("prometheus_registry", metrics)
        kwargs.setdefault("registry", ProviderRegistry(entry_points=False, plugins=kwargs.pop("plugins", ())))
        engine = CredentialEngine(config_of(*entries), **kwargs)
        engines.append(engine)
        return engine

    yield make
    for engine in engines:
        engine.close()


def profile(name: str = "spoke-1", provider: str = "fake", server: str = "https://spoke.test", **meta: Any) -> dict[str, Any]:
    return cluster_profile(name, access_provider(provider, server), **meta)


class GatedProvider:
    """An in-process provider that blocks until released, counting its calls."""

    def __init__(self, options: Any) -> None:
        self.calls = 0
        self.release = threading.Event()
        self.lifetime = options.get("lifetime")

    def get_credential(self, plan: Any) -> Credential:
        self.calls += 1
        assert self.release.wait(30), "test never released the provider"
        expiry = datetime.now(timezone.utc) + timedelta(seconds=self.lifetime) if self.lifetime else None
        return Credential(token=f"gated-{self.calls}", expiration_timestamp=expiry)


class GatedPlugin:
    instance: GatedProvider | None = None

    @hookimpl
    def cpcreds_register_providers(self, register: Any) -> None:
        def factory(options: Any) -> GatedProvider:
            GatedPlugin.instance = GatedProvider(options)
            return GatedPlugin.instance

        register("gated", factory)


def wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + 20
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.001)  # polling an observable condition, bounded


# -- cache -------------------------------------------------------------------------------------


def test_cache_hit_returns_the_same_credential_without_running_the_plugin(make_engine, tmp_path: Path) -> None:
    engine = make_engine(exec_entry("fake", "--count-file", str(tmp_path / "runs")))
    first = engine.get_credential(profile())
    assert engine.get_credential(profile()) is first
    assert runs(tmp_path / "runs") == 1


def test_profiles_resolving_to_one_plan_share_one_credential(make_engine, tmp_path: Path) -> None:
    engine = make_engine(exec_entry("fake", "--count-file", str(tmp_path / "runs")))
    a = engine.get_credential(profile("a", server="https://a"))
    b = engine.get_credential(profile("b", server="https://b"))
    assert a is b and runs(tmp_path / "runs") == 1


def test_plugin_that_sees_the_cluster_runs_once_per_cluster(make_engine, tmp_path: Path) -> None:
    engine = make_engine(exec_entry("fake", "--count-file", str(tmp_path / "runs"), provideClusterInfo=True))
    engine.get_credential(profile("a", server="https://a"))
    engine.get_credential(profile("b", server="https://b"))
    assert runs(tmp_path / "runs") == 2


def test_expired_credential_is_fetched_again(make_engine, tmp_path: Path) -> None:
    clock = Clock(share=tmp_path / "offset")
    engine = make_engine(exec_entry("fake", "--count-file", str(tmp_path / "runs"), "--expires-in", "120", *clock.plugin_args()), clock=clock)
    engine.get_credential(profile())
    clock.offset = 121
    engine.get_credential(profile())
    assert runs(tmp_path / "runs") == 2


def test_credential_without_expiry_lives_as_long_as_the_engine(make_engine, tmp_path: Path) -> None:
    clock = Clock()
    engine = make_engine(exec_entry("fake", "--count-file", str(tmp_path / "runs")), clock=clock)
    engine.get_credential(profile())
    clock.offset = 10 * 365 * 86400
    engine.get_credential(profile())
    assert runs(tmp_path / "runs") == 1


def test_fast_hit_trusts_uid_and_resource_version(make_engine, tmp_path: Path) -> None:
    engine = make_engine(exec_entry("fake", "--count-file", str(tmp_path / "runs")), exec_entry("other"))
    p = profile(uid="u-1", resource_version="7")
    engine.get_credential(p)
    # Same uid and resourceVersion: the remembered plan is used; the profile is not re-read.
    p["status"]["accessProviders"][0]["name"] = "other"
    assert engine.resolve(p).provider == "fake"
    p["metadata"]["resourceVersion"] = "8"
    assert engine.resolve(p).provider == "other"


def test_copies_of_one_export_never_share_a_plan(make_engine) -> None:
    # Two profiles saved from one `kubectl get -o yaml`: same uid and resourceVersion, another
    # name and server. Each gets its own cluster, as a dict and as a ClusterProfile model.
    engine = make_engine(exec_entry("fake", provideClusterInfo=True))
    prod = profile("prod", server="https://prod.test", uid="u-1", resource_version="7")
    staging = profile("staging", server="https://staging.test", uid="u-1", resource_version="7")
    other_ns = profile("prod", server="https://other.test", uid="u-1", resource_version="7", namespace="elsewhere")
    assert engine.resolve(prod).cluster.server == "https://prod.test"
    assert engine.resolve(staging).cluster.server == "https://staging.test"
    assert engine.resolve(other_ns).cluster.server == "https://other.test"
    assert engine.resolve(ClusterProfile.model_validate(staging)).cluster.server == "https://staging.test"
    assert engine.get_answer(staging).plan.cluster.server == "https://staging.test"


_names = st.text(alphabet="abc-", min_size=1, max_size=3)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([None, "ns1", "ns2"]), _names, st.sampled_from(["fake", "other"]), st.integers(0, 3)),
        min_size=1,
        max_size=8,
        unique_by=lambda t: (t[0], t[1]),
    ),
    st.sampled_from(["dict", "model"]),
)
def test_profiles_sharing_uid_and_resource_version_each_get_their_own_plan(profiles: list, shape: str) -> None:
    # However many profiles carry one uid/resourceVersion, the engine's answer is what resolving
    # each profile on its own gives.
    config = config_of(exec_entry("fake", provideClusterInfo=True), exec_entry("other"))
    with CredentialEngine(config, registry=ProviderRegistry(entry_points=False), prometheus_registry=CollectorRegistry()) as engine:
        for _ in range(2):
            for namespace, name, provider, server in profiles:
                p = profile(name, provider=provider, server=f"https://s{server}.test", uid="same", resource_version="1")
                if namespace is None:
                    del p["metadata"]["namespace"]
                else:
                    p["metadata"]["namespace"] = namespace
                given_profile = p if shape == "dict" else ClusterProfile.model_validate(p)
                assert engine.resolve(given_profile) == resolve(config, p)


def test_profile_without_uid_is_identified_by_its_access_providers(make_engine) -> None:
    engine = make_engine(exec_entry("fake"), exec_entry("other"))
    p = profile()
    assert engine.resolve(p).provider == "fake"
    p["status"]["accessProviders"][0]["name"] = "other"
    assert engine.resolve(p).provider == "other"


def test_cache_is_bounded_and_purges_old_entries(make_engine, metrics: CollectorRegistry) -> None:
    engine = make_engine(exec_entry("fake", provideClusterInfo=True), max_entries=3)
    for index in range(6):
        engine.get_credential(profile(f"c{index}", server=f"https://c{index}"))
    assert sample(metrics, "cpcreds_credential_cache_entries") <= 3


# -- single-flight -----------------------------------------------------------------------------


def test_concurrent_threads_share_one_provider_call(make_engine, metrics: CollectorRegistry) -> None:
    engine = make_engine({"name": "fake", "type": "gated", "options": {}}, plugins=(GatedPlugin(),))
    results: list[Credential] = []
    threads = [threading.Thread(target=lambda: results.append(engine.get_credential(profile()))) for _ in range(50)]
    for thread in threads:
        thread.start()
    wait_for(lambda: sample(metrics, "cpcreds_credential_cache_lookups_total", provider="fake", result="miss") == 50, "50 waiting callers")
    GatedPlugin.instance.release.set()
    for thread in threads:
        thread.join()
    assert GatedPlugin.instance.calls == 1
    assert len({id(r) for r in results}) == 1 and len(results) == 50


def test_concurrent_tasks_and_threads_share_one_provider_call(make_engine, metrics: CollectorRegistry) -> None:
    engine = make_engine({"name": "fake", "type": "gated", "options": {}}, plugins=(GatedPlugin(),))

    async def main() -> list[Credential]:
        tasks = [asyncio.create_task(engine.aget_credential(profile())) for _ in range(100)]
        thread_result: list[Credential] = []
        thread = threading.Thread(target=lambda: thread_result.append(engine.get_credential(profile())))
        thread.start()
        await asyncio.to_thread(
            wait_for,
            lambda: sample(metrics, "cpcreds_credential_cache_lookups_total", provider="fake", result="miss") == 101,
            "101 waiting callers",
        )
        GatedPlugin.instance.release.set()
        results = await asyncio.gather(*tasks)
        await asyncio.to_thread(thread.join)
        return [*results, *thread_result]

    results = asyncio.run(main())
    assert GatedPlugin.instance.calls == 1
    assert len(results) == 101 and len({id(r) for r in results}) == 1


def test_concurrent_callers_over_many_plans_run_each_plugin_once(make_engine, tmp_path: Path) -> None:
    engine = make_engine(exec_entry("fake", "--count-file", str(tmp_path / "runs"), provideClusterInfo=True))
    profiles = [profile(f"c{i}", server=f"https://c{i}") for i in range(5)]
    barrier = threading.Barrier(40)

    def call(index: int) -> None:
        barrier.wait()
        engine.get_credential(profiles[index % 5])

    threads = [threading.Thread(target=call, args=(i,)) for i in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert runs(tmp_path / "runs") == 5


# -- refresh ahead ------------------------------------------------------------------------------


def test_refresh_window_is_a_tenth_of_lifetime_clamped() -> None:
    policy = RefreshPolicy()
    assert policy.refresh_at(0, 3600) == 3600 - 300  # capped at 5 min
    assert policy.refresh_at(0, 1000) == 1000 - 100  # 10 %
    assert policy.refresh_at(0, 120) == 120 - 30  # at least 30 s
    assert policy.refresh_at(0, 40) == 40 - 20  # never more than half the lifetime


def test_refresh_ahead_serves_the_cached_credential_and_refreshes_in_background(make_engine, tmp_path: Path) -> None:
    clock = Clock()
    count = tmp_path / "runs"
    engine = make_engine(exec_entry("fake", "--count-file", str(count), "--token-per-run", "--expires-in", "120"), clock=clock)
    first = engine.get_credential(profile())
    assert first.token == "fake-token-1"
    clock.offset = 100  # inside the last 30 s
    assert engine.get_credential(profile()) is first  # nobody waits
    wait_for(lambda: engine.get_credential(profile()).token == "fake-token-2", "the background refresh")
    assert runs(count) == 2


def test_failed_refresh_ahead_keeps_serving_the_valid_credential(make_engine, tmp_path: Path) -> None:
    clock = Clock()
    token_file = tmp_path / "token"
    token_file.write_text("file-token")
    engine = make_engine({"name": "fake", "type": "file", "options": {"tokenFile": str(token_file), "refreshInterval": "2m"}}, clock=clock)
    first = engine.get_credential(profile())
    token_file.unlink()  # the next read fails
    clock.offset = 100
    assert engine.get_credential(profile()) is first
    wait_for(lambda: sample(engine.metrics.registry, "cpcreds_credential_requests_total", provider="fake", result="provider_error") == 1, "the failed refresh")
    assert engine.get_credential(profile()) is first


# -- invalidate ---------------------------------------------------------------------------------


def test_invalidate_drops_the_current_credential(make_engine, tmp_path: Path) -> None:
    engine = make_engine(exec_entry("fake", "--count-file", str(tmp_path / "runs"), "--token-per-run"))
    first = engine.get_credential(profile())
    assert engine.invalidate(profile(), first) is True
    assert engine.get_credential(profile()).token == "fake-token-2"


def test_invalidate_with_a_stale_credential_keeps_the_newer_one(make_engine, tmp_path: Path) -> None:
    engine = make_engine(exec_entry("fake", "--count-file", str(tmp_path / "runs"), "--token-per-run"))
    first = engine.get_credential(profile())
    engine.invalidate(profile(), first)
    second = engine.get_credential(profile())
    assert engine.invalidate(profile(), first) is False  # a late 401 for the old token
    assert engine.get_credential(profile()) is second
    assert runs(tmp_path / "runs") == 2


# -- failures and backoff -----------------------------------------------------------------------


def test_failing_plugin_is_not_run_again_while_backing_off(make_engine, tmp_path: Path, metrics: CollectorRegistry) -> None:
    engine = make_engine(exec_entry("fake", "--count-file", str(tmp_path / "runs"), "--exit-code", "2", "--stderr", "no identity"))
    with pytest.raises(PluginExecutionError, match="no identity"):
        engine.get_credential(profile())
    started = time.monotonic()
    for _ in range(20):
        with pytest.raises(PluginExecutionError, match="exited with code 2: no identity"):
            engine.get_credential(profile())
    assert time.monotonic() - started < 0.5
    assert runs(tmp_path / "runs") == 1
    assert sample(metrics, "cpcreds_credential_cache_lookups_total", provider="fake", result="backoff") == 20


def test_success_after_backoff_resets_it(make_engine, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    engine = make_engine(
        {"name": "fake", "type": "file", "options": {"tokenFile": str(token_file)}}, backoff=BackoffPolicy(initial=0.0)
    )
    with pytest.raises(CredentialError, match="does not exist"):
        engine.get_credential(profile())
    token_file.write_text("now-here")
    assert engine.get_credential(profile()).token == "now-here"


def test_backoff_delay_grows_exponentially_and_is_capped() -> None:
    policy = BackoffPolicy(initial=1, maximum=10, factor=2, jitter=0)
    assert [policy.delay(n) for n in range(1, 6)] == [1, 2, 4, 8, 10]
    jittered = BackoffPolicy(initial=4, jitter=0.5)
    assert all(2 <= jittered.delay(1) <= 4 for _ in range(50))


def test_backoff_jitter_leaves_the_applications_random_sequence_alone() -> None:
    # An application that seeds the random module for itself gets the same sequence whatever the
    # engine's (or a fleet's) backoff and refresh jitter draw meanwhile.
    import random

    random.seed(20261202)
    expected = [random.random() for _ in range(3)]
    random.seed(20261202)
    policy = BackoffPolicy(initial=4, jitter=0.5)
    delays = [policy.delay(1) for _ in range(20)]
    assert [random.random() for _ in range(3)] == expected
    assert all(2 <= delay <= 4 for delay in delays) and len(set(delays)) > 1


def test_provider_bug_becomes_a_credential_error(make_engine) -> None:
    class Broken:
        def __init__(self, options: Any) -> None: ...

        def get_credential(self, plan: Any) -> Any:
            raise KeyError("oops")

    class Plugin:
        @hookimpl
        def cpcreds_register_providers(self, register: Any) -> None:
            register("broken", Broken)

    engine = make_engine({"name": "fake", "type": "broken"}, plugins=(Plugin(),))
    with pytest.raises(CredentialError, match="provider fake: KeyError"):
        engine.get_credential(profile())


def test_closed_engine_refuses_work(make_engine) -> None:
    engine = make_engine(exec_entry("fake"))
    engine.close()
    with pytest.raises(CredentialError, match="closed"):
        engine.get_credential(profile())


# -- metrics ------------------------------------------------------------------------------------


def test_metrics_count_exec_calls_requests_and_hits(make_engine, tmp_path: Path, metrics: CollectorRegistry) -> None:
    engine = make_engine(exec_entry("fake"), exec_entry("bad", "--exit-code", "3"))
    engine.get_credential(profile())
    engine.get_credential(profile())
    with pytest.raises(PluginExecutionError):
        engine.get_credential(profile(provider="bad"))
    assert sample(metrics, "rest_client_exec_plugin_call_total", code="0", call_status="no_error") == 1
    assert sample(metrics, "rest_client_exec_plugin_call_total", code="3", call_status="plugin_execution_error") == 1
    assert sample(metrics, "cpcreds_credential_requests_total", provider="fake", result="success") == 1
    assert sample(metrics, "cpcreds_credential_requests_total", provider="bad", result="plugin_execution_error") == 1
    assert sample(metrics, "cpcreds_credential_request_duration_seconds_count", provider="fake") == 1
    assert sample(metrics, "cpcreds_credential_cache_lookups_total", provider="fake", result="hit") == 1
    assert sample(metrics, "rest_client_exec_plugin_ttl_seconds") == float("inf")


def test_not_found_plugin_is_counted_as_client_go_does(make_engine, metrics: CollectorRegistry) -> None:
    engine = make_engine({"name": "fake", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "/nonexistent/plugin"}})
    with pytest.raises(CredentialError):
        engine.get_credential(profile())
    # client-go's failureExitCode: 1 for a plugin that could not be run.
    assert sample(metrics, "rest_client_exec_plugin_call_total", code="1", call_status="plugin_not_found_error") == 1


def test_certificate_metrics_track_ttl_and_rotation_age(make_engine, metrics: CollectorRegistry, pki, tmp_path: Path) -> None:
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    issued = pki.issue_client_cert("a", not_before=datetime.now(timezone.utc) - timedelta(hours=2))
    cert.write_text(issued.cert_pem)
    key.write_text(issued.key_pem)
    engine = make_engine(exec_entry("fake", "--no-token", "--cert", str(cert), "--key", str(key)))
    first = engine.get_credential(profile())
    ttl = sample(metrics, "rest_client_exec_plugin_ttl_seconds")
    assert 0 < ttl <= (issued.not_after - datetime.now(timezone.utc)).total_seconds() + 1
    rotated = pki.issue_client_cert("b")
    cert.write_text(rotated.cert_pem)
    key.write_text(rotated.key_pem)
    engine.invalidate(profile(), first)
    engine.get_credential(profile())
    assert sample(metrics, "rest_client_exec_plugin_certificate_rotation_age_count") == 1
    assert sample(metrics, "rest_client_exec_plugin_certificate_rotation_age_bucket", le="600.0") == 0
    assert sample(metrics, "rest_client_exec_plugin_certificate_rotation_age_bucket", le="14400.0") == 1


# -- secrets ------------------------------------------------------------------------------------


def test_secrets_appear_in_no_log_line_error_message_or_metric(make_engine, metrics: CollectorRegistry, tmp_path: Path) -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    configure_logging("debug", "json", stream=stream)
    try:
        cases = [
            exec_entry("p1", "--token", SECRET, "--api-version", "client.authentication.k8s.io/v1beta1"),
            exec_entry("p2", "--token", SECRET, "--kind", "Secret"),
            exec_entry("p3", "--exit-code", "1", "--stderr", f"failed; token={SECRET} Authorization: Bearer {SECRET}"),
            exec_entry("p4", "--raw", f'{{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": {{"token": "{SECRET}", "expirationTimestamp": "never"}}}}'),
            exec_entry("p5", "--hang", "--stderr", f"Bearer {SECRET}", timeout="1s"),
            exec_entry("ok", "--token", SECRET),
        ]
        engine = make_engine(*cases)
        messages = []
        for name in ("p1", "p2", "p3", "p4", "p5"):
            with pytest.raises(CredentialError) as info:
                engine.get_credential(profile(provider=name))
            messages.append(str(info.value))
            messages.append(repr(info.value))
        credential = engine.get_credential(profile(provider="ok"))
        messages += [repr(credential), str(credential)]
        logging.getLogger("cpcreds.test").warning("credential %s", credential)
        engine.resolve(profile(provider="ok"))
    finally:
        for handler in list(root.handlers):
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
    assert credential.token == SECRET
    assert stream.getvalue(), "the failures were logged"
    for text in (*messages, stream.getvalue(), generate_latest(metrics).decode()):
        assert SECRET not in text


# -- in-process providers: timeout and asyncio ----------------------------------------------------


class HangingProvider:
    def __init__(self, options: Any) -> None:
        self.release = threading.Event()

    def get_credential(self, plan: Any) -> Credential:
        self.release.wait(30)
        return Credential(token="too-late")


class AsyncProvider:
    def __init__(self, options: Any) -> None:
        self.sync_calls = self.async_calls = 0
        self.loops: list[Any] = []

    def get_credential(self, plan: Any) -> Credential:
        self.sync_calls += 1
        return Credential(token="from-thread")

    async def aget_credential(self, plan: Any) -> Credential:
        self.async_calls += 1
        self.loops.append(asyncio.get_running_loop())
        await asyncio.sleep(0)
        return Credential(token="from-event-loop")


class SlowPlugin:
    made: dict[str, Any] = {}

    @hookimpl
    def cpcreds_register_providers(self, register: Any) -> None:
        def remember(cls: Any) -> Any:
            def factory(options: Any) -> Any:
                SlowPlugin.made[cls.__name__] = cls(options)
                return SlowPlugin.made[cls.__name__]

            return factory

        register("hanging", remember(HangingProvider))
        register("async", remember(AsyncProvider))


def test_hung_in_process_provider_times_out_instead_of_hanging_callers(make_engine, metrics: CollectorRegistry) -> None:
    from cpcreds import ProviderTimeout

    engine = make_engine({"name": "fake", "type": "hanging", "timeout": "300ms"}, plugins=(SlowPlugin(),))
    started = time.monotonic()
    with pytest.raises(ProviderTimeout, match="provider fake: did not answer within 0.3s"):
        engine.get_credential(profile())
    assert time.monotonic() - started < 5
    assert sample(metrics, "cpcreds_credential_requests_total", provider="fake", result="provider_timeout") == 1
    SlowPlugin.made["HangingProvider"].release.set()


def test_async_provider_is_awaited_on_the_callers_event_loop(make_engine) -> None:
    engine = make_engine({"name": "fake", "type": "async"}, plugins=(SlowPlugin(),))

    async def main() -> tuple[list[Credential], Any]:
        results = await asyncio.gather(*(engine.aget_credential(profile()) for _ in range(10)))
        return results, asyncio.get_running_loop()

    results, loop = asyncio.run(main())
    provider = SlowPlugin.made["AsyncProvider"]
    assert {r.token for r in results} == {"from-event-loop"}
    assert provider.async_calls == 1 and provider.sync_calls == 0
    assert provider.loops == [loop]
