"""Hostile clients of a running ``cpcreds serve``: any request target on ``/v1/clusters`` (paging
and filters), ``/v1/clusters/<ns>/<name>`` and the status page gets a worded answer (200, or a 4xx
``Status``), never a dropped connection, within a bounded time and without a token in it; serve
keeps answering ``/healthz``."""

from __future__ import annotations

import base64
import json
import socket
import time
from typing import Any
from urllib.parse import quote

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fakes.builders import access_provider, cluster_profile

MINT = {"name": "mint", "type": "mint", "options": {"lifetime": 3600}}
SECRET = "s3cr3t-hostile-round4-token"


def _profiles() -> dict[str, Any]:
    def profile(name: str, **extension: Any) -> dict[str, Any]:
        return cluster_profile(name, access_provider("mint", f"https://{name}.test:6443", exec_extension={"clusterName": name, **extension}))

    return {f"c{i}.yaml": profile(f"c{i:02d}", token=f"{SECRET}-{i}") for i in range(4)} | {"f.yaml": profile("failer", fail=True)}


def raw_get(url: str, target: str, timeout: float = 5.0) -> tuple[int, bytes]:
    """(status, body) of ``GET target`` sent as written (no client-side quoting); status 0 when
    the server closed the connection without an answer."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    started = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode("utf-8", "surrogateescape"))
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    assert time.monotonic() - started < timeout
    data = b"".join(chunks)
    if not data:
        return 0, b""
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def check_answer(url: str, target: str) -> tuple[int, bytes]:
    status, body = raw_get(url, target)
    assert status != 0, f"serve dropped the connection for {target!r}"
    assert status in (200, 307, 400, 404, 410), (target, status, body[:300])
    assert SECRET.encode() not in body
    if status >= 400 and target.startswith("/v1/"):
        answer = json.loads(body)
        assert answer["kind"] == "Status" and answer["code"] == status and "\n" not in answer["message"]
    return status, body


_values = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["0", "-1", "1", "100000", "100001", "²", "١", "1e3", " 1", "0x10", "9" * 5000, "0" * 4400 + "1", "ready", "failing", "key", "attention"]),
)
_names = st.sampled_from(["limit", "continue", "state", "provider", "prefix", "order", "x", ""])


def _target(path: str, pairs: list[tuple[str, str]]) -> str:
    return path + "?" + "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in pairs)


def test_any_query_on_the_list_and_page_is_answered_in_words(start_serve: Any) -> None:
    running = start_serve([MINT], _profiles())
    running.wait_ready()

    @settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(path=st.sampled_from(["/v1/clusters", "/"]), pairs=st.lists(st.tuples(_names, _values), max_size=6))
    def answered(path: str, pairs: list[tuple[str, str]]) -> None:
        check_answer(running.url, _target(path, pairs))

    answered()
    assert raw_get(running.url, "/healthz")[0] == 200


def test_a_limit_of_unicode_digits_or_thousands_of_digits_is_a_400(start_serve: Any) -> None:
    """On the list and on the status page (whose bad filters were a dropped connection)."""
    running = start_serve([MINT], _profiles())
    running.wait_ready()
    assert check_answer(running.url, "/v1/clusters?limit=" + "0" * 4400 + "1")[0] == 200  # leading zeros are still 1
    for limit in ("²", "¹²", "9" * 5000, "0" * 4400, "0"):
        for path in ("/v1/clusters", "/"):
            status, _ = check_answer(running.url, _target(path, [("limit", limit)]))
            assert status == 400, (path, limit[:10])
    assert raw_get(running.url, "/healthz")[0] == 200


def _token(payload: str) -> str:
    return base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")


def test_forged_continue_tokens_are_a_400_or_410(start_serve: Any) -> None:
    running = start_serve([MINT], _profiles())
    running.wait_ready()
    status, body = check_answer(running.url, "/v1/clusters?limit=1")
    real = json.loads(body)["metadata"]["continue"]
    version, instance, filters, _ = json.loads(base64.urlsafe_b64decode(real + "=" * (-len(real) % 4)))
    forged = [
        "[" * 30000,  # nested past the JSON decoder's recursion limit
        "[1," + json.dumps(instance) + "," + json.dumps(filters) + "," + "[" * 30000 + "]" * 30000 + "]",
        json.dumps([1, instance, filters, 1e308]),
        "[1," + json.dumps(instance) + "," + json.dumps(filters) + ',"' + "9" * 5000 + '"]',
        "[1," + json.dumps(instance) + ',["x"],NaN]',
        json.dumps({"a": 1, "b": 2, "c": 3, "d": 4}),
        "1" * 5000,
    ]
    for payload in forged:
        for path in ("/v1/clusters?limit=1&continue=", "/v1/clusters?limit=1&order=attention&continue=", "/?continue="):
            check_answer(running.url, path + _token(payload)[:60000])

    @settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(last=st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8), lambda c: st.lists(c, max_size=4), max_leaves=12), order=st.sampled_from(["key", "attention"]))
    def forged_last(last: Any, order: str) -> None:
        f = list(filters)
        f[3] = order
        check_answer(running.url, f"/v1/clusters?limit=1&order={order}&continue=" + _token(json.dumps([version, instance, f, last])))

    forged_last()
    assert raw_get(running.url, "/healthz")[0] == 200


def test_any_profile_path_is_a_200_or_404_status(start_serve: Any) -> None:
    running = start_serve([MINT], _profiles())
    running.wait_ready()

    @settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(key=st.text(max_size=60) | st.sampled_from(["fleet-system/c01", "fleet-system/c01/", "../../etc/passwd", "%", "%zz", "%00", "a%2Fb"]))
    def one(key: str) -> None:
        target = "/v1/clusters/" + (key if key.startswith("%") or key.startswith("a%") else quote(key, safe="/"))
        status, body = check_answer(running.url, target)
        if status == 200:
            assert json.loads(body)["key"] == "fleet-system/c01"

    one()
    assert raw_get(running.url, "/healthz")[0] == 200


# -- no endpoint shows a secret inside a URL (issue 28.2) -------------------------------------------

PASSWORD = "Pa55-w0rd-in-a-server-url"
URL_TOKEN = "t0ken-in-a-server-query"


def test_a_server_url_holding_a_password_or_a_token_is_shown_without_them(start_serve: Any) -> None:
    def profile(name: str, server: str) -> dict[str, Any]:
        return cluster_profile(name, access_provider("mint", server, exec_extension={"clusterName": name}))

    running = start_serve(
        [MINT],
        {
            "userinfo.yaml": profile("userinfo", f"https://admin:{PASSWORD}@userinfo.test:6443"),
            "query.yaml": profile("query", f"https://query.test:6443/base?region=eu&access_token={URL_TOKEN}"),
            "plain.yaml": profile("plain", "https://plain.test:6443/base?region=eu"),
        },
    )
    running.wait_ready()
    clusters = running.clusters()
    assert clusters["fleet-system/userinfo"]["server"] == "https://***@userinfo.test:6443"
    assert clusters["fleet-system/query"]["server"] == "https://query.test:6443/base?region=eu&access_token=***"
    assert clusters["fleet-system/plain"]["server"] == "https://plain.test:6443/base?region=eu"  # nothing secret: as written
    for path in ("/v1/clusters", "/v1/clusters/fleet-system/userinfo", "/v1/clusters/fleet-system/query", "/", "/metrics"):
        status, _, body = running.get(path)
        assert status == 200, path
        assert PASSWORD not in body and URL_TOKEN not in body, path
