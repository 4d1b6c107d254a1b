"""Fixtures for the aws provider's tests: the AWS fakes (STS and ECR over HTTPS, trusted through
AWS_CA_BUNDLE and reached through AWS_ENDPOINT_URL_STS/_ECR; IMDSv2 and the container
credentials endpoint over HTTP), an environment in which botocore finds nothing real, a spoke
that accepts only EKS tokens the STS fake verified, and helpers to run the provider in-process
(a CredentialEngine with a registry of this plugin only) and as a console script."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cpcreds.config.wire import EXEC_INFO_ENV
from tests.fakes import fixtures as spoke_fixtures
from tests.fakes.aws import AwsKeys, FakeAWS
from tests.fakes.aws_metadata import FakeAWSMetadata
from tests.fakes.spoke import SpokeServer

from aws_helpers import CLUSTER, PROVIDER, REGION


pki = spoke_fixtures.pki
make_spoke = spoke_fixtures.make_spoke

#: Variables that would let botocore reach something real, or change what it finds.
_OUTSIDE = (
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_CREDENTIAL_EXPIRATION",
    "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ROLE_ARN", "AWS_ROLE_SESSION_NAME",
    "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "AWS_EC2_METADATA_SERVICE_ENDPOINT",
    "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_STS", "AWS_ENDPOINT_URL_ECR",
    "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "AWS_STS_REGIONAL_ENDPOINTS", "AWS_USE_FIPS_ENDPOINT", "AWS_CA_BUNDLE",
    "AWS_METADATA_SERVICE_TIMEOUT", "AWS_METADATA_SERVICE_NUM_ATTEMPTS", "AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE",
    "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy", "REQUESTS_CA_BUNDLE", EXEC_INFO_ENV,
)


@pytest.fixture
def aws(pki) -> Iterator[FakeAWS]:
    with FakeAWS(pki, region=REGION) as server:
        yield server


@pytest.fixture(autouse=True)
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, aws: FakeAWS) -> dict[str, str]:
    """Nothing of the machine's: no AWS variables, no proxy, empty shared config and credentials
    files, instance metadata off; STS and ECR are the fake, its CA trusted, the region set.
    Returns what was set."""
    for name in _OUTSIDE:
        monkeypatch.delenv(name, raising=False)
    values = {
        **aws.env(tmp_path / "aws-ca.pem"),
        "AWS_CONFIG_FILE": str(tmp_path / "aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "aws-credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_REGION": REGION,
        "HOME": str(tmp_path),
        "NO_PROXY": "127.0.0.1,localhost",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


@pytest.fixture
def user(aws: FakeAWS, monkeypatch: pytest.MonkeyPatch) -> AwsKeys:
    """An IAM user's access key, in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY."""
    keys = aws.add_user()
    for name, value in keys.env().items():
        monkeypatch.setenv(name, value)
    return keys


@pytest.fixture
def metadata(aws: FakeAWS) -> Iterator[FakeAWSMetadata]:
    """IMDSv2 and the container credentials endpoint, handing out keys of role ``eks-node``."""
    with FakeAWSMetadata(aws, aws.add_role("eks-node"), container_authorization="pod-identity-" + "z" * 24) as server:
        yield server


@pytest.fixture
def spoke(make_spoke: Callable[..., SpokeServer], aws: FakeAWS) -> SpokeServer:
    """An EKS cluster named CLUSTER: it accepts only tokens STS verified for that name."""
    server = make_spoke()
    server.verify_tokens_with(aws.authenticator(CLUSTER))
    return server


#: ``make_engine(options, timeout="5s")``: an engine whose only provider is ``type: aws`` with
#: these options, from a registry that knows only this plugin (closed after the test);
#: ``run_command(args, input=None, **env)``: a command run with the test's environment minus
#: ``CPCREDS_*``, only this plugin loadable by cpcreds, plus ``env``.
make_engine, run_command = spoke_fixtures.plugin_fixtures("cpcreds_aws.plugin", "aws", PROVIDER, CPCREDS_PLUGINS="aws")
