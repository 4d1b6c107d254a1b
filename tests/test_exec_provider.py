"""The KEP-541 exec provider, against a real plugin process (tests/fakes/exec_plugin.py)."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpcreds import (
    API_VERSION_V1,
    API_VERSION_V1BETA1,
    AccessPlan,
    ExecProvider,
    InteractiveModeError,
    PluginExecutionError,
    PluginNotFound,
    PluginOutputError,
    PluginTimeout,
    resolve,
)
from cpcreds.errors import CLIENT_INTERNAL_ERROR, PLUGIN_EXECUTION_ERROR, PLUGIN_NOT_FOUND_ERROR
from tests.fakes.builders import access_provider, cluster_profile, config_of, exec_entry

SECRET = "s3cr3t-t0ken-never-shown"


def plan_for(*plugin_args: str, profile: dict[str, Any] | None = None, timeout: str | None = None, **fields: Any) -> AccessPlan:
    config = config_of(exec_entry("fake", *plugin_args, timeout=timeout, **fields))
    return resolve(config, profile or cluster_profile("spoke-1", access_provider("fake", exec_extension={"clusterName": "spoke-1"})))


def fetch(*plugin_args: str, **kwargs: Any):
    return ExecProvider().get_credential(plan_for(*plugin_args, **kwargs))


def recorded(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def process_gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")  # a zombie waiting for a reaper is no longer running


# -- answers ---------------------------------------------------------------------------------


@pytest.mark.parametrize("api_version", [API_VERSION_V1, API_VERSION_V1BETA1])
def test_token_answer_in_requested_api_version(api_version: str) -> None:
    credential = fetch("--token", "abc", "--expires-in", "3600", api_version=api_version)
    assert credential.token == "abc"
    assert credential.expiration_timestamp is not None
    assert 3500 < (credential.expiration_timestamp.timestamp() - time.time()) <= 3600


def test_answer_without_expiry_has_none() -> None:
    assert fetch("--token", "abc").expiration_timestamp is None


def test_client_certificate_answer(pki, tmp_path: Path) -> None:
    issued = pki.issue_client_cert("fleet-controller")
    (tmp_path / "c.pem").write_text(issued.cert_pem)
    (tmp_path / "k.pem").write_text(issued.key_pem)
    credential = fetch("--no-token", "--cert", str(tmp_path / "c.pem"), "--key", str(tmp_path / "k.pem"))
    assert credential.token is None
    assert credential.client_certificate_data == issued.cert_pem
    assert credential.client_key_data == issued.key_pem
    assert credential.certificate_not_after == issued.not_after


def test_rsa_client_certificate_answer(pki, tmp_path: Path) -> None:
    issued = pki.issue_client_cert("rsa-user", key_type="rsa")
    (tmp_path / "c.pem").write_text(issued.cert_pem)
    (tmp_path / "k.pem").write_text(issued.key_pem)
    credential = fetch("--no-token", "--cert", str(tmp_path / "c.pem"), "--key", str(tmp_path / "k.pem"))
    assert credential.kind == "client-certificate"


def test_yaml_answer_is_accepted_as_client_go_does() -> None:
    assert fetch("--format", "yaml", "--token", "from-yaml").token == "from-yaml"


@pytest.mark.parametrize("stamp", ["2099-01-02T03:04:05Z", "2099-01-02T03:04:05.123456789+02:00"])
def test_rfc3339_expiry_variants(stamp: str) -> None:
    assert fetch("--expiration", stamp).expiration_timestamp.year == 2099


# -- what the plugin sees --------------------------------------------------------------------


@pytest.mark.parametrize("api_version", [API_VERSION_V1, API_VERSION_V1BETA1])
def test_exec_info_without_provide_cluster_info_has_no_cluster(tmp_path: Path, api_version: str) -> None:
    fetch("--record", str(tmp_path / "seen.json"), api_version=api_version)
    seen = recorded(tmp_path / "seen.json")
    assert json.loads(seen["exec_info_raw"]) == {"kind": "ExecCredential", "apiVersion": api_version, "spec": {"interactive": False}}


def test_exec_info_with_provide_cluster_info_carries_every_cluster_field(tmp_path: Path, pki) -> None:
    profile = cluster_profile(
        "spoke-1",
        access_provider(
            "fake",
            "https://10.1.2.3:6443",
            ca_pem=pki.ca_pem,
            exec_extension={"clusterName": "spoke-1", "audience": ["a", "b"]},
            **{"tls-server-name": "spoke.test", "insecure-skip-tls-verify": True, "proxy-url": "https://proxy:3128", "disable-compression": True},
        ),
    )
    fetch("--record", str(tmp_path / "seen.json"), profile=profile, provideClusterInfo=True)
    cluster = recorded(tmp_path / "seen.json")["exec_info"]["spec"]["cluster"]
    assert cluster == {
        "server": "https://10.1.2.3:6443",
        "tls-server-name": "spoke.test",
        "insecure-skip-tls-verify": True,
        "certificate-authority-data": base64.b64encode(pki.ca_pem).decode(),
        "proxy-url": "https://proxy:3128",
        "disable-compression": True,
        "config": {"clusterName": "spoke-1", "audience": ["a", "b"]},
    }


def test_environment_is_process_env_then_configured_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CPCREDS_TEST_FROM_PROCESS", "process")
    monkeypatch.setenv("CPCREDS_TEST_OVERRIDDEN", "process")
    fetch("--record", str(tmp_path / "seen.json"), env=[{"name": "CPCREDS_TEST_OVERRIDDEN", "value": "configured"}])
    env = recorded(tmp_path / "seen.json")["env"]
    assert env == {"CPCREDS_TEST_FROM_PROCESS": "process", "CPCREDS_TEST_OVERRIDDEN": "configured"}


def test_profile_sourced_args_and_env_reach_the_plugin(tmp_path: Path) -> None:
    profile = cluster_profile(
        "c",
        access_provider("fake", additional_args=["--audience", "spoke"], additional_envs={"CPCREDS_TEST_TENANT": "t1"}),
    )
    fetch(
        "--record", str(tmp_path / "seen.json"), profile=profile,
        profileSourcedCLIArgsPolicy="Append", profileSourcedEnvVarsPolicy="AppendIfNotExists",
    )
    seen = recorded(tmp_path / "seen.json")
    assert seen["extra_args"] == ["--audience", "spoke"]
    assert seen["env"] == {"CPCREDS_TEST_TENANT": "t1"}


def test_non_interactive_plugin_gets_no_stdin_and_its_own_process_group(tmp_path: Path) -> None:
    fetch("--record", str(tmp_path / "seen.json"))
    seen = recorded(tmp_path / "seen.json")
    assert seen["stdin_isatty"] is False
    assert seen["exec_info"]["spec"]["interactive"] is False
    assert seen["pgid_is_own"] is True


def test_plugin_of_a_process_with_a_terminal_cannot_reach_that_terminal(tmp_path: Path) -> None:
    # With a controlling terminal, a non-interactive plugin gets a session of its own (without a
    # terminal, its own process group is enough): it can neither read the terminal nor be
    # stopped by it. The engine runs in a child process that makes a pseudo-terminal its own.
    primary, secondary = os.openpty()
    script = (
        "import os, sys\n"
        "os.setsid()\n"
        "os.close(os.open(sys.argv[1], os.O_RDWR))  # a session leader's first terminal becomes its own\n"
        "assert os.open('/dev/tty', os.O_RDONLY) >= 0\n"
        "from tests.test_exec_provider import fetch\n"
        "fetch('--record', sys.argv[2])\n"
    )
    try:
        subprocess.run(
            [sys.executable, "-c", script, os.ttyname(secondary), str(tmp_path / "seen.json")],
            cwd=Path(__file__).resolve().parent.parent, check=True, timeout=60, stdin=subprocess.DEVNULL,
        )
    finally:
        os.close(primary)
        os.close(secondary)
    seen = recorded(tmp_path / "seen.json")
    assert seen["opens_terminal"] is False
    assert seen["pgid_is_own"] is True


def test_always_interactive_without_a_terminal_fails_without_running(tmp_path: Path) -> None:
    count = tmp_path / "runs"
    with pytest.raises(InteractiveModeError, match="standard input is not a terminal") as info:
        fetch("--count-file", str(count), interactiveMode="Always")
    assert info.value.call_status == CLIENT_INTERNAL_ERROR
    assert not count.exists()


def test_if_available_without_a_terminal_runs_non_interactively(tmp_path: Path) -> None:
    fetch("--record", str(tmp_path / "seen.json"), interactiveMode="IfAvailable")
    assert recorded(tmp_path / "seen.json")["exec_info"]["spec"]["interactive"] is False


def test_interactive_plugin_reads_the_terminal(tmp_path: Path) -> None:
    """IfAvailable with a real terminal: the plugin gets stdin and spec.interactive is true."""
    import pty

    script = (
        "import sys, json\n"
        "from cpcreds import ExecProvider, resolve\n"
        "from tests.fakes.builders import access_provider, cluster_profile, config_of, exec_entry\n"
        f"config = config_of(exec_entry('fake', '--read-stdin', '--record', {str(tmp_path / 'seen.json')!r}, interactiveMode='IfAvailable'))\n"
        "plan = resolve(config, cluster_profile('c', access_provider('fake')))\n"
        "print('TOKEN=' + ExecProvider().get_credential(plan).token, flush=True)\n"
    )
    pid, fd = pty.fork()
    if pid == 0:  # child: the terminal is our stdin
        os.chdir(Path(__file__).parent.parent)
        os.execv(sys.executable, [sys.executable, "-c", script])
    os.write(fd, b"typed-at-terminal\n")
    output = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        output += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, output
    assert b"TOKEN=typed-at-terminal" in output
    seen = recorded(tmp_path / "seen.json")
    assert seen["exec_info"]["spec"]["interactive"] is True
    assert seen["stdin_isatty"] is True


# -- bad plugins -----------------------------------------------------------------------------


def test_missing_executable_names_it_with_install_hint() -> None:
    plan = resolve(
        config_of({"name": "g", "execConfig": {"apiVersion": API_VERSION_V1, "command": "no-such-plugin-xyz", "installHint": "pip install\n  xyz"}}),
        cluster_profile("c", access_provider("g")),
    )
    with pytest.raises(PluginNotFound) as info:
        ExecProvider().get_credential(plan)
    assert str(info.value) == "provider g: exec: executable no-such-plugin-xyz not found on PATH; install hint: pip install xyz"
    assert info.value.call_status == PLUGIN_NOT_FOUND_ERROR


def test_non_executable_file_is_not_found(tmp_path: Path) -> None:
    script = tmp_path / "plugin"
    script.write_text("#!/bin/sh\necho hi\n")
    plan = resolve(config_of({"name": "g", "execConfig": {"apiVersion": API_VERSION_V1, "command": str(script)}}), cluster_profile("c", access_provider("g")))
    with pytest.raises(PluginNotFound, match="is not executable"):
        ExecProvider().get_credential(plan)


def test_non_zero_exit_reports_code_and_stderr() -> None:
    with pytest.raises(PluginExecutionError) as info:
        fetch("--exit-code", "3", "--stderr", "login required:\n run `gcloud auth login`")
    assert str(info.value) == f"provider fake: exec: {sys.executable} exited with code 3: login required: run `gcloud auth login`"
    assert info.value.exit_code == 3
    assert info.value.call_status == PLUGIN_EXECUTION_ERROR


def test_plugin_killed_by_signal_is_reported() -> None:
    plan = resolve(
        config_of({"name": "g", "execConfig": {"apiVersion": API_VERSION_V1, "command": "/bin/sh", "args": ["-c", "kill -SEGV $$"]}}),
        cluster_profile("c", access_provider("g")),
    )
    with pytest.raises(PluginExecutionError, match="was killed by SIGSEGV"):
        ExecProvider().get_credential(plan)


def test_hanging_plugin_times_out_and_its_whole_process_group_is_killed(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    started = time.monotonic()
    with pytest.raises(PluginTimeout) as info:
        fetch("--child-pidfile", str(pidfile), "--hang", timeout="1s")
    assert time.monotonic() - started < 10
    assert "did not answer within 1s; its process group was killed" in str(info.value)
    assert info.value.exit_code == -1
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while not process_gone(child) and time.monotonic() < deadline:
        time.sleep(0.01)  # polling for the kernel to finish the kill, not synchronising with us
    assert process_gone(child)


def test_child_left_holding_stdout_does_not_stall_a_finished_plugin(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    started = time.monotonic()
    credential = fetch("--child-pidfile", str(pidfile), "--linger-child", "--token", "ok", timeout="20s")
    assert credential.token == "ok"
    assert time.monotonic() - started < 10  # not the 20 s deadline
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while not process_gone(child) and time.monotonic() < deadline:
        time.sleep(0.01)  # polling for the kernel to finish the kill, not synchronising with us
    assert process_gone(child)  # no helper outlives its plugin


@pytest.mark.parametrize("use_pidfd", [True, False], ids=["pidfd", "no-pidfd"])
def test_output_larger_than_a_pipe_is_read_whole(use_pidfd: bool) -> None:
    # Both pipes fill before the plugin can exit: a quiet wait for the exit alone must give way
    # to reading them, and the answer arrives whole.
    token = "t" * (100 * 1024)
    plan = plan_for("--stderr-spam-bytes", str(300 * 1024), "--token", token, timeout="20s")
    started = time.monotonic()
    assert ExecProvider(use_pidfd=use_pidfd).get_credential(plan).token == token
    assert time.monotonic() - started < 10  # not the 20 s deadline


def test_sixty_megabytes_of_output_is_an_error_not_an_allocation() -> None:
    with pytest.raises(PluginExecutionError, match=r"wrote more than 4194304 bytes to stdout; killed"):
        fetch("--spam-bytes", str(60 * 1024 * 1024))


def test_stderr_flood_keeps_only_a_bounded_tail() -> None:
    with pytest.raises(PluginExecutionError) as info:
        fetch("--stderr-spam-bytes", str(5 * 1024 * 1024), "--stderr", "the real reason", "--exit-code", "1")
    message = str(info.value)
    assert message.endswith("the real reason")
    assert len(message) < 5000


@pytest.mark.parametrize(
    ("plugin_args", "fields", "reason"),
    [
        (("--api-version", API_VERSION_V1BETA1), {}, "apiVersion 'client.authentication.k8s.io/v1beta1', but it is configured to use 'client.authentication.k8s.io/v1'"),
        (("--kind", "Secret"), {}, "kind 'Secret', expected 'ExecCredential'"),
        (("--no-status",), {}, "no status field"),
        (("--no-token",), {}, "no token and no client certificate/key pair"),
        (("--raw", ""), {}, "nothing on stdout"),
        (("--raw", "{not json: [}"), {}, "neither JSON nor YAML"),
        (("--raw", "[1, 2]"), {}, "a list, not an ExecCredential object"),
        (("--expiration", "tomorrow"), {}, "is not an RFC 3339 timestamp"),
        (("--expiration", "2030-01-01T00:00:00"), {}, "is not an RFC 3339 timestamp"),
        (("--raw", '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":5}}'), {}, "field status.token"),
    ],
)
def test_lying_plugin_answers_are_rejected(plugin_args: tuple, fields: dict, reason: str) -> None:
    with pytest.raises(PluginOutputError) as info:
        fetch(*plugin_args, **fields)
    assert reason in str(info.value)


def test_certificate_without_key_is_rejected(pki, tmp_path: Path) -> None:
    issued = pki.issue_client_cert("x")
    (tmp_path / "c.pem").write_text(issued.cert_pem)
    with pytest.raises(PluginOutputError, match="only one of client certificate and key"):
        fetch("--no-token", "--cert", str(tmp_path / "c.pem"))


def test_key_of_another_certificate_is_rejected(pki, tmp_path: Path) -> None:
    (tmp_path / "c.pem").write_text(pki.issue_client_cert("a").cert_pem)
    (tmp_path / "k.pem").write_text(pki.issue_client_cert("b").key_pem)
    with pytest.raises(PluginOutputError, match="does not match"):
        fetch("--no-token", "--cert", str(tmp_path / "c.pem"), "--key", str(tmp_path / "k.pem"))


def test_expired_client_certificate_is_rejected(pki, tmp_path: Path) -> None:
    from datetime import datetime, timedelta, timezone

    now = datetime.now(timezone.utc)
    issued = pki.issue_client_cert("old", not_before=now - timedelta(days=2), not_after=now - timedelta(hours=1))
    (tmp_path / "c.pem").write_text(issued.cert_pem)
    (tmp_path / "k.pem").write_text(issued.key_pem)
    with pytest.raises(PluginOutputError, match="a client certificate that expired at"):
        fetch("--no-token", "--cert", str(tmp_path / "c.pem"), "--key", str(tmp_path / "k.pem"))


def test_client_certificate_from_the_far_future_is_rejected(pki, tmp_path: Path) -> None:
    from datetime import datetime, timedelta, timezone

    now = datetime.now(timezone.utc)
    issued = pki.issue_client_cert("early", not_before=now + timedelta(hours=1), not_after=now + timedelta(days=1))
    (tmp_path / "c.pem").write_text(issued.cert_pem)
    (tmp_path / "k.pem").write_text(issued.key_pem)
    with pytest.raises(PluginOutputError, match="not valid before"):
        fetch("--no-token", "--cert", str(tmp_path / "c.pem"), "--key", str(tmp_path / "k.pem"))


def test_garbage_certificate_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "c.pem").write_text("-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n")
    (tmp_path / "k.pem").write_text("nope")
    with pytest.raises(PluginOutputError, match="clientCertificateData is not a PEM certificate"):
        fetch("--no-token", "--cert", str(tmp_path / "c.pem"), "--key", str(tmp_path / "k.pem"))


def test_a_rejected_answer_never_quotes_the_secret() -> None:
    for args in (("--api-version", API_VERSION_V1BETA1), ("--kind", "Nope"), ("--expiration", SECRET), ("--api-version", SECRET), ("--kind", SECRET)):
        with pytest.raises(PluginOutputError) as info:
            fetch("--token", SECRET, *args)
        assert SECRET not in str(info.value)
    with pytest.raises(PluginOutputError) as info:
        fetch("--raw", f"token: {SECRET}\n: : :")
    assert SECRET not in str(info.value)


def test_plugin_that_dies_from_sigterm_reports_it(tmp_path: Path) -> None:
    plan = resolve(
        config_of({"name": "g", "execConfig": {"apiVersion": API_VERSION_V1, "command": "/bin/sh", "args": ["-c", f"kill -{int(signal.SIGTERM)} $$"]}}),
        cluster_profile("c", access_provider("g")),
    )
    with pytest.raises(PluginExecutionError, match="killed by SIGTERM"):
        ExecProvider().get_credential(plan)


# What a /bin/sh plugin answers: its ignored-signal mask (SigIgn in /proc/self/status, hex) as the
# token. The shell changes no disposition before the script runs, unlike a Python plugin.
_SIGNAL_MASK_SCRIPT = (
    'mask=$(sed -n "s/^SigIgn:[[:space:]]*//p" /proc/$$/status)\n'
    "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"%s\"}}' \"$mask\"\n"
)


def _ignored_by_plugin() -> set[int]:
    execconfig = {"apiVersion": API_VERSION_V1, "command": "/bin/sh", "args": ["-c", _SIGNAL_MASK_SCRIPT]}
    plan = resolve(config_of({"name": "s", "execConfig": execconfig}), cluster_profile("c", access_provider("s")))
    mask = int(ExecProvider().get_credential(plan).token, 16)
    return {number for number in range(1, 65) if mask >> (number - 1) & 1}


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the plugin's signal mask from /proc")
def test_a_plugin_starts_with_the_signals_python_ignores_at_their_default() -> None:
    # Python ignores SIGPIPE and SIGXFSZ for itself; a plugin inheriting that would see a
    # pipeline's writer fail with EPIPE instead of ending quietly (client-go's plugins do not).
    assert signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN
    assert not _ignored_by_plugin() & {signal.SIGPIPE, signal.SIGXFSZ}


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the plugin's signal mask from /proc")
@pytest.mark.parametrize("number", [signal.SIGHUP, signal.SIGINT], ids=["nohup", "background-job"])
def test_a_hangup_or_interrupt_this_process_ignores_stays_ignored_in_the_plugin(number: signal.Signals) -> None:
    # As in Go: a process run under nohup (SIGHUP) or as a shell's background job (SIGINT)
    # passes that on; whatever else it ignores, the plugin starts at the default action.
    previous = signal.signal(number, signal.SIG_IGN)
    try:
        ignored = _ignored_by_plugin()
    finally:
        signal.signal(number, previous)
    assert number in ignored
    assert signal.SIGPIPE not in ignored
    assert number not in _ignored_by_plugin()


# -- hostile answers and the command's origin (issue 7, the exec side) ---------------------------

HOSTILE_SECRET = "tok-HOSTILE-9d1e"


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return seen


@pytest.mark.parametrize(
    "raw",
    [
        '{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": {"token": "%s"' % HOSTILE_SECRET,
        "status: {token: %s\n  bad: [" % HOSTILE_SECRET,
        '{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": {"token": 5, "x": "%s"}}' % HOSTILE_SECRET,
        '{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": {"token": "%s", "expirationTimestamp": "%s"}}'
        % (HOSTILE_SECRET, HOSTILE_SECRET),
    ],
    ids=["truncated-json", "broken-yaml", "wrong-type", "bad-expiry"],
)
def test_rejected_answer_leaves_no_trace_of_itself_in_the_error_or_its_chain(raw: str) -> None:
    with pytest.raises(PluginOutputError) as failure:
        fetch("--raw", raw)
    for exc in _chain(failure.value):
        assert HOSTILE_SECRET not in str(exc) and HOSTILE_SECRET not in repr(exc.args)
    assert failure.value.__context__ is None and failure.value.__cause__ is None


@pytest.mark.parametrize(
    "raw",
    ["[" * 25_000, '{"a":' * 25_000, "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(f"{c}: &{c} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n" for p, c in zip("abcdefgh", "bcdefghi"))],
    ids=["deep-yaml", "deep-json", "billion-laughs"],
)
def test_bomb_answers_fail_fast_and_cleanly(raw: str) -> None:
    started = time.monotonic()
    with pytest.raises(PluginOutputError, match="neither JSON nor YAML"):
        fetch("--raw", raw)
    assert time.monotonic() - started < 5  # the plugin's start-up; the parse itself is milliseconds


def test_bare_command_is_found_on_our_path_not_the_plugins(tmp_path: Path) -> None:
    # A configured (or profile-sourced) PATH in the plugin's environment must not choose what runs.
    decoy = tmp_path / "bin"
    decoy.mkdir()
    (decoy / "cpcreds-test-plugin").write_text("#!/bin/sh\necho decoy ran >&2\nexit 9\n")
    (decoy / "cpcreds-test-plugin").chmod(0o755)
    plan = plan_for(env=[{"name": "PATH", "value": str(decoy)}])
    spec = plan.exec
    assert spec is not None
    from dataclasses import replace

    plan = replace(plan, exec=replace(spec, command="cpcreds-test-plugin", args=()))
    with pytest.raises(PluginNotFound, match="not found on PATH"):
        ExecProvider().get_credential(plan)


# -- an answer read while the plugin ends ------------------------------------------------------

ANSWER = '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"early-token"}}'


def shell_plan(script: str, **fields: Any) -> AccessPlan:
    entry = {"name": "g", "execConfig": {"apiVersion": API_VERSION_V1, "command": "/bin/sh", "args": ["-c", script]}, **fields}
    return resolve(config_of(entry), cluster_profile("c", access_provider("g")))


def test_an_answer_written_before_a_slow_end_is_the_credential() -> None:
    assert ExecProvider().get_credential(shell_plan(f"printf '%s' '{ANSWER}'; sleep 0.2")).token == "early-token"


def test_an_answer_followed_by_a_failing_exit_is_that_failure() -> None:
    with pytest.raises(PluginExecutionError) as info:
        ExecProvider().get_credential(shell_plan(f"printf '%s' '{ANSWER}'; sleep 0.2; exit 3"))
    assert info.value.exit_code == 3


def test_an_answer_followed_by_more_output_is_read_whole() -> None:
    with pytest.raises(PluginOutputError, match="neither JSON nor YAML"):
        ExecProvider().get_credential(shell_plan(f"printf '%s' '{ANSWER}'; sleep 0.2; printf 'more'"))


def test_an_answer_followed_by_a_hang_is_a_timeout() -> None:
    with pytest.raises(PluginTimeout):
        ExecProvider().get_credential(shell_plan(f"printf '%s' '{ANSWER}'; exec sleep 30", timeout="1s"))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=1, max_value=len(ANSWER) - 1))
def test_an_answer_written_in_two_parts_is_read_whole(split: int) -> None:
    first, rest = ANSWER[:split], ANSWER[split:]
    assert ExecProvider().get_credential(shell_plan(f"printf '%s' '{first}'; sleep 0.05; printf '%s' '{rest}'")).token == "early-token"
