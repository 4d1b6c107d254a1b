"""The KEP-541 exec provider: run a credential plugin and validate its ExecCredential answer.

Behaves as client-go's exec authenticator (``plugin/pkg/client/auth/exec``) does for one call,
with the safety it lacks (a deadline that kills the plugin's whole process group, bounded stdout,
only a redacted tail of stderr, orphans of an exited plugin killed): the running itself is
:mod:`cpcreds.exec.process`'s, shared with the kubelet-plugin runner; :mod:`.command` words what a
run's outcome means as KEP-541 errors and :mod:`.answer` decodes the ExecCredential; this module
builds the run (environment, KUBERNETES_EXEC_INFO, interactivity, the plugin policy) and ties them
together.

The environment is the process environment, then the configured env, then KUBERNETES_EXEC_INFO,
exactly as client-go builds it. stdin is handed over only when the run is interactive (client-go
reasons that a plugin must not fight its caller for a terminal it was not promised).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any, Unpack

from ..config import PluginPolicy
from ..config.access import AccessPlan, ExecSpec, cluster_json, json_value
from ..credential import Credential
from ..errors import (
    CLIENT_INTERNAL_ERROR,
    NO_ERROR,
    CredentialError,
    InteractiveModeError,
    PluginError,
    PluginNotAllowed,
    PluginNotFound,
    ProviderError,
    ProviderTimeout,
)
from ..kep import EXEC_INFO_ENV
from ..logs import get_logger
from ..providers.hookspecs import hookimpl
from .answer import decode_answer
from .command import MAX_STDOUT_BYTES, STDERR_TAIL_BYTES, Job, RunOptions, RunResult, not_found, run_command
from .policy import PluginGate
from .process import Groups, find_executable, process_environment, terminate_all

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
        return self.decode(plan, self.run(plan, env, interactive=interactive, deadline=deadline))

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

    def run(
        self,
        plan: AccessPlan,
        env: dict[bytes, bytes],
        *,
        interactive: bool,
        deadline: float | None = None,
    ) -> RunResult:
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
        # Every admitted run counts once, when it is admitted (as client-go counts its policy
        # decisions), whether the plugin then starts or not.
        if gate.allows_all:
            self._observe(plan.provider, "allowed")
            return self.run_command(job, executable, argv, env, deadline=deadline, interactive=interactive)
        try:
            admission = gate.admit(plan.provider, spec.command, executable, argv, env)
        except PluginNotAllowed as refusal:
            self._observe(plan.provider, refusal.decision)
            self._log_refusal(plan.provider, refusal)
            raise
        try:
            self._observe(plan.provider, "allowed_pinned" if admission.sha256 else "allowed")
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
        **options: Unpack[RunOptions],
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
            **options,
        )

    def _not_found(self, spec: ExecSpec, provider: str) -> PluginNotFound:
        return not_found(Job(provider, spec.command, 0.0, spec.install_hint))

    def decode(self, plan: AccessPlan, result: RunResult) -> Credential:
        """Validate the answer: an ExecCredential in the requested apiVersion with a credential.

        Messages describe what is wrong with the answer but never quote it: it may hold a token.
        """
        return decode_answer(plan, result.stdout, self.max_stdout_bytes)


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
