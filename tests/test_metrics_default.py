"""Where the metrics show (issue 29): prometheus_client's default ``REGISTRY`` for an engine or a
fleet given no registry, whatever the import order, as client-go registers its exec metrics
with its global registry; a private registry when one is given; one set of series per registry,
shared by the engines and fleets that use it.

The import-order cases run in a fresh interpreter: what matters is what the process had imported
when the engine was built.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from cpcreds import CredentialEngine, Fleet, ProfileFeed, ProviderConfig, ProviderRegistry
from tests.fakes import mint

TOKEN_PLUGIN = "#!/bin/sh\nprintf '%s' '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"t\"}}'\n"
PROFILE = {"metadata": {"name": "c"}, "status": {"accessProviders": [{"name": "p", "cluster": {"server": "https://c.test"}}]}}
#: The KEP-541 and KEP-5339 series an exec fetch and a cache hit write.
SERIES = (
    ("rest_client_exec_plugin_call_total", {"code": "0", "call_status": "no_error"}),
    ("cpcreds_credential_requests_total", {"provider": "p", "result": "success"}),
    ("cpcreds_credential_request_duration_seconds_count", {"provider": "p"}),
    ("cpcreds_credential_cache_lookups_total", {"provider": "p", "result": "hit"}),
)


def plugin(tmp_path: Path) -> str:
    path = tmp_path / "plugin.sh"
    path.write_text(TOKEN_PLUGIN)
    path.chmod(0o755)
    return str(path)


def exec_config(command: str) -> ProviderConfig:
    return ProviderConfig.from_dict({"providers": [{"name": "p", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": command}}]})


def in_a_fresh_process(tmp_path: Path, body: str) -> dict:
    """Run ``body`` after defining ``engine()`` (no registry argument), ``PROFILE`` and
    ``series()`` (the SERIES read from ``prometheus_client.REGISTRY``); its last line of output
    is JSON."""
    code = textwrap.dedent(
        f"""
        import json, sys
        import cpcreds
        PROFILE = {PROFILE!r}
        def engine():
            return cpcreds.CredentialEngine(cpcreds.ProviderConfig.from_dict(
                {{"providers": [{{"name": "p", "execConfig": {{"apiVersion": "client.authentication.k8s.io/v1", "command": {plugin(tmp_path)!r}}}}}]}}
            ))
        def series():
            from prometheus_client import REGISTRY
            return [REGISTRY.get_sample_value(name, labels) for name, labels in {SERIES!r}]
        """
    ) + textwrap.dedent(body)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def test_an_engine_built_before_prometheus_client_is_imported_shows_in_the_default_registry(tmp_path: Path) -> None:
    shown = in_a_fresh_process(
        tmp_path,
        """
        loaded_before = "prometheus_client" in sys.modules
        e = engine()
        e.get_credential(PROFILE)
        e.get_credential(PROFILE)  # a hit
        import prometheus_client  # only now, as a program adding /metrics later would
        text = prometheus_client.generate_latest().decode()
        print(json.dumps({"loaded_before": loaded_before, "series": series(), "in_text": "rest_client_exec_plugin_call_total{" in text}))
        """,
    )
    assert shown == {"loaded_before": False, "series": [1.0, 1.0, 1.0, 1.0], "in_text": True}


def test_an_engine_built_after_prometheus_client_is_imported_shows_in_the_default_registry(tmp_path: Path) -> None:
    shown = in_a_fresh_process(
        tmp_path,
        """
        import prometheus_client
        e = engine()
        e.get_credential(PROFILE)
        e.get_credential(PROFILE)
        print(json.dumps({"series": series()}))
        """,
    )
    assert shown == {"series": [1.0, 1.0, 1.0, 1.0]}


def test_two_engines_on_the_default_registry_share_its_series_and_one_closing_leaves_them(tmp_path: Path) -> None:
    shown = in_a_fresh_process(
        tmp_path,
        """
        first, second = engine(), engine()  # no "Duplicated timeseries"
        first.get_credential(PROFILE)
        second.get_credential(PROFILE)
        second.get_credential(PROFILE)
        first.close()  # its counts stay; the second engine's series are still there
        second.get_credential(PROFILE)
        print(json.dumps({"series": series()}))
        """,
    )
    assert shown == {"series": [2.0, 2.0, 2.0, 2.0]}


def test_the_default_registry_holds_every_engine_metric_the_docs_list(tmp_path: Path) -> None:
    shown = in_a_fresh_process(
        tmp_path,
        """
        e = engine()
        from prometheus_client import REGISTRY
        names = sorted({metric.name for metric in REGISTRY.collect()})
        print(json.dumps({"names": names}))
        """,
    )
    assert set(shown["names"]) >= {
        "rest_client_exec_plugin_call",
        "rest_client_exec_plugin_ttl_seconds",
        "rest_client_exec_plugin_certificate_rotation_age",
        "cpcreds_credential_requests",
        "cpcreds_credential_request_duration_seconds",
        "cpcreds_credential_cache_lookups",
        "cpcreds_credential_cache_entries",
        "rest_client_exec_plugin_policy_call",
        "cpcreds_plugin_policy",
        "cpcreds_failover",
    }


def test_a_private_registry_holds_the_engines_series_and_the_default_one_does_not_count_them(tmp_path: Path) -> None:
    from prometheus_client import REGISTRY

    labels = {"provider": "p", "result": "success"}
    before = REGISTRY.get_sample_value("cpcreds_credential_requests_total", labels)
    registry = CollectorRegistry()
    with CredentialEngine(exec_config(plugin(tmp_path)), prometheus_registry=registry) as engine:
        engine.get_credential(PROFILE)
    assert registry.get_sample_value("cpcreds_credential_requests_total", labels) == 1.0
    assert REGISTRY.get_sample_value("cpcreds_credential_requests_total", labels) == before


def test_engines_given_one_private_registry_add_up(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    engines = [CredentialEngine(exec_config(plugin(tmp_path)), prometheus_registry=registry) for _ in range(2)]
    for engine in engines:
        engine.get_credential(PROFILE)
    engines[0].close()
    assert registry.get_sample_value("cpcreds_credential_requests_total", {"provider": "p", "result": "success"}) == 2.0
    assert registry.get_sample_value("cpcreds_credential_cache_entries") == 1.0  # the open engine's entry
    engines[1].close()
    assert registry.get_sample_value("cpcreds_credential_cache_entries") == 0.0


def test_a_registry_already_holding_one_of_the_names_is_a_config_error_and_keeps_nothing_of_ours() -> None:
    from prometheus_client import Counter

    from cpcreds import ConfigError

    registry = CollectorRegistry()
    Counter("cpcreds_failover_total", "someone else's", registry=registry)
    with pytest.raises(ConfigError, match="prometheus_registry"):
        CredentialEngine(ProviderConfig.from_dict({"providers": []}), prometheus_registry=registry)
    assert "rest_client_exec_plugin_call_total" not in generate_latest(registry).decode()


def test_register_is_kept_for_programs_that_call_it_and_refuses_a_registry_with_metrics_of_its_own() -> None:
    import cpcreds.metrics

    cpcreds.metrics.register()  # nothing to do: the default metrics are in REGISTRY already
    registry = CollectorRegistry()
    CredentialEngine(ProviderConfig.from_dict({"providers": []}), prometheus_registry=registry).close()
    with pytest.raises(ValueError, match="already holds cpcreds metrics"):
        cpcreds.metrics.register(registry)


# -- the fleet's series --------------------------------------------------------------------------------


def mint_profile(name: str) -> dict:
    return {"metadata": {"name": name, "namespace": "fleet-system"}, "status": {"accessProviders": [{"name": "mint", "cluster": {"server": f"https://{name}.test"}}]}}


def mint_engine(registry: CollectorRegistry | None = None) -> CredentialEngine:
    config = ProviderConfig.from_dict({"providers": [{"name": "mint", "type": "mint"}]})
    return CredentialEngine(config, registry=ProviderRegistry(entry_points=False, plugins=(mint,)), prometheus_registry=registry)


def test_two_fleets_on_one_registry_add_up_and_a_closed_one_leaves_the_sums() -> None:
    registry = CollectorRegistry()
    fleets = [
        Fleet(mint_engine(registry), feed=ProfileFeed([mint_profile(f"{side}-{i}") for i in range(count)]), require_healthy=False, prometheus_registry=registry).start()
        for side, count in (("a", 2), ("b", 3))
    ]
    try:
        assert all(fleet.wait_synced(20) for fleet in fleets)
        assert registry.get_sample_value("cpcreds_fleet_engaged_clusters") == 5.0
        assert registry.get_sample_value("cpcreds_fleet_clusters", {"state": "ready"}) == 5.0
        fleets[1].close()
        assert registry.get_sample_value("cpcreds_fleet_engaged_clusters") == 2.0
    finally:
        for fleet in fleets:
            fleet.close()
            fleet.engine.close()


def test_a_fleet_given_no_registry_shows_in_the_default_one(tmp_path: Path) -> None:
    shown = in_a_fresh_process(
        tmp_path,
        """
        fleet = cpcreds.Fleet(engine(), feed=cpcreds.ProfileFeed([PROFILE]), require_healthy=False).start()
        assert fleet.wait_synced(20)
        from prometheus_client import REGISTRY
        engaged = REGISTRY.get_sample_value("cpcreds_fleet_engaged_clusters")
        fleet.close()
        print(json.dumps({"engaged": engaged, "after_close": REGISTRY.get_sample_value("cpcreds_fleet_engaged_clusters")}))
        """,
    )
    assert shown == {"engaged": 1.0, "after_close": 0.0}
