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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cpcreds.sdk import read_bounded

from .options import ENVIRONMENTS, AzureOptions, authority_url
from .transport import BoundedTransport

__all__ = ["IdentityError", "build_credential", "authority", "tenant", "describe"]

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


class _NoFailureText(logging.Filter):
    """Drops azure-identity's WARNING-and-above records: the provider reports each failure itself,
    in one line built from what it saw on the wire (never a body). Lower levels pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < logging.WARNING


_FILTER = _NoFailureText()


def _hush_failure_logs() -> None:
    # A filter on those loggers only (no handler, no level is touched): without it, Python's
    # last-resort handler prints the quoted answer on stderr when an application has no logging set up.
    for name in _FAILURE_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


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
