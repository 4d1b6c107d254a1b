"""The ``options:`` of a ``type: azure`` provider entry, and the flags of ``cpcreds-azure
get-token``: kubelogin's ``get-token`` flags by the same names (``--server-id`` is ``serverId``),
so the ``args`` of a kubeconfig's ``kubelogin get-token`` carry over one to one.

Values arrive from YAML or from flags (always strings), so booleans also take ``"true"``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

__all__ = ["AzureOptions", "AKS_SERVER_ID", "LOGIN_MODES", "ENVIRONMENTS", "authority_url"]

#: The application ID of the AKS AAD server (the audience of every AKS cluster's tokens).
AKS_SERVER_ID = "6dae42f8-4368-4678-94ff-3960e28e3630"
#: kubelogin's login modes that make sense without a user at a terminal, and ``default``:
#: azure-identity's DefaultAzureCredential chain.
LOGIN_MODES = ("default", "workloadidentity", "msi", "spn", "azurecli")
#: kubelogin's ``--environment`` names and their Entra ID authority hosts.
ENVIRONMENTS = {
    "AzurePublicCloud": "login.microsoftonline.com",
    "AzureChinaCloud": "login.chinacloudapi.cn",
    "AzureUSGovernmentCloud": "login.microsoftonline.us",
}
# A client, tenant or application ID: a GUID, or (tenant) a domain name; it goes into a URL path.
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9.\-]{0,252}")
# A server ID is an application ID URI or GUID: it becomes the scope "<server-id>/.default".
_SERVER_ID = re.compile(r"[A-Za-z0-9][\x21\x23-\x2b\x2d-\x5b\x5d-\x7e]{0,511}")
_RESOURCE_ID = re.compile(r"/subscriptions/[^\s?#]{1,1024}")


def authority_url(host: str) -> str:
    """``https://<host>`` for a bare host name, the URL itself (without a trailing slash) otherwise."""
    return host.rstrip("/") if "://" in host else f"https://{host.rstrip('/')}"


class AzureOptions(BaseModel):
    """Entra ID access tokens for AKS, as ``kubelogin get-token`` gets them for a service: the login
    mode (``--login``) picks the identity: workload identity (a federated token file), a managed
    identity, a service principal with a secret or a certificate, the Azure CLI's signed-in
    account, or (``default``) azure-identity's DefaultAzureCredential chain. Options not given
    are read from the environment variables kubelogin and azure-identity read (AZURE_CLIENT_ID,
    AZURE_TENANT_ID, AZURE_FEDERATED_TOKEN_FILE, AZURE_AUTHORITY_HOST, ...). The token is for
    ``<serverId>/.default``."""

    # This docstring and each field's description are what `cpcreds-azure --help` shows.

    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)

    login: Literal["default", "workloadidentity", "msi", "spn", "azurecli"] = Field(
        default="default", description="Login mode: workloadidentity, msi, spn, azurecli or default (azure-identity's chain)."
    )
    server_id: str = Field(
        default=AKS_SERVER_ID, alias="serverId", description="The AAD server application ID: the token is for <serverId>/.default."
    )
    client_id: str | None = Field(
        default=None, alias="clientId", description="Application (client) ID: of the service principal, the federated identity or a user-assigned managed identity."
    )
    tenant_id: str | None = Field(default=None, alias="tenantId", description="Directory (tenant) ID (else AZURE_TENANT_ID).")
    client_secret: SecretStr | None = Field(
        default=None,
        alias="clientSecret",
        description="spn: the client secret (prefer AAD_SERVICE_PRINCIPAL_CLIENT_SECRET or AZURE_CLIENT_SECRET in the environment).",
    )
    client_certificate: Path | None = Field(
        default=None, alias="clientCertificate", description="spn: a PEM or PKCS#12 file holding the certificate and its private key."
    )
    client_certificate_password: SecretStr | None = Field(
        default=None, alias="clientCertificatePassword", description="spn: the password of clientCertificate, if it has one."
    )
    federated_token_file: Path | None = Field(
        default=None,
        alias="federatedTokenFile",
        description="workloadidentity: the projected service account token file (else AZURE_FEDERATED_TOKEN_FILE).",
    )
    authority_host: str | None = Field(
        default=None, alias="authorityHost", description="Entra ID authority host or URL (else AZURE_AUTHORITY_HOST, else from environment)."
    )
    environment: Literal["AzurePublicCloud", "AzureChinaCloud", "AzureUSGovernmentCloud"] | None = Field(
        default=None, description="The cloud, for its authority host: AzurePublicCloud, AzureChinaCloud or AzureUSGovernmentCloud."
    )
    identity_resource_id: str | None = Field(
        default=None, alias="identityResourceId", description="msi: the ARM resource ID of a user-assigned managed identity (instead of clientId)."
    )
    disable_instance_discovery: bool = Field(
        default=False,
        alias="disableInstanceDiscovery",
        description="Do not ask login.microsoftonline.com to validate the authority (an authority host Microsoft does not know).",
    )
    registries: tuple[str, ...] = Field(
        default=(),
        description="Kubelet plugin: registry hosts to answer besides *.azurecr.io, *.azurecr.cn and *.azurecr.us (a private endpoint; a flag also takes a,b).",
    )
    acr_scope: str | None = Field(
        default=None,
        alias="acrScope",
        description="Kubelet plugin: the scope of the Entra token exchanged at the registry (default: the registry's cloud's ARM scope).",
    )

    @field_validator("server_id", "acr_scope", mode="before")
    @classmethod
    def _server(cls, value: Any) -> Any:
        if isinstance(value, str) and not _SERVER_ID.fullmatch(value):
            raise ValueError("must be an application ID or ID URI: printable ASCII without spaces, quotes or commas")
        return value

    @field_validator("client_id", "tenant_id", mode="before")
    @classmethod
    def _ident(cls, value: Any) -> Any:
        if isinstance(value, str) and not _ID.fullmatch(value):
            raise ValueError("must be a GUID (letters, digits, dots and dashes)")
        return value

    @field_validator("client_certificate", "federated_token_file", mode="before")
    @classmethod
    def _file(cls, value: Any) -> Any:
        if isinstance(value, str):
            if not value.strip():
                raise ValueError("must not be empty")
            return Path(value).expanduser()
        return value

    @field_validator("authority_host", mode="before")
    @classmethod
    def _authority(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        url = authority_url(value)
        try:
            parts = urlsplit(url)
            valid = parts.scheme == "https" and bool(parts.hostname) and not (parts.query or parts.fragment or "@" in parts.netloc)
            valid = valid and parts.path in ("", "/") and not any(c.isspace() for c in url)
        except ValueError:
            valid = False
        if not valid:
            raise ValueError("must be a host name or an https URL without a path, such as login.microsoftonline.com")
        return url

    @field_validator("identity_resource_id", mode="before")
    @classmethod
    def _resource(cls, value: Any) -> Any:
        if isinstance(value, str) and not _RESOURCE_ID.fullmatch(value):
            raise ValueError("must be an ARM resource ID (/subscriptions/...)")
        return value

    @field_validator("registries", mode="before")
    @classmethod
    def _registries(cls, value: Any) -> Any:
        items = value if isinstance(value, (list, tuple)) else [value]
        hosts: list[str] = []
        for item in items:
            if not isinstance(item, str):
                raise ValueError("must be a list of registry hosts or a comma-separated string")
            hosts.extend(part for part in re.split(r"[,\s]+", item) if part)
        for host in hosts:
            if not re.fullmatch(r"[A-Za-z0-9.\-]{1,253}(:[0-9]{1,5})?", host):
                raise ValueError("each registry must be a host[:port]")
        return tuple(host.lower() for host in hosts)

    @model_validator(mode="after")
    def _consistent(self) -> AzureOptions:
        only = {
            "clientSecret": ("spn", self.client_secret is not None),
            "clientCertificate": ("spn", self.client_certificate is not None),
            "clientCertificatePassword": ("spn", self.client_certificate_password is not None),
            "federatedTokenFile": ("workloadidentity", self.federated_token_file is not None),
            "identityResourceId": ("msi", self.identity_resource_id is not None),
        }
        for name, (mode, given) in only.items():
            if given and self.login != mode:
                raise ValueError(f"{name} applies only with login {mode} (login is {self.login})")
        if self.client_secret is not None and self.client_certificate is not None:
            raise ValueError("clientSecret and clientCertificate are exclusive: give one")
        if self.client_certificate_password is not None and self.client_certificate is None:
            raise ValueError("clientCertificatePassword applies only with clientCertificate")
        if self.identity_resource_id is not None and self.client_id is not None:
            raise ValueError("clientId and identityResourceId are exclusive: a managed identity is named by one")
        if self.authority_host is not None and self.environment is not None:
            raise ValueError("authorityHost and environment are exclusive: give one")
        return self

    @property
    def scope(self) -> str:
        """What the token is asked for: ``<serverId>/.default``."""
        return self.server_id if self.server_id.endswith("/.default") else f"{self.server_id}/.default"
