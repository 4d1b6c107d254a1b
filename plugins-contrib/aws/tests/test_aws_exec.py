"""``cpcreds-aws eks-token`` as a real subprocess: a drop-in for ``aws eks get-token`` answering
ExecCredential v1 and v1beta1 as asked (KUBERNETES_EXEC_INFO), its ``--help`` and option errors,
and kubectl running it from a kubeconfig against a spoke that accepts only tokens STS verified."""

from __future__ import annotations

import base64
import json
import shutil
from datetime import UTC, datetime, timedelta

import pytest

pytest.importorskip("cpcreds_aws", reason="install plugins-contrib/aws")

from aws_helpers import CLUSTER, CPCREDS_AWS, exec_info, token_url  # noqa: E402

V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"


@pytest.mark.parametrize("api_version", [V1, V1BETA1])
def test_it_answers_in_the_api_version_asked_for(aws, user, spoke, run_command, api_version) -> None:
    result = run_command([CPCREDS_AWS, "eks-token", "--cluster-name", CLUSTER], KUBERNETES_EXEC_INFO=exec_info(api_version))
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["apiVersion"] == api_version and answer["kind"] == "ExecCredential"
    status = answer["status"]
    expiry = datetime.strptime(status["expirationTimestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert timedelta(minutes=13, seconds=55) <= expiry - datetime.now(UTC) <= timedelta(minutes=14)
    assert aws.authenticator(CLUSTER)(status["token"])
    assert aws.verified == [(CLUSTER, user.arn)]


@pytest.mark.parametrize(
    "args",
    [
        # A kubeconfig's `aws eks get-token ...` args, command swapped.
        ["eks", "get-token", "--cluster-name", CLUSTER, "--region", "us-west-2", "--output", "json"],
        # Argo CD's `argocd-k8s-auth aws ...` args, command swapped.
        ["aws", "--cluster-name", CLUSTER],
    ],
)
def test_aws_cli_and_argocd_spellings_carry_over(aws, user, run_command, args) -> None:
    result = run_command([CPCREDS_AWS, *args])
    assert result.returncode == 0, result.stderr
    token = json.loads(result.stdout)["status"]["token"]
    assert aws.authenticator(CLUSTER)(token)


def test_role_arn_and_cluster_id_flags(aws, user, run_command) -> None:
    role = aws.add_role("eks-reader", trusts=(user.arn,))
    cluster_id = "0e5ab1c2-3d4e-4f5a-8b6c-7d8e9f0a1b2c"
    result = run_command([CPCREDS_AWS, "eks-token", "--cluster-name", CLUSTER, "--cluster-id", cluster_id, "--role-arn", role])
    assert result.returncode == 0, result.stderr
    assert aws.authenticator(cluster_id)(json.loads(result.stdout)["status"]["token"])
    assert aws.verified[-1][1].endswith(":assumed-role/eks-reader/EKSGetTokenAuth")


def test_the_cluster_name_comes_from_the_cluster_info(aws, user, spoke, run_command) -> None:
    result = run_command([CPCREDS_AWS, "eks-token"], KUBERNETES_EXEC_INFO=exec_info(V1, spoke, cluster=CLUSTER))
    assert result.returncode == 0, result.stderr
    assert aws.authenticator(CLUSTER)(json.loads(result.stdout)["status"]["token"])


def test_help_lists_the_options(run_command) -> None:
    result = run_command([CPCREDS_AWS, "eks-token", "--help"])
    assert result.returncode == 0
    for option in ("--clusterName", "--clusterId", "--region", "--roleArn", "--profile", "--externalId"):
        assert option in result.stdout


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--cluster-name", "not a name!"], "option clusterName: must be an EKS cluster name"),
        (["--region", "mars"], "option region: must be an AWS region"),
        (["--role-arn", "eks-admin"], "option roleArn: must be an IAM role ARN"),
        (["--external-id", "x1"], "externalId applies only with roleArn"),
        (["--no-such-flag", "1"], "noSuchFlag"),
    ],
)
def test_bad_options_are_one_line(run_command, flags, expected) -> None:
    result = run_command([CPCREDS_AWS, "eks-token", *flags])
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and expected in result.stderr, result.stderr


def test_no_credentials_is_one_line(run_command) -> None:
    result = run_command([CPCREDS_AWS, "eks-token", "--cluster-name", CLUSTER])
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "found no AWS credentials" in result.stderr


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_runs_it_in_place_of_aws_eks_get_token(aws, user, spoke, run_command, tmp_path) -> None:
    # The user entry `aws eks update-kubeconfig` writes, with the command swapped.
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "eks", "cluster": {"server": spoke.url, "certificate-authority-data": base64.b64encode(spoke.ca_pem).decode()}}],
        "users": [{"name": "eks", "user": {"exec": {
            "apiVersion": V1BETA1,
            "command": str(CPCREDS_AWS),
            "args": ["eks-token", "--cluster-name", CLUSTER, "--region", "us-west-2", "--output", "json"],
            "env": [{"name": "AWS_STS_REGIONAL_ENDPOINTS", "value": "regional"}],
            "interactiveMode": "IfAvailable",
        }}}],
        "contexts": [{"name": "eks", "context": {"cluster": "eks", "user": "eks"}}],
        "current-context": "eks",
    }))
    result = run_command(["kubectl", "--kubeconfig", kubeconfig, "--request-timeout=20s", "get", "namespaces", "-o", "name"])
    assert result.returncode == 0, result.stderr
    assert "namespace/default" in result.stdout.split()
    assert spoke.requests and all(seen.auth == "token" for seen in spoke.requests)
    assert aws.verified and {arn for _, arn in aws.verified} == {user.arn}
    token = spoke.requests[0].token
    assert token is not None and token_url(token)[0] == f"{aws.url}/"


def test_argo_cd_profiles_with_additional_args_through_cpcreds(aws, user, spoke) -> None:
    # docs/providers-aws.md: Argo CD's argo-cd-builtin-aws profile carrying `--cluster-name` in
    # its additional-args extension, served by the exec plugin with the arguments appended.
    from kubernetes import client as kclient
    from prometheus_client import CollectorRegistry

    from cpcreds import CredentialEngine, ProviderConfig

    from aws_helpers import PROVIDER, profile

    config = ProviderConfig.from_dict({"providers": [{
        "name": PROVIDER,
        "profileSourcedCLIArgsPolicy": "Append",
        "execConfig": {"apiVersion": V1BETA1, "command": str(CPCREDS_AWS), "args": ["aws"], "provideClusterInfo": True, "interactiveMode": "Never"},
    }]}, source="providers.yaml")
    argo = profile(spoke, cluster=None)
    argo["status"]["accessProviders"][0]["cluster"]["extensions"] = [
        {"name": "clusterprofiles.multicluster.x-k8s.io/exec/additional-args", "extension": ["--cluster-name", CLUSTER]}
    ]
    engine = CredentialEngine(config, prometheus_registry=CollectorRegistry())
    try:
        with engine.api_client(argo) as api:
            assert kclient.CoreV1Api(api).list_namespace().items
    finally:
        engine.close()
    assert aws.verified == [(CLUSTER, user.arn)]
