"""One run of a program, worded as KEP-541's runner words its outcome: :func:`run_command` runs
it under :func:`cpcreds.exec.process.run` and raises a :class:`~cpcreds.errors.PluginError` that
names the command unless it exited 0 (not found, not executable, timed out, too much output, a
non-zero exit with what the plugin said and the redacted tail of its stderr). The exec provider
and the kubelet-plugin runner both run their programs through it.
"""

from __future__ import annotations

import errno
import json
import re
import signal
from typing import Any, NamedTuple, TypedDict, Unpack

from ..errors import CLIENT_INTERNAL_ERROR, PluginExecutionError, PluginNotFound, PluginTimeout
from ..logs import redact_text
from . import process
from .process import Groups, Outcome

__all__ = ["Job", "MAX_STDOUT_BYTES", "RunOptions", "RunResult", "STDERR_TAIL_BYTES", "not_found", "run_command"]

#: A credential answer is a few KiB (a certificate chain at most); 4 MiB is generous and bounded.
MAX_STDOUT_BYTES = 4 * 1024 * 1024
#: How much of the plugin's stderr is kept for the error message (the end is the useful part).
STDERR_TAIL_BYTES = 4096


class RunOptions(TypedDict, total=False):
    """How one run is started, handed through to :func:`cpcreds.exec.process.run` unchanged (see
    there): an ``interactive`` terminal, bytes for ``stdin``, descriptors to ``pass_fds``."""

    interactive: bool
    stdin: bytes | None
    pass_fds: tuple[int, ...]


class Job(NamedTuple):
    """What a run is for, as errors name it: the provider, the command as configured, the
    timeout the deadline came from, and the command's install hint."""

    provider: str
    command: str
    timeout: float
    install_hint: str | None = None


#: The outcome of one plugin process (internal; exposed for metrics).
RunResult = Outcome


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
    **options: Unpack[RunOptions],
) -> RunResult:
    """Run ``executable`` once under :func:`cpcreds.exec.process.run` (a session of its own, killed
    with its group at ``deadline``, stdout bounded by ``max_stdout_bytes``) and word the outcome
    as KEP-541's runner does: a :class:`PluginError` naming ``job.command`` unless it exited 0
    (:class:`PluginNotFound` when it cannot be run, :class:`PluginTimeout` past the deadline).
    The exec provider and the kubelet-plugin runner both run their programs through this;
    ``options`` (:class:`RunOptions`) go to :func:`~cpcreds.exec.process.run` as they are."""
    provider, command = job.provider, job.command
    try:
        result = process.run(
            executable,
            argv,
            env,
            deadline=deadline,
            max_stdout=max_stdout_bytes,
            stderr_tail=STDERR_TAIL_BYTES,
            use_pidfd=use_pidfd,
            groups=groups,
            **options,
        )
    except FileNotFoundError:
        raise not_found(job) from None
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


def not_found(job: Job) -> PluginNotFound:
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
