"""The aws provider as a kubelet image credential provider plugin (KEP-2133): the
``cpcreds-aws-credential-provider`` console script run as the kubelet runs it, and
``AwsProvider.get_image_credential`` in-process, against the ECR fake; the password it answers
with opens a registry that trusts ECR's tokens."""

from __future__ import annotations

import base64
import json
import time

import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("cpcreds_aws", reason="install plugins-contrib/aws")

from cpcreds import ProviderError  # noqa: E402
from cpcreds.images.protocol import API_VERSION_V1, SUPPORTED_API_VERSIONS  # noqa: E402
from cpcreds.sdk import AuthConfig, CredentialProviderRequest, encode_request, parse_duration, parse_response  # noqa: E402
from cpcreds_aws import AwsProvider  # noqa: E402
from tests.fakes.registry import FakeRegistry  # noqa: E402

from aws_helpers import CPCREDS_AWS_KUBELET, ECR_IMAGE  # noqa: E402

HOST = ECR_IMAGE.split("/")[0]


def _run(run_command, image: str, api_version: str = API_VERSION_V1, *args: str, **env: str):
    return run_command([CPCREDS_AWS_KUBELET, *args], input=encode_request(image, api_version).decode(), **env)


@pytest.mark.parametrize("api_version", SUPPORTED_API_VERSIONS)
def test_ecr_answers_for_the_images_registry(aws, user, run_command, api_version) -> None:
    result = _run(run_command, ECR_IMAGE, api_version)
    assert result.returncode == 0, result.stderr
    [password] = aws.ecr_passwords
    response = parse_response(result.stdout.encode(), api_version)
    assert response.auth == {HOST: AuthConfig("AWS", password)}
    assert response.cache_key_type == "Registry"
    # Half the token's 12 hours, as ecr-credential-provider caches it.
    assert 6 * 3600 - 10 <= response.cache_duration <= 6 * 3600
    assert parse_duration(json.loads(result.stdout)["cacheDuration"]) == response.cache_duration


def test_the_password_opens_a_registry_that_trusts_ecr(aws, user, run_command, pki, tmp_path) -> None:
    result = _run(run_command, ECR_IMAGE)
    assert result.returncode == 0, result.stderr
    auth = parse_response(result.stdout.encode(), API_VERSION_V1).auth[HOST]
    ca = tmp_path / "registry-ca.pem"
    ca.write_bytes(pki.ca_pem)
    with FakeRegistry(pki, users={"AWS": password for password in aws.ecr_passwords}) as registry:
        assert requests.get(f"{registry.url}/v2/", verify=str(ca), timeout=10).status_code == 401
        assert requests.get(f"{registry.url}/v2/", auth=(auth.username, auth.password), verify=str(ca), timeout=10).status_code == 200


def test_role_arn_flag_pulls_as_the_role(aws, user, run_command) -> None:
    role = aws.add_role("ecr-puller", trusts=(user.arn,))
    result = _run(run_command, ECR_IMAGE, API_VERSION_V1, f"--role-arn={role}")
    assert result.returncode == 0, result.stderr
    assert [call.endpoint for call in aws.seen] == ["assume-role", "AssumeRole:issued", "ecr"]


@pytest.mark.parametrize(
    ("host", "region"),
    [
        ("111122223333.dkr.ecr.cn-north-1.amazonaws.com.cn", "cn-north-1"),
        ("111122223333.dkr.ecr-fips.us-gov-west-1.amazonaws.com", "us-gov-west-1"),
        ("111122223333.dkr-ecr.eu-west-1.on.aws", "eu-west-1"),
    ],
)
def test_china_fips_and_dual_stack_hosts_are_ecr_asked_in_their_region(aws, user, host, region) -> None:
    response = AwsProvider({}).get_image_credential(CredentialProviderRequest(image=f"{host}/app:1"), timeout=5)
    assert list(response.auth) == [host]
    assert aws.ecr_calls == [(region, user.arn)]


@pytest.mark.parametrize("image", ["docker.io/library/nginx:1", "nginx", "111122223333.dkr.ecr.us-west-2.amazonaws.com.evil.example/app"])
def test_other_registries_are_refused(aws, user, image) -> None:
    with pytest.raises(ProviderError, match="is not in an ECR registry"):
        AwsProvider({}).get_image_credential(CredentialProviderRequest(image=image), timeout=5)
    assert aws.ecr_passwords == []


def test_a_short_lived_token_is_cached_for_half_its_life(aws, user) -> None:
    aws.ecr_token_lifetime = 1000
    response = AwsProvider({}).get_image_credential(CredentialProviderRequest(image=ECR_IMAGE), timeout=5)
    assert 495 <= response.cache_duration <= 500


def test_ecr_refusing_is_one_line_without_the_answer(aws, user, run_command) -> None:
    aws.fail("ecr", status=400, body={"__type": "AccessDeniedException", "message": f"denied for {user.secret_key}"})
    result = _run(run_command, ECR_IMAGE)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and user.secret_key not in result.stderr
    assert "ECR GetAuthorizationToken answered HTTP 400 (AccessDeniedException)" in result.stderr


def test_a_long_image_outside_ecr_is_shown_shortened(aws, user, run_command) -> None:
    image = "registry.example.com/" + "team/" * 30 + "app:1"
    result = _run(run_command, image)
    assert result.returncode == 1 and result.stderr.count("\n") == 1
    assert "registry.example.com/team/team" in result.stderr and "..." in result.stderr
    assert "the value" not in result.stderr
    assert len(result.stderr) < 300


def _answer(*entries: dict) -> bytes:
    return json.dumps({"authorizationData": list(entries)}).encode()


def _entry(password: str, expires_at: float, endpoint: str = f"https://{HOST}") -> dict:
    token = base64.b64encode(f"AWS:{password}".encode()).decode()
    return {"authorizationToken": token, "expiresAt": expires_at, "proxyEndpoint": endpoint}


# ECR's expiresAt is epoch seconds; botocore turns it into a datetime (at most the end of year 9999).
_LAST_SECOND = 253402300799.0
_LIFETIMES = st.floats(min_value=10, max_value=_LAST_SECOND, allow_nan=False)


def test_the_cache_duration_is_at_most_six_hours(aws, user) -> None:
    provider = AwsProvider({})  # one botocore session for every example: its ECR model loads once

    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(lifetime=_LIFETIMES)
    def answer(lifetime: float) -> None:
        aws.fail("ecr", status=200, body=_answer(_entry("pw-" + "k" * 20, min(time.time() + lifetime, _LAST_SECOND))))
        response = provider.get_image_credential(CredentialProviderRequest(image=ECR_IMAGE), timeout=5)
        assert 0 <= response.cache_duration <= 6 * 3600
        aws.clear_faults()

    answer()


def test_a_token_valid_for_millennia_is_cached_six_hours_by_the_kubelet(aws, user, run_command) -> None:
    aws.fail("ecr", status=200, body=_answer(_entry("pw-" + "k" * 20, 253402300799.0)))
    result = _run(run_command, ECR_IMAGE)
    assert result.returncode == 0, result.stderr
    assert parse_response(result.stdout.encode(), API_VERSION_V1).cache_duration == 6 * 3600


_OTHER_HOSTS = st.sampled_from([
    "https://444455556666.dkr.ecr.us-west-2.amazonaws.com",
    "https://111122223333.dkr.ecr.eu-west-1.amazonaws.com",
    "https://registry.example.com",
    "",
])


def test_the_entry_for_the_requested_registry_is_used_or_none(aws, user) -> None:
    provider = AwsProvider({})
    request = CredentialProviderRequest(image=ECR_IMAGE)

    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(before=st.lists(_OTHER_HOSTS, max_size=3), after=st.lists(_OTHER_HOSTS, max_size=3), ours=st.booleans())
    def answer(before: list[str], after: list[str], ours: bool) -> None:
        later = time.time() + 12 * 3600
        entries = [_entry(f"other-{i}-" + "x" * 20, later, host) for i, host in enumerate(before)]
        if ours:
            entries.append(_entry("ours-" + "y" * 20, later))
        entries += [_entry(f"after-{i}-" + "z" * 20, later, host) for i, host in enumerate(after)]
        aws.fail("ecr", status=200, body=_answer(*entries))
        if ours:
            assert provider.get_image_credential(request, timeout=5).auth == {HOST: AuthConfig("AWS", "ours-" + "y" * 20)}
        else:
            with pytest.raises(ProviderError, match="(no|without) authorizationData") as caught:
                provider.get_image_credential(request, timeout=5)
            assert "other-" not in str(caught.value) and "after-" not in str(caught.value)
        aws.clear_faults()

    answer()
