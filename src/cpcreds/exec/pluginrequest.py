"""The KEP-541 request and answer of an exec plugin written in Python: :func:`read_request` reads
``KUBERNETES_EXEC_INFO`` (bounded, never quoted in an error; a well-formed request without pydantic,
anything else through the ExecCredential model, which words what is wrong) and
:func:`write_response` prints the ExecCredential. :mod:`cpcreds.exec.plugin` exports both.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO, Any

from ..config.documents import Limits, load_or_raise
from ..credential import Credential
from ..errors import CredentialError
from ..kep import API_VERSION_V1, EXEC_INFO_ENV, SUPPORTED_API_VERSIONS, ExecCluster, exec_cluster_of_validated

__all__ = ["PluginRequest", "PluginRequestError", "read_request", "write_response"]

#: client-go's request is a few KiB (a CA bundle at most); anything near this is not one.
_MAX_EXEC_INFO_BYTES = 1024 * 1024

class PluginRequestError(CredentialError, ValueError):
    """KUBERNETES_EXEC_INFO is present but not a usable ExecCredential request."""


@dataclass(frozen=True, slots=True)
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
    # The client wrote this, but a hostile environment is possible: parse it bounded, never quote it.
    document = load_or_raise(
        raw, PluginRequestError, source=EXEC_INFO_ENV, syntax="json", limits=Limits(max_bytes=_MAX_EXEC_INFO_BYTES),
        message=f"{EXEC_INFO_ENV} is not JSON ({{detail}})",
    )
    if not isinstance(document, dict) or document.get("kind") != "ExecCredential":
        raise PluginRequestError(f"{EXEC_INFO_ENV} is not an ExecCredential")
    api_version = document.get("apiVersion")
    if api_version not in SUPPORTED_API_VERSIONS:
        shown = repr(api_version) if isinstance(api_version, str) and len(api_version) <= 64 and api_version.isprintable() else "an unsupported value"
        raise PluginRequestError(f"{EXEC_INFO_ENV} asks for apiVersion {shown}; supported: {', '.join(SUPPORTED_API_VERSIONS)}")
    plain = _read_plain_spec(document)
    if plain is not None:
        return PluginRequest(api_version=api_version, interactive=plain[0], cluster=plain[1])
    from ..config.wire import ExecCredential  # pydantic, imported only for such a request
    from ..config.wording import field_problem, read_with

    request, problems = read_with(ExecCredential, document)
    if request is None:
        raise PluginRequestError(field_problem(EXEC_INFO_ENV, problems) if problems else f"{EXEC_INFO_ENV} is not a valid ExecCredential")
    return PluginRequest(api_version=api_version, interactive=request.spec.interactive, cluster=request.spec.cluster)


#: Fields of a request's spec.cluster, as the wire spells them, with their plain types.
_CLUSTER_TEXT = ("tls-server-name", "proxy-url")
_CLUSTER_FLAGS = ("insecure-skip-tls-verify", "disable-compression")
#: Python spellings the model also accepts (populate_by_name): those go to the model.
_PYTHON_SPELLINGS = frozenset({"api_version", "tls_server_name", "insecure_skip_tls_verify", "certificate_authority_data", "proxy_url", "disable_compression"})


def _read_plain_spec(document: dict[str, Any]) -> tuple[bool, ExecCluster | None] | None:
    """``(interactive, cluster)`` of a well-formed request read directly, as
    :class:`cpcreds.config.wire.ExecCredential` reads it; ``None`` for anything else (the model then reads
    it and words what is wrong). tests/test_imports.py checks both agree on generated requests."""
    if not _PYTHON_SPELLINGS.isdisjoint(document) or document.get("status") is not None:
        return None
    spec = document.get("spec", {})
    if type(spec) is not dict or not _PYTHON_SPELLINGS.isdisjoint(spec):
        return None
    interactive = spec.get("interactive", False)
    cluster = spec.get("cluster")
    if type(interactive) is not bool:
        return None
    if cluster is None:
        return interactive, None
    if type(cluster) is not dict or not _PYTHON_SPELLINGS.isdisjoint(cluster) or type(cluster.get("server")) is not str:
        return None
    if any(type(cluster.get(key, "")) is not str for key in _CLUSTER_TEXT):
        return None
    if any(type(cluster.get(key, False)) is not bool for key in _CLUSTER_FLAGS):
        return None
    ca_text = cluster.get("certificate-authority-data", "")
    if type(ca_text) is not str:
        return None
    try:
        ca_data = base64.b64decode(ca_text, validate=True) if ca_text else b""
    except ValueError:  # binascii.Error: the model words it
        return None
    return interactive, exec_cluster_of_validated(
        cluster["server"],
        cluster.get("tls-server-name", ""),
        cluster.get("insecure-skip-tls-verify", False),
        ca_data,
        cluster.get("proxy-url", ""),
        cluster.get("disable-compression", False),
        cluster.get("config"),
    )


def write_response(credential: Credential, api_version: str, stream: IO[str] | None = None) -> None:
    """Print the ExecCredential answer (one JSON line) and flush."""
    out = stream or sys.stdout
    out.write(json.dumps(credential.to_exec_credential(api_version)) + "\n")
    out.flush()
