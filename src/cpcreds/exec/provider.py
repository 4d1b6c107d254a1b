"""The KEP-541 exec provider: run a credential plugin and validate its ExecCredential answer.

Behaves as client-go's exec authenticator (``plugin/pkg/client/auth/exec``) does for one call,
with the safety it lacks (a deadline that kills the plugin's whole process group, bounded stdout,
only a redacted tail of stderr, orphans of an exited plugin killed): the running itself is
:mod:`cpcreds.exec.process`'s, shared with the kubelet-plugin runner; this module words what a run's
outcome means as KEP-541 errors and decodes the ExecCredential.

The environment is the process environment, then the configured env, then KUBERNETES_EXEC_INFO,
exactly as client-go builds it. stdin is handed over only when the run is interactive (client-go
reasons that a plugin must not fight its caller for a terminal it was not promised).
"""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import sys
import time
from datetime import datetime, timedelta, timezone
from collections.abc import Callable
from typing import Any, NamedTuple

from . import process as _process
from ..config.access import AccessPlan, ExecSpec, cluster_json, json_value
from ..config.documents import Limits, load_or_raise
from .process import Groups, Outcome, find_executable, process_environment, terminate_all
from .._show import shown
from ..config import PluginPolicy, json_type_name
from ..credential import Credential, credential_from_status_fields, format_rfc3339
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
from ..providers.hookspecs import hookimpl
from ..kep import EXEC_INFO_ENV
from ..logs import get_logger, redact_text
from .policy import PluginGate

__all__ = [
    "ExecProvider",
    "Job",
    "MAX_STDOUT_BYTES",
    "STDERR_TAIL_BYTES",
    "exec_info",
    "RunResult",
    "run_command",
    "terminate_running_plugins",
    "find_executable",
]

_log = get_logger(__name__)

#: A credential answer is a few KiB (a certificate chain at most); 4 MiB is generous and bounded.
MAX_STDOUT_BYTES = 4 * 1024 * 1024
#: The bounds of an answer read with the default stdout bound (built once: decode runs right after
#: the plugin exits, when every step costs several times its usual).
_ANSWER_LIMITS = Limits(max_bytes=MAX_STDOUT_BYTES)
#: How much of the plugin's stderr is kept for the error message (the end is the useful part).
STDERR_TAIL_BYTES = 4096
#: How far in the future a client certificate's notBefore may be (clock differences).
CLOCK_SKEW = timedelta(minutes=5)
#: KUBERNETES_EXEC_INFO is compact JSON, non-ASCII escaped.
_EXEC_INFO_ENCODER = json.JSONEncoder(separators=(",", ":"))


def exec_info(spec: ExecSpec, plan: AccessPlan, *, interactive: bool) -> str:
    """The KUBERNETES_EXEC_INFO value: the ExecCredential request, as client-go encodes it.

    The JSON of ``{"kind": "ExecCredential", "apiVersion": ..., "spec": {"interactive": ...,
    "cluster": {...}}}``, written piece by piece so that the usual request never starts the JSON
    encoder (see :func:`~cpcreds.config.access.compact_json`)."""
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


#: The outcome of one plugin process (internal; exposed for metrics).
RunResult = Outcome


_EXEC_INFO_ENV_BYTES = EXEC_INFO_ENV.encode()


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
        self._groups = Groups()  # process groups of this provider's running plugins
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
        env = process_environment()
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
        self._groups.kill_all()

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
        """:func:`run_command` with this provider's bounds, its process groups (killed by
        :meth:`close`) and its way of noticing an exit; refused once closed."""
        if self._closed:
            raise ProviderError("the exec provider is closed", provider=job.provider)
        return run_command(
            job,
            executable,
            argv,
            env,
            deadline=deadline,
            groups=self._groups,
            max_stdout_bytes=self.max_stdout_bytes,
            use_pidfd=self.use_pidfd,
            interactive=interactive,
            stdin=stdin,
            pass_fds=pass_fds,
        )

    def _not_found(self, spec: ExecSpec, provider: str) -> PluginNotFound:
        return _not_found(Job(provider, spec.command, 0.0, spec.install_hint))

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
        limits = _ANSWER_LIMITS if self.max_stdout_bytes == MAX_STDOUT_BYTES else Limits(max_bytes=self.max_stdout_bytes)
        document = load_or_raise(
            raw, lambda detail: bad(f"{len(raw)} bytes that are neither JSON nor YAML ({detail})"), source="answer", limits=limits
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

            from ..config.wire import ExecCredential
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
            credential = credential_from_status_fields(Credential, *fields)
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
    # Anything but a short name of the expected shape: its type and size only (a placeholder
    # cpcreds.logs recognises as already redacted).
    hidden = f"<a {type(value).__name__} of length {len(str(value))}, not shown>"
    return shown(value, limit=256, shape=shape, otherwise=hidden) if isinstance(value, str) else hidden


def run_command(
    job: Job,
    executable: str,
    argv: list[str],
    env: dict[bytes, bytes],
    *,
    deadline: float,
    groups: Groups,
    max_stdout_bytes: int = MAX_STDOUT_BYTES,
    use_pidfd: bool = True,
    interactive: bool = False,
    stdin: bytes | None = None,
    pass_fds: tuple[int, ...] = (),
) -> RunResult:
    """Run ``executable`` once under :func:`cpcreds.exec.process.run` (a session of its own, killed
    with its group at ``deadline``, stdout bounded by ``max_stdout_bytes``) and word the outcome
    as KEP-541's runner does: a :class:`PluginError` naming ``job.command`` unless it exited 0
    (:class:`PluginNotFound` when it cannot be run, :class:`PluginTimeout` past the deadline).
    The exec provider and the kubelet-plugin runner both run their programs through this."""
    provider, command = job.provider, job.command
    try:
        result = _process.run(
            executable,
            argv,
            env,
            deadline=deadline,
            max_stdout=max_stdout_bytes,
            stderr_tail=STDERR_TAIL_BYTES,
            interactive=interactive,
            stdin=stdin,
            pass_fds=pass_fds,
            use_pidfd=use_pidfd,
            groups=groups,
        )
    except FileNotFoundError:
        raise _not_found(job) from None
    except PermissionError:
        raise PluginNotFound(f"exec: executable {command} is not executable (permission denied)", provider=provider) from None
    except OSError as exc:
        if exc.errno in (errno.ENOEXEC, errno.ENOTDIR, errno.EISDIR):
            raise PluginNotFound(f"exec: executable {command} cannot be run: {exc.strerror}", provider=provider) from None
        error = PluginExecutionError(f"exec: cannot start {command}: {exc.strerror}", provider=provider)
        error.call_status = CLIENT_INTERNAL_ERROR  # our side failed (fork, fds), as client-go counts it
        raise error from None
    if result.timed_out:
        raise _timeout(job, result.stderr_tail)
    if result.overflowed:
        raise PluginExecutionError(
            f"exec: {command} wrote more than {max_stdout_bytes} bytes to stdout; killed", provider=provider, exit_code=-1
        )
    if result.exit_code != 0:
        raise _exit_error(job, result.exit_code, result.stderr_tail, result.stdout)
    return result


def _not_found(job: Job) -> PluginNotFound:
    message = f"exec: executable {job.command} not found"
    if "/" not in job.command:
        message += " on PATH"
    if job.install_hint:
        message += "; install hint: " + " ".join(job.install_hint.split())
    return PluginNotFound(message, provider=job.provider)


def _timeout(job: Job, stderr: bytes) -> PluginTimeout:
    message = f"exec: {job.command} did not answer within {job.timeout:g}s; its process group was killed"
    if stderr:
        message += f"; stderr: {_tail(stderr)}"
    return PluginTimeout(message, provider=job.provider, exit_code=-1)


def _exit_error(job: Job, exit_code: int, stderr: bytes, stdout: bytes) -> PluginExecutionError:
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


#: Kill the process group of every plugin this process is running (SIGTERM, exit); the same as
#: :func:`cpcreds.exec.process.terminate_all`, under the name this module has always exported.
terminate_running_plugins = terminate_all


def _exec_factory(options: dict[str, Any]) -> ExecProvider:
    if options:
        raise ValueError("exec plugins take no options; use execConfig args and env")
    return ExecProvider()  # one per config entry: closing an engine kills only its own plugins


class ExecPlugin:
    """Registers the exec provider under kind ``exec``, like any third-party plugin."""

    # tryfirst: the built-ins register before the plugins without it (their names are reserved too).
    @hookimpl(tryfirst=True)
    def cpcreds_register_providers(self, register: Any) -> None:
        register("exec", _exec_factory)
