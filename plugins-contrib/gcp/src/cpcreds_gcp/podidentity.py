"""Image pulls with the pod's own identity (KEP-4412): the kubelet hands the plugin the pod's
service account token and the annotations of its service account; Workload Identity Federation
exchanges that token at STS for a federated Google token (google-auth's identity-pool
credentials, with the token as a programmatic subject token), optionally impersonating the
Google service account the annotation names, and that token pulls.

Who pulls with whose identity:

- The pod's identity is asked for when ``requireServiceAccount`` is set, when the service account
  carries :data:`SERVICE_ACCOUNT_ANNOTATION` or :data:`PROVIDER_ANNOTATION`, or (as in
  auth-provider-gcp's flow) :data:`ENABLE_ANNOTATION` is ``"true"`` and the provider knows a pool
  (``workloadIdentityProvider``, or ``identityProvider`` and ``projectId``). Then it either
  completes or fails: it never falls back to the node's identity.
- Otherwise the node's identity pulls, exactly as without KEP-4412.

Nothing is held between requests: each request's token gets its own credentials object, so one
pod's token or Google token never serves another pod or service account (the kubelet's cache,
keyed per token or per service account by ``cacheType``, is the only cache).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from cpcreds.sdk import CredentialProviderRequest, shown_endpoint

from .adc import Source
from .options import GcpOptions, check_account, check_pool_provider

__all__ = [
    "ENABLE_ANNOTATION",
    "SERVICE_ACCOUNT_ANNOTATION",
    "PROVIDER_ANNOTATION",
    "PodIdentity",
    "PodIdentityError",
    "pod_identity",
    "pod_source",
]

#: auth-provider-gcp's opt-in: ``"true"`` on the service account turns its flow on.
ENABLE_ANNOTATION = "iam.gke.io/enable-wi-image-pull"
#: GKE's convention: the Google service account a Kubernetes service account acts as.
SERVICE_ACCOUNT_ANNOTATION = "iam.gke.io/gcp-service-account"
#: cpcreds': the workload identity pool provider for this service account, over the option.
PROVIDER_ANNOTATION = "cpcreds.io/gcp-workload-identity-provider"
_JWT_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:jwt"
# What auth-provider-gcp asks STS for, and all that reading from Google's registries needs.
_CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"


class PodIdentityError(ValueError):
    """The pod's identity was asked for and cannot be used; the message names what is missing."""


@dataclass(frozen=True)
class PodIdentity:
    """What one request asks for: the STS audience, the Google service account to impersonate
    (or ``None``: the federated token pulls), and why the pod's identity is used (for messages)."""

    audience: str
    service_account: str | None
    reason: str


def _annotation(annotations: Mapping[str, str], key: str) -> str | None:
    value = annotations.get(key)
    return value.strip() if value is not None and value.strip() else None


def pod_identity(options: GcpOptions, request: CredentialProviderRequest) -> PodIdentity | None:
    """The pod identity ``request`` asks for, ``None`` when the node's identity pulls, or
    :class:`PodIdentityError` when it is asked for and cannot be used (no token, no pool, a
    malformed annotation)."""
    annotations = request.service_account_annotations
    account, provider = _annotation(annotations, SERVICE_ACCOUNT_ANNOTATION), _annotation(annotations, PROVIDER_ANNOTATION)
    configured = options.pool_audience()
    if options.require_service_account:
        reason = "requireServiceAccount is set"
    elif account is not None or provider is not None:
        reason = f"the service account has the annotation {SERVICE_ACCOUNT_ANNOTATION if account is not None else PROVIDER_ANNOTATION}"
    elif annotations.get(ENABLE_ANNOTATION) == "true" and configured is not None:
        reason = f"the service account has the annotation {ENABLE_ANNOTATION}: \"true\""
    else:
        return None
    if not request.service_account_token:
        raise PodIdentityError(
            f"the pod's identity is asked for ({reason}) but the request carries no service account token; "
            "the kubelet sends one when the provider's entry in its CredentialProviderConfig has tokenAttributes"
        )
    try:
        audience = check_pool_provider(provider, f"annotation {PROVIDER_ANNOTATION}") if provider is not None else configured
        target = check_account(account, f"annotation {SERVICE_ACCOUNT_ANNOTATION}") if account is not None else None
    except ValueError as exc:
        raise PodIdentityError(f"the pod's identity is asked for ({reason}) but the {exc}") from None
    if audience is None:
        raise PodIdentityError(
            f"the pod's identity is asked for ({reason}) but no workload identity pool provider is known: "
            f"set workloadIdentityProvider (or identityProvider and projectId), or the annotation {PROVIDER_ANNOTATION}"
        )
    return PodIdentity(audience, target, reason)


def pod_source(identity: PodIdentity, token: str, options: GcpOptions) -> Source:
    """google-auth identity-pool credentials that exchange ``token`` (the pod's) at
    ``stsEndpoint`` for ``identity.audience``, then impersonate ``identity.service_account``
    through ``iamEndpoint`` when it is set; with labels for the endpoints they call."""
    from google.auth import identity_pool

    class _PodToken(identity_pool.SubjectTokenSupplier):
        # The pod's token, handed over as is: google-auth reads no file and runs nothing.
        def get_subject_token(self, context: object, request: object) -> str:
            return token

        def __repr__(self) -> str:
            return "<the pod's service account token>"

    token_url = options.sts_token_url()
    impersonation = options.impersonation_url(identity.service_account) if identity.service_account is not None else None
    credentials = identity_pool.Credentials(
        audience=identity.audience,
        subject_token_type=_JWT_TOKEN_TYPE,
        token_url=token_url,
        subject_token_supplier=_PodToken(),
        service_account_impersonation_url=impersonation,
        scopes=[_CLOUD_PLATFORM],
    )
    endpoints = {shown_endpoint(token_url): "STS token endpoint"}
    description = f"the pod's service account token exchanged for {identity.audience}"
    if impersonation is not None:
        endpoints[shown_endpoint(impersonation)] = "IAM Credentials endpoint"
        description += f", impersonating {identity.service_account}"
    return Source(credentials, description, endpoints)
