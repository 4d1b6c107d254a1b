"""What a one-shot run of cpcreds-aws loads: an EKS token and an ECR answer from the AWS fakes, as
kubectl and the kubelet run them, without pydantic (the options are a cpcreds.sdk.Options),
structured logging, metrics, settings, PyYAML or the kubernetes client."""

from __future__ import annotations

import json
import sys

import pytest

pytest.importorskip("cpcreds_aws", reason="install plugins-contrib/aws")

from aws_helpers import CLUSTER, CPCREDS_AWS, CPCREDS_AWS_KUBELET, ECR_IMAGE  # noqa: E402
from tests.fakes.processes import imported_modules  # noqa: E402

#: Never needed to answer once.
NOT_NEEDED = {"pydantic", "pydantic_core", "structlog", "prometheus_client", "pydantic_settings", "yaml", "kubernetes"}


def _loaded(run_command, argv: list, stdin: str | None = None) -> set[str]:
    result = run_command([sys.executable, "-X", "importtime", *argv], input=stdin)
    assert result.returncode == 0, result.stderr[-2000:]
    return imported_modules(result.stderr)


def test_an_exec_answer_loads_only_what_it_needs(aws, user, run_command) -> None:
    modules = _loaded(run_command, [CPCREDS_AWS, "eks-token", "--cluster-name", CLUSTER])
    assert "cpcreds_aws" in modules and [cluster for cluster, _ in aws.verified] == [] and aws.calls("sts") == []
    assert sorted(modules & NOT_NEEDED) == []
    # Keys in the environment: signed with the standard library (cpcreds_aws.sigv4), not botocore's
    # signer (~70 ms: urllib3, xml.etree); and the console script does not register a plugin (pluggy).
    assert sorted(modules & {"botocore", "urllib3", "xml", "pluggy"}) == []


def test_a_kubelet_answer_loads_only_what_it_needs(aws, user, run_command) -> None:
    request = json.dumps({"apiVersion": "credentialprovider.kubelet.k8s.io/v1", "kind": "CredentialProviderRequest", "image": ECR_IMAGE})
    modules = _loaded(run_command, [CPCREDS_AWS_KUBELET], request)
    assert "cpcreds_aws" in modules and len(aws.ecr_passwords) == 1
    assert sorted(modules & NOT_NEEDED) == []
