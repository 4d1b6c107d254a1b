"""EKS tokens for clusters, and ECR credentials for images, from AWS credentials.

``get_credential`` signs a fresh token for the plan's cluster each time it is called (signing
is local and takes well under a millisecond; the engine caches the credential for its 14
minutes). The cluster is the ``clusterId`` option (EKS on Outposts), else ``clusterName``, else
the ``clusterName`` of the ClusterProfile's exec extension, so one provider entry serves every
EKS cluster of a fleet whose profiles name their cluster. The options are
:class:`~cpcreds_aws.options.AwsOptions` (``cpcreds-aws --help`` lists them).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from cpcreds.sdk import Credential, ProviderError, deadline, get_logger, shown

from .failures import Unusable, describe, operation
from .login import Login
from .options import CLUSTER_NAME, AwsOptions
from .token import eks_token

TYPE_CHECKING = False
if TYPE_CHECKING:  # an exec plugin's run loads neither the plan nor the KEP-2133 types
    from cpcreds.sdk import AccessPlan, CredentialProviderRequest, CredentialProviderResponse

__all__ = ["AwsProvider"]

_log = get_logger(__name__)


def _shown_image(image: object, limit: int = 80) -> str:
    # The image as the kubelet named it (an image name holds no secret), quoted and cut short: a
    # long name still says which image it was.
    if not isinstance(image, str):
        return shown(image)
    text = repr(image) if image.isprintable() else ascii(image)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class AwsProvider:
    """Built once per config entry (no I/O); ``get_credential`` is safe to call from many threads."""

    kind = "aws"
    #: What ``cpcreds-aws --help`` lists and its flags may set.
    options_model = AwsOptions

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.options = AwsOptions.read(options)
        self._login = Login(self.options)

    def get_credential(self, plan: AccessPlan) -> Credential:
        """A token for the plan's EKS cluster, expiring in 14 minutes."""
        cluster = self._cluster(plan)
        problem = None
        # What botocore's calls may take: the fetch's deadline (cpcreds.sdk), which ends before
        # the caller's timeout, so that our error naming the endpoint is the one the caller sees.
        until = deadline(plan.timeout)
        try:
            keys = self._login.keys(max(0.1, until.remaining()))
            region = self._login.region()
            settings = self._login.endpoint_settings()
        except Exception as exc:  # botocore's, described without its text (it may quote an answer)
            problem = describe(exc, until.seconds)
        if problem is not None:
            raise ProviderError(f"aws: {problem}", provider=plan.provider)
        now = datetime.now(timezone.utc)
        if keys.expires_at is not None and keys.expires_at <= now:
            # botocore hands out expired instance keys while IMDS cannot renew them ("static
            # stability"), saying so only at INFO; STS refuses what they sign.
            expired = keys.expires_at.strftime("%Y-%m-%dT%H:%M:%SZ")
            _log.warning("aws keys expired", source=keys.source, expired_at=expired, access_key=keys.access_key)
            raise ProviderError(f"aws: the keys from {keys.source or 'the login source'} expired at {expired}: "
                                "a token they signed would be refused", provider=plan.provider)
        try:
            token, expiry = eks_token(keys, cluster, region, settings=settings, now=now)
        except Unusable as exc:  # botocore's rule set has no STS endpoint for these settings (words of ours)
            raise ProviderError(f"aws: {exc}", provider=plan.provider) from None
        if keys.expires_at is not None and keys.expires_at < expiry:
            expiry = keys.expires_at  # STS refuses the token once its signing keys have expired
        _log.debug("eks token signed", cluster=cluster, region=region or "global", access_key=keys.access_key)
        return Credential(token=token, expiration_timestamp=expiry)

    def get_image_credential(self, request: CredentialProviderRequest, *, timeout: float) -> CredentialProviderResponse:
        """ECR's (or ECR Public's) credentials for the image's registry (KEP-2133; see
        :mod:`cpcreds_aws.kubelet`), with the pod's own role when the request carries its
        service-account token and a role is named (KEP-4412; see :mod:`cpcreds_aws.podidentity`),
        else with the provider's own identity."""
        from .kubelet import ecr_registry, image_response
        from .podidentity import pod_role

        registry = ecr_registry(request.image)
        if registry is None:
            raise ProviderError(
                f"aws: image {_shown_image(request.image)} is not in an ECR registry "
                "(<account>.dkr.ecr.<region>.amazonaws.com, public.ecr.aws)",
                provider=self.kind,
            )
        role = pod_role(request)  # ProviderError when the pod's role is asked for and unusable
        problem = None
        until = deadline(timeout)  # as in get_credential
        try:
            keys = None
            if role is not None:
                sts_region = registry.region if not registry.public else (self._login.region() or registry.region)
                keys = self._login.web_identity_keys(role, str(request.service_account_token), sts_region, max(0.1, until.remaining()))
            client = self._login.client(registry.service, registry.region, max(0.1, until.remaining()), fips=registry.fips, keys=keys)
            try:
                with operation(registry.operation):
                    answer = client.get_authorization_token()
            finally:
                client.close()
            return image_response(registry, answer)
        except Exception as exc:  # described without botocore's text, as above
            problem = describe(exc, until.seconds, service=registry.service)
        raise ProviderError(f"aws: {problem}", provider=self.kind)

    def close(self) -> None:
        """Nothing to release: clients are closed after each call."""

    def _cluster(self, plan: AccessPlan) -> str:
        if self.options.cluster_id is not None:
            return self.options.cluster_id
        if self.options.cluster_name is not None:
            return self.options.cluster_name
        config = plan.cluster.config
        name = config.get("clusterName") if isinstance(config, Mapping) else None
        if name is None:
            raise ProviderError(
                "aws: no cluster name: set the clusterName option (--cluster-name) or clusterName in the profile's exec extension",
                provider=plan.provider,
            )
        if not isinstance(name, str) or not CLUSTER_NAME.fullmatch(name):
            raise ProviderError(f"aws: the profile's exec extension clusterName {shown(name)} is not an EKS cluster name", provider=plan.provider)
        return name
