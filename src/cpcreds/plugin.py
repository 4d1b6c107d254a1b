"""SDK for writing KEP-541 exec plugins in Python.

A plugin reads its request from ``KUBERNETES_EXEC_INFO``, prints one ExecCredential on stdout in
the apiVersion it was asked for, and exits 0; on failure it prints one line on stderr and exits
non-zero (client-go and cpcreds show that line to the user). :func:`run_plugin` does all of it::

    from cpcreds.plugin import run_plugin, PluginRequest
    from cpcreds import Credential

    def get(request: PluginRequest) -> Credential:
        name = (request.cluster.config or {}).get("clusterName") if request.cluster else None
        return Credential(token=mint_token_for(name), expiration_timestamp=...)

    if __name__ == "__main__":
        run_plugin(get)
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import IO, Any, NoReturn

from pydantic import ValidationError

from ._parse import DocumentError, load_document
from .api import API_VERSION_V1, EXEC_INFO_ENV, SUPPORTED_API_VERSIONS, ExecCluster, ExecCredential
from .config import describe_validation_error
from .credential import Credential
from .errors import CredentialError
from .logs import redact_text

#: client-go's request is a few KiB (a CA bundle at most); anything near this is not one.
_MAX_EXEC_INFO_BYTES = 1024 * 1024

__all__ = ["PluginRequest", "PluginRequestError", "read_request", "write_response", "run_plugin"]


class PluginRequestError(CredentialError, ValueError):
    """KUBERNETES_EXEC_INFO is present but not a usable ExecCredential request."""


@dataclass(frozen=True)
class PluginRequest:
    """What the client asked: the apiVersion to answer in, whether stdin is ours, the cluster.

    ``cluster`` is ``None`` unless the client was configured with ``provideClusterInfo: true``;
    ``from_environment`` is False when KUBERNETES_EXEC_INFO was absent (run by hand).
    """

    api_version: str
    interactive: bool = False
    cluster: ExecCluster | None = None
    from_environment: bool = True


def read_request(environ: Mapping[str, str] | None = None, *, default_api_version: str = API_VERSION_V1) -> PluginRequest:
    """Parse KUBERNETES_EXEC_INFO; without it, a request for ``default_api_version``."""
    env = os.environ if environ is None else environ
    raw = env.get(EXEC_INFO_ENV, "")
    if not raw.strip():
        return PluginRequest(api_version=default_api_version, interactive=False, cluster=None, from_environment=False)
    # The client wrote this, but a hostile environment is possible: parse it bounded, never quote
    # it, and raise outside the except blocks so no parser exception is chained to ours.
    problem = None
    try:
        document = load_document(raw, source=EXEC_INFO_ENV, syntax="json", max_bytes=_MAX_EXEC_INFO_BYTES)
    except DocumentError as exc:
        problem = f"{EXEC_INFO_ENV} is not JSON ({exc.detail})"
    if problem is not None:
        raise PluginRequestError(problem)
    if not isinstance(document, dict) or document.get("kind") != "ExecCredential":
        raise PluginRequestError(f"{EXEC_INFO_ENV} is not an ExecCredential")
    api_version = document.get("apiVersion")
    if api_version not in SUPPORTED_API_VERSIONS:
        shown = repr(api_version) if isinstance(api_version, str) and len(api_version) <= 64 and api_version.isprintable() else "an unsupported value"
        raise PluginRequestError(f"{EXEC_INFO_ENV} asks for apiVersion {shown}; supported: {', '.join(SUPPORTED_API_VERSIONS)}")
    request = None
    try:
        request = ExecCredential.model_validate(document)
    except ValidationError as exc:
        where, what = describe_validation_error(exc, ExecCredential)[0]
        problem = f"{EXEC_INFO_ENV}: field {where} {what}"
    if request is None:
        raise PluginRequestError(problem or f"{EXEC_INFO_ENV} is not a valid ExecCredential")
    return PluginRequest(api_version=api_version, interactive=request.spec.interactive, cluster=request.spec.cluster)


def write_response(credential: Credential, api_version: str, stream: IO[str] | None = None) -> None:
    """Print the ExecCredential answer (one JSON line) and flush."""
    out = stream or sys.stdout
    out.write(json.dumps(credential.to_exec_credential(api_version)) + "\n")
    out.flush()


def run_plugin(
    get_credential: Callable[[PluginRequest], Credential],
    *,
    name: str | None = None,
    default_api_version: str = API_VERSION_V1,
) -> NoReturn:
    """Run a plugin main: read the request, answer, exit 0; any error becomes one stderr line and exit 1."""
    label = name or os.path.basename(sys.argv[0] or "plugin")
    try:
        request = read_request(default_api_version=default_api_version)
        credential = get_credential(request)
        if not isinstance(credential, Credential):
            raise TypeError(f"get_credential returned {type(credential).__name__}, not a Credential")
        write_response(credential, request.api_version)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # the plugin boundary: the client wants one line and an exit code
        _fail(label, exc)
    sys.exit(0)


def _fail(label: str, exc: BaseException) -> NoReturn:
    # The client shows this line to its user and may log it: nothing that looks like a secret.
    message: Any = redact_text(" ".join(str(exc).split())) or type(exc).__name__
    sys.stderr.write(f"{label}: {message}\n")
    sys.stderr.flush()
    sys.exit(1)
