"""``cpcreds serve`` against a hub that answers badly, and against hostile HTTP clients: every
failure is a worded problem on the page and in ``/v1/clusters``, the last good inventory stays,
retries back off (1 s doubling to 1 min), and serve keeps answering ``/healthz``."""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fakes import mint
from tests.fakes.builders import FAKE_PLUGIN, access_provider, cluster_profile
from tests.fakes.fixtures import HUB_TOKEN
from tests.fakes.processes import alive
from tests.test_serve_process import Serve

MINT = {"name": "mint", "type": "mint", "options": {"lifetime": 3600}}
#: A provider config for a `cpcreds serve` subprocess (the mint provider is in-process only).
EXEC_ONLY = {"providers": [{"name": "none", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "true"}}]}
LIST_PATH = "/apis/multicluster.x-k8s.io/v1alpha2/clusterprofiles"


def mint_profile(name: str, namespace: str = "fleet-system") -> dict[str, Any]:
    return cluster_profile(name, access_provider("mint", f"https://{name}.test:6443", exec_extension={"clusterName": name}), namespace=namespace)


def problems_of(running: Any) -> dict[str, str]:
    return json.loads(running.get("/v1/clusters")[2])["problems"]


def watches(hub: Any, path: str = LIST_PATH) -> list[Any]:
    return [r for r in hub.requests if r.path == path and r.watch]


def serve_on_hub(start_serve: Any, hub: Any, tmp_path: Path, **settings: Any) -> Any:
    kubeconfig = hub.write_kubeconfig(tmp_path / "hub.kubeconfig", HUB_TOKEN)
    return start_serve([MINT], hub_kubeconfig=str(kubeconfig), **settings)


# -- 17.5: a hub answering 404 names the URL and what is likely missing -----------------------


def test_a_hub_answering_404_for_the_list_names_the_url_and_the_likely_cause(start_serve: Any, hub: Any, tmp_path: Path) -> None:
    path = "/apis/multicluster.x-k8s.io/v1alpha2/namespaces/nowhere/clusterprofiles"
    hub.inject_answer(path, 404, json.dumps({"kind": "Status", "code": 404, "reason": "NotFound", "message": "the server could not find the requested resource"}).encode())
    running = serve_on_hub(start_serve, hub, tmp_path, namespaces="nowhere")
    (problem,) = running.until(lambda: problems_of(running), what="the 404 problem").values()
    assert f"{hub.url}{path}" in problem
    assert "ClusterProfile CRD" in problem and "--namespaces" in problem
    assert "could not find" in running.get("/")[2] or "404" in running.get("/")[2]


# -- 18.10: a list answered 200 that is not a list keeps the last good inventory --------------


def test_a_list_answered_with_a_status_is_an_error_and_the_last_inventory_stays(start_serve: Any, hub: Any, tmp_path: Path) -> None:
    hub.put(mint_profile("stays"))
    running = serve_on_hub(start_serve, hub, tmp_path)
    running.wait_ready()
    assert hub.wait_for_watchers(1)
    # The next relist (after a broken watch) is answered 200 with a Status: not an empty fleet.
    status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "etcdserver: leader changed", "code": 500}
    hub.inject_answer(LIST_PATH, 200, json.dumps(status).encode(), watch=False)
    hub.inject_answer(LIST_PATH, 500, b'{"kind":"Status","code":500,"message":"watch cache not ready"}', watch=True)
    hub.put(mint_profile("nudge"))  # arrives after the hub is well again (a relist)
    assert hub.end_watches() == 1
    running.until(lambda: any("a Status, not a list" in p for p in problems_of(running).values()), what="the malformed list problem")
    problem = next(iter(problems_of(running).values()))
    assert "leader changed" in problem
    assert running.clusters()["fleet-system/stays"]["state"] == "ready"
    hub.clear_faults()
    running.until(lambda: "fleet-system/nudge" in running.clusters(), timeout=15, what="the relist once the hub is well")
    assert "fleet-system/stays" in running.clusters()


@pytest.mark.parametrize(
    "body, worded",
    [
        (b'{"kind":"Status","code":403,"message":"nope"}', "a Status, not a list"),
        (b'{"kind":"ClusterProfileList","metadata":{"resourceVersion":"5"}}', "not a list"),
        (b'{"kind":"ClusterProfileList","metadata":{"resourceVersion":"5"},"items":[{"metadata":{}}]}', "without a usable metadata.name"),
        (b'{"kind":"ClusterProfileList","metadata":{},"items":[]}', "no metadata.resourceVersion"),
        (b"<html>proxy error</html>", "not JSON"),
    ],
)
def test_a_malformed_first_list_is_a_worded_problem_never_an_empty_inventory(start_serve: Any, hub: Any, tmp_path: Path, body: bytes, worded: str) -> None:
    hub.inject_answer(LIST_PATH, 200, body, watch=False)
    running = serve_on_hub(start_serve, hub, tmp_path)
    (problem,) = running.until(lambda: problems_of(running), what="the problem").values()
    assert worded in problem and "Error" not in problem
    assert running.get("/readyz")[0] == 503  # not "ready: no profiles"


# -- 17.5: a broken watch or malformed events back off 1 s, 2 s, 4 s… -------------------------


@pytest.mark.parametrize(
    "status, body, worded",
    [
        (200, b'{"type":"ADDED"}\n', "without an object"),
        (200, b"not json at all\n", "not JSON"),
        (200, b'{"type":"SURPRISE","object":{}}\n', "unknown type"),
        (200, b'["ADDED"]\n', "JSON list, not an object"),
        (200, b"", "ended the watch at once"),
        (500, b'{"kind":"Status","code":500,"message":"watch is broken"}', "watch is broken"),
    ],
    ids=["no-object", "not-json", "unknown-type", "not-an-object", "ends-at-once", "http-500"],
)
def test_a_broken_watch_is_a_worded_problem_and_the_inventory_stays(
    start_serve: Any, hub: Any, tmp_path: Path, status: int, body: bytes, worded: str
) -> None:
    hub.put(mint_profile("kept"))
    hub.inject_answer(LIST_PATH, status, body, watch=True, chunked=status == 200)
    running = serve_on_hub(start_serve, hub, tmp_path)
    (problem,) = running.until(lambda: problems_of(running), what="the watch problem").values()
    assert worded in problem and "KeyError" not in problem
    running.wait_ready()
    assert running.clusters()["fleet-system/kept"]["state"] == "ready"  # the listed inventory stays


def test_a_hub_answering_malformed_events_is_retried_1s_then_2s_not_every_second(start_serve: Any, hub: Any, tmp_path: Path) -> None:
    # What the hub did in the report: events without "object", and a retry every second.
    hub.inject_answer(LIST_PATH, 200, b'{"type":"ADDED"}\n', watch=True, chunked=True)
    running = serve_on_hub(start_serve, hub, tmp_path)
    running.until(lambda: len(watches(hub)) >= 3, timeout=15, what="three watch attempts")
    first, second, third = (r.at for r in watches(hub)[:3])
    assert 0.9 <= second - first < 1.9 and third - second >= 1.9


# -- 17.5: a failed reload stays visible until a good config loads -----------------------------


def test_a_failed_config_reload_is_on_the_page_and_in_v1_clusters_until_a_good_one_loads(start_serve: Any, tmp_path: Path) -> None:
    running = start_serve([MINT], {"a.yaml": mint_profile("a")})
    running.wait_ready()
    config = tmp_path / "providers.yaml"
    good = config.read_text()
    config.write_text("providers: [{name: mint, type: mint, options: {lifetime: -5}}")  # not YAML
    assert running.reload() is False
    body = json.loads(running.get("/v1/clusters")[2])
    assert body["configError"].startswith("reload failed (test), running the previous config: ")
    assert "reload failed" in running.get("/")[2]
    assert body["clusters"][0]["state"] == "ready"
    config.write_text(good)
    assert running.reload() is True
    assert json.loads(running.get("/v1/clusters")[2])["configError"] is None
    assert "reload failed" not in running.get("/")[2]


# -- 18.9: silent sockets cannot exhaust serve's descriptors -----------------------------------


def test_silent_sockets_at_a_low_descriptor_limit_do_not_kill_healthz(tmp_path: Path) -> None:
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    config = tmp_path / "providers.yaml"
    config.write_text(yaml.safe_dump(EXEC_ONLY))

    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (160, 160))

    process = Serve(
        ["--config", str(config), "--profiles-dir", str(profiles), "--http-header-timeout", "30s", "--http-idle-timeout", "30s"],
        preexec_fn=low_limit,
    )
    try:
        host, port = process.wait_for(r"status page http://([\d.]+):(\d+)/").groups()
        silent = []
        for _ in range(155):  # with serve's own descriptors, past the limit; the cap (80) sheds the oldest
            silent.append(socket.create_connection((host, int(port)), timeout=5))
        started = time.monotonic()
        with socket.create_connection((host, int(port)), timeout=5) as probe:
            probe.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
            answer = probe.recv(1024)
        assert answer.startswith(b"HTTP/1.0 200") and time.monotonic() - started < 3
        for sock in silent:
            sock.close()
    finally:
        process.kill()


# -- 17.5: logs on stderr; a busy address is one line that suggests a free port ---------------


def test_serve_logs_to_stderr_and_nothing_to_stdout(hub: Any, tmp_path: Path) -> None:
    config = tmp_path / "providers.yaml"
    config.write_text(yaml.safe_dump(EXEC_ONLY))
    kubeconfig = hub.write_kubeconfig(tmp_path / "hub.kubeconfig", "unknown-token")  # 401: a warning is logged
    out = tmp_path / "stdout"
    with open(out, "w") as stdout:
        process = Serve(["--config", str(config), "--hub-kubeconfig", str(kubeconfig)], stdout=stdout)
        try:
            process.wait_for(r"hub list/watch failed")
        finally:
            process.kill()
    assert out.read_text() == ""


def test_an_address_in_use_is_one_line_suggesting_a_free_port(tmp_path: Path) -> None:
    config = tmp_path / "providers.yaml"
    config.write_text(yaml.safe_dump(EXEC_ONLY))
    (tmp_path / "profiles").mkdir()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = Serve(["--config", str(config), "--profiles-dir", str(tmp_path / "profiles"), "--listen", f"127.0.0.1:{port}"])
        try:
            assert process.process.wait(30) == 1
            assert process.process.stderr is not None
            lines = process.process.stderr.read().splitlines()
        finally:
            process.kill()
    assert len(lines) == 1 and lines[0].startswith("cpcreds: error: ") and "--listen 127.0.0.1:0" in lines[0]


# -- 18.8: the hub kubeconfig's own exec plugin has a deadline and dies with serve -------------


def exec_kubeconfig(hub: Any, path: Path, *plugin_args: str) -> Path:
    document = hub.kubeconfig(HUB_TOKEN)
    document["users"][0]["user"] = {
        "exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable, "args": [str(FAKE_PLUGIN), *plugin_args], "interactiveMode": "Never"}
    }
    path.write_text(yaml.safe_dump(document))
    return path


def test_the_hub_kubeconfigs_exec_plugin_authenticates_serve(start_serve: Any, hub: Any, tmp_path: Path) -> None:
    hub.put(mint_profile("via-exec"))
    kubeconfig = exec_kubeconfig(hub, tmp_path / "hub.kubeconfig", "--token", HUB_TOKEN, "--expires-in", "3600")
    running = start_serve([MINT], hub_kubeconfig=str(kubeconfig))
    running.wait_ready()
    assert list(running.clusters()) == ["fleet-system/via-exec"]


def test_a_hanging_hub_exec_plugin_times_out_as_a_problem(start_serve: Any, hub: Any, tmp_path: Path) -> None:
    kubeconfig = exec_kubeconfig(hub, tmp_path / "hub.kubeconfig", "--hang")
    running = start_serve([MINT], hub_kubeconfig=str(kubeconfig), hub_timeout="0.3s")
    (problem,) = running.until(lambda: problems_of(running), what="the plugin's timeout").values()
    assert problem.startswith("the hub kubeconfig's exec plugin failed: ") and "0.3" in problem


def test_a_hanging_hub_exec_plugin_is_killed_when_serve_stops(hub: Any, tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    kubeconfig = exec_kubeconfig(hub, tmp_path / "hub.kubeconfig", "--hang", "--child-pidfile", str(pidfile))
    config = tmp_path / "providers.yaml"
    config.write_text(yaml.safe_dump(EXEC_ONLY))
    process = Serve(["--config", str(config), "--hub-kubeconfig", str(kubeconfig), "--hub-timeout", "5m"])
    try:
        process.wait_for(r"watching ClusterProfiles on the hub")
        deadline = time.monotonic() + 20
        while not (pidfile.exists() and pidfile.read_text().strip()):
            assert time.monotonic() < deadline, "the plugin never started"
            time.sleep(0.02)
        child = int(pidfile.read_text())
        code, took = process.stop(signal.SIGTERM)
        assert took < 5
        deadline = time.monotonic() + 5
        while alive(child):
            assert time.monotonic() < deadline, "the hub exec plugin's child outlived serve"
            time.sleep(0.02)
    finally:
        process.kill()
        if pidfile.exists() and pidfile.read_text().strip() and alive(int(pidfile.read_text())):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)
