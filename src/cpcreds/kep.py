"""The KEP names and the one KEP-541 wire type a plan holds, without pydantic.

This is the base the plan (:mod:`cpcreds.plan`), the exec provider and :mod:`cpcreds.providers.hookspecs`
build on: the apiVersions and reserved extension names of KEP-541 / KEP-5339, what text can be
handed to a process, and :class:`ExecCluster`, the ``spec.cluster`` a plugin receives. Reading
wire objects *with worded errors* is :mod:`cpcreds.config.wire`'s job (pydantic, imported only when an
input needs it); tests/test_imports.py checks that importing this module loads nothing else.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from dataclasses import dataclass, field
from ._patterns import LazyPattern

__all__ = [
    "API_VERSION_V1",
    "API_VERSION_V1BETA1",
    "SUPPORTED_API_VERSIONS",
    "EXEC_INFO_ENV",
    "EXEC_EXTENSION",
    "ADDITIONAL_ARGS_EXTENSION",
    "ADDITIONAL_ENVS_EXTENSION",
    "CLUSTER_PROFILE_API_VERSION",
    "ExecCluster",
    "unpassable_text",
]

API_VERSION_V1 = "client.authentication.k8s.io/v1"
API_VERSION_V1BETA1 = "client.authentication.k8s.io/v1beta1"
SUPPORTED_API_VERSIONS = (API_VERSION_V1, API_VERSION_V1BETA1)

#: The environment variable through which a client hands the ExecCredential request to a plugin.
EXEC_INFO_ENV = "KUBERNETES_EXEC_INFO"

#: Reserved by client.authentication.k8s.io: per-cluster plugin config, passed verbatim as
#: ``ExecCredential.spec.cluster.config``.
EXEC_EXTENSION = "client.authentication.k8s.io/exec"
#: Reserved by KEP-5339: extra plugin arguments (a list of strings), used only under ``Append``.
ADDITIONAL_ARGS_EXTENSION = "clusterprofiles.multicluster.x-k8s.io/exec/additional-args"
#: Reserved by KEP-5339: extra plugin environment (a string map), used only when a policy allows.
ADDITIONAL_ENVS_EXTENSION = "clusterprofiles.multicluster.x-k8s.io/exec/additional-envs"

CLUSTER_PROFILE_API_VERSION = "multicluster.x-k8s.io/v1alpha1"

# Compiled on first use: a plugin run that hands nothing to a process never needs it.
_UNPASSABLE = LazyPattern("[\x00\ud800-\udfff]")


def unpassable_text(value: str) -> str | None:
    """Why ``value`` cannot be passed to a process (argv or environment), or ``None`` if it can.

    A NUL ends a C string; a lone surrogate (``\\ud800``) has no UTF-8 encoding. The value itself
    is never part of the answer: it may be a secret.
    """
    found = _UNPASSABLE.search(value)
    if found is None:
        return None
    return "contains a NUL character" if found.group() == "\x00" else "contains a lone surrogate (not valid Unicode text)"


@dataclass(frozen=True, kw_only=True, slots=True, repr=False)
class ExecCluster:
    """KEP-541 ``Cluster``: what a plugin receives in ``spec.cluster`` (kebab-case on the wire,
    see :func:`cpcreds.plan.cluster_to_wire`), and what ``AccessPlan.cluster`` holds.

    ``certificate_authority_data`` is bytes; base64 text (as Go marshals ``[]byte``) is decoded,
    and text that is not base64 is a ``ValueError``. ``config`` is the profile's
    ``client.authentication.k8s.io/exec`` extension, verbatim (in a plan: a read-only copy).
    Plugin requests and ClusterProfiles are read into this type by :mod:`cpcreds.config.wire`, which
    checks every field's type and words the errors; tests/test_access.py checks that both agree.
    """

    server: str
    tls_server_name: str = ""
    insecure_skip_tls_verify: bool = False
    certificate_authority_data: bytes = field(default=b"", repr=False)
    proxy_url: str = ""
    disable_compression: bool = False
    config: Any = None

    def __post_init__(self) -> None:
        ca = self.certificate_authority_data
        if isinstance(ca, str):
            problem = False
            try:
                ca = base64.b64decode(ca, validate=True)
            except (binascii.Error, ValueError):
                problem = True
            if problem:  # raised outside the except block: the text may be anything
                raise ValueError("certificate_authority_data is not valid base64")
            object.__setattr__(self, "certificate_authority_data", ca)

    def __repr__(self) -> str:
        # URLs as they may be shown (a password or token in them masked), the CA data and the
        # exec extension's values not at all: a repr ends up in logs and tracebacks.
        from ._show import shown_url

        config = self.config
        if isinstance(config, dict):
            config = "{" + ", ".join(f"{key!r}: ..." for key in config) + "}"
        elif config is not None:
            config = type(config).__name__
        return (
            f"ExecCluster(server={shown_url(self.server)!r}, tls_server_name={self.tls_server_name!r}, "
            f"insecure_skip_tls_verify={self.insecure_skip_tls_verify!r}, proxy_url={shown_url(self.proxy_url)!r}, "
            f"disable_compression={self.disable_compression!r}, config={config})"
        )


def exec_cluster_of_validated(
    server: str,
    tls_server_name: str,
    insecure_skip_tls_verify: bool,
    certificate_authority_data: bytes,
    proxy_url: str,
    disable_compression: bool,
    config: Any,
) -> ExecCluster:
    """``ExecCluster(server=..., ...)`` with every field given, for values that already have
    the fields' types (a read profile's, a plugin request's), positionally as their readers
    hold them."""
    return ExecCluster(
        server=server,
        tls_server_name=tls_server_name,
        insecure_skip_tls_verify=insecure_skip_tls_verify,
        certificate_authority_data=certificate_authority_data,
        proxy_url=proxy_url,
        disable_compression=disable_compression,
        config=config,
    )
