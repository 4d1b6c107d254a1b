"""Image pulls with the pod's own AWS identity (KEP-4412), as ecr-credential-provider does them.

When the kubelet hands the plugin the pod's service-account token (``tokenAttributes`` in its
``CredentialProviderConfig``), the role is the service account's annotation
``eks.amazonaws.com/ecr-role-arn``, else the environment variable ``AWS_ECR_ROLE_ARN``; the token
is exchanged for that role's keys (STS ``AssumeRoleWithWebIdentity``, session name
``ecr-credential-provider``) and ECR is asked with them. Without a token, or with a token but no
role named anywhere (ecr-credential-provider's choice too), the node's identity pulls, as without
KEP-4412. A role that is named but unusable (not a role ARN, a token STS cannot take) fails the
request: the pod's identity was asked for, and the node's is never used in its place.
"""

from __future__ import annotations

import os

from cpcreds.sdk import ProviderError, get_logger

from .options import ROLE_ARN

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cpcreds.sdk import CredentialProviderRequest

__all__ = ["ROLE_ANNOTATION", "ROLE_ENV", "pod_role"]

#: The service-account annotation naming the role a pod pulls with.
ROLE_ANNOTATION = "eks.amazonaws.com/ecr-role-arn"
#: The variable naming it for every pod whose service account has no such annotation.
ROLE_ENV = "AWS_ECR_ROLE_ARN"
# STS takes web identity tokens of 4 to 20000 characters (AssumeRoleWithWebIdentity's limits).
_TOKEN_CHARS = (4, 20000)

_log = get_logger(__name__)


def pod_role(request: CredentialProviderRequest) -> str | None:
    """The role ARN the pod of ``request`` pulls with, or ``None`` for the node's identity.
    :class:`~cpcreds.sdk.ProviderError` (never quoting the value) when the role or the token is unusable."""
    token = request.service_account_token
    if not token:  # the kubelet sends none (or an empty one) without tokenAttributes
        return None
    annotations = request.service_account_annotations
    if ROLE_ANNOTATION in annotations:  # present, even empty, it decides (as ecr-credential-provider reads it)
        arn, where = annotations[ROLE_ANNOTATION], f"the service account's annotation {ROLE_ANNOTATION}"
    else:
        arn, where = os.environ.get(ROLE_ENV, ""), ROLE_ENV
    if not arn:
        _log.info("aws: a service-account token but no role named; pulling with the node's identity")
        return None
    if not ROLE_ARN.fullmatch(arn):
        raise ProviderError(f"aws: {where} is not an IAM role ARN (arn:aws:iam::<account>:role/<name>)", provider="aws")
    if not _TOKEN_CHARS[0] <= len(token) <= _TOKEN_CHARS[1] or not token.isascii() or not token.isprintable():
        raise ProviderError("aws: the service-account token is not one STS takes (4 to 20000 printable ASCII characters)", provider="aws")
    return arn
