"""The ``options:`` of a ``type: azure`` provider entry, and the flags of ``cpcreds-azure
get-token``: kubelogin's ``get-token`` flags by the same names (``--server-id`` is ``serverId``),
so the ``args`` of a kubeconfig's ``kubelogin get-token`` carry over one to one.

Values arrive from YAML or from flags (always strings), so booleans also take ``"true"``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from cpcreds.sdk import Options, option, type_name

from .acr import ACR_AUDIENCE, ACR_SUFFIXES, login_server

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
_HOST = re.compile(r"[A-Za-z0-9.\-]{1,253}")
_REGISTRY = re.compile(r"[A-Za-z0-9.\-]{1,253}(:[0-9]{1,5})?")


def authority_url(host: str) -> str:
    """``https://<host>`` for a bare host name, the URL itself (without a trailing slash) otherwise."""
    return host.rstrip("/") if "://" in host else f"https://{host.rstrip('/')}"


class Secret:
    """A secret option's value: ``repr``/``str`` show stars, :meth:`get_secret_value` the value."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def get_secret_value(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('**********')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


def _secret(value: Any) -> Secret:
    if not isinstance(value, str):
        raise ValueError(f"must be a string, not {type_name(value)}")
    return Secret(value)


def _matching(pattern: re.Pattern[str], problem: str) -> Callable[[str], str]:
    # An option's check: the value, or a ValueError that describes it without quoting it.
    def check(value: str) -> str:
        if not pattern.fullmatch(value):
            raise ValueError(problem)
        return value

    return check


def _file(value: Path) -> Path:
    if not str(value).strip():
        raise ValueError("must not be empty")
    return value.expanduser()


def _authority(value: str) -> str:
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


def _words(value: Any, what: str) -> list[str]:
    # YAML gives a list; a flag gives "a,b" (or a list of such strings when repeated).
    items = value if isinstance(value, (list, tuple)) else [value]
    if not all(isinstance(item, str) for item in items):
        raise ValueError(f"must be a list of {what} or a comma-separated string")
    return [part for item in items for part in re.split(r"[,\s]+", item) if part]


def _registries(value: Any) -> tuple[str, ...]:
    hosts = _words(value, "registry hosts")
    if not all(_REGISTRY.fullmatch(host) for host in hosts):
        raise ValueError("each registry must be a host[:port]")
    return tuple(host.lower() for host in hosts)


def _mirrors(value: Any) -> dict[str, str]:
    # acr-credential-provider's --registry-mirror: "source:target,source:target" (spaces ignored);
    # YAML may give a mapping. The target may have a port (source:host:port).
    if isinstance(value, dict):
        pairs = list(value.items())
    else:
        items = value if isinstance(value, (list, tuple)) else [value]
        joined = ["".join(item.split()) if isinstance(item, str) else item for item in items]
        pairs = [tuple(word.split(":", 1)) for word in _words(joined, "source:target pairs")]
    mirrors: dict[str, str] = {}
    for pair in pairs:
        source, target = pair if len(pair) == 2 else ("", "")
        if not (isinstance(source, str) and _HOST.fullmatch(source) and isinstance(target, str) and _REGISTRY.fullmatch(target)):
            raise ValueError("each mirror must be source:target, two registry hosts (docker.io:mymirror.azurecr.io)")
        mirrors[source.lower()] = target.lower()
    return mirrors


def _suffix(value: str) -> str:
    suffix = value if value.startswith(".") else f".{value}"
    if not re.fullmatch(r"(\.[a-z0-9]([a-z0-9\-]{0,61}[a-z0-9])?){2,}", suffix.lower()):
        raise ValueError("must be a DNS suffix of two labels or more, such as .azurecr.my.cloud")
    return suffix.lower()


_server = _matching(_SERVER_ID, "must be an application ID or ID URI: printable ASCII without spaces, quotes or commas")
_ident = _matching(_ID, "must be a GUID (letters, digits, dots and dashes)")


def _audience(value: str) -> str:
    if value.lower() == "arm":
        return "arm"
    return _server(value).removesuffix("/.default")


class AzureOptions(Options):
    """Entra ID access tokens for AKS, as ``kubelogin get-token`` gets them for a service: the login
    mode (``--login``) picks the identity: workload identity (a federated token file), a managed
    identity, a service principal with a secret or a certificate, the Azure CLI's signed-in
    account, or (``default``) azure-identity's DefaultAzureCredential chain. Options not given
    are read from the environment variables kubelogin and azure-identity read (AZURE_CLIENT_ID,
    AZURE_TENANT_ID, AZURE_FEDERATED_TOKEN_FILE, AZURE_AUTHORITY_HOST, ...). The token is for
    ``<serverId>/.default``."""

    # This docstring and each option's description are what `cpcreds-azure --help` shows.

    login: Literal["default", "workloadidentity", "msi", "spn", "azurecli"] = option(
        "default", description="Login mode: workloadidentity, msi, spn, azurecli or default (azure-identity's chain)."
    )
    server_id: str = option(
        AKS_SERVER_ID, names=("serverId",), check=_server, description="The AAD server application ID: the token is for <serverId>/.default."
    )
    client_id: str | None = option(
        None, names=("clientId",), check=_ident,
        description="Application (client) ID: of the service principal, the federated identity or a user-assigned managed identity.",
    )
    tenant_id: str | None = option(None, names=("tenantId",), check=_ident, description="Directory (tenant) ID (else AZURE_TENANT_ID).")
    client_secret: Secret | None = option(
        None, names=("clientSecret",), parse=_secret,
        description="spn: the client secret (prefer AAD_SERVICE_PRINCIPAL_CLIENT_SECRET or AZURE_CLIENT_SECRET in the environment).",
    )
    client_certificate: Path | None = option(
        None, names=("clientCertificate",), check=_file, description="spn: a PEM or PKCS#12 file holding the certificate and its private key."
    )
    client_certificate_password: Secret | None = option(
        None, names=("clientCertificatePassword",), parse=_secret, description="spn: the password of clientCertificate, if it has one."
    )
    federated_token_file: Path | None = option(
        None, names=("federatedTokenFile",), check=_file,
        description="workloadidentity: the projected service account token file (else AZURE_FEDERATED_TOKEN_FILE).",
    )
    authority_host: str | None = option(
        None, names=("authorityHost",), check=_authority,
        description="Entra ID authority host or URL (else AZURE_AUTHORITY_HOST, else from environment).",
    )
    environment: Literal["AzurePublicCloud", "AzureChinaCloud", "AzureUSGovernmentCloud"] | None = option(
        None, description="The cloud, for its authority host: AzurePublicCloud, AzureChinaCloud or AzureUSGovernmentCloud."
    )
    identity_resource_id: str | None = option(
        None, names=("identityResourceId",), check=_matching(_RESOURCE_ID, "must be an ARM resource ID (/subscriptions/...)"),
        description="msi: the ARM resource ID of a user-assigned managed identity (instead of clientId).",
    )
    disable_instance_discovery: bool = option(
        False, names=("disableInstanceDiscovery",),
        description="Do not ask login.microsoftonline.com to validate the authority (an authority host Microsoft does not know).",
    )
    # The kubelet plugin's: which images are ACR's, and the Entra token exchanged at the registry.
    registries: tuple[str, ...] = option(
        (), parse=_registries,
        description="Kubelet plugin: registry hosts to answer besides *.azurecr.io, .cn, .de and .us (a flag also takes a,b).",
    )
    container_registry_dns_suffix: str | None = option(
        None, names=("containerRegistryDnsSuffix", "containerRegistryDNSSuffix"), check=_suffix,
        description="Kubelet plugin: the login-server suffix of another cloud's registries, such as .azurecr.my.cloud.",
    )
    registry_mirror: dict[str, str] = option(
        {}, names=("registryMirror",), parse=_mirrors,
        description="Kubelet plugin: source:target pairs (docker.io:mymirror.azurecr.io): images of the source registry pull from that ACR.",
    )
    acr_audience: str = option(
        ACR_AUDIENCE, names=("acrAudience", "acrScope"), check=_audience,
        description="Kubelet plugin: the audience of the Entra token exchanged at the registry; arm: the registry's cloud's ARM.",
    )
    require_service_account: bool = option(
        True, names=("requireServiceAccount",),
        description="Kubelet plugin: a pod's service account token without a client-id annotation is an error (false: the node's identity pulls).",
    )

    def check_options(self) -> None:
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
        for source, target in self.registry_mirror.items():
            if not login_server(f"{target}/", self.acr_suffixes, self.registries):
                raise ValueError(f"registryMirror: the mirror of {source} is not an ACR login server (<name>{', <name>'.join(self.acr_suffixes)} or one of registries)")

    @property
    def acr_suffixes(self) -> tuple[str, ...]:
        """The login-server suffixes of ACR's clouds, and containerRegistryDnsSuffix."""
        custom = (self.container_registry_dns_suffix,) if self.container_registry_dns_suffix else ()
        return (*ACR_SUFFIXES, *custom)

    @property
    def scope(self) -> str:
        """What the token is asked for: ``<serverId>/.default``."""
        return self.server_id if self.server_id.endswith("/.default") else f"{self.server_id}/.default"
