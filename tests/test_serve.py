"""cpcreds serve, in-process: inventory from a folder, credentials kept warm through the engine,
the HTTP endpoints, kubeconfigs, reload. (Signals and the real command: test_serve_process.py.)"""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from cpcreds.errors import ConfigError
from cpcreds.fleet.inventory import DirectorySource
from cpcreds.serve.kubeconfigs import file_stem
from cpcreds.serve.settings import ServeSettings
from tests.fakes import mint
from tests.fakes.builders import access_provider, cluster_profile
from tests.serve_harness import write_profiles

MINT = {"name": "mint", "type": "mint", "options": {"lifetime": 3600}}


def mint_profile(name: str, **extension: Any) -> dict[str, Any]:
    return cluster_profile(name, access_provider("mint", f"https://{name}.test:6443", exec_extension={"clusterName": name, **extension}))


# -- the directory source --------------------------------------------------------------------------


def test_directory_source_reports_added_changed_and_removed_files(tmp_path: Path) -> None:
    write_profiles(tmp_path, {"a.yaml": mint_profile("a"), "b.json": json.dumps(mint_profile("b")), ".hidden.yaml": mint_profile("h"), "notes.txt": "x"})
    source = DirectorySource(tmp_path)
    first = source.scan()
    assert set(first.upserts) == {"fleet-system/a", "fleet-system/b"} and not first.deletes
    assert not source.scan()  # nothing changed: nothing reported
    write_profiles(tmp_path, {"a.yaml": mint_profile("a", extra="1")})
    os.utime(tmp_path / "a.yaml", ns=(1, time.time_ns() + 10**9))  # a new mtime even on a coarse clock
    (tmp_path / "b.json").unlink()
    second = source.scan()
    assert set(second.upserts) == {"fleet-system/a"} and second.deletes == {"fleet-system/b"}


def test_a_quick_scan_reads_files_added_or_renamed_into_place_and_leaves_in_place_edits_to_a_full_one(tmp_path: Path) -> None:
    write_profiles(tmp_path, {"a.yaml": mint_profile("a"), "b.yaml": mint_profile("b")})
    source = DirectorySource(tmp_path)
    source.scan()
    write_profiles(tmp_path, {"c.yaml": mint_profile("c")})  # added
    (tmp_path / "new-a.yaml").write_text(yaml.safe_dump(mint_profile("a", extra="renamed")))
    os.replace(tmp_path / "new-a.yaml", tmp_path / "a.yaml")  # saved as editors do: another inode
    (tmp_path / "b.yaml").write_text(yaml.safe_dump(mint_profile("b", extra="in place")))
    os.utime(tmp_path / "b.yaml", ns=(1, time.time_ns() + 10**9))
    quick = source.scan(full=False)
    assert set(quick.upserts) == {"fleet-system/a", "fleet-system/c"}
    assert quick.upserts["fleet-system/a"][0]["status"]["accessProviders"][0]["cluster"]["extensions"][0]["extension"]["extra"] == "renamed"
    assert set(source.scan().upserts) == {"fleet-system/b"}  # the full scan stats every file


def test_directory_source_keeps_a_broken_files_profiles_and_reports_it(tmp_path: Path) -> None:
    write_profiles(tmp_path, {"a.yaml": mint_profile("a")})
    source = DirectorySource(tmp_path)
    source.scan()
    (tmp_path / "a.yaml").write_text("metadata: [unclosed\n")
    os.utime(tmp_path / "a.yaml", ns=(1, time.time_ns() + 10**9))
    change = source.scan()
    assert not change.upserts and not change.deletes  # the cluster keeps its credential
    assert list(change.problems) == [str(tmp_path / "a.yaml")]
    assert "unclosed" not in next(iter(change.problems.values()))  # never quotes the file
    write_profiles(tmp_path, {"a.yaml": mint_profile("a")})
    os.utime(tmp_path / "a.yaml", ns=(1, time.time_ns() + 2 * 10**9))
    assert source.scan().problems == {str(tmp_path / "a.yaml"): ""}  # fixed: the problem clears


def test_directory_source_two_files_one_profile_first_file_wins(tmp_path: Path) -> None:
    write_profiles(tmp_path, {"1.yaml": mint_profile("a", v="1"), "2.yaml": mint_profile("a", v="2")})
    change = DirectorySource(tmp_path).scan()
    profile, origin = change.upserts["fleet-system/a"]
    assert origin.endswith("1.yaml")


# -- settings --------------------------------------------------------------------------------------


def test_settings_flags_beat_environment_beat_the_config_section(monkeypatch: pytest.MonkeyPatch) -> None:
    section = {"concurrency": 3, "scanInterval": "2s", "kubeconfigDir": "/from/file"}
    assert ServeSettings.load({}, section).concurrency == 3
    monkeypatch.setenv("CPCREDS_CONCURRENCY", "5")
    monkeypatch.setenv("CPCREDS_NAMESPACES", "a, b")
    settings = ServeSettings.load({"scan_interval": "250ms"}, section)
    assert (settings.concurrency, settings.scan_interval, settings.namespaces) == (5, 0.25, ["a", "b"])
    assert ServeSettings.load({"concurrency": "9"}, section).concurrency == 9
    assert settings.kubeconfig_dir == Path("/from/file")


@pytest.mark.parametrize(
    ("flags", "section", "message"),
    [
        ({}, {"concurency": 3}, "--concurency / CPCREDS_CONCURENCY / serve.concurency: is not a known field"),
        ({"listen": "9733"}, {}, "--listen / CPCREDS_LISTEN / serve.listen: must be HOST:PORT"),
        ({"concurrency": "0"}, {}, "--concurrency / CPCREDS_CONCURRENCY / serve.concurrency: must be at least 1"),
        ({"in_cluster": True}, {"profilesDir": "/x"}, "choose one inventory source, not profilesDir and inCluster"),
        ({"probe_path": "version"}, {}, "must be an absolute URL path"),
    ],
)
def test_settings_errors_name_the_setting_in_every_spelling(flags: dict[str, Any], section: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match="serve settings") as info:
        ServeSettings.load(flags, section)
    assert message in str(info.value)


# -- keeping credentials warm ----------------------------------------------------------------------


def test_serve_fetches_every_profile_then_is_ready(start_serve: Any) -> None:
    profiles = {f"c{i}.yaml": mint_profile(f"ready-{i}") for i in range(20)}
    running = start_serve([MINT], profiles)
    running.wait_ready()
    assert running.get("/readyz")[0] == 200
    clusters = running.clusters()
    assert len(clusters) == 20
    assert {c["state"] for c in clusters.values()} == {"ready"}
    first = clusters["fleet-system/ready-0"]
    assert first["provider"] == "mint" and first["expirationTimestamp"] and first["lastSuccess"]
    assert all(mint.calls[f"ready-{i}"] == 1 for i in range(20))
    status, _, body = running.get("/v1/clusters/fleet-system/ready-3")
    assert status == 200 and json.loads(body)["key"] == "fleet-system/ready-3"
    assert running.get("/v1/clusters/fleet-system/nope")[0] == 404


def test_no_endpoint_shows_a_token(start_serve: Any) -> None:
    running = start_serve([MINT], {"a.yaml": mint_profile("tokenless", token="s3cr3t-token-value")})
    running.wait_ready()
    for path in ("/", "/v1/clusters", "/metrics"):
        status, _, body = running.get(path)
        assert status == 200
        assert "s3cr3t-token-value" not in body


def test_an_added_profile_gets_its_credential_within_a_second(start_serve: Any, tmp_path: Path) -> None:
    running = start_serve([MINT], {"a.yaml": mint_profile("first")})
    running.wait_ready()
    started = time.monotonic()
    write_profiles(tmp_path / "profiles", {"b.yaml": mint_profile("added")})
    running.until(lambda: running.clusters().get("fleet-system/added", {}).get("state") == "ready", what="the added profile")
    assert time.monotonic() - started < 1.0


def test_a_deleted_profile_is_dropped_with_its_kubeconfig(start_serve: Any, tmp_path: Path) -> None:
    kubeconfigs = tmp_path / "kubeconfigs"
    running = start_serve([MINT], {"a.yaml": mint_profile("stays"), "b.yaml": mint_profile("goes")}, kubeconfig_dir=str(kubeconfigs))
    running.wait_ready()
    single = kubeconfigs / f"{file_stem('fleet-system/goes')}.yaml"
    running.until(lambda: (kubeconfigs / "kubeconfig").exists(), what="the merged kubeconfig")
    assert single.exists()
    (tmp_path / "profiles" / "b.yaml").unlink()
    running.until(lambda: "fleet-system/goes" not in running.clusters(), what="the deletion")
    assert not single.exists()
    running.until(lambda: "goes" not in (kubeconfigs / "kubeconfig").read_text(), what="the merged kubeconfig to drop it")
    assert "stays" in (kubeconfigs / "kubeconfig").read_text()


def test_kubeconfigs_are_private_and_run_cpcreds_for_the_profile(start_serve: Any, tmp_path: Path) -> None:
    kubeconfigs = tmp_path / "kubeconfigs"
    running = start_serve([MINT], {"a.yaml": mint_profile("kc")}, kubeconfig_dir=str(kubeconfigs))
    running.wait_ready()
    running.until(lambda: (kubeconfigs / "kubeconfig").exists(), what="the merged kubeconfig")
    for path in [kubeconfigs / "kubeconfig", *kubeconfigs.glob("*.yaml"), *(kubeconfigs / "profiles").iterdir()]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert stat.S_IMODE(kubeconfigs.stat().st_mode) == 0o700
    document = yaml.safe_load((kubeconfigs / "kubeconfig").read_text())
    user = document["users"][0]["user"]["exec"]
    assert user["args"][:3] == ["-m", "cpcreds", "get-credential"]
    assert document["clusters"][0]["cluster"]["server"] == "https://kc.test:6443"
    assert "token" not in json.dumps(document)


def test_a_failing_profile_is_retried_with_backoff_and_shows_its_error(start_serve: Any) -> None:
    # A cluster name of this test's own: mint counts calls per name across the whole process.
    running = start_serve([MINT], {"a.yaml": mint_profile("backs-off", fail=True), "b.yaml": mint_profile("fine")})
    running.wait_ready()  # a failure is a first fetch done: readiness does not wait for success
    clusters = running.clusters()
    assert clusters["fleet-system/fine"]["state"] == "ready"
    broken = clusters["fleet-system/backs-off"]
    assert broken["state"] == "failing" and "mint refuses cluster backs-off" in broken["lastError"]
    assert broken["consecutiveFailures"] == 1 and broken["nextRefresh"]
    assert mint.calls["backs-off"] == 1  # backed off, not retried in a loop


def test_a_profile_that_failed_over_shows_which_provider_answered(start_serve: Any) -> None:
    first = {"name": "first", "type": "mint", "failover": True}
    second = {"name": "second", "type": "mint"}
    offered = cluster_profile(
        "both",
        access_provider("first", "https://both.test:6443", exec_extension={"clusterName": "both-first", "fail": True}),
        access_provider("second", "https://both.test:6443", exec_extension={"clusterName": "both-second"}),
    )
    running = start_serve([first, second], {"a.yaml": offered})
    running.wait_ready()
    row = running.clusters()["fleet-system/both"]
    assert (row["provider"], row["answeredBy"], row["state"]) == ("first", "second", "ready")


def test_credentials_are_refreshed_ahead_of_expiry(start_serve: Any) -> None:
    short = {"name": "mint", "type": "mint", "options": {"lifetime": 2}}
    running = start_serve([short], {"a.yaml": mint_profile("short-lived")})
    running.wait_ready()
    running.until(lambda: mint.calls["short-lived"] >= 2, timeout=10, what="a refresh")
    running.until(lambda: running.clusters()["fleet-system/short-lived"]["state"] == "ready", what="the refreshed state")


def test_unmatched_and_invalid_profiles_are_shown_not_fatal(start_serve: Any) -> None:
    other = cluster_profile("elsewhere", access_provider("nobody-configured"))
    running = start_serve([MINT], {"a.yaml": other, "b.yaml": mint_profile("ok")})
    running.wait_ready()
    clusters = running.clusters()
    assert clusters["fleet-system/elsewhere"]["state"] == "unmatched"
    assert "no configured provider matches" in clusters["fleet-system/elsewhere"]["lastError"]
    assert clusters["fleet-system/ok"]["state"] == "ready"


def test_metrics_show_inventory_and_per_profile_expiry(start_serve: Any) -> None:
    running = start_serve([MINT], {"a.yaml": mint_profile("m1"), "b.yaml": mint_profile("m2", fail=True)})
    running.wait_ready()
    _, content_type, body = running.get("/metrics")
    assert content_type.startswith("text/plain")
    assert 'cpcreds_serve_inventory_profiles{source="directory",state="ready"} 1.0' in body
    assert 'cpcreds_serve_inventory_profiles{source="directory",state="failing"} 1.0' in body
    assert 'cpcreds_serve_credential_expiry_timestamp_seconds{profile="fleet-system/m1",provider="mint"}' in body
    assert 'cpcreds_serve_credential_consecutive_failures{profile="fleet-system/m2",provider="mint"} 1.0' in body
    assert "cpcreds_serve_ready 1.0" in body
    assert "cpcreds_credential_requests_total" in body  # the library's metrics, same registry


def test_status_page_is_a_table_with_every_value_escaped(start_serve: Any) -> None:
    hostile = mint_profile("page")
    hostile["metadata"]["name"] = "<img src=x onerror=alert(1)>"
    running = start_serve([MINT], {"a.yaml": hostile, "b.yaml": mint_profile("plain")})
    running.wait_ready()
    status, content_type, page = running.get("/")
    assert status == 200 and content_type.startswith("text/html")
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "<table>" in page and "fleet-system/plain" in page


def test_readyz_waits_for_the_first_sync_and_healthz_answers_at_once(start_serve: Any, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    hanging = {"name": "mint", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": os.sys.executable, "args": [str(Path(__file__).parent / "fakes" / "exec_plugin.py"), "--wait-for", str(gate)]}}
    running = start_serve([hanging], {"a.yaml": mint_profile("slow")})
    assert running.get("/healthz")[0] == 200
    assert running.get("/readyz")[0] == 503
    gate.touch()
    running.wait_ready()
    assert running.get("/readyz")[0] == 200


def test_reload_with_a_broken_config_keeps_the_running_one(start_serve: Any, tmp_path: Path) -> None:
    running = start_serve([MINT], {"a.yaml": mint_profile("reload")}, watch_config=False)
    running.wait_ready()
    (tmp_path / "providers.yaml").write_text("providers: [{name: mint}]\n")  # no execConfig or type
    assert running.reload() is False
    assert "config reload failed, keeping the running config" in running.out.getvalue()
    assert running.clusters()["fleet-system/reload"]["state"] == "ready"
    (tmp_path / "providers.yaml").write_text(yaml.safe_dump({"providers": [{**MINT, "name": "mint"}]}))
    assert running.reload() is True
    running.until(lambda: running.clusters()["fleet-system/reload"]["state"] == "ready", what="the reloaded state")


def test_the_config_file_changing_reloads_it(start_serve: Any, tmp_path: Path) -> None:
    running = start_serve([MINT], {"a.yaml": mint_profile("watched")})
    running.wait_ready()
    engine = running.service.engine
    (tmp_path / "providers.yaml").write_text(yaml.safe_dump({"providers": [{**MINT, "options": {"lifetime": 1800}}]}))
    assert engine is not None
    # The new engine runs first; the old one is closed once the fleet has moved to it.
    running.until(lambda: running.service.engine is not engine and engine.closed, what="the reload, the old engine closed")


def test_probes_record_reachability_and_latency(start_serve: Any, spoke: Any) -> None:
    reachable = cluster_profile("up", access_provider("mint", spoke.url, ca_pem=spoke.ca_pem, exec_extension={"clusterName": "up", "token": "spoke-token"}))
    rejected = cluster_profile("denied", access_provider("mint", spoke.url, ca_pem=spoke.ca_pem, exec_extension={"clusterName": "denied"}))
    running = start_serve([MINT], {"a.yaml": reachable, "b.yaml": rejected}, probe_path="/version", probe_timeout="5s")
    running.wait_ready()
    clusters = running.until(lambda: (c := running.clusters()) and all(x["probe"] for x in c.values()) and c, what="both probes")
    up, denied = clusters["fleet-system/up"]["probe"], clusters["fleet-system/denied"]["probe"]
    assert up["ok"] is True and up["status"] == 200 and up["latencySeconds"] > 0
    assert denied["ok"] is False and denied["status"] == 401
    _, _, metrics = running.get("/metrics")
    assert 'cpcreds_serve_probe_up{profile="fleet-system/up"} 1.0' in metrics
    assert 'cpcreds_serve_probe_up{profile="fleet-system/denied"} 0.0' in metrics
    assert any(r.path.startswith("/version") for r in spoke.requests)


def test_the_status_page_renders_in_headless_chromium(start_serve: Any, tmp_path: Path) -> None:
    import shutil
    import subprocess

    browser = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome") if shutil.which(name)), None)
    if browser is None:
        pytest.skip("no chromium on this machine")
    running = start_serve([MINT], {"a.yaml": mint_profile("browser")})
    running.wait_ready()
    result = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'chromium'}", "--dump-dom", running.url + "/"],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "fleet-system/browser" in result.stdout and "<table>" in result.stdout
