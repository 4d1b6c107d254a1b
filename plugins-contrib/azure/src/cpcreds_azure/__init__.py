"""cpcreds provider type ``azure``: Entra ID access tokens for AKS clusters (workload identity,
managed identity, service principal with a secret or certificate, the Azure CLI, or
azure-identity's default chain), and ACR refresh tokens for the kubelet.

In-process: ``type: azure`` in a provider config. As an exec plugin: ``cpcreds-azure get-token``,
a drop-in for ``kubelogin get-token`` with kubelogin's flags.
"""

from .options import AKS_SERVER_ID, AzureOptions
from .provider import AzureProvider

__all__ = ["AzureProvider", "AzureOptions", "AKS_SERVER_ID"]
