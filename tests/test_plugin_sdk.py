"""cpcreds.exec.plugin: the SDK for writing exec plugins, run for real through the exec provider."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpcreds.config.access import AccessPlan, resolve
from cpcreds.config.wire import API_VERSION_V1, API_VERSION_V1BETA1, EXEC_EXTENSION, EXEC_INFO_ENV
from cpcreds.config import ProviderConfig
from cpcreds.credential import Credential
from cpcreds.errors import PluginExecutionError
from cpcreds.exec.plugin import (
    OptionFlagError,
    PluginRequest,
    PluginRequestError,
    parse_option_flags,
    read_request,
    run_plugin,
    write_response,
)
from cpcreds.exec.provider import ExecProvider

PROVIDER = "fleet-sdk"

# Echoes what it was asked into the token, so a test can see the request the plugin parsed.
ECHO_PLUGIN = """\
from cpcreds.exec.plugin import run_plugin
from cpcreds import Credential


def get(request):
    config = request.cluster.config if request.cluster is not None else None
    server = request.cluster.server if request.cluster is not None else None
    version = request.api_version.rsplit("/", 1)[1]
    name = (config or {}).get("clusterName")
    return Credential(token=f"{version}|{name}|{server}|{request.interactive}|{request.from_environment}")


run_plugin(get)
"""

FAILING_PLUGIN = """\
from cpcreds.exec.plugin import run_plugin


def get(request):
    raise RuntimeError("vault is sealed:\\n  ask the on-call   to unseal it")


run_plugin(get, name="sealed-vault")
"""

WRONG_TYPE_PLUGIN = """\
from cpcreds.exec.plugin import run_plugin

run_plugin(lambda request: {"token": "not-a-credential-object"})
"""


def write_plugin(tmp_path: Path, name: str, body: str) -> Path:
    script = tmp_path / name
    script.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body), encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return script


def plan_for(command: Path, api_version: str, *, provide_cluster_info: bool = True) -> AccessPlan:
    config = ProviderConfig.from_dict(
        {
            "providers": [
                {
                    "name": PROVIDER,
                    "timeout": "30s",
                    "execConfig": {
                        "apiVersion": api_version,
                        "command": str(command),
                        "provideClusterInfo": provide_cluster_info,
                    },
                }
            ]
        }
    )
    profile = {
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": "spoke-3", "namespace": "fleet"},
        "status": {
            "accessProviders": [
                {
                    "name": PROVIDER,
                    "cluster": {
                        "server": "https://spoke-3.example:6443",
                        "extensions": [{"name": EXEC_EXTENSION, "extension": {"clusterName": "spoke-3"}}],
                    },
                }
            ]
        },
    }
    return resolve(config, profile)


def exec_info(api_version: str = API_VERSION_V1, **spec: Any) -> str:
    return json.dumps({"apiVersion": api_version, "kind": "ExecCredential", "spec": {"interactive": False, **spec}})


# -- running SDK plugins through the exec provider -----------------------------------------------


@pytest.mark.parametrize("api_version", [API_VERSION_V1, API_VERSION_V1BETA1])
def test_sdk_plugin_answers_in_the_requested_version_with_the_cluster_config(tmp_path: Path, api_version: str) -> None:
    plugin = write_plugin(tmp_path, "echo-plugin", ECHO_PLUGIN)
    plan = plan_for(plugin, api_version)
    # The exec provider rejects an answer in any other apiVersion, so success proves the version.
    credential = ExecProvider().get_credential(plan)
    version = api_version.rsplit("/", 1)[1]
    assert credential.token == f"{version}|spoke-3|https://spoke-3.example:6443|False|True"


def test_sdk_plugin_sees_no_cluster_without_provide_cluster_info(tmp_path: Path) -> None:
    plugin = write_plugin(tmp_path, "echo-plugin", ECHO_PLUGIN)
    credential = ExecProvider().get_credential(plan_for(plugin, API_VERSION_V1, provide_cluster_info=False))
    assert credential.token == "v1|None|None|False|True"


def test_sdk_plugin_function_raising_becomes_plugin_execution_error_with_its_stderr_line(tmp_path: Path) -> None:
    plugin = write_plugin(tmp_path, "sealed-plugin", FAILING_PLUGIN)
    with pytest.raises(PluginExecutionError) as info:
        ExecProvider().get_credential(plan_for(plugin, API_VERSION_V1))
    error = info.value
    assert error.exit_code == 1
    assert error.provider == PROVIDER
    assert "exited with code 1" in str(error)
    # run_plugin writes the exception as one line, whitespace collapsed, prefixed by the plugin name.
    assert "sealed-vault: vault is sealed: ask the on-call to unseal it" in str(error)
    assert "\n" not in str(error)


def test_sdk_plugin_returning_a_non_credential_fails_with_exit_code_1(tmp_path: Path) -> None:
    plugin = write_plugin(tmp_path, "wrong-type-plugin", WRONG_TYPE_PLUGIN)
    with pytest.raises(PluginExecutionError) as info:
        ExecProvider().get_credential(plan_for(plugin, API_VERSION_V1BETA1))
    assert info.value.exit_code == 1
    assert "wrong-type-plugin: get_credential returned dict, not a Credential" in str(info.value)
    assert "not-a-credential-object" not in str(info.value)


def _run_directly(plugin: Path, exec_info_value: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != EXEC_INFO_ENV}
    if exec_info_value is not None:
        env[EXEC_INFO_ENV] = exec_info_value
    return subprocess.run([str(plugin)], env=env, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)


def test_sdk_plugin_run_by_hand_answers_v1_without_a_request(tmp_path: Path) -> None:
    plugin = write_plugin(tmp_path, "echo-plugin", ECHO_PLUGIN)
    result = _run_directly(plugin, None)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer == {"apiVersion": API_VERSION_V1, "kind": "ExecCredential", "status": {"token": "v1|None|None|False|False"}}
    assert result.stdout.count("\n") == 1


def test_sdk_plugin_with_malformed_exec_info_exits_1_with_one_stderr_line(tmp_path: Path) -> None:
    plugin = write_plugin(tmp_path, "echo-plugin", ECHO_PLUGIN)
    result = _run_directly(plugin, "{not json")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith(f"echo-plugin: {EXEC_INFO_ENV} is not JSON")
    assert result.stderr.count("\n") == 1


# -- read_request --------------------------------------------------------------------------------


def test_read_request_without_exec_info_is_not_from_the_environment() -> None:
    request = read_request({})
    assert request == PluginRequest(api_version=API_VERSION_V1, interactive=False, cluster=None, from_environment=False)


def test_read_request_without_exec_info_uses_the_default_api_version() -> None:
    request = read_request({EXEC_INFO_ENV: "  "}, default_api_version=API_VERSION_V1BETA1)
    assert request.api_version == API_VERSION_V1BETA1
    assert request.from_environment is False


def test_read_request_reads_the_process_environment_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(EXEC_INFO_ENV, exec_info(API_VERSION_V1BETA1))
    request = read_request()
    assert request.api_version == API_VERSION_V1BETA1
    assert request.from_environment is True


def test_read_request_parses_version_interactive_and_cluster() -> None:
    raw = json.dumps(
        {
            "apiVersion": API_VERSION_V1BETA1,
            "kind": "ExecCredential",
            "spec": {
                "interactive": True,
                "cluster": {
                    "server": "https://spoke.example",
                    "tls-server-name": "spoke.internal",
                    "certificate-authority-data": "Q0EtUEVN",
                    "config": {"clusterName": "spoke", "region": "eu"},
                },
            },
        }
    )
    request = read_request({EXEC_INFO_ENV: raw})
    assert request.api_version == API_VERSION_V1BETA1
    assert request.interactive is True
    assert request.from_environment is True
    assert request.cluster is not None
    assert request.cluster.server == "https://spoke.example"
    assert request.cluster.tls_server_name == "spoke.internal"
    assert request.cluster.certificate_authority_data == b"CA-PEM"
    assert request.cluster.config == {"clusterName": "spoke", "region": "eu"}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{not json", "is not JSON"),
        ("[1, 2]", "is not an ExecCredential"),
        (json.dumps({"apiVersion": API_VERSION_V1, "kind": "Pod"}), "is not an ExecCredential"),
        (exec_info(cluster={"config": {}}), "field spec.cluster.server"),
        (exec_info(cluster={"server": "https://x", "certificate-authority-data": "%%%"}), "certificate-authority-data"),
    ],
    ids=["not-json", "not-an-object", "wrong-kind", "cluster-without-server", "bad-ca-base64"],
)
def test_read_request_with_malformed_exec_info_raises_plugin_request_error(raw: str, message: str) -> None:
    with pytest.raises(PluginRequestError, match=message):
        read_request({EXEC_INFO_ENV: raw})


@pytest.mark.parametrize("api_version", ["client.authentication.k8s.io/v1alpha1", None, "v1"])
def test_read_request_with_unsupported_api_version_raises_plugin_request_error(api_version: Any) -> None:
    raw = json.dumps({"apiVersion": api_version, "kind": "ExecCredential", "spec": {}})
    with pytest.raises(PluginRequestError, match="supported: client.authentication.k8s.io/v1, client.authentication.k8s.io/v1beta1"):
        read_request({EXEC_INFO_ENV: raw})


def test_plugin_request_error_is_a_value_error() -> None:
    assert issubclass(PluginRequestError, ValueError)


# -- write_response / run_plugin in-process -----------------------------------------------------


def test_write_response_prints_one_json_line_in_the_given_version() -> None:
    stream = io.StringIO()
    write_response(Credential(token="abc"), API_VERSION_V1BETA1, stream)
    text = stream.getvalue()
    assert text.endswith("\n") and text.count("\n") == 1
    assert json.loads(text) == {"apiVersion": API_VERSION_V1BETA1, "kind": "ExecCredential", "status": {"token": "abc"}}


def test_run_plugin_exits_0_after_answering(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(EXEC_INFO_ENV, exec_info(API_VERSION_V1BETA1))
    with pytest.raises(SystemExit) as info:
        run_plugin(lambda request: Credential(token=f"for-{request.api_version}"))
    assert info.value.code == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["status"]["token"] == f"for-{API_VERSION_V1BETA1}"
    assert json.loads(out)["apiVersion"] == API_VERSION_V1BETA1
    assert err == ""


def test_run_plugin_unsupported_api_version_exits_1_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(EXEC_INFO_ENV, exec_info("client.authentication.k8s.io/v1alpha1"))
    called = []
    with pytest.raises(SystemExit) as info:
        run_plugin(lambda request: called.append(request) or Credential(token="x"), name="my-plugin")
    assert info.value.code == 1
    assert called == []
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("my-plugin: ") and "client.authentication.k8s.io/v1alpha1" in err
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    "raw",
    ["[" * 25_000, '{"kind": "ExecCredential", "apiVersion": 1' + "1" * 5000 + "}", '{"a": 1, "a": 2}', "\ud800"],
    ids=["deep", "huge-int", "duplicate-key", "surrogate"],
)
def test_hostile_exec_info_is_a_credential_error_with_nothing_chained(raw: str) -> None:
    from cpcreds import CredentialError

    with pytest.raises(CredentialError) as failure:
        read_request({"KUBERNETES_EXEC_INFO": raw})
    assert isinstance(failure.value, PluginRequestError)
    assert failure.value.__cause__ is None and failure.value.__context__ is None


def test_unsupported_api_version_is_quoted_only_when_it_looks_like_one() -> None:
    secret = "tok-" + "S" * 80
    with pytest.raises(PluginRequestError) as failure:
        read_request({"KUBERNETES_EXEC_INFO": json.dumps({"kind": "ExecCredential", "apiVersion": secret})})
    assert secret not in str(failure.value)


# -- run_provider: an in-process provider as an exec plugin ---------------------------------------

# A provider as a contrib package would register it: options validated by a pydantic model, the
# plan's cluster config and options echoed into the token so a test can see what it received.
PROVIDER_PLUGIN = """\
from pydantic import BaseModel, ConfigDict, Field

from cpcreds import Credential, ProviderError
from cpcreds.exec.plugin import provider_main


class Options(BaseModel):
    model_config = ConfigDict(extra="forbid")
    audience: str = "default-audience"
    retries: int = Field(default=1, ge=0, le=5)
    scopes: list[str] | str = []
    fail: bool = False


class EchoProvider:
    def __init__(self, options):
        self.options = Options.model_validate(dict(options))

    def get_credential(self, plan):
        if self.options.fail:
            raise ProviderError("the vault is sealed", provider=plan.provider)
        name = (plan.cluster.config or {}).get("clusterName") if isinstance(plan.cluster.config, dict) else None
        scopes = self.options.scopes if isinstance(self.options.scopes, list) else [self.options.scopes]
        return Credential(token="|".join([plan.provider, plan.kind, str(name), plan.cluster.server, self.options.audience, str(self.options.retries), ",".join(scopes)]))


main = provider_main("echo", EchoProvider, options={"audience": "from-defaults"})
main()
"""


@pytest.mark.parametrize("api_version", [API_VERSION_V1, API_VERSION_V1BETA1])
def test_run_provider_answers_in_the_requested_version_with_flags_as_options(tmp_path: Path, api_version: str) -> None:
    script = write_plugin(tmp_path, "cpcreds-echo", PROVIDER_PLUGIN)
    config = ProviderConfig.from_dict(
        {
            "providers": [
                {
                    "name": PROVIDER,
                    "execConfig": {
                        "apiVersion": api_version,
                        "command": str(script),
                        "args": ["--retries", "3", "--scopes=a", "--scopes", "b"],
                        "provideClusterInfo": True,
                    },
                }
            ]
        }
    )
    profile = plan_for(script, api_version)
    plan = resolve(config, {"metadata": {"name": "spoke-3"}, "status": {"accessProviders": [{"name": PROVIDER, "cluster": {"server": profile.cluster.server, "extensions": [{"name": EXEC_EXTENSION, "extension": {"clusterName": "spoke-3"}}]}}]}})
    credential = ExecProvider().get_credential(plan)
    assert credential.token == "echo|echo|spoke-3|https://spoke-3.example:6443|from-defaults|3|a,b"


def test_run_provider_without_cluster_info_gets_an_empty_cluster(tmp_path: Path) -> None:
    script = write_plugin(tmp_path, "cpcreds-echo", PROVIDER_PLUGIN)
    result = _run_directly_with(script, exec_info(API_VERSION_V1BETA1), "--audience=mine", "--scopes", "x")
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["apiVersion"] == API_VERSION_V1BETA1
    assert answer["status"]["token"] == "echo|echo|None||mine|1|x"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--retries=9"], "cpcreds-echo: option retries: must be at most 5\n"),
        (["--colour=red"], "cpcreds-echo: option colour: is not a known field\n"),
        (["stray-secret-value"], "cpcreds-echo: argument 1 is not an option flag (expected --name=value or -name value)\n"),
        (["--retries=1", "-9"], "cpcreds-echo: '-9' is not an option flag (expected --name=value or -name value)\n"),
        (["token=hunter2"], "cpcreds-echo: argument 1 is not an option flag (expected --name=value or -name value)\n"),
        (["--fail"], "cpcreds-echo: provider echo: the vault is sealed\n"),
    ],
)
def test_run_provider_errors_are_one_line_and_exit_1(tmp_path: Path, args: list[str], expected: str) -> None:
    script = write_plugin(tmp_path, "cpcreds-echo", PROVIDER_PLUGIN)
    result = _run_directly_with(script, exec_info(), *args)
    assert (result.returncode, result.stdout, result.stderr) == (1, "", expected)


def test_run_provider_refuses_an_unsupported_request_version(tmp_path: Path) -> None:
    script = write_plugin(tmp_path, "cpcreds-echo", PROVIDER_PLUGIN)
    result = _run_directly_with(script, exec_info("client.authentication.k8s.io/v1alpha1"))
    assert result.returncode == 1
    assert result.stderr.startswith(f"cpcreds-echo: {EXEC_INFO_ENV} asks for apiVersion 'client.authentication.k8s.io/v1alpha1'")


def test_run_provider_help_describes_the_provider_and_exits_0(tmp_path: Path) -> None:
    script = write_plugin(tmp_path, "cpcreds-echo", PROVIDER_PLUGIN)
    result = _run_directly_with(script, None, "--help")
    assert result.returncode == 0
    assert result.stdout.startswith("usage: cpcreds-echo [--OPTION=VALUE ...]")
    assert "'echo'" in result.stdout


# The same provider with an options model the SDK reads: --help and unknown flags come from it.
MODELLED_PLUGIN = PROVIDER_PLUGIN.replace(
    "class EchoProvider:\n", 'class EchoProvider:\n    options_model = Options\n'
).replace(
    "class Options(BaseModel):\n", 'class Options(BaseModel):\n    """Echoes its options into the token."""\n\n'
).replace(
    "    audience: str = \"default-audience\"\n",
    '    audience: str = Field(default="default-audience", description="Who the token is for.")\n'
    '    retry_count: int = Field(default=1, alias="retryCount", ge=0, le=5)\n'
    '    ttl: float | None = Field(default=None, json_schema_extra={"format": "duration"})\n',
)


def test_run_provider_help_lists_the_options_model_with_types_and_defaults(tmp_path: Path) -> None:
    script = write_plugin(tmp_path, "cpcreds-echo", MODELLED_PLUGIN)
    result = _run_directly_with(script, None, "--help")
    assert (result.returncode, result.stderr) == (0, "")
    lines = result.stdout.splitlines()
    assert lines[0] == "usage: cpcreds-echo [--OPTION=VALUE ...]"
    assert "Echoes its options into the token." in lines
    assert [line for line in lines if line.startswith("  --")] == [
        "  --audience  string; default: default-audience",
        "  --retryCount  whole number; default: 1",
        "  --ttl  duration; default: unset",
        "  --retries  whole number; default: 1",
        "  --scopes  list of strings (repeat the flag) or string; default: none",
        "  --fail  true or false; default: false",
    ]
    assert "      Who the token is for." in lines
    assert "kebab-case works too: --retry-count" in result.stdout


def test_run_provider_refuses_an_unknown_flag_with_did_you_mean_before_reading_the_request(tmp_path: Path) -> None:
    script = write_plugin(tmp_path, "cpcreds-echo", MODELLED_PLUGIN)
    # The request is not even JSON: the flag is refused first.
    result = _run_directly_with(script, "not json", "--retry-cuont=2")
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        "cpcreds-echo: option retryCuont: is not a known option; did you mean 'retryCount'? "
        "(options: audience, retryCount, ttl, retries, scopes, fail; --help describes them)\n"
    )
    # Every spelling of a known option still works.
    answered = _run_directly_with(script, exec_info(), "--retry-count=2", "--retryCount=3")
    assert answered.returncode == 1 and "option retryCount: must be a whole number, not a list" in answered.stderr


def _run_directly_with(plugin: Path, exec_info_value: str | None, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != EXEC_INFO_ENV}
    if exec_info_value is not None:
        env[EXEC_INFO_ENV] = exec_info_value
    return subprocess.run([str(plugin), *args], env=env, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)


def test_parse_option_flags_spellings() -> None:
    assert parse_option_flags(["--secret-name=x", "--key", "k", "--insecure", "--ns", "a", "--ns=b"]) == {
        "secretName": "x",
        "key": "k",
        "insecure": "true",
        "ns": ["a", "b"],
    }
    assert parse_option_flags(["--secretName", "--x=="]) == {"secretName": "true", "x": "="}
    # Go's flag spelling, as the Go plugins' profile-sourced arguments use it.
    assert parse_option_flags(["-audience", "spoke", "-debug", "-n=3"]) == {"audience": "spoke", "debug": "true", "n": "3"}
    # Go plugins' snake_case flags (gke-gcloud-auth-plugin --use_application_default_credentials).
    assert parse_option_flags(["--use_application_default_credentials"]) == {"use_application_default_credentials": "true"}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=30), max_size=12))
def test_parse_option_flags_takes_any_argv_and_raises_only_its_error(argv: list[str]) -> None:
    try:
        options = parse_option_flags(argv)
    except OptionFlagError as exc:
        # Never quotes an argument that could be a secret: only short, flag-shaped ones.
        for argument in argv:
            if len(argument) > 3 and not argument.startswith("-"):
                assert repr(argument) not in str(exc)
    else:
        assert all(isinstance(value, (str, list)) for value in options.values())


# -- every provider's remaining time (cpcreds.sdk.deadline) ------------------------------------------


def _engine_for(factory: Any, timeout: str) -> Any:
    from cpcreds import CredentialEngine, ProviderRegistry
    from cpcreds.sdk import hookimpl

    class Plugin:
        @hookimpl
        def cpcreds_register_providers(self, register: Any) -> None:
            register("patient", factory)

    config = ProviderConfig.from_dict({"providers": [{"name": "vault", "type": "patient", "timeout": timeout}]})
    return CredentialEngine(config, registry=ProviderRegistry(entry_points=False, plugins=(Plugin(),)))


_PROFILE = {
    "apiVersion": "multicluster.x-k8s.io/v1alpha1",
    "kind": "ClusterProfile",
    "metadata": {"name": "a"},
    "status": {"accessProviders": [{"name": "vault", "cluster": {"server": "https://a.example"}}]},
}


def test_an_in_process_provider_sees_its_remaining_time_and_its_own_error_wins_over_the_engine_timeout() -> None:
    import threading

    from cpcreds import ProviderError, ProviderTimeout
    from cpcreds.sdk import DEADLINE_MARGIN, deadline

    seen: list[tuple[float, float]] = []

    class Patient:
        """Waits for an endpoint that never answers, until the fetch's deadline, then says which."""

        def __init__(self, options: Any) -> None:
            pass

        def get_credential(self, plan: AccessPlan) -> Credential:
            until = deadline()
            seen.append((until.seconds, until.remaining()))
            threading.Event().wait(max(0.0, until.remaining()))  # the endpoint that never answers
            raise ProviderError(f"https://vault.example/ did not answer within the {until.shown()} timeout", provider=plan.provider)

    # 3 s: the provider's error comes 0.6 s before the engine's timeout, room for a loaded machine.
    engine = _engine_for(Patient, "3s")
    try:
        with pytest.raises(ProviderError) as caught:
            engine.get_credential(_PROFILE)
    finally:
        engine.close()
    assert not isinstance(caught.value, ProviderTimeout)
    assert "https://vault.example/ did not answer within the 3s timeout" in str(caught.value)
    seconds, left = seen[0]
    assert seconds == 3.0 and left <= 3.0 * (1 - DEADLINE_MARGIN)


def test_an_in_process_provider_run_as_an_exec_plugin_sees_the_deadline(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from cpcreds.sdk import DEADLINE_MARGIN, deadline, run_provider

    monkeypatch.delenv(EXEC_INFO_ENV, raising=False)

    class Reporter:
        def __init__(self, options: Any) -> None:
            pass

        def get_credential(self, plan: AccessPlan) -> Credential:
            until = deadline()
            return Credential(token=f"t-{until.shown()}-{until.remaining() <= (1 - DEADLINE_MARGIN) * plan.timeout}")

    with pytest.raises(SystemExit) as exited:
        run_provider(Reporter, name="reporter", argv=[], timeout=5.0)
    assert exited.value.code == 0
    assert json.loads(capsys.readouterr().out)["status"]["token"] == "t-5s-True"


def test_a_provider_called_outside_a_fetch_gets_a_deadline_for_its_timeout() -> None:
    from cpcreds.sdk import DEADLINE_MARGIN, deadline, remaining

    until = deadline(10.0)
    assert until.seconds == 10.0 and 0 < until.remaining() <= 10.0 * (1 - DEADLINE_MARGIN)
    assert remaining(10.0) <= 10.0 * (1 - DEADLINE_MARGIN)


def test_an_image_provider_run_as_a_kubelet_plugin_sees_the_deadline(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from types import SimpleNamespace

    from cpcreds.sdk import DEADLINE_MARGIN, AuthConfig, CredentialProviderResponse, deadline, encode_request, run_image_provider

    class Reporter:
        def __init__(self, options: Any) -> None:
            pass

        def get_image_credential(self, request: Any, *, timeout: float) -> CredentialProviderResponse:
            until = deadline(timeout)
            early = until.remaining() <= (1 - DEADLINE_MARGIN) * until.seconds
            return CredentialProviderResponse(cache_key_type="Global", auth={"registry.example": AuthConfig(username=until.shown(), password=str(early))})

    monkeypatch.setattr(sys, "stdin", SimpleNamespace(buffer=io.BytesIO(encode_request("registry.example/app:1"))))
    monkeypatch.setattr(sys, "argv", ["reporter"])
    with pytest.raises(SystemExit) as exited:
        run_image_provider(Reporter, name="reporter", argv=[], timeout=3.0)
    assert exited.value.code == 0
    auth = json.loads(capsys.readouterr().out)["auth"]["registry.example"]
    assert auth == {"username": "3s", "password": "True"}
