"""The console scripts: ``cpcreds-aws`` (``main``), the aws provider as a KEP-541 exec plugin,
``cpcreds-aws eks-token --cluster-name X`` answering as ``aws eks get-token --cluster-name X``
does (``eks get-token`` is accepted in place of ``eks-token``, as is ``argocd-k8s-auth``'s
``aws``, and ``--output json`` is accepted, so a kubeconfig's ``aws`` or ``argocd-k8s-auth``
args carry over with only the command changed); and ``cpcreds-aws-credential-provider``
(``kubelet_main``), the same provider as a kubelet image credential provider plugin for ECR
(KEP-2133, see :mod:`cpcreds_aws.kubelet`). Options are flags (``--cluster-name=x`` or
``--cluster-name x``).

Apart from :mod:`cpcreds_aws.plugin` so that a run loads neither pluggy (the ``hookimpl`` that
registers the provider type) nor, for an exec plugin's run, the KEP-2133 code: an exec plugin's
start is most of its answer.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import NoReturn

from .provider import AwsProvider

__all__ = ["main", "kubelet_main", "exec_arguments"]

#: The command ``cpcreds-aws`` runs, aws-cli's spelling of it, and argocd-k8s-auth's.
_COMMANDS = (["eks-token"], ["eks", "get-token"], ["aws"])
#: The apiVersion ``aws eks get-token`` answers when ``KUBERNETES_EXEC_INFO`` is not set.
_BY_HAND_VERSION = "client.authentication.k8s.io/v1beta1"
#: aws-cli's output flag: the answer is always JSON.
_OUTPUT_JSON = (["--output", "json"], ["--output=json"])


def exec_arguments(argv: Sequence[str]) -> list[str]:
    """``argv`` without the command (``eks-token``, ``eks get-token`` or ``aws``) and ``--output json``."""
    arguments = list(argv)
    for command in _COMMANDS:
        if arguments[: len(command)] == command:
            arguments = arguments[len(command) :]
            break
    for flag in _OUTPUT_JSON:
        for at in range(len(arguments) - len(flag) + 1):
            if arguments[at : at + len(flag)] == flag:
                del arguments[at : at + len(flag)]
                break
    return arguments


def main() -> NoReturn:
    """Run the aws provider as a KEP-541 exec plugin (``cpcreds-aws eks-token ...``). Run without
    ``KUBERNETES_EXEC_INFO`` (by hand, or by a client that is not client-go), it answers
    ``client.authentication.k8s.io/v1beta1``, as ``aws eks get-token`` and aws-iam-authenticator do."""
    from cpcreds.sdk import run_provider

    run_provider(AwsProvider, name="aws", argv=exec_arguments(sys.argv[1:]), default_api_version=_BY_HAND_VERSION)


def kubelet_main() -> NoReturn:
    """Run the aws provider as a kubelet image credential provider plugin
    (``cpcreds-aws-credential-provider``): ECR registries, user ``AWS``."""
    from cpcreds.sdk import run_image_provider

    run_image_provider(AwsProvider, name="aws")
