"""SDK for kubelet image credential provider plugins (KEP-2133) in Python, and for running a
cpcreds provider as one.

A kubelet plugin reads one CredentialProviderRequest on stdin, prints one
CredentialProviderResponse on stdout in the same apiVersion, and exits 0; on failure it prints
one line on stderr and exits non-zero (the kubelet logs that line and pulls without credentials
from this plugin). :func:`run_kubelet_plugin` does all of it for a function::

    from cpcreds.images.kubelet_plugin import AuthConfig, CredentialProviderResponse, run_kubelet_plugin

    def answer(request):                       # a CredentialProviderRequest
        registry = request.image.split("/", 1)[0]
        return CredentialProviderResponse("Registry", {registry: AuthConfig("robot", read_password())}, cache_duration=600)

    if __name__ == "__main__":
        run_kubelet_plugin(answer)

A provider with a ``get_image_credential`` method (see
:class:`cpcreds.sdk.ImageCredentialProvider`) becomes a kubelet plugin with no code of its
own: :func:`kubelet_plugin_main` makes the ``main`` of a ``[project.scripts]`` entry, which builds
the provider from ``--option=value`` flags (the kubelet config's ``args``), exactly as
:func:`cpcreds.exec.plugin.provider_main` does for KEP-541::

    [project.scripts]
    cpcreds-vault-credential-provider = "cpcreds_vault.plugin:kubelet_main"

    kubelet_main = kubelet_plugin_main("vault", VaultProvider)   # in cpcreds_vault/plugin.py

Every run is bounded: reading the request, building the provider and answering must finish
within the timeout (``timeout=``, else ``CPCREDS_DEFAULT_TIMEOUT``, else 60s), or the plugin
says so on stderr and exits 1 without waiting for the provider.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any, NoReturn

from ..errors import ConfigError, CredentialError, ProviderError
from .protocol import (
    API_VERSION_V1,
    API_VERSION_V1ALPHA1,
    API_VERSION_V1BETA1,
    CACHE_KEY_GLOBAL,
    CACHE_KEY_IMAGE,
    CACHE_KEY_REGISTRY,
    MAX_REQUEST_BYTES,
    SUPPORTED_API_VERSIONS,
    AuthConfig,
    CredentialProviderRequest,
    CredentialProviderResponse,
    ProtocolError,
    encode_response,
    parse_request,
)
from ..config.durations import parse_duration
from ..logs import redact_text

# cpcreds.exec.plugin (flags, building a provider) is imported by run_image_provider only: a function
# plugin starts without it and its pydantic models, which its one-shot runs would load for nothing.

__all__ = [
    "API_VERSION_V1",
    "API_VERSION_V1BETA1",
    "API_VERSION_V1ALPHA1",
    "SUPPORTED_API_VERSIONS",
    "CACHE_KEY_IMAGE",
    "CACHE_KEY_REGISTRY",
    "CACHE_KEY_GLOBAL",
    "AuthConfig",
    "CredentialProviderRequest",
    "CredentialProviderResponse",
    "ProtocolError",
    "TIMEOUT_ENV",
    "DEFAULT_TIMEOUT",
    "read_request",
    "write_response",
    "run_kubelet_plugin",
    "run_image_provider",
    "kubelet_plugin_main",
]

#: The environment variable (a Go duration, e.g. ``20s``) that bounds a run when ``timeout=`` is
#: not given; the kubelet config's ``env`` sets it per provider.
TIMEOUT_ENV = "CPCREDS_DEFAULT_TIMEOUT"
#: Seconds a run may take when neither ``timeout=`` nor :data:`TIMEOUT_ENV` says otherwise.
DEFAULT_TIMEOUT = 60.0
# A provider that honours its timeout reports its own, better, error: the hard stop comes a
# little after the time the provider is given.
_GRACE = 0.5


class _TimedOut(Exception):
    pass


def read_request(stream: IO[bytes] | None = None, *, max_bytes: int = MAX_REQUEST_BYTES) -> CredentialProviderRequest:
    """Read and validate the CredentialProviderRequest on ``stream`` (default: stdin) up to its end.

    At most ``max_bytes`` are read: a longer input is refused without reading the rest. Raises
    :class:`~cpcreds.images.protocol.ProtocolError` (a :class:`~cpcreds.CredentialError`) for an
    empty, oversized or invalid request, and when stdin is a terminal (the plugin was run by hand
    without a request: it says so rather than wait).
    """
    source = stream if stream is not None else sys.stdin.buffer
    isatty = getattr(source, "isatty", None)
    if callable(isatty) and isatty():
        raise ProtocolError("reads a CredentialProviderRequest on stdin (it is a terminal)")
    chunks: list[bytes] = []
    size = 0
    while size <= max_bytes:
        # read1 returns what the pipe holds without waiting for max_bytes (the kubelet writes a
        # few hundred bytes and closes); streams without read1 fall back to read.
        read = getattr(source, "read1", None) or source.read
        chunk = read(min(65536, max_bytes + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > max_bytes:
        raise ProtocolError(f"CredentialProviderRequest is larger than {max_bytes} bytes")
    data = b"".join(chunks)
    if not data.strip():
        raise ProtocolError("no CredentialProviderRequest on stdin (it is empty)")
    return parse_request(data, max_bytes=max_bytes)


def write_response(response: CredentialProviderResponse, api_version: str, stream: IO[bytes] | None = None) -> None:
    """Print ``response`` in ``api_version`` (the request's) as one JSON line, and flush."""
    data = encode_response(response, api_version)
    out = stream if stream is not None else sys.stdout.buffer
    out.write(data)
    out.flush()


def _timeout(timeout: float | None) -> float:
    if timeout is not None:
        return timeout
    raw = os.environ.get(TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_TIMEOUT
    problem = None
    try:
        seconds = parse_duration(raw)
    except ValueError as exc:
        problem = str(exc)
    if problem is not None:
        raise ConfigError(problem, source=TIMEOUT_ENV)
    if seconds <= 0:
        raise ConfigError("must be longer than zero", source=TIMEOUT_ENV)
    return seconds


def _run(label: str, timeout: float | None, work: Callable[[float], tuple[CredentialProviderResponse, str]]) -> NoReturn:
    """Run ``work(deadline)`` in a thread of its own, bounded; print its answer or one error line."""
    try:
        limit = _timeout(timeout)
    except CredentialError as exc:
        _fail(label, exc)
    deadline = time.monotonic() + limit
    outcome: list[tuple[bool, Any]] = []
    done = threading.Event()

    def target() -> None:
        from ..providers.deadline import fetch_deadline

        try:
            # The provider's cpcreds.sdk.deadline() ends a share of the timeout before this
            # runner's, so that its error (naming what did not answer) is the one printed.
            with fetch_deadline(limit, ends=deadline):
                outcome.append((True, work(deadline)))
        except BaseException as exc:  # noqa: BLE001 - carried to the main thread, reported there
            outcome.append((False, exc))
        finally:
            done.set()

    # A daemon thread: a provider stuck past the deadline must not keep the process alive.
    threading.Thread(target=target, name=f"{label} request", daemon=True).start()
    try:
        finished = done.wait(limit + _GRACE)
    except KeyboardInterrupt:
        os._exit(130)
    if not finished:
        _fail(label, _TimedOut(f"no answer within the {limit:g}s timeout"), hard=True)
    ok, value = outcome[0]
    if not ok:
        if isinstance(value, KeyboardInterrupt):
            sys.exit(130)
        _fail(label, value)
    response, api_version = value
    try:
        write_response(response, api_version)
    except (ValueError, TypeError) as exc:
        _fail(label, exc)
    except BrokenPipeError:
        # The kubelet stopped reading (it timed out): nothing left to tell it.
        os._exit(1)
    sys.exit(0)


def _fail(label: str, exc: BaseException, *, hard: bool = False) -> NoReturn:
    # The kubelet logs this line: nothing that looks like a secret, and one line only.
    message = redact_text(" ".join(str(exc).split())) or type(exc).__name__
    sys.stderr.write(f"{label}: {message}\n")
    sys.stderr.flush()
    if hard:
        # The provider's thread is still running: leave without waiting for it or for atexit.
        os._exit(1)
    sys.exit(1)


def _checked(response: Any, name: str) -> CredentialProviderResponse:
    if not isinstance(response, CredentialProviderResponse):
        raise ProviderError(f"returned {type(response).__name__}, not a CredentialProviderResponse", provider=name)
    return response


def run_kubelet_plugin(
    get_credential: Callable[[CredentialProviderRequest], CredentialProviderResponse],
    *,
    name: str | None = None,
    timeout: float | None = None,
) -> NoReturn:
    """Run a kubelet plugin main: read the request on stdin, call ``get_credential(request)``,
    print its :class:`CredentialProviderResponse` in the request's apiVersion, exit 0.

    Any error (a bad request, an exception, a wrong return type, the timeout) is one line on
    stderr prefixed by ``name`` (default: the program's name), and exit 1; Ctrl-C exits 130.
    ``timeout`` bounds the whole run (default: :data:`TIMEOUT_ENV`, else 60s).
    """
    label = name or os.path.basename(sys.argv[0] or "") or "kubelet-plugin"

    def work(deadline: float) -> tuple[CredentialProviderResponse, str]:
        request = read_request()
        return _checked(get_credential(request), label), request.api_version

    _run(label, timeout, work)


def run_image_provider(
    factory: Callable[[Mapping[str, Any]], Any],
    *,
    name: str,
    options: Mapping[str, Any] | None = None,
    argv: Sequence[str] | None = None,
    timeout: float | None = None,
) -> NoReturn:
    """Run an in-process provider once as a kubelet image credential provider plugin, and exit.

    ``factory`` is what the provider registers (called with the options), ``name`` its type name.
    The options are ``options`` overlaid with the flags of ``argv`` (default ``sys.argv[1:]``,
    the kubelet config's ``args``; see :func:`cpcreds.exec.plugin.parse_option_flags`). The provider's
    ``get_image_credential(request, timeout=...)`` is called with the time left, and its answer
    written in the request's apiVersion (v1, v1beta1 or v1alpha1). A provider without that
    method, bad flags, bad options, a bad request, a provider failure and the timeout are one
    line on stderr (prefixed by the program's name) and exit 1. ``-h``/``--help`` describes the
    provider and exits 0.
    """
    from ..exec.plugin import build_provider, close_provider, command_line, option_flags

    label, arguments = command_line(
        name,
        argv,
        "[--OPTION=VALUE ...] < CredentialProviderRequest",
        f"Runs the cpcreds provider {name!r} as a kubelet image credential provider plugin (KEP-2133): "
        "it reads a CredentialProviderRequest on stdin and prints a CredentialProviderResponse in the "
        f"same apiVersion. {TIMEOUT_ENV} bounds a run (default {DEFAULT_TIMEOUT:g}s).",
        factory,
    )

    def work(deadline: float) -> tuple[CredentialProviderResponse, str]:
        given = {**dict(options or {}), **option_flags(arguments, factory)}
        request = read_request()
        provider = build_provider(factory, given)
        answer = getattr(provider, "get_image_credential", None)
        if not callable(answer):
            raise ProviderError("does not answer for images (it has no get_image_credential method)", provider=name)
        try:
            response = answer(request, timeout=max(0.0, deadline - time.monotonic()))
        finally:
            close_provider(provider)
        return _checked(response, name), request.api_version

    _run(label, timeout, work)


def kubelet_plugin_main(
    name: str,
    factory: Callable[[Mapping[str, Any]], Any],
    *,
    options: Mapping[str, Any] | None = None,
    timeout: float | None = None,
) -> Callable[[], NoReturn]:
    """A zero-argument ``main`` for a ``[project.scripts]`` entry that runs ``factory``'s
    provider as a kubelet plugin (see :func:`run_image_provider`); ``options`` are defaults the
    flags override."""

    def main() -> NoReturn:
        run_image_provider(factory, name=name, options=options, timeout=timeout)

    main.__doc__ = f"Run the {name} provider as a kubelet image credential provider plugin."
    return main
