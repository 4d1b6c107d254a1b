"""The ``options:`` of a ``type: aws`` provider entry (and the flags of ``cpcreds-aws`` and
``cpcreds-aws-credential-provider``), spelled as ``aws eks get-token``'s flags in camelCase
(``--cluster-name`` is ``clusterName``)."""

from __future__ import annotations

import re
from collections.abc import Callable

from cpcreds.sdk import Options, option

__all__ = ["AwsOptions", "DEFAULT_SESSION_NAME"]

#: The role session name ``aws eks get-token --role-arn`` uses.
DEFAULT_SESSION_NAME = "EKSGetTokenAuth"
# EKS cluster names: 1-100 characters, a letter or digit first, then letters, digits, - and _.
CLUSTER_NAME = re.compile(r"[0-9A-Za-z][A-Za-z0-9\-_]{0,99}")
# EKS on Outposts local clusters are named by their id (a UUID).
_CLUSTER_ID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")
_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-[0-9]{1,2}")
# arn:<partition>:iam::<12 digits>:role/<path and name> (IAM's limits: 2048 characters in all).
_ROLE_ARN = re.compile(r"arn:aws(-[a-z]+)*:iam::[0-9]{12}:role/[\w+=,.@/\-]{1,512}")
# STS RoleSessionName and ExternalId: [\w+=,.@-], 2-64 and 2-1224 characters.
_SESSION_NAME = re.compile(r"[\w+=,.@\-]{2,64}")
_EXTERNAL_ID = re.compile(r"[\w+=,.@:/\-]{2,1224}")
_PROFILE = re.compile(r"[A-Za-z0-9_.\-+@]{1,128}")


def _matching(pattern: re.Pattern[str], what: str) -> Callable[[str], str]:
    # An option's check: the value as given, or a ValueError that describes it without quoting it.
    def check(value: str) -> str:
        if not pattern.fullmatch(value):
            raise ValueError(f"must be {what}")
        return value

    return check


class AwsOptions(Options):
    """EKS tokens as ``aws eks get-token`` makes them (a presigned STS GetCallerIdentity URL for the
    cluster), signed with credentials from botocore's chain: environment variables, the shared
    config and credentials files (``profile``), web identity (IRSA), EKS Pod Identity and container
    credentials, instance metadata (IMDSv2); optionally assuming ``roleArn`` first. As a kubelet
    plugin: ECR GetAuthorizationToken for the image's registry. ``type: aws`` alone uses the
    default chain and the cluster name from the ClusterProfile's exec extension (``clusterName``)."""

    # This docstring and each option's description are what `cpcreds-aws --help` shows.

    cluster_name: str | None = option(
        None,
        names=("clusterName",),
        check=_matching(CLUSTER_NAME, "an EKS cluster name: letters, digits, - and _, at most 100, a letter or digit first"),
        description="The EKS cluster's name (aws eks get-token --cluster-name). Unset: the profile's exec extension clusterName.",
    )
    cluster_id: str | None = option(
        None,
        names=("clusterId",),
        check=_matching(_CLUSTER_ID, "an EKS on Outposts cluster id (a UUID)"),
        description="An EKS on Outposts local cluster's id: signed in place of the name (--cluster-id).",
    )
    region: str | None = option(
        None,
        check=_matching(_REGION, "an AWS region such as us-west-2"),
        description="The region whose STS endpoint signs the token (--region). Unset: AWS_REGION, AWS_DEFAULT_REGION or the profile's region, else the global endpoint.",
    )
    profile: str | None = option(
        None,
        check=_matching(_PROFILE, "a profile name (letters, digits, _ . - + @)"),
        description="A profile of the shared config and credentials files (--profile); unset: AWS_PROFILE or default.",
    )
    role_arn: str | None = option(
        None,
        names=("roleArn",),
        check=_matching(_ROLE_ARN, "an IAM role ARN such as arn:aws:iam::111122223333:role/eks-reader"),
        description="Assume this IAM role (STS AssumeRole) with the found credentials first (--role-arn).",
    )
    role_session_name: str = option(
        DEFAULT_SESSION_NAME,
        names=("roleSessionName",),
        check=_matching(_SESSION_NAME, "2 to 64 of letters, digits and + = , . @ - _"),
        description="The session name of the assumed role (--role-session-name).",
    )
    external_id: str | None = option(
        None,
        names=("externalId",),
        check=_matching(_EXTERNAL_ID, "2 to 1224 of letters, digits and + = , . @ : / - _"),
        description="The external id the assumed role's trust policy wants.",
    )

    def check_options(self) -> None:
        if self.role_arn is None:
            given = [name for name, set_ in (("roleSessionName", self.role_session_name != DEFAULT_SESSION_NAME),
                                             ("externalId", self.external_id is not None)) if set_]
            if given:
                raise ValueError(f"{' and '.join(given)} {'applies' if len(given) == 1 else 'apply'} only with roleArn")
