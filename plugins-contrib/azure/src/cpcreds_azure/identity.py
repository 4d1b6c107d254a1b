"""Which azure-identity credential a login mode uses, built from the options and the
environment variables kubelogin and azure-identity read. Each mode imports only its own
credential class (azure-identity's package pulls in msal and cryptography lazily).

=================  ==================================================================  =====================================
login              azure-identity credential                                          from the environment (option unset)
=================  ==================================================================  =====================================
workloadidentity   WorkloadIdentityCredential (client assertion: the token file)      AZURE_CLIENT_ID, AZURE_TENANT_ID,
                                                                                       AZURE_FEDERATED_TOKEN_FILE, AZURE_AUTHORITY_HOST
msi                ManagedIdentityCredential (App Service / Arc / IMDS, by env vars)   IDENTITY_ENDPOINT + IDENTITY_HEADER, else IMDS
spn                ClientSecretCredential or CertificateCredential                     AAD_SERVICE_PRINCIPAL_CLIENT_ID/_SECRET,
                                                                                       AZURE_CLIENT_ID/_SECRET/_CERTIFICATE_PATH
azurecli           AzureCliCredential (``az account get-access-token``)                ``az`` on PATH
default            DefaultAzureCredential (environment, workload identity, managed     all of the above
                   identity, Azure CLI), without interactive or developer-tool steps
=================  ==================================================================  =====================================
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from cpcreds.sdk import read_bounded

from .options import ENVIRONMENTS, AzureOptions, authority_url
from .transport import BoundedTransport

__all__ = [
    "IdentityError",
    "PodIdentity",
    "CLIENT_ID_ANNOTATIONS",
    "TENANT_ID_ANNOTATIONS",
    "build_credential",
    "pod_identity",
    "pod_credential",
    "authority",
    "tenant",
    "describe",
]

#: The service-account annotations that name the pod's identity for image pulls, the first
#: present wins: acr-credential-provider's own keys, then Azure Workload Identity's.
CLIENT_ID_ANNOTATIONS = ("kubernetes.azure.com/acr-client-id", "azure.workload.identity/client-id")
TENANT_ID_ANNOTATIONS = ("kubernetes.azure.com/acr-tenant-id", "azure.workload.identity/tenant-id")

_GUID_OR_DOMAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9.\-]{0,252}")
#: A certificate file with its key (PEM or PKCS#12) is a few KiB.
MAX_CERTIFICATE_BYTES = 256 * 1024


class IdentityError(Exception):
    """The login mode cannot be used as configured; the message names what is missing, never a value."""


def _first(environ: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        value = environ.get(name, "").strip()
        if value:
            return value
    return None


def authority(options: AzureOptions, environ: Mapping[str, str]) -> str | None:
    """The authority URL: ``authorityHost``, else ``environment``'s host, else AZURE_AUTHORITY_HOST;
    ``None`` for azure-identity's default (the public cloud)."""
    if options.authority_host is not None:
        return options.authority_host
    if options.environment is not None:
        return authority_url(ENVIRONMENTS[options.environment])
    named = _first(environ, "AZURE_AUTHORITY_HOST")
    return authority_url(named) if named else None


def tenant(options: AzureOptions, environ: Mapping[str, str]) -> str | None:
    return options.tenant_id or _first(environ, "AZURE_TENANT_ID")


def describe(options: AzureOptions) -> str:
    """The login mode in words, for messages."""
    return {
        "workloadidentity": "workload identity",
        "msi": "managed identity",
        "spn": "service principal",
        "azurecli": "the Azure CLI",
        "default": "the default credential chain",
    }[options.login]


def _need(value: str | None, option: str, variables: str, mode: str) -> str:
    if not value:
        raise IdentityError(f"login {mode} needs {option} (or {variables} in the environment)")
    return value


def _certificate(path: Path) -> bytes:
    problem = None
    try:
        data = read_bounded(path, MAX_CERTIFICATE_BYTES)
    except FileNotFoundError:
        problem = "does not exist"
    except OSError as exc:
        problem = f"cannot be read: {exc.strerror or type(exc).__name__}"
    except ValueError as exc:
        problem = str(exc)
    if problem is not None:
        raise IdentityError(f"clientCertificate {path} {problem}")
    return data


#: azure-identity's modules that log a failed fetch at WARNING with the exception's text, which
#: quotes the endpoint's answer (a hostile or careless one echoes the client secret or assertion).
_FAILURE_LOGGERS = tuple(
    f"azure.identity.{name}"
    for name in ("_internal.decorators", "_internal.get_token_mixin", "_internal.msal_managed_identity_client", "_internal.utils",
                 "_credentials.chained", "_credentials.managed_identity", "_credentials.default", "_credentials.environment")
)


def _below_warning(record: logging.LogRecord) -> bool:
    # azure-identity's WARNING-and-above records are dropped: the provider reports each failure
    # itself, in one line built from what it saw on the wire (never a body). Lower levels pass.
    return record.levelno < logging.WARNING


def _hush_failure_logs() -> None:
    # A filter on those loggers only (no handler, no level is touched): without it, Python's
    # last-resort handler prints the quoted answer on stderr when an application has no logging set up.
    for logger in map(logging.getLogger, _FAILURE_LOGGERS):
        if _below_warning not in logger.filters:
            logger.addFilter(_below_warning)


def build_credential(options: AzureOptions, transport: BoundedTransport, timeout: float, environ: Mapping[str, str] | None = None) -> Any:
    """The azure-identity credential for ``options.login``, calling out through ``transport``
    (its own retries off: the transport retries within the deadline). ``timeout`` bounds the
    Azure CLI's process. :class:`IdentityError` when a required value is missing or unusable."""
    _hush_failure_logs()
    env = os.environ if environ is None else environ
    common: dict[str, Any] = {"transport": transport, "retry_total": 0}
    where = authority(options, env)
    mode = options.login
    if mode == "workloadidentity":
        from azure.identity import WorkloadIdentityCredential

        token_file = str(options.federated_token_file) if options.federated_token_file else _first(env, "AZURE_FEDERATED_TOKEN_FILE")
        return WorkloadIdentityCredential(
            tenant_id=_need(tenant(options, env), "tenantId", "AZURE_TENANT_ID", mode),
            client_id=_need(options.client_id or _first(env, "AZURE_CLIENT_ID"), "clientId", "AZURE_CLIENT_ID", mode),
            token_file_path=_need(token_file, "federatedTokenFile", "AZURE_FEDERATED_TOKEN_FILE", mode),
            authority=where,
            disable_instance_discovery=options.disable_instance_discovery,
            **common,
        )
    if mode == "msi":
        from azure.identity import ManagedIdentityCredential

        if options.identity_resource_id is not None:
            return ManagedIdentityCredential(identity_config={"resource_id": options.identity_resource_id}, **common)
        return ManagedIdentityCredential(client_id=options.client_id, **common)
    if mode == "spn":
        client_id = _need(
            options.client_id or _first(env, "AAD_SERVICE_PRINCIPAL_CLIENT_ID", "AZURE_CLIENT_ID"),
            "clientId", "AAD_SERVICE_PRINCIPAL_CLIENT_ID or AZURE_CLIENT_ID", mode,
        )
        tenant_id = _need(tenant(options, env), "tenantId", "AZURE_TENANT_ID", mode)
        extra = {"authority": where, "disable_instance_discovery": options.disable_instance_discovery, **common}
        secret = options.client_secret.get_secret_value() if options.client_secret else None
        certificate = options.client_certificate
        if secret is None and certificate is None:
            secret = _first(env, "AAD_SERVICE_PRINCIPAL_CLIENT_SECRET", "AZURE_CLIENT_SECRET")
            named = _first(env, "AZURE_CLIENT_CERTIFICATE_PATH")
            certificate = Path(named) if secret is None and named else None
        if secret is not None:
            from azure.identity import ClientSecretCredential

            return ClientSecretCredential(tenant_id, client_id, secret, **extra)
        if certificate is None:
            raise IdentityError(
                "login spn needs clientSecret or clientCertificate (or AAD_SERVICE_PRINCIPAL_CLIENT_SECRET, "
                "AZURE_CLIENT_SECRET or AZURE_CLIENT_CERTIFICATE_PATH in the environment)"
            )
        from azure.identity import CertificateCredential

        password = options.client_certificate_password.get_secret_value() if options.client_certificate_password else _first(env, "AZURE_CLIENT_CERTIFICATE_PASSWORD")
        data = _certificate(certificate)
        problem = None
        try:
            return CertificateCredential(tenant_id, client_id, certificate_data=data, password=password, **extra)
        except (ValueError, TypeError):
            # Raised outside: the loader's text may say something about the key.
            problem = f"clientCertificate {certificate} is not a PEM or PKCS#12 certificate with its private key (or the password is wrong)"
        raise IdentityError(problem)
    if mode == "azurecli":
        from azure.identity import AzureCliCredential

        return AzureCliCredential(tenant_id=tenant(options, env), process_timeout=max(1, int(timeout)))
    from azure.identity import DefaultAzureCredential

    return DefaultAzureCredential(
        authority=where,
        managed_identity_client_id=options.client_id,
        workload_identity_client_id=options.client_id,
        workload_identity_tenant_id=options.tenant_id,
        exclude_interactive_browser_credential=True,
        exclude_shared_token_cache_credential=True,
        exclude_visual_studio_code_credential=True,
        exclude_powershell_credential=True,
        exclude_developer_cli_credential=True,
        process_timeout=max(1, int(timeout)),
        disable_instance_discovery=options.disable_instance_discovery,
        **common,
    )


class PodIdentity(NamedTuple):
    """The pod's own identity for an image pull (KEP-4412): its service-account ``token``, the
    federated credential's ``client_id`` and ``tenant_id``. Never in ``repr``: the token."""

    client_id: str
    tenant_id: str
    token: str

    def __repr__(self) -> str:
        return f"PodIdentity(client_id={self.client_id!r}, tenant_id={self.tenant_id!r})"


def _annotated(annotations: Mapping[str, str], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = annotations.get(key, "").strip()
        if value:
            if not _GUID_OR_DOMAIN.fullmatch(value):  # it goes into the token endpoint's path
                raise IdentityError(f"the service account's annotation {key} is not a GUID (nor a domain name)")
            return value
    return None


def pod_identity(
    token: str | None, annotations: Mapping[str, str], options: AzureOptions, environ: Mapping[str, str] | None = None
) -> PodIdentity | None:
    """The pod's identity when the kubelet sent its service-account token, ``None`` when the node's
    identity pulls: no token, or (``requireServiceAccount: false``) no client-id annotation. A token
    without a client id (``requireServiceAccount: true``) or without a tenant is an
    :class:`IdentityError` naming what is missing: the pod's pull never falls back to the node."""
    if not token:
        return None
    client_id = _annotated(annotations, CLIENT_ID_ANNOTATIONS)
    if client_id is None:
        if not options.require_service_account:
            return None
        raise IdentityError(
            f"the pod's service account has no {CLIENT_ID_ANNOTATIONS[1]} (or {CLIENT_ID_ANNOTATIONS[0]}) annotation: "
            "annotate it with the client id of its federated identity, and list the key in the kubelet config's "
            "requiredServiceAccountAnnotationKeys (or set requireServiceAccount false to pull with the node's identity)"
        )
    tenant_id = _annotated(annotations, TENANT_ID_ANNOTATIONS) or tenant(options, os.environ if environ is None else environ)
    if not tenant_id:
        raise IdentityError(
            f"the pod's identity needs a tenant: the service account's {TENANT_ID_ANNOTATIONS[1]} annotation, "
            "or tenantId (or AZURE_TENANT_ID in the environment)"
        )
    return PodIdentity(client_id, tenant_id, token)


def pod_credential(pod: PodIdentity, options: AzureOptions, transport: BoundedTransport, environ: Mapping[str, str] | None = None) -> Any:
    """azure-identity's workload-identity path for ``pod``: a ClientAssertionCredential whose
    assertion is the pod's service-account token. Built per pull, so that no token of one pod is
    ever held for another."""
    _hush_failure_logs()
    from azure.identity import ClientAssertionCredential

    token = pod.token
    return ClientAssertionCredential(
        pod.tenant_id, pod.client_id, lambda: token,
        authority=authority(options, os.environ if environ is None else environ),
        disable_instance_discovery=options.disable_instance_discovery,
        transport=transport, retry_total=0,
    )
