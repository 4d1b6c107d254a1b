"""Engines built without ``prometheus_registry`` (issue 19): counting needs no prometheus_client,
and nothing counted is lost when the application shows the metrics later.

Each case runs in a fresh interpreter, since what matters is what the process had imported when
the engine was built.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TOKEN_PLUGIN = "#!/bin/sh\nprintf '%s' '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"t\"}}'\n"


def run(tmp_path: Path, body: str) -> dict:
    plugin = tmp_path / "plugin.sh"
    plugin.write_text(TOKEN_PLUGIN)
    plugin.chmod(0o755)
    code = textwrap.dedent(
        f"""
        import json, sys
        import cpcreds
        def engine():
            config = cpcreds.ProviderConfig.from_dict(
                {{"providers": [{{"name": "p", "execConfig": {{"apiVersion": "client.authentication.k8s.io/v1", "command": {str(plugin)!r}}}}}]}}
            )
            return cpcreds.CredentialEngine(config)
        PROFILE = {{"metadata": {{"name": "c"}}, "status": {{"accessProviders": [{{"name": "p", "cluster": {{"server": "https://c.test"}}}}]}}}}
        def requests():
            from prometheus_client import REGISTRY
            return REGISTRY.get_sample_value("cpcreds_credential_requests_total", {{"provider": "p", "result": "success"}})
        """
    ) + textwrap.dedent(body)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def test_counts_made_before_register_are_shown_after_it(tmp_path: Path) -> None:
    shown = run(
        tmp_path,
        """
        e = engine()
        e.get_credential(PROFILE)
        loaded_while_counting = "prometheus_client" in sys.modules
        import cpcreds.metrics
        before = requests()  # prometheus_client now imported, nothing registered yet
        cpcreds.metrics.register()
        cpcreds.metrics.register()  # idempotent
        print(json.dumps({"loaded": loaded_while_counting, "before": before, "after": requests()}))
        """,
    )
    assert shown == {"loaded": False, "before": None, "after": 1.0}


def test_an_engine_built_after_prometheus_client_is_imported_shows_at_once(tmp_path: Path) -> None:
    shown = run(
        tmp_path,
        """
        import prometheus_client
        e = engine()
        e.get_credential(PROFILE)
        e2 = engine()  # a second engine adds to the same default metrics
        e2.get_credential(PROFILE)
        print(json.dumps({"after": requests()}))
        """,
    )
    assert shown == {"after": 2.0}


def test_register_refuses_a_registry_with_metrics_of_its_own() -> None:
    from prometheus_client import CollectorRegistry

    import cpcreds.metrics
    from cpcreds import CredentialEngine, ProviderConfig

    registry = CollectorRegistry()
    CredentialEngine(ProviderConfig.from_dict({"providers": []}), prometheus_registry=registry).close()
    with pytest.raises(ValueError, match="already holds cpcreds metrics"):
        cpcreds.metrics.register(registry)
