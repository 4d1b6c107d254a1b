"""The ``options:`` of a ``type: aws`` provider entry (and the flags of ``cpcreds-aws`` and
``cpcreds-aws-credential-provider``), spelled as ``aws eks get-token``'s flags in camelCase
(``--cluster-name`` is ``clusterName``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from cpcreds.sdk import Options, option

__all__ = ["AwsOptions", "DEFAULT_SESSION_NAME", "ROLE_ARN"]

#: The role session name ``aws eks get-token --role-arn`` uses.
DEFAULT_SESSION_NAME = "EKSGetTokenAuth"
# EKS cluster names: 1-100 characters, a letter or digit first, then letters, digits, - and _.
CLUSTER_NAME = re.compile(r"[0-9A-Za-z][A-Za-z0-9\-_]{0,99}")
# EKS on Outposts local clusters are named by their id (a UUID).
_CLUSTER_ID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")
# arn:<partition>:iam::<12 digits>:role/<path and name> (IAM's limits: 2048 characters in all).
ROLE_ARN = re.compile(r"arn:aws(-[a-z]+)*:iam::[0-9]{12}:role/[\w+=,.@/\-]{1,512}", re.ASCII)
# STS RoleSessionName and ExternalId: [\w+=,.@-], 2-64 and 2-1224 characters.
_SESSION_NAME = re.compile(r"[\w+=,.@\-]{2,64}", re.ASCII)
_EXTERNAL_ID = re.compile(r"[\w+=,.@:/\-]{2,1224}", re.ASCII)
_PROFILE = re.compile(r"[A-Za-z0-9_.\-+@]{1,128}")


def _matching(pattern: re.Pattern[str], what: str) -> Callable[[str], str]:
    # An option's check: the value as given, or a ValueError that describes it without quoting it.
    def check(value: str) -> str:
        if not pattern.fullmatch(value):
            raise ValueError(f"must be {what}")
        return value

    return check


def _text(pattern: re.Pattern[str], what: str, description: str, *, names: tuple[str, ...] = (), default: str | None = None) -> Any:
    # A text option checked against ``pattern``; ``what`` words a refusal.
    return option(default, names=names, check=_matching(pattern, what), description=description)


def _region(value: str) -> str:
    # A region name of one of botocore's partitions (their regionRegex): it becomes part of a host name.
    from .endpoints import is_region

    if not is_region(value):
        raise ValueError("must be an AWS region such as us-west-2")
    return value


class AwsOptions(Options):
    """EKS tokens as ``aws eks get-token`` makes them (a presigned STS GetCallerIdentity URL for the
    cluster), signed with credentials from botocore's chain: environment variables, the shared
    config and credentials files (``profile``), web identity (IRSA), EKS Pod Identity and container
    credentials, instance metadata (IMDSv2); optionally assuming ``roleArn`` first. As a kubelet
    plugin: ECR GetAuthorizationToken for the image's registry. ``type: aws`` alone uses the
    default chain and the cluster name from the ClusterProfile's exec extension (``clusterName``)."""

    # This docstring and each option's description are what `cpcreds-aws --help` shows.

    cluster_name: str | None = _text(
        CLUSTER_NAME, "an EKS cluster name: letters, digits, - and _, at most 100, a letter or digit first",
        "The EKS cluster's name (aws eks get-token --cluster-name). Unset: the profile's exec extension clusterName.",
        names=("clusterName",),
    )
    cluster_id: str | None = _text(
        _CLUSTER_ID, "an EKS on Outposts cluster id (a UUID)",
        "An EKS on Outposts local cluster's id: signed in place of the name (--cluster-id).", names=("clusterId",),
    )
    region: str | None = option(
        None,
        check=_region,
        description="The region whose STS endpoint signs the token (--region): one of any AWS partition's (us-west-2, "
        "cn-north-1, us-gov-west-1, us-iso-east-1, eusc-de-east-1...). Unset: AWS_REGION, AWS_DEFAULT_REGION or the "
        "profile's region, else the global endpoint.",
    )
    profile: str | None = _text(
        _PROFILE, "a profile name (letters, digits, _ . - + @)",
        "A profile of the shared config and credentials files (--profile); unset: AWS_PROFILE or default.",
    )
    role_arn: str | None = _text(
        ROLE_ARN, "an IAM role ARN such as arn:aws:iam::111122223333:role/eks-reader",
        "Assume this IAM role (STS AssumeRole) with the found credentials first (--role-arn).", names=("roleArn",),
    )
    role_session_name: str = _text(
        _SESSION_NAME, "2 to 64 of letters, digits and + = , . @ - _",
        "The session name of the assumed role (--role-session-name).", names=("roleSessionName",), default=DEFAULT_SESSION_NAME,
    )
    external_id: str | None = _text(
        _EXTERNAL_ID, "2 to 1224 of letters, digits and + = , . @ : / - _",
        "The external id the assumed role's trust policy wants.", names=("externalId",),
    )

    def check_options(self) -> None:
        if self.role_arn is None:
            given = [name for name, set_ in (("roleSessionName", self.role_session_name != DEFAULT_SESSION_NAME),
                                             ("externalId", self.external_id is not None)) if set_]
            if given:
                raise ValueError(f"{' and '.join(given)} {'applies' if len(given) == 1 else 'apply'} only with roleArn")
