"""ecr-credential-provider's own test tables (cloud-provider-aws, cmd/ecr-credential-provider/main_test.go)
replayed against cpcreds' aws provider: its registry pattern grid (through
``AwsProvider.get_image_credential``, what ``cpcreds-aws-credential-provider`` runs, and a row each
way through the console script run as the kubelet runs it), ECR Public (``public.ecr.aws``,
``ecr-public.aws.com``, asked of ``ecr-public`` in us-east-1), and an answer without ``expiresAt``
(``cacheDuration: 0``). Where cpcreds is stricter (an image outside ECR gets no ECR token), the test
says so."""

from __future__ import annotations

import base64
import json

import pytest

pytest.importorskip("cpcreds_aws", reason="install plugins-contrib/aws")

from cpcreds.images.protocol import API_VERSION_V1  # noqa: E402
from cpcreds.sdk import AuthConfig, CredentialProviderRequest, ProviderError, encode_request, parse_response  # noqa: E402
from cpcreds_aws import AwsProvider  # noqa: E402

from aws_helpers import CPCREDS_AWS_KUBELET  # noqa: E402

# TestRegistryPatternMatch's grid, as upstream lists it.
GRID = [
    ("123456789012.dkr.ecr.lala-land-1.amazonaws.com", True),
    ("123456789012.dkr.ecr-fips.lala-land-1.amazonaws.com", True),
    ("123456789012.dkr.ecr.lala-land-1.amazonaws.com.cn", True),
    ("123456789012.dkr.ecr.eusc-de-east-1.amazonaws.eu", True),
    ("123456789012.dkr.ecr-fips.eusc-de-east-1.amazonaws.eu", True),
    ("1234567890123.dkr.ecr.lala-land-1.amazonaws.com", False),
    ("12345678901.dkr.ecr.lala-land-1.amazonaws.com", False),
    ("12345678901A.dkr.ecr.lala-land-1.amazonaws.com", False),
    ("123456789012.dkr.ecr.lala-land-1!.amazonaws.com", False),
    ("123456789012.dkr.ecr.#lala-land-1.amazonaws.com", False),
    ("123456789012.dkr.ecr.lala-land-1.amazonaws.hacker.com", False),
    ("123456789012.dkr.ecr.lala-land-1.hacker.com", False),
    ("123456789012.dkr.ecr.lala-land-1.amazonaws.lol", False),
    ("123456789012.dog.ecr.lala-land-1.amazonaws.com", False),
    ("123456789012.dkr.cat.lala-land-1.amazonaws.com", False),
    ("123456789012.dkr.cat.lala-land-1.awsamazon.com", False),
    ("123456789012.lala-land-1.amazonaws.com", False),
    ("123456789012.dkr.ecr.us-iso-east-1.c2s.ic.gov", True),
    ("123456789012.dkr.ecr.us-isob-east-1.sc2s.sgov.gov", True),
    ("123456789012.dkr.ecr.eu-isoe-west-1.cloud.adc-e.uk", True),
    ("123456789012.dkr.ecr.us-isof-east-1.csp.hci.ic.gov", True),
    ("123456789012.dkr.ecr.us-iso-east-1.amazonaws.gov", False),
    ("123456789012.dkr-ecr.lala-land-1.on.aws", True),
    ("123456789012.dkr-ecr-fips.lala-land-1.on.aws", True),
    ("123456789012.dkr-ecr.lala-land-1.on.amazonwebservices.com.cn", True),
]


def _run(run_command, image: str):
    return run_command([CPCREDS_AWS_KUBELET], input=encode_request(image, API_VERSION_V1).decode())


@pytest.mark.parametrize(("registry", "expected"), GRID)
def test_the_registry_pattern_grid(aws, user, registry, expected) -> None:
    aws.fail("ecr", status=200, body=_private_answer(registry))
    request = CredentialProviderRequest(image=f"{registry}/app:1")
    if expected:
        assert AwsProvider({}).get_image_credential(request, timeout=5).auth == {registry: AuthConfig("user", "pass")}
    else:
        with pytest.raises(ProviderError):
            AwsProvider({}).get_image_credential(request, timeout=5)
        assert not [call for call in aws.seen if call.endpoint == "ecr"]


@pytest.mark.parametrize(("registry", "expected"), [GRID[0], GRID[10]])
def test_the_console_script_answers_as_the_grid_says(aws, user, run_command, registry, expected) -> None:
    aws.fail("ecr", status=200, body=_private_answer(registry))
    result = _run(run_command, f"{registry}/app:1")
    if expected:
        assert result.returncode == 0, result.stderr
        assert parse_response(result.stdout.encode(), API_VERSION_V1).auth == {registry: AuthConfig("user", "pass")}
    else:
        assert result.returncode == 1 and result.stdout == "" and result.stderr.count("\n") == 1
        assert not [call for call in aws.seen if call.endpoint == "ecr"]


@pytest.mark.parametrize("image", ["123456789123.dkr.ecr.us-west-2.amazonaws.com",
                                   "123456789123.dkr.ecr.us-west-2.amazonaws.com/public.ecr.aws/foo:latest"])
def test_private_success_cases(aws, user, image) -> None:
    host = image.split("/")[0]
    aws.fail("ecr", status=200, body=_private_answer(host))
    response = AwsProvider({}).get_image_credential(CredentialProviderRequest(image=image), timeout=5)
    assert response.auth == {host: AuthConfig("user", "pass")}
    assert response.cache_duration == 0  # the answer has no expiresAt: not cached, as upstream


@pytest.mark.parametrize("host", ["public.ecr.aws", "ecr-public.aws.com"])
def test_ecr_public(aws, user, run_command, host) -> None:
    result = _run(run_command, f"{host}/nginx/nginx:1.27")
    assert result.returncode == 0, result.stderr
    [password] = aws.ecr_passwords
    response = parse_response(result.stdout.encode(), API_VERSION_V1)
    assert response.auth == {host: AuthConfig("AWS", password)} and response.cache_key_type == "Registry"
    assert 6 * 3600 - 10 <= response.cache_duration <= 6 * 3600
    assert aws.ecr_public_calls == [user.arn] and aws.ecr_calls == []


@pytest.mark.parametrize(
    "answer",
    [{}, {"authorizationData": {}}, {"authorizationData": {"authorizationToken": base64.b64encode(b"foo").decode()}}],
    ids=["empty", "empty-authorization-data", "no-colon"],
)
def test_ecr_public_failure_cases(aws, user, answer) -> None:
    aws.fail("ecr-public", status=200, body=json.dumps(answer).encode())
    with pytest.raises(ProviderError, match="ECR Public GetAuthorizationToken") as failure:
        AwsProvider({}).get_image_credential(CredentialProviderRequest(image="public.ecr.aws/nginx/nginx:1.27"), timeout=5)
    assert "\n" not in str(failure.value)


def test_ecr_public_without_expires_at_is_not_cached(aws, user, run_command) -> None:
    token = base64.b64encode(b"AWS:pw").decode()
    aws.fail("ecr-public", status=200, body=json.dumps({"authorizationData": {"authorizationToken": token}}).encode())
    result = _run(run_command, "ecr-public.aws.com/nginx/nginx:1.27")
    assert result.returncode == 0, result.stderr
    assert parse_response(result.stdout.encode(), API_VERSION_V1).cache_duration == 0


def test_a_registry_outside_ecr_gets_no_ecr_token(aws, user, run_command) -> None:
    # Stricter than upstream's "non ECR host" case, which hands registry.k8s.io an ECR token.
    result = _run(run_command, "registry.k8s.io/foo:latest")
    assert result.returncode == 1 and result.stdout == ""
    assert aws.ecr_calls == [] and aws.ecr_public_calls == []


def _private_answer(host: str) -> bytes:
    # What upstream's table mocks: user:pass, no expiresAt, for the image's registry.
    token = base64.b64encode(b"user:pass").decode()
    return json.dumps({"authorizationData": [{"authorizationToken": token, "proxyEndpoint": f"https://{host}"}]}).encode()
