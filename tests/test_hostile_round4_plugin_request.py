"""A hostile KUBERNETES_EXEC_INFO and command line for an exec plugin built on cpcreds: any
value is a request or one PluginRequestError line, never another exception, never quoting a
secret it holds; many repeated flags are read in linear time."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cpcreds.exec.plugin import PluginRequestError, parse_option_flags, read_request

SECRET = "t0ken-r0und4-s3cret"

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10) | st.just(SECRET),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=12) | st.sampled_from(["server", "config", "status"]), children, max_size=3),
    max_leaves=10,
)
_cluster_fields = st.fixed_dictionaries(
    {},
    optional={
        "server": st.just("https://x.test") | _json,
        "tls-server-name": _json,
        "insecure-skip-tls-verify": _json,
        "certificate-authority-data": st.just(base64.b64encode(SECRET.encode()).decode()) | st.just(SECRET) | _json,
        "proxy-url": st.just(f"https://u:{SECRET}@proxy.test") | _json,
        "disable-compression": _json,
        "config": _json,
        "tls_server_name": _json,
    },
)
_documents = st.fixed_dictionaries(
    {"kind": st.just("ExecCredential") | _json, "apiVersion": st.sampled_from(["client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"]) | st.none() | st.integers() | st.text(max_size=10)},
    optional={"spec": st.fixed_dictionaries({}, optional={"interactive": _json, "cluster": _cluster_fields | _json}) | _json, "status": _json},
)


@settings(max_examples=400, deadline=None)
@given(document=_documents | _json, raw=st.none() | st.text(max_size=40))
def test_any_exec_info_is_a_request_or_one_line_refusal(document: Any, raw: str | None) -> None:
    text = raw if raw is not None else json.dumps(document)
    try:
        read_request({"KUBERNETES_EXEC_INFO": text})
    except PluginRequestError as exc:
        message = str(exc)
        assert "\n" not in message and len(message) < 500
        assert SECRET not in message  # (a short apiVersion is quoted by design: none here is the secret)
        for linked in (exc.__cause__, exc.__context__):
            assert linked is None or SECRET not in str(linked)


def test_a_flag_repeated_many_times_is_read_in_linear_time() -> None:
    for count in (1000, 4000):
        started = time.monotonic()
        try:
            options = parse_option_flags(["--audience=x"] * count)
        except PluginRequestError:
            continue  # more arguments than a plugin takes: refused at once
        assert len(options["audience"]) == count
        assert time.monotonic() - started < 0.5
