"""Options: defaults as aws eks get-token's, and errors that name the option without quoting what
was given (a provider config is often templated: a wrong value may be a secret put in the wrong place)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("cpcreds_aws", reason="install plugins-contrib/aws")

from cpcreds import ConfigError, CredentialEngine, ProviderConfig, ProviderRegistry  # noqa: E402
from cpcreds_aws import AwsOptions, AwsProvider, plugin  # noqa: E402


def _config_error(options: dict) -> str:
    config = ProviderConfig.from_dict({"providers": [{"name": "eks", "type": "aws", "options": options}]}, source="providers.yaml")
    with pytest.raises(ConfigError) as caught:
        CredentialEngine(config, registry=ProviderRegistry(entry_points=False, plugins=(plugin,)))
    return str(caught.value)


def test_the_defaults_are_aws_eks_get_tokens() -> None:
    options = AwsOptions()
    assert options.role_session_name == "EKSGetTokenAuth"
    assert (options.cluster_name, options.cluster_id, options.region, options.role_arn, options.external_id) == (None,) * 5


def test_building_the_provider_does_no_io(monkeypatch) -> None:
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://192.0.2.1:1")  # unreachable: would hang if called
    AwsProvider({"profile": "not-in-any-file", "roleArn": "arn:aws:iam::111122223333:role/x"})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"region": "mars"}, 'provider "eks": field options.region: must be an AWS region such as us-west-2'),
        ({"clusterId": "fleet-eks-1"}, "field options.clusterId: must be an EKS on Outposts cluster id"),
        ({"roleArn": "arn:aws:iam::1:user/x"}, "field options.roleArn: must be an IAM role ARN"),
        ({"externalId": "abc"}, "field options: externalId applies only with roleArn"),
        ({"roleSessionName": "ci", "externalId": "abc"}, "roleSessionName and externalId apply only with roleArn"),
        ({"clusterNmae": "x"}, "clusterNmae"),
    ],
)
def test_a_wrong_option_is_named(options, message) -> None:
    assert message in _config_error(options)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["clusterName", "clusterId", "region", "profile", "roleArn", "roleSessionName"]), st.text(min_size=12, max_size=40))
def test_a_refused_value_is_never_quoted(option, value) -> None:
    try:
        AwsOptions.read({option: value, "roleArn": "arn:aws:iam::111122223333:role/r"} if option == "roleSessionName" else {option: value})
    except ValueError:
        message = _config_error({option: value} if option != "roleSessionName" else {option: value, "roleArn": "arn:aws:iam::111122223333:role/r"})
        assert value not in message and "\n" not in message
