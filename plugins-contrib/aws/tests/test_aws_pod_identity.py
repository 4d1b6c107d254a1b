"""KEP-4412 on AWS: the kubelet hands ``cpcreds-aws-credential-provider`` the pod's
service-account token and annotations; the pod's role (``eks.amazonaws.com/ecr-role-arn``, else
``AWS_ECR_ROLE_ARN``) is assumed with it (the fake STS checks the JWT's signature, its audience
``sts.amazonaws.com`` and the role's trust in its subject) and ECR is asked with those keys (the
fake ECR gives tokens only to the roles allowed: a request with the node's keys where the pod's
role was asked is refused). Without a token, or without a role named, the node pulls."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("cpcreds_aws", reason="install plugins-contrib/aws")

from cpcreds import ProviderError  # noqa: E402
from cpcreds.images.protocol import API_VERSION_V1  # noqa: E402
from cpcreds.sdk import CredentialProviderRequest, encode_request, parse_response  # noqa: E402
from cpcreds_aws import AwsProvider  # noqa: E402

from aws_helpers import CPCREDS_AWS_KUBELET, ECR_IMAGE  # noqa: E402

ANNOTATION = "eks.amazonaws.com/ecr-role-arn"
HOST = ECR_IMAGE.split("/")[0]


def _pull(run_command, image: str, token: str | None = None, annotations: dict[str, str] | None = None, **env: str):
    """The plugin run as the kubelet runs it for a pod (tokenAttributes set: token and annotations in the request)."""
    request = encode_request(image, API_VERSION_V1, service_account_token=token, service_account_annotations=annotations)
    return run_command([CPCREDS_AWS_KUBELET], input=request.decode(), **env)


@pytest.fixture
def pod_role(aws, user) -> str:
    """Role ``ecr-puller``, trusting the service account ``shop/checkout``; only it may get ECR tokens."""
    role = aws.add_role("ecr-puller")
    aws.trust_service_account(role, "shop", "checkout")
    aws.allow_ecr(role)
    return role


def test_the_pod_pulls_with_its_role(aws, user, pod_role, run_command) -> None:
    result = _pull(run_command, ECR_IMAGE, aws.service_account_token("shop", "checkout"), {ANNOTATION: pod_role})
    assert result.returncode == 0, result.stderr
    [password] = aws.ecr_passwords
    assert parse_response(result.stdout.encode(), API_VERSION_V1).auth[HOST].password == password
    assert aws.web_identity_calls == [(pod_role, "system:serviceaccount:shop:checkout", "ecr-credential-provider")]
    [(region, caller)] = aws.ecr_calls
    assert region == "us-west-2" and caller.endswith(":assumed-role/ecr-puller/ecr-credential-provider")


def test_the_role_may_come_from_aws_ecr_role_arn(aws, user, pod_role, run_command) -> None:
    result = _pull(run_command, ECR_IMAGE, aws.service_account_token("shop", "checkout"), AWS_ECR_ROLE_ARN=pod_role)
    assert result.returncode == 0, result.stderr
    assert [call[0] for call in aws.web_identity_calls] == [pod_role]


def test_ecr_public_with_the_pods_role(aws, user, pod_role, run_command) -> None:
    result = _pull(run_command, "public.ecr.aws/shop/checkout:1", aws.service_account_token("shop", "checkout"), {ANNOTATION: pod_role})
    assert result.returncode == 0, result.stderr
    [caller] = aws.ecr_public_calls
    assert caller.endswith(":assumed-role/ecr-puller/ecr-credential-provider")


@pytest.mark.parametrize("annotations", [None, {"other": "x"}, {ANNOTATION: ""}])
def test_a_token_without_a_role_pulls_as_the_node(aws, user, run_command, annotations) -> None:
    # ecr-credential-provider's choice: no role named anywhere, the node's identity.
    aws.allow_ecr(user.arn)
    result = _pull(run_command, ECR_IMAGE, aws.service_account_token("shop", "checkout"), annotations)
    assert result.returncode == 0, result.stderr
    assert aws.web_identity_calls == [] and aws.ecr_calls == [("us-west-2", user.arn)]


def test_without_a_token_the_node_pulls_and_the_registry_refuses_it(aws, user, pod_role, run_command) -> None:
    result = _pull(run_command, ECR_IMAGE, None, {ANNOTATION: pod_role})
    assert result.returncode == 1 and result.stdout == ""
    assert "ECR GetAuthorizationToken answered HTTP 400 (AccessDeniedException)" in result.stderr
    assert aws.web_identity_calls == []


@pytest.mark.parametrize(
    "token",
    [
        pytest.param(lambda aws: aws.service_account_token("shop", "checkout", audience="kubernetes.default.svc"), id="audience"),
        pytest.param(lambda aws: aws.service_account_token("shop", "checkout", key=ec.generate_private_key(ec.SECP256R1())), id="foreign-key"),
        pytest.param(lambda aws: aws.service_account_token("shop", "checkout", lifetime=-60), id="expired"),
        pytest.param(lambda aws: aws.service_account_token("shop", "other"), id="untrusted-subject"),
    ],
)
def test_a_token_sts_refuses_fails_without_falling_back_to_the_node(aws, user, pod_role, run_command, token) -> None:
    aws.allow_ecr(pod_role, user.arn)  # the node could pull: it must not be asked in the pod's place
    jwt = token(aws)
    result = _pull(run_command, ECR_IMAGE, jwt, {ANNOTATION: pod_role})
    assert result.returncode == 1 and result.stdout == "" and result.stderr.count("\n") == 1
    assert "STS AssumeRoleWithWebIdentity answered HTTP" in result.stderr and jwt not in result.stderr
    assert aws.ecr_calls == []


def test_each_service_account_gets_its_own_roles_keys(aws, user) -> None:
    roles = {}
    for name in ("checkout", "payments"):
        roles[name] = aws.add_role(f"puller-{name}")
        aws.trust_service_account(roles[name], "shop", name)
    aws.allow_ecr(*roles.values())
    provider = AwsProvider({})
    for name in ("checkout", "payments", "checkout"):
        request = CredentialProviderRequest(image=ECR_IMAGE, service_account_token=aws.service_account_token("shop", name),
                                            service_account_annotations={ANNOTATION: roles[name]})
        provider.get_image_credential(request, timeout=10)
    assert [caller.split("/")[1] for _, caller in aws.ecr_calls] == ["puller-checkout", "puller-payments", "puller-checkout"]
    assert len(aws.web_identity_calls) == 3  # one exchange per token: no role's keys serve another request


_HOSTILE = st.text(max_size=80) | st.sampled_from(["arn:aws:iam::111122223333:role/ecr-puller\n", "arn:aws:iam::111122223333:rôle/x",
                                                   "arn:aws:iam::111122223333:role/" + "x" * 600, "arn:aws:iam::999999999999:role/nobody"])


def test_hostile_annotations_and_tokens_fail_alone(aws, user, pod_role) -> None:
    aws.allow_ecr(pod_role, user.arn)
    provider = AwsProvider({})

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(role=_HOSTILE, token=st.text(min_size=1, max_size=300) | st.just("x" * 20001))
    def pull(role: str, token: str) -> None:
        request = CredentialProviderRequest(image=ECR_IMAGE, service_account_token=token, service_account_annotations={ANNOTATION: role})
        before = len(aws.ecr_calls)
        try:
            provider.get_image_credential(request, timeout=10)
        except ProviderError as refused:
            message = str(refused)
            assert "\n" not in message and (len(token) < 8 or token not in message)
        # Whatever happened, the node never pulled in the pod's place (an empty annotation names no role).
        assert not role or all(caller != user.arn for _, caller in aws.ecr_calls[before:])

    pull()
