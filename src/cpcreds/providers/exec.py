"""The KEP-541 exec provider: run a credential plugin and validate its ExecCredential answer.

Behaves as client-go's exec authenticator (``plugin/pkg/client/auth/exec``) does for one call,
with the safety it lacks:

- every run has a deadline; on expiry the plugin's whole process group is killed (its children
  too), because a plugin stuck on a network call must not hang a controller;
- stdout is bounded (a plugin printing 60 MB gets an error, not our memory) and only the tail of
  stderr is kept, for the error message;
- after the plugin exits, whatever it left running in its process group is killed, so a stray
  child holding the pipe open cannot stall us until the deadline.

The environment is the process environment, then the configured env, then KUBERNETES_EXEC_INFO,
exactly as client-go builds it. stdin is handed over only when the run is interactive (client-go
reasons that a plugin must not fight its caller for a terminal it was not promised).
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from collections.abc import Callable
from typing import Any, NamedTuple

from ..access import AccessPlan, ExecSpec, cluster_json, json_value
from .._parse import Limits, load_or_raise
from ..config import PluginPolicy, json_type_name
from ..credential import Credential, format_rfc3339
from ..errors import (
    CLIENT_INTERNAL_ERROR,
    NO_ERROR,
    CredentialError,
    InteractiveModeError,
    PluginError,
    PluginExecutionError,
    PluginNotAllowed,
    PluginNotFound,
    PluginOutputError,
    PluginTimeout,
    ProviderError,
    ProviderTimeout,
)
from ..hookspecs import hookimpl
from ..kep import EXEC_INFO_ENV
from ..logs import get_logger, redact_text
from ..pluginpolicy import PluginGate

__all__ = ["ExecProvider", "Job", "MAX_STDOUT_BYTES", "STDERR_TAIL_BYTES", "exec_info", "RunResult", "terminate_running_plugins", "find_executable"]

_log = get_logger(__name__)

#: A credential answer is a few KiB (a certificate chain at most); 4 MiB is generous and bounded.
MAX_STDOUT_BYTES = 4 * 1024 * 1024
#: How much of the plugin's stderr is kept for the error message (the end is the useful part).
STDERR_TAIL_BYTES = 4096
_READ_CHUNK = 65536
#: Without a pidfd, the plugin's exit is looked for after 1 ms, then ever less often, up to
#: every 20 ms: a fast plugin is noticed at once, a slow one costs few wake-ups.
_FIRST_TICK = 0.001
_LAST_TICK = 0.02

# Process groups of all running plugins (all providers), for terminate_running_plugins().
_RUNNING_GROUPS: set[int] = set()
_groups_lock = threading.Lock()
#: How far in the future a client certificate's notBefore may be (clock differences).
CLOCK_SKEW = timedelta(minutes=5)
#: KUBERNETES_EXEC_INFO is compact JSON, non-ASCII escaped.
_EXEC_INFO_ENCODER = json.JSONEncoder(separators=(",", ":"))


def exec_info(spec: ExecSpec, plan: AccessPlan, *, interactive: bool) -> str:
    """The KUBERNETES_EXEC_INFO value: the ExecCredential request, as client-go encodes it.

    The JSON of ``{"kind": "ExecCredential", "apiVersion": ..., "spec": {"interactive": ...,
    "cluster": {...}}}``, written piece by piece so that the usual request never starts the JSON
    encoder (see :func:`~cpcreds.access.compact_json`)."""
    cluster = ',"cluster":' + cluster_json(plan.cluster, _EXEC_INFO_ENCODER) if spec.provide_cluster_info else ""
    return (
        '{"kind":"ExecCredential","apiVersion":' + json_value(spec.api_version, _EXEC_INFO_ENCODER)
        + ',"spec":{"interactive":' + json_value(interactive, _EXEC_INFO_ENCODER) + cluster + "}}"
    )  # fmt: skip


class Job(NamedTuple):
    """What a run is for, as errors name it: the provider, the command as configured, the
    timeout the deadline came from, and the command's install hint."""

    provider: str
    command: str
    timeout: float
    install_hint: str | None = None


class RunResult:
    """The outcome of one plugin process (internal; exposed for metrics)."""

    __slots__ = ("exit_code", "stdout", "stderr_tail", "duration")

    def __init__(self, exit_code: int, stdout: bytes, stderr_tail: bytes, duration: float) -> None:
        self.exit_code, self.stdout, self.stderr_tail, self.duration = exit_code, stdout, stderr_tail, duration


_EXEC_INFO_ENV_BYTES = EXEC_INFO_ENV.encode()


def _process_environment() -> dict[bytes, bytes]:
    """A copy of the process environment, already encoded as the child needs it.

    ``dict(os.environ)`` decodes every variable only for subprocess to encode it again, which
    costs more than the rest of our per-run work together; CPython keeps the encoded form.
    """
    data = getattr(os.environ, "_data", None)
    if isinstance(data, dict):
        return dict(data)
    return {os.fsencode(k): os.fsencode(v) for k, v in os.environ.items()}


def _stdin_is_terminal() -> bool:
    try:
        return sys.stdin is not None and os.isatty(sys.stdin.fileno())
    except (ValueError, OSError, AttributeError):
        return False


def _is_interactive(spec: ExecSpec, provider: str) -> bool:
    # client-go: Never -> no stdin; IfAvailable -> stdin if it is a terminal and available;
    # Always -> a terminal is required, else the plugin is not run at all.
    mode = spec.interactive_mode
    if mode == "Never":
        return False
    available = not spec.stdin_unavailable and _stdin_is_terminal()
    if mode == "Always" and not available:
        reason = "standard input is unavailable" if spec.stdin_unavailable else "standard input is not a terminal"
        raise InteractiveModeError(
            f"exec plugin cannot support interactive mode: {reason} (interactiveMode is Always)", provider=provider
        )
    return available


#: Largest stdout of a failed plugin that is looked at for a status message.
_STATUS_BYTES = 65536
#: Longest part of a plugin's own failure message kept in an error.
_STATUS_MESSAGE_CHARS = 512


def _status_message(stdout: bytes | bytearray) -> str | None:
    """What a failed plugin said on stdout, if it said it the Kubernetes way: a ``metav1.Status``
    (``{"kind": "Status", "message": ..., "reason": ..., "code": ...}``) or an ExecCredential
    whose ``status`` carries a ``message``. One line, bounded and redacted; None otherwise.

    client-go reports only the exit code (kubernetes/kubernetes#139150); a plugin that explains
    itself deserves to be heard."""
    text = bytes(stdout).strip()
    if not text.startswith(b"{") or len(text) > _STATUS_BYTES:
        return None
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(document, dict):
        return None
    kind = document.get("kind")
    if kind == "Status":
        body: Any = document
    elif kind == "ExecCredential" and isinstance(document.get("status"), dict):
        body = document["status"]
    else:
        return None
    message = body.get("message")
    if not isinstance(message, str) or not message.strip():
        return None
    said = " ".join(message.split())[:_STATUS_MESSAGE_CHARS]
    details = []
    reason, code = body.get("reason"), body.get("code")
    if isinstance(reason, str) and re.fullmatch(r"[A-Za-z]{1,64}", reason):
        details.append(f"reason {reason}")
    if isinstance(code, int) and not isinstance(code, bool) and 0 <= code < 1000:
        details.append(f"code {code}")
    if details:
        said += f" ({', '.join(details)})"
    return redact_text(said, strict=True)


def _tail(data: bytes) -> str:
    text = data.decode("utf-8", "replace").strip()
    text = " ".join(text.split())  # one line: error messages are one line
    # A plugin may echo a token or key while failing; error messages must never carry one.
    return redact_text(text[-STDERR_TAIL_BYTES:], strict=True)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class ExecProvider:
    """Runs ``plan.exec`` and returns its credential. Thread-safe; caching is the engine's job.

    ``use_pidfd=False`` forces the portable way of noticing the plugin's exit (polling
    ``waitid``), which is what runs where ``pidfd_open`` does not exist (macOS, Linux before 5.3,
    seccomp sandboxes)."""

    kind = "exec"
    #: The engine hands ``get_credential`` its fetch deadline and calls it in the fetching
    #: thread: the run is bounded by it (the plugin's process group is killed), not abandoned.
    accepts_deadline = True

    def __init__(
        self, *, max_stdout_bytes: int = MAX_STDOUT_BYTES, use_pidfd: bool = True, gate: PluginGate | None = None
    ) -> None:
        self.max_stdout_bytes = max_stdout_bytes
        self.use_pidfd = use_pidfd
        #: The plugin policy every run passes (the config's ``pluginPolicy``; AllowAll by default).
        self.gate = gate or PluginGate()
        #: Called with (provider, decision) for every policy decision (the engine counts them).
        self.policy_observer: Callable[[str, str], None] | None = None
        self._groups: set[int] = set()  # process groups of this provider's running plugins
        self._closed = False
        self._refusals_logged: set[tuple[str, str, str]] = set()

    def use_plugin_policy(self, policy: PluginPolicy, observer: Callable[[str, str], None] | None = None) -> None:
        """Apply ``policy`` to every later run, reporting each decision to ``observer``."""
        self.gate = PluginGate(policy, pins=self.gate.pins)
        self.policy_observer = observer

    def get_credential(self, plan: AccessPlan, *, deadline: float | None = None) -> Credential:
        """Run the plugin and validate its answer. ``deadline`` (``time.monotonic()`` seconds)
        bounds the run; by default it is ``plan.timeout`` from now."""
        spec = plan.exec
        if spec is None:
            raise ProviderError("the exec provider needs a plan with an exec spec", provider=plan.provider)
        interactive = _is_interactive(spec, plan.provider)
        env = _process_environment()
        for name, value in spec.env:
            env[os.fsencode(name)] = os.fsencode(value)
        env[_EXEC_INFO_ENV_BYTES] = exec_info(spec, plan, interactive=interactive).encode()
        result = self.run(plan, env, interactive=interactive, deadline=deadline)
        return self.decode(plan, result)

    @staticmethod
    def call_outcome(plan: AccessPlan, error: CredentialError | None) -> tuple[int, str] | None:
        """KEP-541's ``rest_client_exec_plugin_call_total`` labels ``(code, call_status)`` for one
        call of this provider that ended with ``error`` (None: success), or None for a call in
        which no plugin ran. client-go's labels: the exit code when the plugin exited non-zero,
        -1 when it was killed, 1 for everything else that failed; 0 only for a success."""
        if plan.exec is None or isinstance(error, InteractiveModeError):
            return None  # not an exec plan, or a plugin that was never run
        if error is None:
            return 0, NO_ERROR
        if isinstance(error, PluginError):
            return (error.exit_code if error.exit_code not in (None, 0) else 1), error.call_status
        if isinstance(error, ProviderTimeout):
            return None  # it waited for a fetch slot and never ran
        return 1, CLIENT_INTERNAL_ERROR

    def close(self) -> None:
        """Kill the process groups of every plugin this provider is running, and run no more."""
        self._closed = True
        with _groups_lock:
            groups = list(self._groups)
        for pgid in groups:
            _kill_group(pgid)

    # -- running ---------------------------------------------------------------------------

    def run(self, plan: AccessPlan, env: dict[bytes, bytes], *, interactive: bool, deadline: float | None = None) -> RunResult:
        """Run the plugin once; raise a :class:`PluginError` unless it exited 0."""
        spec = plan.exec
        assert spec is not None
        if deadline is None:
            deadline = time.monotonic() + plan.timeout
        executable = find_executable(spec.command)
        if executable is None:
            raise self._not_found(spec, plan.provider)
        job = Job(plan.provider, spec.command, plan.timeout, spec.install_hint)
        argv = [spec.command, *spec.args]
        gate = self.gate
        if gate.allows_all:
            self._observe(plan.provider, "allowed")
            return self.run_command(job, executable, argv, env, deadline=deadline, interactive=interactive)
        try:
            admission = gate.admit(plan.provider, spec.command, executable, argv, env)
        except PluginNotAllowed as refusal:
            self._observe(plan.provider, refusal.decision)
            self._log_refusal(plan.provider, refusal)
            raise
        self._observe(plan.provider, "allowed_pinned" if admission.sha256 else "allowed")
        try:
            return self.run_command(
                job, admission.executable, admission.argv, env, deadline=deadline, interactive=interactive, pass_fds=admission.pass_fds
            )
        finally:
            admission.release()

    def _observe(self, provider: str, decision: str) -> None:
        observer = self.policy_observer
        if observer is not None:
            observer(provider, decision)

    def _log_refusal(self, provider: str, refusal: PluginNotAllowed) -> None:
        # Once per provider, command and reason: backoff retries of a refused plan say nothing new.
        key = (provider, refusal.command, refusal.decision)
        if key in self._refusals_logged:
            return
        if len(self._refusals_logged) < 1024:
            self._refusals_logged.add(key)
        # info, not warning: the caller gets the refusal as an error (the CLI prints it), while a
        # service (serve logs at info) records it once.
        _log.info("exec plugin refused by pluginPolicy", provider=provider, command=refusal.command, reason=refusal.reason)

    def run_command(
        self,
        job: Job,
        executable: str,
        argv: list[str],
        env: dict[bytes, bytes],
        *,
        deadline: float,
        interactive: bool = False,
        stdin: bytes | None = None,
        pass_fds: tuple[int, ...] = (),
    ) -> RunResult:
        """Run ``executable`` (``argv[0]`` as the name it is given) once, in a session of its own,
        bounded by ``deadline`` (``time.monotonic()`` seconds); raise a :class:`PluginError`
        naming ``job.command`` unless it exited 0.

        ``stdin`` is written to the process's standard input, which is then closed (KEP-2133
        plugins read their request there); without it, stdin is ``/dev/null`` (or the terminal
        when ``interactive``). ``pass_fds`` are descriptors the process inherits under the same
        numbers (sealed copies of pinned executables, run as ``/proc/self/fd/N``); they must be
        the caller's own, as they are made inheritable for the spawn."""
        provider, command = job.provider, job.command
        if self._closed:
            raise ProviderError("the exec provider is closed", provider=provider)
        try:
            child = None
            if not interactive and _SPAWN.usable:
                child = _spawn(executable, argv, env, with_stdin=stdin is not None, pass_fds=pass_fds)
            if child is None:
                child = _popen(executable, argv, env, interactive, with_stdin=stdin is not None, pass_fds=pass_fds)
        except FileNotFoundError:
            raise self._not_found_job(job) from None
        except PermissionError:
            raise PluginNotFound(f"exec: executable {command} is not executable (permission denied)", provider=provider) from None
        except OSError as exc:
            if exc.errno in (errno.ENOEXEC, errno.ENOTDIR, errno.EISDIR):
                raise PluginNotFound(f"exec: executable {command} cannot be run: {exc.strerror}", provider=provider) from None
            error = PluginExecutionError(f"exec: cannot start {command}: {exc.strerror}", provider=provider)
            error.call_status = CLIENT_INTERNAL_ERROR  # our side failed (fork, fds), as client-go counts it
            raise error from None
        pgid = None if interactive else child.pid
        if pgid is not None:
            with _groups_lock:
                self._groups.add(pgid)
                _RUNNING_GROUPS.add(pgid)
        try:
            return self._collect(child, job, pgid, deadline, stdin)
        finally:
            child.close_pipes()
            if pgid is not None:
                with _groups_lock:
                    self._groups.discard(pgid)
                    _RUNNING_GROUPS.discard(pgid)

    def _not_found(self, spec: ExecSpec, provider: str) -> PluginNotFound:
        return self._not_found_job(Job(provider, spec.command, 0.0, spec.install_hint))

    @staticmethod
    def _not_found_job(job: Job) -> PluginNotFound:
        message = f"exec: executable {job.command} not found"
        if "/" not in job.command:
            message += " on PATH"
        if job.install_hint:
            message += "; install hint: " + " ".join(job.install_hint.split())
        return PluginNotFound(message, provider=job.provider)

    def _collect(self, proc: _Child, job: Job, pgid: int | None, deadline: float, stdin: bytes | None = None) -> RunResult:
        started = time.monotonic()
        buffers = {proc.stdout_fd: bytearray()}
        stdout = buffers[proc.stdout_fd]
        stderr = bytearray()
        if proc.stderr_fd is not None:
            buffers[proc.stderr_fd] = stderr
        # poll(), not a selectors object: no epoll descriptor to create and close on every run.
        poller = select.poll()
        for fd in buffers:
            poller.register(fd, select.POLLIN)
        pending = memoryview(stdin) if stdin is not None else None
        if proc.stdin_fd is not None:
            # Written as the plugin reads, so a request larger than the pipe cannot block us.
            os.set_blocking(proc.stdin_fd, False)
            poller.register(proc.stdin_fd, select.POLLOUT)

        def write(fd: int) -> None:
            nonlocal pending
            try:
                written = os.write(fd, pending) if pending else 0
            except BlockingIOError:
                return
            except (BrokenPipeError, OSError):  # it exited or closed stdin without reading it all
                written = len(pending) if pending else 0
            pending = pending[written:] if pending else None
            if not pending:
                poller.unregister(fd)
                proc.close_stdin()
        pidfd = _open_pidfd(proc.pid) if self.use_pidfd else None
        if pidfd is not None:
            poller.register(pidfd, select.POLLIN)
        tick = _FIRST_TICK  # without a pidfd: how long to wait before looking for the exit again

        def read(fd: int) -> None:
            chunk = os.read(fd, _READ_CHUNK)
            if not chunk:
                poller.unregister(fd)
                del buffers[fd]
                return
            buffer = buffers[fd]
            buffer += chunk
            if buffer is stderr:
                del stderr[: max(0, len(stderr) - STDERR_TAIL_BYTES)]
            elif len(stdout) > self.max_stdout_bytes:
                self._kill(proc, pgid)
                raise PluginExecutionError(
                    f"exec: {job.command} wrote more than {self.max_stdout_bytes} bytes to stdout; killed",
                    provider=job.provider,
                    exit_code=-1,
                )

        try:
            exited = False
            while not exited:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self._kill(proc, pgid)
                    raise self._timeout(job, stderr)
                wait = remaining if pidfd is not None else min(remaining, tick)
                for fd, _ in poller.poll(wait * 1000):
                    if fd == pidfd:
                        exited = True
                    elif fd == proc.stdin_fd:
                        write(fd)
                    else:
                        read(fd)
                if pidfd is None and not exited:
                    exited = _has_exited(proc)
                    tick = min(tick * 2, _LAST_TICK)
            # The plugin has exited (and is not reaped yet, so its group ID cannot have been
            # reused): anything left in its group is an orphan; stop it. Everything the plugin
            # wrote is in the pipes now. Read what is there without waiting for end-of-file,
            # which a grandchild that left the group (setsid) could hold back until the deadline.
            if pgid is not None:
                _kill_group(pgid)
            proc.close_stdin()
            while buffers:
                ready = poller.poll(0)
                if not any(fd in buffers for fd, _ in ready):
                    break
                for fd, _ in ready:
                    if fd in buffers:
                        read(fd)
            exit_code = proc.wait()  # it has exited: reaping cannot block
        finally:
            if pidfd is not None:
                os.close(pidfd)
            if proc.returncode is None:  # an error or Ctrl-C above: the plugin must not outlive the run
                self._kill(proc, pgid)
        duration = time.monotonic() - started
        if exit_code != 0:
            raise self._exit_error(job, exit_code, stderr, stdout)
        return RunResult(exit_code, bytes(stdout), bytes(stderr), duration)

    @staticmethod
    def _kill(proc: _Child, pgid: int | None) -> None:
        if pgid is not None:
            _kill_group(pgid)
        else:
            proc.kill()
        proc.wait()

    @staticmethod
    def _timeout(job: Job, stderr: bytearray) -> PluginTimeout:
        message = f"exec: {job.command} did not answer within {job.timeout:g}s; its process group was killed"
        if stderr:
            message += f"; stderr: {_tail(stderr)}"
        return PluginTimeout(message, provider=job.provider, exit_code=-1)

    @staticmethod
    def _exit_error(job: Job, exit_code: int, stderr: bytearray, stdout: bytearray) -> PluginExecutionError:
        command = job.command
        if exit_code < 0:
            try:
                name = signal.Signals(-exit_code).name
            except ValueError:
                name = f"signal {-exit_code}"
            message = f"exec: {command} was killed by {name}"
        else:
            message = f"exec: {command} exited with code {exit_code}"
        said = _status_message(stdout)
        if said:
            message += f": {said}"
        if stderr:
            message += f"; stderr: {_tail(stderr)}" if said else f": {_tail(stderr)}"
        return PluginExecutionError(message, provider=job.provider, exit_code=exit_code if exit_code >= 0 else -1)

    # -- decoding --------------------------------------------------------------------------

    def decode(self, plan: AccessPlan, result: RunResult) -> Credential:
        """Validate the answer: an ExecCredential in the requested apiVersion with a credential.

        Messages describe what is wrong with the answer but never quote it: it may hold a token.
        """
        spec = plan.exec
        assert spec is not None

        def bad(reason: str) -> PluginOutputError:
            return PluginOutputError(f"exec: {spec.command} answered {reason}", provider=plan.provider, exit_code=0)

        raw = result.stdout
        if not raw.strip():
            raise bad("nothing on stdout")
        # client-go's universal decoder takes YAML as well as JSON. The bounded loader keeps a
        # hostile answer (deep nesting, alias bombs) from costing more than its size; its errors
        # never quote the answer. Every error below is raised outside the except block that saw
        # the problem, so no exception chained to ours can carry the answer's text.
        document = load_or_raise(
            raw, bad, source="answer", limits=Limits(max_bytes=self.max_stdout_bytes), message=f"{len(raw)} bytes that are neither JSON nor YAML ({{detail}})"
        )
        if not isinstance(document, dict):
            raise bad(f"{json_type_name(document)}, not an ExecCredential object")
        api_version, kind = document.get("apiVersion"), document.get("kind")
        if kind != "ExecCredential":
            raise bad(f"kind {_shown(kind, _KIND_SHAPE)}, expected 'ExecCredential'")
        if api_version != spec.api_version:
            raise bad(
                f"apiVersion {_shown(api_version, _API_VERSION_SHAPE)}, but it is configured to use "
                f"{spec.api_version!r} (the answer must use the requested version)"
            )
        fields = _plain_status(document)
        if fields is None:  # anything unusual: the model reads it, and words what is wrong
            from pydantic import ValidationError  # imported only for such an answer

            from ..api import ExecCredential
            from ..config import describe_validation_error

            answer = None
            try:
                answer = ExecCredential.model_validate(document)
            except ValidationError as exc:
                where, what = describe_validation_error(exc, ExecCredential)[0]
                problem = f"an invalid ExecCredential: field {where} {what}"
            if answer is None:
                raise bad(problem or "an invalid ExecCredential")
            if answer.status is None:
                raise bad("no status field")
            status = answer.status
            fields = (status.expiration_timestamp, status.token, status.client_certificate_data, status.client_key_data)
        credential = None
        try:
            credential = Credential._from_status_fields(*fields)
        except ValueError as exc:
            problem = f"an unusable credential: {exc}"
        if credential is None:
            raise bad(problem or "an unusable credential")
        not_after, not_before = credential.certificate_not_after, credential.certificate_not_before
        if not_after is not None and not_before is not None:
            # KEP-541: "The certificate must be valid at the time of execution." Clocks differ a
            # little between machines, so a certificate from the near future is accepted.
            now = datetime.now(timezone.utc)
            if not_after <= now:
                raise bad(f"a client certificate that expired at {format_rfc3339(not_after)}")
            if not_before > now + CLOCK_SKEW:
                raise bad(f"a client certificate that is not valid before {format_rfc3339(not_before)}")
        return credential


#: Fields the answer models also take under their Python names (``populate_by_name``).
_PYTHON_SPELLINGS = frozenset({"api_version", "client_certificate_data", "client_key_data", "expiration_timestamp"})
_STATUS_TEXT = ("token", "clientCertificateData", "clientKeyData")


def _plain_status(document: dict[str, Any]) -> tuple[str | None, str, str, str] | None:
    """(expirationTimestamp, token, clientCertificateData, clientKeyData) of an answer whose every
    value has exactly the type the ExecCredential model expects; None for anything else.

    Validating the usual answer through the model costs more than everything else decode does,
    right after the plugin ran, with nothing in the CPU's caches. What this accepts, the model
    accepts with the same values (tests/test_exec_answers.py compares them); the rest, and every
    error, is the model's.
    """
    if not _PYTHON_SPELLINGS.isdisjoint(document):
        return None
    if "spec" in document:
        spec = document["spec"]
        if type(spec) is not dict or spec.get("cluster") is not None or type(spec.get("interactive", False)) is not bool:
            return None
    status = document.get("status")
    if type(status) is not dict or not _PYTHON_SPELLINGS.isdisjoint(status):
        return None
    expiry = status.get("expirationTimestamp")
    if expiry is not None and type(expiry) is not str:
        return None
    for key in _STATUS_TEXT:
        if type(status.get(key, "")) is not str:
            return None
    return expiry, status.get("token", ""), status.get("clientCertificateData", ""), status.get("clientKeyData", "")


# Values of a rejected answer are quoted only when they have the shape of what belongs there; a
# lying plugin could put anything in them, a token included.
_API_VERSION_SHAPE = re.compile(r"(?:[a-z0-9-]+(?:\.[a-z0-9-]+)*/)?v\d+(?:(?:alpha|beta)\d+)?")
_KIND_SHAPE = re.compile(r"[A-Z][A-Za-z]{0,62}")


def _shown(value: Any, shape: re.Pattern[str]) -> str:
    if value is None:
        return "missing"
    if isinstance(value, str) and shape.fullmatch(value):
        return repr(value)
    return f"<a {type(value).__name__} of length {len(str(value))}, not shown>"


class _Child:
    """A running plugin: its pid, our ends of its stdout/stderr pipes, its exit code once reaped.

    The interface of ``subprocess.Popen`` that the runner uses (pid, returncode, poll, wait, kill),
    for a process started with ``os.posix_spawn``."""

    __slots__ = ("pid", "returncode", "stdout_fd", "stderr_fd", "stdin_fd")

    def __init__(self, pid: int, stdout_fd: int, stderr_fd: int | None, stdin_fd: int | None = None) -> None:
        self.pid, self.stdout_fd, self.stderr_fd, self.stdin_fd = pid, stdout_fd, stderr_fd, stdin_fd
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped by someone else (a SIGCHLD handler)
                self.returncode = -1
            else:
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self) -> int:
        if self.returncode is None:
            try:
                _, status = os.waitpid(self.pid, 0)
            except ChildProcessError:
                self.returncode = -1
            else:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:  # once reaped, the pid may belong to someone else
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)

    def close_stdin(self) -> None:
        """Close our end of the plugin's stdin (end of the request); idempotent."""
        if self.stdin_fd is not None:
            fd, self.stdin_fd = self.stdin_fd, None
            os.close(fd)

    def close_pipes(self) -> None:
        self.close_stdin()
        for fd in (self.stdout_fd, self.stderr_fd):
            if fd is not None:
                os.close(fd)


class _PopenChild(_Child):
    """The same for a ``subprocess.Popen`` (interactive runs, or where posix_spawn cannot serve)."""

    __slots__ = ("_proc",)

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        stdin_fd = proc.stdin.fileno() if proc.stdin is not None else None
        super().__init__(proc.pid, proc.stdout.fileno(), proc.stderr.fileno() if proc.stderr is not None else None, stdin_fd)
        self._proc = proc

    def close_stdin(self) -> None:
        if self.stdin_fd is not None and self._proc.stdin is not None:
            self.stdin_fd = None
            self._proc.stdin.close()

    def poll(self) -> int | None:
        self.returncode = self._proc.poll()
        return self.returncode

    def wait(self) -> int:
        self.returncode = self._proc.wait()
        return self.returncode

    def kill(self) -> None:
        self._proc.kill()

    def close_pipes(self) -> None:
        self.close_stdin()
        for pipe in (self._proc.stdout, self._proc.stderr):
            if pipe is not None:
                pipe.close()


class _SpawnSupport:
    # posix_spawn: the environment is encoded in C and the child is started with a vfork-like
    # clone, about 0.1 ms less per run than subprocess.Popen(env=...) here. Turned off for good
    # the first time the platform says it cannot start a new session this way.
    usable = hasattr(os, "posix_spawn") and hasattr(os, "POSIX_SPAWN_DUP2")


_SPAWN = _SpawnSupport()


def _spawn(
    executable: str, argv: list[str], env: dict[bytes, bytes], *, with_stdin: bool = False, pass_fds: tuple[int, ...] = ()
) -> _Child | None:
    """Start a non-interactive plugin in a new session with os.posix_spawn: stdin /dev/null (or
    a pipe of ours with ``with_stdin``), stdout and stderr our pipes, and ``pass_fds`` kept
    under their own numbers. None where posix_spawn cannot do it (the caller uses Popen).

    Only what is inheritable reaches the plugin: Python opens every descriptor non-inheritable
    (PEP 446), as Go does, so the pipes below are the plugin's only descriptors besides stdio
    (and ``pass_fds``)."""
    fds: list[int] = []
    try:
        out_r, out_w = os.pipe()
        fds += (out_r, out_w)
        err_r, err_w = os.pipe()
        fds += (err_r, err_w)
        in_r = in_w = None
        if with_stdin:
            in_r, in_w = os.pipe()
            fds += (in_r, in_w)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    if min(fds) <= 2 or any(fd <= 2 for fd in pass_fds):
        # Our own stdio is closed and a pipe end took its number: dup2 onto itself would keep
        # close-on-exec set. subprocess knows how to shuffle these; let it.
        for fd in fds:
            os.close(fd)
        return None
    actions: list[tuple[Any, ...]] = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0) if in_r is None else (os.POSIX_SPAWN_DUP2, in_r, 0),
        (os.POSIX_SPAWN_DUP2, out_w, 1),
        (os.POSIX_SPAWN_DUP2, err_w, 2),
    ]
    inherited = [fd for fd in pass_fds if not os.get_inheritable(fd)]
    try:
        for fd in inherited:
            # dup2 onto itself does not clear close-on-exec everywhere; the flag is set for the
            # spawn only, on descriptors that are the caller's own for this run.
            os.set_inheritable(fd, True)
        pid = os.posix_spawn(executable, argv, env, file_actions=actions, setsid=True)
    except NotImplementedError:
        _SpawnSupport.usable = False
        for fd in fds:
            os.close(fd)
        return None
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    finally:
        for fd in inherited:
            os.set_inheritable(fd, False)
    os.close(out_w)
    os.close(err_w)
    if in_r is not None:
        os.close(in_r)
    return _Child(pid, out_r, err_r, in_w)


def _popen(
    executable: str,
    argv: list[str],
    env: dict[bytes, bytes],
    interactive: bool,
    *,
    with_stdin: bool = False,
    pass_fds: tuple[int, ...] = (),
) -> _Child:
    if with_stdin:
        stdin: Any = subprocess.PIPE
    else:
        stdin = None if interactive else subprocess.DEVNULL
    proc = subprocess.Popen(
        argv,
        executable=executable,
        env=env,
        stdin=stdin,
        stdout=subprocess.PIPE,
        # Interactive plugins prompt on stderr, so it stays the user's terminal, as in client-go.
        stderr=None if interactive else subprocess.PIPE,
        # Its own session makes the plugin and all its children one group we can kill; an
        # interactive plugin must stay in our session to keep the terminal.
        start_new_session=not interactive,
        pass_fds=pass_fds,
    )
    return _PopenChild(proc)


def _has_exited(proc: _Child) -> bool:
    """Whether the plugin has exited, leaving it unreaped (WNOWAIT) where the system allows, so
    that its process group ID stays reserved until we have killed what is left in the group."""
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except (AttributeError, ChildProcessError, OSError):
        return proc.poll() is not None


def find_executable(command: str) -> str | None:
    """What runs for ``command``: itself when it contains a ``/``, else its match on *this
    process's* ``PATH`` (as Go's ``exec.Command`` looks it up), or None. The plugin's environment,
    which a profile may add to, never chooses what runs."""
    if "/" in command:
        return command
    return shutil.which(command, path=os.environ.get("PATH", os.defpath))


def terminate_running_plugins() -> None:
    """Kill the process group of every exec plugin this process is running.

    For a signal handler (SIGTERM, SIGHUP) and at exit: plugins run in sessions of their own, so
    they do not get the signals sent to our process group, and would otherwise outlive us."""
    with _groups_lock:
        groups = list(_RUNNING_GROUPS)
    for pgid in groups:
        _kill_group(pgid)


def _open_pidfd(pid: int) -> int | None:
    # A pidfd becomes readable when the process exits: the only race-free way to notice the
    # plugin is gone while a child of it still holds stdout open.
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _exec_factory(options: dict[str, Any]) -> ExecProvider:
    if options:
        raise ValueError("exec plugins take no options; use execConfig args and env")
    return ExecProvider()  # one per config entry: closing an engine kills only its own plugins


class ExecPlugin:
    """Registers the exec provider under kind ``exec``, like any third-party plugin."""

    @hookimpl
    def cpcreds_register_providers(self, register: Any) -> None:
        register("exec", _exec_factory)


# A plugin started by a daemon thread (a refresh ahead of expiry) must not outlive the process.
atexit.register(terminate_running_plugins)

