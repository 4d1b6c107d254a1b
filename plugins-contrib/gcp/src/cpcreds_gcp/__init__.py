"""cpcreds provider type ``gcp``: Google OAuth access tokens for GKE clusters from application
default credentials (service account keys, workload identity federation, the metadata server,
gcloud's user credentials), with optional service account impersonation.

In-process: ``type: gcp`` in a provider config. As an exec plugin: the ``cpcreds-gcp`` command,
a drop-in for ``gke-gcloud-auth-plugin --use_application_default_credentials``.
"""

from .options import DEFAULT_SCOPES, GcpOptions
from .provider import GcpProvider

__all__ = ["GcpProvider", "GcpOptions", "DEFAULT_SCOPES"]
