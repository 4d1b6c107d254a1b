"""A plugin that fails and explains itself on stdout the Kubernetes way (a metav1.Status, or an
ExecCredential whose status carries a message) gets its words into the error, redacted; client-go
reports only the exit code (kubernetes/kubernetes#139150)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from cpcreds import CredentialEngine, PluginExecutionError
from cpcreds.exec.command import _status_message
from tests.fakes.builders import access_provider, cluster_profile, config_of, exec_entry

SECRET = "sk-live-0123456789abcdefSECRET"


def failure_of(*plugin_args: str) -> str:
    config = config_of(exec_entry("p", *plugin_args))
    with CredentialEngine(config, prometheus_registry=CollectorRegistry()) as engine, pytest.raises(PluginExecutionError) as caught:
        engine.get_credential(cluster_profile("spoke", access_provider("p")))
    return str(caught.value)


def status(message: str, **fields: object) -> str:
    return json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, **fields})


def test_a_status_message_reaches_the_error_with_reason_and_code() -> None:
    text = failure_of("--raw", status("token for fleet-a expired; run login", reason="Unauthorized", code=401), "--exit-code", "1", "--stderr", "see above")
    assert text.startswith("provider p: exec: ")
    assert text.endswith(" exited with code 1: token for fleet-a expired; run login (reason Unauthorized, code 401); stderr: see above")


def test_an_exec_credential_with_a_status_message() -> None:
    answer = json.dumps({"kind": "ExecCredential", "apiVersion": "client.authentication.k8s.io/v1", "status": {"message": "MFA required"}})
    assert failure_of("--raw", answer, "--exit-code", "2").endswith("exited with code 2: MFA required")


def test_a_secret_in_the_message_is_redacted() -> None:
    text = failure_of("--raw", status(f"refused token={SECRET}"), "--exit-code", "1")
    assert SECRET not in text and "refused token=" in text


@pytest.mark.parametrize(
    "stdout",
    [
        "",
        "not json",
        "[1, 2]",
        json.dumps({"kind": "Status"}),
        json.dumps({"kind": "Status", "message": 5}),
        json.dumps({"kind": "Status", "message": "   "}),
        json.dumps({"kind": "Other", "message": "x"}),
        json.dumps({"kind": "ExecCredential", "status": "x"}),
        "[" * 100_000,
    ],
)
def test_no_usable_message_means_exit_code_only(stdout: str) -> None:
    assert _status_message(stdout.encode()) is None


def test_odd_reason_and_code_are_left_out_and_the_message_is_bounded() -> None:
    said = _status_message(status("x" * 5000, reason="Not A Reason!", code=True).encode())
    assert said == "x" * 512


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(message=st.text(max_size=300), reason=st.one_of(st.none(), st.text(max_size=80)), code=st.one_of(st.none(), st.integers()))
def test_any_message_gives_one_redacted_line(message: str, reason: str | None, code: int | None) -> None:
    fields = {k: v for k, v in (("reason", reason), ("code", code)) if v is not None}
    said = _status_message(status(f"{message} token: {SECRET}", **fields).encode())
    assert said is not None and "\n" not in said and SECRET not in said and len(said) < 700
