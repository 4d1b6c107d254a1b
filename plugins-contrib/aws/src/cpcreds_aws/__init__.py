"""cpcreds provider type ``aws``: EKS tokens as ``aws eks get-token`` makes them, and ECR image
credentials, from botocore's credential chain (environment, shared config and credentials files,
web identity, EKS Pod Identity and container credentials, instance metadata), optionally
assuming a role.

In-process: ``type: aws`` in a provider config. As an exec plugin: ``cpcreds-aws eks-token``, a
drop-in for ``aws eks get-token``. As a kubelet plugin: ``cpcreds-aws-credential-provider``.
"""

from .options import AwsOptions
from .provider import AwsProvider

__all__ = ["AwsProvider", "AwsOptions"]
