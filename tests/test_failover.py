"""Failover (``failover: true``): the next provider the config lists and the profile offers
answers when one fails; backoff stays per plan; refusals never fail over; one error names every
provider tried. Plugins are real executables."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes import client as kclient
from prometheus_client import CollectorRegistry

from cpcreds import (
    AllProvidersFailed,
    CredentialEngine,
    PluginExecutionError,
    PluginNotAllowed,
    PluginTimeout,
    ProfileError,
    ProviderConfig,
    ProviderRegistry,
    resolve,
)
from cpcreds.config.access import resolve_chain
from cpcreds.engine import BackoffPolicy
from cpcreds.logs import configure_logging
from cpcreds import Fleet as CredentialFleet
from cpcreds.fleet.inventory import ProfileFeed
from tests.fakes.builders import access_provider, cluster_profile, exec_config

SECRET = "tok-SECRET-f41c9"

#: A plugin whose health a test switches: it fails (exit 3, a secret on stderr) while the file
#: ``<folder>/<name>.down`` exists or its cluster's server contains "<name>-down"; else it answers
#: ``<name>-<run>``. Every run appends a line to ``<folder>/<name>.runs``.
SWITCH_PLUGIN = """#!{python}
import json, os, sys
name, folder = sys.argv[1], sys.argv[2]
runs_file = os.path.join(folder, name + ".runs")
with open(runs_file, "a") as handle:
    handle.write("run\\n")
info = json.loads(os.environ.get("KUBERNETES_EXEC_INFO") or "{{}}")
server = ((info.get("spec") or {{}}).get("cluster") or {{}}).get("server", "")
if os.path.exists(os.path.join(folder, name + ".down")) or name + "-down" in server:
    sys.stderr.write(name + " is down; token={secret}\\n")
    sys.exit(3)
with open(runs_file) as handle:
    runs = len(handle.readlines())
answer = {{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": {{"token": name + "-" + str(runs)}}}}
print(json.dumps(answer))
"""


class Fleet:
    """Switchable plugins in one folder, the configs and profiles that use them, and engines
    (closed after the test)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.script = folder / "switch-plugin"
        self.script.write_text(SWITCH_PLUGIN.format(python=sys.executable, secret=SECRET))
        self.script.chmod(0o755)
        self.engines: list[CredentialEngine] = []
        self.metrics = CollectorRegistry()

    def entry(self, name: str, failover: bool | None = None, timeout: str = "20s") -> dict[str, Any]:
        exec_config = {"apiVersion": "client.authentication.k8s.io/v1", "command": str(self.script), "args": [name, str(self.folder)], "provideClusterInfo": True}
        entry: dict[str, Any] = {"name": name, "execConfig": exec_config, "timeout": timeout}
        if failover is not None:
            entry["failover"] = failover
        return entry

    def config(self, *entries: dict[str, Any], failover: bool | None = True, **top: Any) -> ProviderConfig:
        document: dict[str, Any] = {"providers": list(entries), **top}
        if failover is not None:
            document["failover"] = failover
        return ProviderConfig.from_dict(document, source="failover-test.yaml")

    def engine(self, config: ProviderConfig, **kwargs: Any) -> CredentialEngine:
        kwargs.setdefault("prometheus_registry", self.metrics)
        engine = CredentialEngine(config, registry=ProviderRegistry(entry_points=False), **kwargs)
        self.engines.append(engine)
        return engine

    def down(self, name: str, down: bool = True) -> None:
        marker = self.folder / f"{name}.down"
        if down:
            marker.touch()
        else:
            marker.unlink()

    def runs(self, name: str) -> int:
        path = self.folder / f"{name}.runs"
        return len(path.read_text().splitlines()) if path.exists() else 0

    def failovers(self, source: str, target: str, reason: str) -> float:
        labels = {"from_provider": source, "to_provider": target, "reason": reason}
        return self.metrics.get_sample_value("cpcreds_failover_total", labels) or 0.0


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    made = Fleet(tmp_path)
    yield made
    for engine in made.engines:
        engine.close()


def profile(*names: str, server: str = "https://spoke.test", name: str = "c1", rv: str = "1") -> dict[str, Any]:
    """A profile offering ``names`` in that order (on one server), with uid and resourceVersion."""
    return cluster_profile(name, *(access_provider(n, server) for n in names), uid=f"uid-{name}", resource_version=rv)


def wait_for(condition: Any, what: str, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)  # polling an observable condition, bounded


# -- choosing the next provider -------------------------------------------------------------------


def test_without_failover_the_first_providers_failure_is_the_callers(fleet: Fleet) -> None:
    engine = fleet.engine(fleet.config(fleet.entry("a"), fleet.entry("b"), failover=None))
    fleet.down("a")
    with pytest.raises(PluginExecutionError, match="provider a: "):
        engine.get_credential(profile("a", "b"))
    assert fleet.runs("b") == 0


def test_failover_moves_to_the_next_provider_that_the_config_lists_and_the_profile_offers(fleet: Fleet) -> None:
    engine = fleet.engine(fleet.config(fleet.entry("a"), fleet.entry("b"), fleet.entry("c")))
    fleet.down("a")
    answer = engine.get_answer(profile("c", "a"))  # offers c and a; the config's order counts
    assert (answer.plan.provider, answer.credential.token) == ("c", "c-1")
    assert (fleet.runs("a"), fleet.runs("b"), fleet.runs("c")) == (1, 0, 1)
    assert fleet.failovers("a", "c", "plugin_execution_error") == 1


def test_failover_over_three_providers_past_a_failing_and_a_hanging_one(fleet: Fleet) -> None:
    hanging = {"name": "b", "execConfig": exec_config("--hang"), "timeout": "1s"}
    engine = fleet.engine(fleet.config(fleet.entry("a"), hanging, fleet.entry("c")))
    fleet.down("a")
    started = time.monotonic()
    answer = engine.get_answer(profile("a", "b", "c"))
    assert (answer.plan.provider, answer.credential.token) == ("c", "c-1")
    assert 1.0 <= time.monotonic() - started < 10
    assert fleet.failovers("a", "b", "plugin_execution_error") == 1
    assert fleet.failovers("b", "c", "plugin_timeout") == 1
    # The next call takes c's cached credential: a and b are backing off, neither runs again.
    again = time.monotonic()
    assert engine.get_answer(profile("a", "b", "c")).credential is answer.credential
    assert time.monotonic() - again < 0.5
    assert (fleet.runs("a"), fleet.runs("c")) == (1, 1)


def test_each_providers_own_setting_decides_whether_its_failure_moves_on(fleet: Fleet) -> None:
    # Top level off; a fails over, b (inheriting "off") does not: c is never tried.
    config = fleet.config(fleet.entry("a", failover=True), fleet.entry("b"), fleet.entry("c"), failover=False)
    engine = fleet.engine(config)
    fleet.down("a")
    fleet.down("b")
    with pytest.raises(AllProvidersFailed) as info:
        engine.get_credential(profile("a", "b", "c"))
    assert [name for name, _ in info.value.attempts] == ["a", "b"]
    assert fleet.runs("c") == 0
    # Top level on, but a says no: a's own error, and nothing else runs.
    other = fleet.engine(fleet.config(fleet.entry("a", failover=False), fleet.entry("c")))
    with pytest.raises(PluginExecutionError, match="provider a: "):
        other.get_credential(profile("a", "c", name="c2"))
    assert fleet.runs("c") == 0


def test_a_profile_offering_one_configured_provider_gets_that_providers_error(fleet: Fleet) -> None:
    engine = fleet.engine(fleet.config(fleet.entry("a"), fleet.entry("b")))
    fleet.down("a")
    with pytest.raises(PluginExecutionError, match="provider a: ") as info:
        engine.get_credential(profile("a"))
    assert not isinstance(info.value, AllProvidersFailed)


def test_a_fallback_whose_cluster_is_malformed_is_a_failure_failover_moves_past(fleet: Fleet) -> None:
    engine = fleet.engine(fleet.config(fleet.entry("a"), fleet.entry("b"), fleet.entry("c")))
    fleet.down("a")

    def broken(name: str, server: str) -> dict[str, Any]:  # b offered without a cluster
        return cluster_profile(name, access_provider("a", server), {"name": "b"}, access_provider("c", server), uid=name, resource_version="1")

    answer = engine.get_answer(broken("c1", "https://spoke.test"))
    assert answer.plan.provider == "c"
    assert fleet.failovers("b", "c", "profile_error") == 1
    with pytest.raises(AllProvidersFailed) as info:
        engine.get_credential(broken("c2", "https://c-down.test"))
    assert [(name, type(error)) for name, error in info.value.attempts] == [("a", PluginExecutionError), ("b", ProfileError), ("c", PluginExecutionError)]


# -- refusals ------------------------------------------------------------------------------------

def test_a_provider_refused_by_the_plugin_policy_never_fails_over(fleet: Fleet) -> None:
    # b runs the fake plugin through this interpreter, the only allowlisted command; a's script is not on the list.
    allowed = {"name": "b", "execConfig": exec_config("--token", "b-token")}
    policy = {"policyType": "Allowlist", "allowlist": [{"command": sys.executable}]}
    engine = fleet.engine(fleet.config(fleet.entry("a"), allowed, pluginPolicy=policy))
    with pytest.raises(PluginNotAllowed):
        engine.get_credential(profile("a", "b"))
    assert fleet.runs("a") == 0  # refused: nothing ran


def test_a_refused_fallback_stops_failover_with_the_refusal(fleet: Fleet) -> None:
    first = {"name": "first", "execConfig": exec_config("--exit-code", "3")}
    policy = {"policyType": "Allowlist", "allowlist": [{"command": sys.executable}]}
    engine = fleet.engine(fleet.config(first, fleet.entry("a"), fleet.entry("c"), pluginPolicy=policy))
    with pytest.raises(PluginNotAllowed):
        engine.get_credential(profile("first", "a", "c"))
    assert (fleet.runs("a"), fleet.runs("c")) == (0, 0)


# -- backoff stays per plan ----------------------------------------------------------------------


def test_a_provider_in_backoff_is_skipped_without_running_it(fleet: Fleet) -> None:
    engine = fleet.engine(fleet.config(fleet.entry("a"), fleet.entry("b")), backoff=BackoffPolicy(initial=30, jitter=0))
    fleet.down("a")
    tokens = {engine.get_credential(profile("a", "b")).token for _ in range(50)}
    assert tokens == {"b-1"}
    assert (fleet.runs("a"), fleet.runs("b")) == (1, 1)
    assert fleet.failovers("a", "b", "plugin_execution_error") == 1  # one failover, not fifty


def test_the_profile_goes_back_to_its_preferred_provider_once_it_answers_again(fleet: Fleet) -> None:
    engine = fleet.engine(fleet.config(fleet.entry("a"), fleet.entry("b")), backoff=BackoffPolicy(initial=0.05, maximum=0.05, jitter=0))
    fleet.down("a")
    assert engine.get_answer(profile("a", "b")).plan.provider == "b"
    fleet.down("a", False)
    # Callers keep getting b's credential without waiting while a is retried in the background.
    wait_for(lambda: engine.get_answer(profile("a", "b")).plan.provider == "a", "the profile to go back to a")
    assert engine.get_credential(profile("a", "b")).token == f"a-{fleet.runs('a')}"
    assert fleet.runs("b") == 1
    assert fleet.failovers("a", "b", "plugin_execution_error") == 1


def test_one_profiles_failover_does_not_poison_another_profiles_plan_of_the_same_provider(fleet: Fleet) -> None:
    engine = fleet.engine(fleet.config(fleet.entry("a"), fleet.entry("b")), backoff=BackoffPolicy(initial=30, jitter=0))
    # Provider a fails for clusters on "a-down" servers only; its plans are per cluster (provideClusterInfo).
    assert engine.get_answer(profile("a", "b", server="https://a-down.test", name="p1")).plan.provider == "b"
    assert engine.get_answer(profile("a", "b", server="https://up.test", name="p2")).plan.provider == "a"
    # A profile sharing p1's plan of a, offering nothing else: the shared backoff answers at once.
    with pytest.raises(PluginExecutionError, match="provider a: "):
        engine.get_credential(profile("a", server="https://a-down.test", name="p3"))
    assert fleet.runs("a") == 2


# -- when every provider fails -------------------------------------------------------------------


def test_when_all_fail_one_line_names_every_provider_tried_and_why_without_secrets(fleet: Fleet) -> None:
    hanging = {"name": "b", "execConfig": exec_config("--hang", "--stderr", f"Bearer {SECRET}"), "timeout": "1s"}
    engine = fleet.engine(fleet.config(fleet.entry("a"), hanging), backoff=BackoffPolicy(initial=30, jitter=0))
    fleet.down("a")
    with pytest.raises(AllProvidersFailed) as info:
        engine.get_credential(profile("a", "b"))
    error = info.value
    message = str(error)
    assert "\n" not in message and SECRET not in message and SECRET not in repr(error)
    assert message.startswith("ClusterProfile fleet-system/c1: every provider tried failed: a (")
    assert "exited with code 3" in message and "; b (" in message
    assert [(name, type(e)) for name, e in error.attempts] == [("a", PluginExecutionError), ("b", PluginTimeout)]
    assert error.__cause__ is None and error.__context__ is None
    assert error.profile == "fleet-system/c1" and error.provider is None
    # Both backing off: the next caller gets the same account at once, nothing runs.
    started = time.monotonic()
    with pytest.raises(AllProvidersFailed):
        engine.get_credential(profile("a", "b"))
    assert time.monotonic() - started < 0.5
    assert fleet.runs("a") == 1


def test_each_failover_is_logged_once_as_a_redacted_warning(fleet: Fleet) -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    configure_logging("debug", "json", stream=stream)
    try:
        engine = fleet.engine(fleet.config(fleet.entry("a"), fleet.entry("b")), backoff=BackoffPolicy(initial=30, jitter=0))
        fleet.down("a")
        for _ in range(20):
            engine.get_credential(profile("a", "b"))
    finally:
        for handler in list(root.handlers):
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
    records = [json.loads(line) for line in stream.getvalue().splitlines()]
    failovers = [r for r in records if r.get("event") == "failing over to the next provider"]
    assert len(failovers) == 1
    assert failovers[0]["level"] == "warning"
    assert (failovers[0]["from_provider"], failovers[0]["to_provider"], failovers[0]["reason"]) == ("a", "b", "plugin_execution_error")
    assert SECRET not in stream.getvalue()


# -- asyncio -------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_async_failover_and_a_cancelled_caller_whose_wait_is_its_own(fleet: Fleet) -> None:
    gate, count = fleet.folder / "gate", fleet.folder / "gated.runs"
    gated = {"name": "a", "execConfig": exec_config("--count-file", str(count), "--wait-for", str(gate), "--exit-code", "3")}
    engine = fleet.engine(fleet.config(gated, fleet.entry("b")), backoff=BackoffPolicy(initial=30, jitter=0))
    impatient = asyncio.create_task(engine.aget_answer(profile("a", "b")))
    await asyncio.to_thread(wait_for, count.exists, "the gated plugin to start")
    patient = asyncio.create_task(engine.aget_answer(profile("a", "b")))
    await asyncio.sleep(0)  # let the patient caller join the flight before the impatient one leaves
    impatient.cancel()
    gate.touch()
    answer = await patient
    assert (answer.plan.provider, answer.credential.token) == ("b", "b-1")
    with pytest.raises(asyncio.CancelledError):
        await impatient
    assert (await engine.aget_credential(profile("a", "b"))).token == "b-1"
    assert len(count.read_text().splitlines()) == 1 and fleet.runs("b") == 1


@pytest.mark.asyncio
async def test_async_all_failed(fleet: Fleet) -> None:
    engine = fleet.engine(fleet.config(fleet.entry("a"), fleet.entry("b")))
    fleet.down("a")
    fleet.down("b")
    with pytest.raises(AllProvidersFailed) as info:
        await engine.aget_credential(profile("a", "b"))
    assert [name for name, _ in info.value.attempts] == ["a", "b"]


# -- adapters ------------------------------------------------------------------------------------


def test_api_client_uses_the_answering_providers_endpoint_and_refreshes_its_credential_after_a_401(fleet: Fleet, spoke: Any) -> None:
    count = fleet.folder / "b-plugin.runs"
    b = {"name": "b", "execConfig": exec_config("--token", "b", "--token-per-run", "--count-file", str(count))}
    engine = fleet.engine(fleet.config(fleet.entry("a"), b), backoff=BackoffPolicy(initial=30, jitter=0))
    fleet.down("a")
    spoke.accept_token("b-2")  # the first credential b answers is rejected, the second accepted
    # a names an address nobody listens on: only b's endpoint must ever be contacted.
    unreachable = access_provider("a", "https://127.0.0.1:9")
    through_b = access_provider("b", spoke.url, ca_pem=spoke.ca_pem)
    with engine.api_client(cluster_profile("c1", unreachable, through_b, uid="u", resource_version="1")) as api:
        kclient.CoreV1Api(api).list_namespace()
    assert [(r.status, r.token) for r in spoke.requests] == [(401, "b-1"), (200, "b-2")]
    assert fleet.runs("a") == 1 and len(count.read_text().splitlines()) == 2


def test_the_fleet_shows_which_provider_answered(fleet: Fleet) -> None:
    engine = fleet.engine(fleet.config(fleet.entry("a"), fleet.entry("b")), backoff=BackoffPolicy(initial=30, jitter=0))
    fleet.down("a")
    with CredentialFleet(engine, feed=ProfileFeed([profile("a", "b")]), require_healthy=False) as fleet_of_one:
        assert fleet_of_one.wait_synced(20)
        (cluster,) = fleet_of_one.clusters.values()
        assert (cluster.provider, cluster.answered_by, cluster.state) == ("a", "b", "ready")


# -- the chain, for any config and profile -------------------------------------------------------

_names = st.lists(st.sampled_from("abcde"), min_size=1, max_size=5, unique=True)


@settings(max_examples=200, deadline=None)
@given(configured=_names, offered=_names, top=st.booleans(), own=st.lists(st.sampled_from([None, True, False]), min_size=5, max_size=5))
def test_resolve_chain_follows_config_order_and_each_providers_failover_setting(configured: list[str], offered: list[str], top: bool, own: list[bool | None]) -> None:
    entries = []
    for index, name in enumerate(configured):
        entry: dict[str, Any] = {"name": name, "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "plugin"}}
        if own[index] is not None:
            entry["failover"] = own[index]
        entries.append(entry)
    config = ProviderConfig.from_dict({"providers": entries, "failover": top})
    the_profile = cluster_profile("c", *(access_provider(name) for name in offered))
    if not set(configured) & set(offered):
        return
    chain = resolve_chain(config, the_profile)
    assert chain[0].plan == resolve(config, the_profile)
    expected = [name for name in configured if name in offered]
    cut = next((i for i, name in enumerate(expected) if not config.fails_over(name)), len(expected) - 1)
    assert [candidate.provider for candidate in chain] == expected[: cut + 1]
    assert all(candidate.plan is not None and candidate.plan.provider == candidate.provider for candidate in chain)


def test_resolve_shows_what_failover_would_try_next(tmp_path: Path) -> None:
    import yaml

    from tests.test_cli import run_cli

    config = {
        "failover": True,
        "providers": [
            {"name": "a", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "/bin/echo"}},
            {"name": "b", "type": "file", "options": {"tokenFile": str(tmp_path / "token")}},
            {"name": "c", "type": "file", "options": {"tokenFile": str(tmp_path / "token")}},
        ],
    }
    profile = {
        "metadata": {"name": "p", "namespace": "ns"},
        "status": {"accessProviders": [
            {"name": "a", "cluster": {"server": "https://a.test"}},
            {"name": "b", "cluster": {"server": "https://b.test"}},
            {"name": "c"},  # no cluster: in the chain with its error
        ]},
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "profile.yaml").write_text(yaml.safe_dump(profile))
    result = run_cli("resolve", "--config", "config.yaml", "--profile", "profile.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["provider"] == "a"
    assert [step["provider"] for step in shown["failover"]] == ["b", "c"]
    assert shown["failover"][0]["cluster"] == {"server": "https://b.test"}
    assert "error" in shown["failover"][1] and "cluster" not in shown["failover"][1]
    config["failover"] = False
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    alone = json.loads(run_cli("resolve", "--config", "config.yaml", "--profile", "profile.yaml", cwd=tmp_path).stdout)
    assert "failover" not in alone
