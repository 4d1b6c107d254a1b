"""cpcreds.images.kubelet_plugin: Python programs and cpcreds providers as kubelet image credential
provider plugins (KEP-2133), run as the kubelet runs them: a real process, the request on stdin,
the response read from stdout, one error line on stderr and a non-zero exit otherwise."""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import requests
from hypothesis import given, settings
from hypothesis import strategies as st

from cpcreds.images.protocol import (
    API_VERSION_V1,
    SUPPORTED_API_VERSIONS,
    AuthConfig,
    CredentialProviderResponse,
    ProtocolError,
    encode_request,
    parse_response,
)
from cpcreds.images.kubelet_plugin import read_request
from tests.fakes.pki import PKI
from tests.fakes.registry import FakeRegistry

SECRET = "s3cr3t-Registry-Password"

# A plugin written with run_kubelet_plugin: the registry of the image gets a robot's password from
# $ROBOT_PASSWORD; images under slow.example hang, under boom.example fail, under wrong.example
# return something that is not a response.
FUNCTION_PLUGIN = """
import os, sys, threading
from cpcreds.images.kubelet_plugin import AuthConfig, CredentialProviderResponse, run_kubelet_plugin

def answer(request):
    registry = request.image.split("/", 1)[0]
    if registry == "slow.example":
        threading.Event().wait()
    if registry == "boom.example":
        raise RuntimeError("registry refused: password=" + os.environ["ROBOT_PASSWORD"])
    if registry == "wrong.example":
        return {"auth": {}}
    if registry == "token.example":
        return CredentialProviderResponse("Image", {registry: AuthConfig("sa", request.service_account_token or "")}, cache_duration=0)
    return CredentialProviderResponse("Registry", {registry: AuthConfig("robot", os.environ["ROBOT_PASSWORD"])}, cache_duration=300)

run_kubelet_plugin(answer)
"""

# An in-process provider (what a cpcreds_register_providers hook registers) run with
# kubelet_plugin_main: options from flags, validated by the factory.
PROVIDER_PLUGIN = '''
"""A robot account for the registries named by --registries."""
import os, threading
from cpcreds.errors import ProviderError
from cpcreds.images.kubelet_plugin import AuthConfig, CredentialProviderResponse, kubelet_plugin_main

class RobotProvider:
    def __init__(self, options):
        unknown = set(options) - {"registries", "username", "hang"}
        if unknown:
            raise ValueError(f"unknown option {sorted(unknown)[0]}")
        if "registries" not in options:
            raise ValueError("registries is required")
        self.registries = options["registries"].split(",")
        self.username = options.get("username", "robot")
        self.hang = options.get("hang") == "true"

    def get_image_credential(self, request, *, timeout):
        if self.hang:
            # A provider that honours its timeout stops a little before it, with its own error.
            threading.Event().wait(max(0.0, timeout - 0.3))
            raise ProviderError("the vault did not answer in time", provider="robot")
        auth = AuthConfig(self.username, os.environ["ROBOT_PASSWORD"])
        return CredentialProviderResponse("Global", {key: auth for key in self.registries}, cache_duration=3600)

class ClusterOnly:
    def __init__(self, options):
        pass

    def get_credential(self, plan):
        raise AssertionError("not called")

import sys
factory = ClusterOnly if os.environ.get("CLUSTER_ONLY") else RobotProvider
kubelet_plugin_main("robot", factory)()
'''


@pytest.fixture
def function_plugin(tmp_path: Path) -> Path:
    path = tmp_path / "robot-credential-provider.py"
    path.write_text(FUNCTION_PLUGIN, encoding="utf-8")
    return path


@pytest.fixture
def provider_plugin(tmp_path: Path) -> Path:
    path = tmp_path / "robot-provider.py"
    path.write_text(textwrap.dedent(PROVIDER_PLUGIN), encoding="utf-8")
    return path


def run(script: Path, stdin: bytes, *args: str, timeout: float = 30, **env: str) -> subprocess.CompletedProcess[bytes]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CPCREDS_")}
    environment.update(ROBOT_PASSWORD=SECRET, **env)
    return subprocess.run([sys.executable, str(script), *args], input=stdin, capture_output=True, env=environment, timeout=timeout)


def error_line(result: subprocess.CompletedProcess[bytes]) -> str:
    assert result.returncode == 1, result
    assert result.stdout == b""
    text = result.stderr.decode()
    assert text.endswith("\n") and text.count("\n") == 1, text
    assert SECRET not in text
    return text.rstrip("\n")


# -- answering ----------------------------------------------------------------------------------


@pytest.mark.parametrize("api_version", SUPPORTED_API_VERSIONS)
def test_a_function_plugin_answers_in_the_requests_api_version(function_plugin: Path, api_version: str) -> None:
    result = run(function_plugin, encode_request("registry.example:5000/team/app:1.2", api_version))
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(b"\n") == 1
    document = json.loads(result.stdout)
    assert document["apiVersion"] == api_version and document["kind"] == "CredentialProviderResponse"
    response = parse_response(result.stdout, api_version)
    assert response == CredentialProviderResponse("Registry", {"registry.example:5000": AuthConfig("robot", SECRET)}, 300)
    assert document["cacheDuration"] == "5m0s"


def test_a_v1_request_hands_the_service_account_token_to_the_plugin(function_plugin: Path) -> None:
    result = run(function_plugin, encode_request("token.example/app", API_VERSION_V1, service_account_token="eyJ.sa.token"))
    assert result.returncode == 0, result.stderr
    assert parse_response(result.stdout, API_VERSION_V1).auth["token.example"] == AuthConfig("sa", "eyJ.sa.token")


@pytest.mark.parametrize("api_version", SUPPORTED_API_VERSIONS)
def test_a_provider_runs_as_a_kubelet_plugin_with_options_from_flags(provider_plugin: Path, api_version: str) -> None:
    # As the kubelet config's args would pass them: Go flag spellings work.
    result = run(provider_plugin, encode_request("gcr.io/p/app", api_version), "--registries=*.example.com,gcr.io", "-username", "ci")
    assert result.returncode == 0, result.stderr
    response = parse_response(result.stdout, api_version)
    assert response.cache_key_type == "Global" and response.cache_duration == 3600
    assert dict(response.auth) == {"*.example.com": AuthConfig("ci", SECRET), "gcr.io": AuthConfig("ci", SECRET)}


def test_the_credential_a_plugin_returns_opens_the_registry(function_plugin: Path, pki: PKI, tmp_path: Path) -> None:
    with FakeRegistry(pki, users={"robot": SECRET}) as registry:
        result = run(function_plugin, encode_request(f"{registry.host}/team/app:1", API_VERSION_V1))
        assert result.returncode == 0, result.stderr
        auth = parse_response(result.stdout, API_VERSION_V1).auth[registry.host]
        ca = tmp_path / "ca.pem"
        ca.write_bytes(registry.ca_pem)
        assert requests.get(f"{registry.url}/v2/", verify=str(ca), timeout=10).status_code == 401
        assert requests.get(f"{registry.url}/v2/", auth=(auth.username, auth.password), verify=str(ca), timeout=10).status_code == 200


# -- failing ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stdin", "message"),
    [
        (b"", "no CredentialProviderRequest on stdin (it is empty)"),
        (b"  \n", "no CredentialProviderRequest on stdin (it is empty)"),
        (b"image: gcr.io/a", "CredentialProviderRequest is not a JSON document"),
        (b"\xff\xfe", "CredentialProviderRequest is not a JSON document"),
        (b"[]", "CredentialProviderRequest is a list, not a JSON object"),
        (json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential"}).encode(), "kind is 'ExecCredential', expected CredentialProviderRequest"),
        (
            json.dumps({"apiVersion": "credentialprovider.kubelet.k8s.io/v2", "kind": "CredentialProviderRequest", "image": "a"}).encode(),
            "apiVersion 'credentialprovider.kubelet.k8s.io/v2' is not one of",
        ),
        (json.dumps({"apiVersion": API_VERSION_V1, "kind": "CredentialProviderRequest", "image": ""}).encode(), "image must be a non-empty string"),
        (b"{" + b" " * (2 * 1024 * 1024), "CredentialProviderRequest is larger than 1048576 bytes"),
    ],
)
def test_a_bad_request_is_one_line_and_exit_1(function_plugin: Path, stdin: bytes, message: str) -> None:
    assert message in error_line(run(function_plugin, stdin))


def test_the_line_is_prefixed_with_the_programs_name_and_redacted(function_plugin: Path) -> None:
    line = error_line(run(function_plugin, encode_request("boom.example/app")))
    assert line.startswith("robot-credential-provider.py: registry refused: password=")


def test_an_answer_that_is_not_a_response_is_refused(function_plugin: Path) -> None:
    line = error_line(run(function_plugin, encode_request("wrong.example/app")))
    assert line.endswith("returned dict, not a CredentialProviderResponse")


def test_a_hung_plugin_is_cut_off_at_the_timeout(function_plugin: Path) -> None:
    began = time.monotonic()
    result = run(function_plugin, encode_request("slow.example/app"), CPCREDS_DEFAULT_TIMEOUT="300ms")
    took = time.monotonic() - began
    assert error_line(result).endswith("no answer within the 0.3s timeout")
    assert took < 10  # the timeout plus the interpreter's start, not the hang


def test_a_provider_gets_the_time_left_and_reports_its_own_timeout(provider_plugin: Path) -> None:
    result = run(provider_plugin, encode_request("gcr.io/app"), "--registries=gcr.io", "--hang", CPCREDS_DEFAULT_TIMEOUT="1s")
    assert error_line(result).endswith("provider robot: the vault did not answer in time")


@pytest.mark.parametrize("value", ["soon", "-1s", "0"])
def test_a_bad_timeout_setting_is_named(function_plugin: Path, value: str) -> None:
    assert "robot-credential-provider.py: CPCREDS_DEFAULT_TIMEOUT: " in error_line(run(function_plugin, encode_request("a.io/b"), CPCREDS_DEFAULT_TIMEOUT=value))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "options: registries is required"),
        (["--registries=gcr.io", "--colour=red"], "options: unknown option colour"),
        (["--registries=gcr.io", SECRET], "argument 2 is not an option flag"),
    ],
)
def test_bad_flags_and_options_are_named(provider_plugin: Path, args: list[str], message: str) -> None:
    assert message in error_line(run(provider_plugin, encode_request("gcr.io/app"), *args))


def test_a_provider_that_does_not_answer_for_images_says_so(provider_plugin: Path) -> None:
    line = error_line(run(provider_plugin, encode_request("gcr.io/app"), CLUSTER_ONLY="1"))
    assert line.endswith("provider robot: does not answer for images (it has no get_image_credential method)")


def test_help_describes_the_provider(provider_plugin: Path) -> None:
    result = run(provider_plugin, b"", "--help")
    assert result.returncode == 0
    assert b"CredentialProviderRequest on stdin" in result.stdout and b"A robot account" in result.stdout


# A provider with an options model: the SDK lists it in --help and checks flags against it.
MODELLED_PLUGIN = '''
from pydantic import BaseModel, ConfigDict, Field
from cpcreds.images.kubelet_plugin import AuthConfig, CredentialProviderResponse, kubelet_plugin_main

class RobotOptions(BaseModel):
    """A robot account for the registries named by --registries."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    registries: list[str] = Field(description="Registries to answer for.")
    user_name: str = Field(default="robot", alias="userName", description="The robot's user name.")

class RobotProvider:
    options_model = RobotOptions

    def __init__(self, options):
        self.options = RobotOptions.model_validate(dict(options))

    def get_image_credential(self, request, *, timeout):
        auth = AuthConfig(self.options.user_name, "pw")
        return CredentialProviderResponse("Global", {key: auth for key in self.options.registries})

kubelet_plugin_main("robot", RobotProvider)()
'''


def test_help_lists_the_options_model_with_types_and_defaults(tmp_path: Path) -> None:
    script = tmp_path / "robot-provider.py"
    script.write_text(MODELLED_PLUGIN, encoding="utf-8")
    result = run(script, b"", "--help")
    assert (result.returncode, result.stderr) == (0, b"")
    lines = result.stdout.decode().splitlines()
    assert lines[0] == "usage: robot-provider.py [--OPTION=VALUE ...] < CredentialProviderRequest"
    assert [line for line in lines if line.startswith("  --")] == [
        "  --registries  list of strings (repeat the flag); required",
        "  --userName  string; default: robot",
    ]
    assert "A robot account for the registries named by --registries." in lines


def test_an_unknown_flag_is_refused_with_did_you_mean_before_the_request_is_read(tmp_path: Path) -> None:
    script = tmp_path / "robot-provider.py"
    script.write_text(MODELLED_PLUGIN, encoding="utf-8")
    line = error_line(run(script, b"not a request", "--registries=gcr.io", "--user-nmae=bot"))
    assert line == (
        "robot-provider.py: option userNmae: is not a known option; did you mean 'userName'? "
        "(options: registries, userName; --help describes them)"
    )
    # The Python name is accepted (the model populates by name), not shown.
    answered = run(script, encode_request("gcr.io/app"), "--registries=gcr.io", "--registries=quay.io", "--user_name=bot")
    assert answered.returncode == 0, answered.stderr


def test_run_at_a_terminal_it_says_what_it_wants_instead_of_waiting(function_plugin: Path) -> None:
    controller, terminal = pty.openpty()
    try:
        environment = {**os.environ, "ROBOT_PASSWORD": SECRET}
        result = subprocess.run(
            [sys.executable, str(function_plugin)], stdin=terminal, capture_output=True, env=environment, timeout=30
        )
    finally:
        os.close(controller)
        os.close(terminal)
    assert error_line(result).endswith("reads a CredentialProviderRequest on stdin (it is a terminal)")


# -- reading, in-process ------------------------------------------------------------------------


class Trickle(io.RawIOBase):
    """A pipe that hands over its bytes a few at a time, as a slow writer's pipe does."""

    def __init__(self, data: bytes, step: int) -> None:
        self._data, self._step = data, step

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        size = min(self._step, len(buffer))
        chunk, self._data = self._data[:size], self._data[size:]
        buffer[: len(chunk)] = chunk
        return len(chunk)


def test_a_request_is_read_to_its_end_however_it_arrives() -> None:
    data = encode_request("gcr.io/p/app", API_VERSION_V1, service_account_token="t")
    request = read_request(io.BufferedReader(Trickle(data, 7)))
    assert (request.image, request.service_account_token) == ("gcr.io/p/app", "t")


def test_a_request_larger_than_the_bound_is_refused_without_reading_it_all() -> None:
    pipe = Trickle(b"{" + b" " * 10_000_000, 65536)
    with pytest.raises(ProtocolError, match="larger than 1000 bytes"):
        read_request(io.BufferedReader(pipe), max_bytes=1000)
    assert len(pipe._data) > 9_000_000  # the rest was left unread


def test_a_terminal_is_refused_in_process() -> None:
    controller, terminal = pty.openpty()
    try:
        with open(terminal, "rb", buffering=0, closefd=False) as stream, pytest.raises(ProtocolError, match="terminal"):
            read_request(stream)  # type: ignore[arg-type]
    finally:
        os.close(controller)
        os.close(terminal)


@settings(max_examples=200)
@given(st.binary(max_size=300) | st.builds(lambda image, version: encode_request(image, version), st.text(min_size=1, max_size=40), st.sampled_from(SUPPORTED_API_VERSIONS)))
def test_any_stdin_is_a_request_or_one_line_protocol_error(data: bytes) -> None:
    try:
        request = read_request(io.BytesIO(data))
    except ProtocolError as exc:
        assert "\n" not in str(exc)
    else:
        assert request.image
