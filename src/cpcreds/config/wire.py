"""Wire types: the Kubernetes objects cpcreds reads and writes, spelled as the specs spell them.

- ``client.authentication.k8s.io`` v1 / v1beta1 ``ExecCredential`` (KEP-541), with its ``Cluster``.
- kubeconfig's ``ExecConfig`` (the ``execConfig`` of a provider config entry; a plain type of
  :mod:`cpcreds.config`, re-exported).
- ``multicluster.x-k8s.io/v1alpha1`` ``ClusterProfile`` with ``status.accessProviders`` (KEP-5339),
  each holding a kubeconfig ``Cluster`` with ``NamedExtension`` entries.

Models use the Kubernetes field names as aliases (``certificate-authority-data``,
``expirationTimestamp``) and Python names inside. Wire objects from a cluster or a plugin ignore
unknown fields (servers and plugins add fields over time); configuration written by a person is
strict (see :mod:`cpcreds.config`).
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator, model_validator

# The names and the plan's cluster type live in the base (no pydantic); re-exported here, where
# they have always been importable from.
from .. import kep as _kep
from ..kep import (
    ADDITIONAL_ARGS_EXTENSION,
    ADDITIONAL_ENVS_EXTENSION,
    API_VERSION_V1,
    API_VERSION_V1BETA1,
    CLUSTER_PROFILE_API_VERSION,
    EXEC_EXTENSION,
    EXEC_INFO_ENV,
    SUPPORTED_API_VERSIONS,
    ExecCluster,
    exec_cluster_of_validated,
    unpassable_text,
)

# A provider config's execConfig is a plain type of the config (read without pydantic there);
# re-exported here, where it has always been importable from.
from . import ExecConfig, ExecEnvVar, InteractiveMode

__all__ = [
    *_kep.__all__,  # every name of the base, re-exported above
    "InteractiveMode",
    "ExecEnvVar",
    "ExecConfig",
    "NamedExtension",
    "KubeconfigCluster",
    "AccessProvider",
    "ClusterProfileStatus",
    "ObjectMeta",
    "ClusterProfile",
    "ExecClusterModel",
    "ExecCredentialSpec",
    "ExecCredentialStatus",
    "ExecCredential",
]

def _decode_base64_bytes(value: Any) -> Any:
    # Go marshals []byte as standard base64; a model built in Python may already hold bytes.
    if isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError("is not valid base64") from exc
    return value


class _Wire(BaseModel):
    """Objects read from a cluster or a plugin: unknown fields are ignored, as Go's decoder does."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore", frozen=True)


class NamedExtension(_Wire):
    """A kubeconfig ``NamedExtension``: a name and an arbitrary (JSON) object."""

    name: str
    extension: Any = None


class KubeconfigCluster(_Wire):
    """kubeconfig v1 ``Cluster``, as found in ``status.accessProviders[].cluster``."""

    server: str = ""
    tls_server_name: str = Field(default="", alias="tls-server-name")
    insecure_skip_tls_verify: bool = Field(default=False, alias="insecure-skip-tls-verify")
    # A file path means nothing to a ClusterProfile (KEP-5339); kept only to say it is ignored.
    certificate_authority: str = Field(default="", alias="certificate-authority")
    certificate_authority_data: bytes = Field(default=b"", alias="certificate-authority-data", repr=False)
    proxy_url: str = Field(default="", alias="proxy-url")
    disable_compression: bool = Field(default=False, alias="disable-compression")
    extensions: tuple[NamedExtension, ...] = ()

    _decode_ca = field_validator("certificate_authority_data", mode="before")(_decode_base64_bytes)

    @field_validator("extensions", mode="before")
    @classmethod
    def _null_extensions(cls, value: Any) -> Any:
        return () if value is None else value

    @field_serializer("certificate_authority_data")
    def _encode_ca(self, value: bytes) -> str:
        return base64.b64encode(value).decode("ascii")


class AccessProvider(_Wire):
    """One entry of ``status.accessProviders``: how the cluster is reached by one kind of identity."""

    name: str
    cluster: KubeconfigCluster | None = None


class ClusterProfileStatus(_Wire):
    access_providers: tuple[AccessProvider, ...] = Field(default=(), alias="accessProviders")
    #: Deprecated predecessor of ``accessProviders``; still read, with a warning.
    credential_providers: tuple[AccessProvider, ...] = Field(default=(), alias="credentialProviders")

    @field_validator("access_providers", "credential_providers", mode="before")
    @classmethod
    def _null_list(cls, value: Any) -> Any:
        return () if value is None else value


class ObjectMeta(_Wire):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = Field(default="", alias="resourceVersion")
    generation: int | None = None


class ClusterProfile(_Wire):
    """``multicluster.x-k8s.io/v1alpha1`` ClusterProfile (only what credential lookup reads)."""

    api_version: str = Field(default=CLUSTER_PROFILE_API_VERSION, alias="apiVersion")
    kind: str = "ClusterProfile"
    metadata: ObjectMeta = ObjectMeta()
    spec: dict[str, Any] = Field(default_factory=dict)
    status: ClusterProfileStatus = ClusterProfileStatus()

    @field_validator("metadata", "status", "spec", mode="before")
    @classmethod
    def _null_object(cls, value: Any) -> Any:
        return {} if value is None else value

    @property
    def ref(self) -> str:
        """``namespace/name`` (or ``name``), for messages and logs."""
        meta = self.metadata
        name = meta.name if _showable_name(meta.name) else "<unnamed>"
        if _showable_name(meta.namespace):
            return f"{meta.namespace}/{name}"
        return name


def _showable_name(value: str) -> bool:
    # Kubernetes names are at most 253 printable characters; anything else is not put in messages.
    return 0 < len(value) <= 253 and value.isprintable()


class ExecClusterModel(_Wire):
    """Reads a KEP-541 ``Cluster`` (kebab-case on the wire) with worded errors, into the plain
    :class:`~cpcreds.kep.ExecCluster` (:meth:`to_cluster`); the fields are that class's."""

    server: str
    tls_server_name: str = Field(default="", alias="tls-server-name")
    insecure_skip_tls_verify: bool = Field(default=False, alias="insecure-skip-tls-verify")
    certificate_authority_data: bytes = Field(default=b"", alias="certificate-authority-data", repr=False)
    proxy_url: str = Field(default="", alias="proxy-url")
    disable_compression: bool = Field(default=False, alias="disable-compression")
    config: Any = None

    _decode_ca = field_validator("certificate_authority_data", mode="before")(_decode_base64_bytes)

    def to_cluster(self) -> ExecCluster:
        return exec_cluster_of_validated(
            self.server,
            self.tls_server_name,
            self.insecure_skip_tls_verify,
            self.certificate_authority_data,
            self.proxy_url,
            self.disable_compression,
            self.config,
        )


class ExecCredentialSpec(_Wire):
    cluster: ExecClusterModel | None = None
    interactive: bool = False

    @field_validator("cluster", mode="after")
    @classmethod
    def _plain_cluster(cls, value: ExecClusterModel | None) -> Any:
        # Every consumer of a request's cluster (a plugin, a plan) gets the one plain type.
        return value.to_cluster() if value is not None else None


class ExecCredentialStatus(_Wire):
    """What a plugin answers. ``token`` and ``clientKeyData`` never appear in ``repr``."""

    expiration_timestamp: str | None = Field(default=None, alias="expirationTimestamp")
    token: str = Field(default="", repr=False)
    client_certificate_data: str = Field(default="", alias="clientCertificateData", repr=False)
    client_key_data: str = Field(default="", alias="clientKeyData", repr=False)


class ExecCredential(_Wire):
    """``client.authentication.k8s.io`` ExecCredential (v1 or v1beta1)."""

    api_version: str = Field(alias="apiVersion")
    kind: str = "ExecCredential"
    spec: ExecCredentialSpec = ExecCredentialSpec()
    status: ExecCredentialStatus | None = None
