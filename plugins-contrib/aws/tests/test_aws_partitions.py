"""Every AWS partition, as ``aws eks get-token`` signs for it: the STS host and signing region of
an EKS token are botocore's own (its STS client's presigned URL is the oracle) for regions of
every partition, with FIPS, dual-stack and the legacy global endpoint; the fake STS, answering
as a partition's real host name, accepts the token only when it was signed for that host and
region; ``--region`` takes every partition's region names and nothing else; and run by hand,
``cpcreds-aws eks-token`` answers v1beta1 as ``aws eks get-token`` does."""

from __future__ import annotations

import functools
import json
from urllib.parse import parse_qs, urlsplit

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

pytest.importorskip("cpcreds_aws", reason="install plugins-contrib/aws")

import botocore.session  # noqa: E402
from cpcreds import ProviderError  # noqa: E402
from cpcreds.sdk import ExecCluster, plan_for_request  # noqa: E402
from cpcreds.exec.pluginrequest import PluginRequest  # noqa: E402
from cpcreds_aws import AwsOptions, AwsProvider  # noqa: E402
from cpcreds_aws.token import Keys, eks_token  # noqa: E402

from aws_helpers import CLUSTER, CPCREDS_AWS, token_url  # noqa: E402

_LOADER = botocore.session.Session().get_component("data_loader")
_PARTITIONS = _LOADER.load_data("partitions")["partitions"]
#: Every real region botocore knows, of every partition (not the *-global pseudo-regions).
REGIONS = sorted(name for partition in _PARTITIONS for name in partition["regions"] if not name.endswith("-global"))
_SETTINGS = {"AWS_USE_FIPS_ENDPOINT": st.sampled_from([None, "true", "false", "TRUE"]),
             "AWS_USE_DUALSTACK_ENDPOINT": st.sampled_from([None, "true", "false"]),
             "AWS_STS_REGIONAL_ENDPOINTS": st.sampled_from([None, "legacy", "regional"])}
KEYS = Keys("AKIAEXAMPLEEXAMPLE01", "secret/with+chars=")


def _host_and_scope(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.netloc, parse_qs(parts.query)["X-Amz-Credential"][0].split("/")[2]


@functools.cache
def _botocore_session() -> botocore.session.Session:
    # One session for every example: a client reads the endpoint settings from the environment
    # when it is created, and a session's data files load once.
    return botocore.session.Session()


def _botocore_presigned(region: str | None) -> str:
    """What ``aws eks get-token`` signs: botocore's STS client's presigned GetCallerIdentity."""
    client = _botocore_session().create_client(
        "sts", region_name=region, aws_access_key_id=KEYS.access_key, aws_secret_access_key=KEYS.secret_key
    )
    try:
        return client.generate_presigned_url("get_caller_identity", Params={}, ExpiresIn=60, HttpMethod="GET")
    finally:
        client.close()


@pytest.fixture
def real_sts(monkeypatch):
    """No configured STS endpoint: the token is for the region's real STS host."""
    for name in ("AWS_ENDPOINT_URL_STS", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)


def test_the_host_and_signing_region_are_botocores(real_sts, monkeypatch) -> None:
    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(region=st.sampled_from([None, *REGIONS]), env=st.fixed_dictionaries(_SETTINGS))
    def same(region, env) -> None:
        for name, value in env.items():
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, value)
        try:
            expected = _host_and_scope(_botocore_presigned(region))
        except Exception:  # noqa: BLE001 - botocore's legacy endpoint data refuses a variant its rule set has
            return  # (dual-stack in an isolated partition): docs/providers-aws.md says what is signed then
        token, _ = eks_token(KEYS, CLUSTER, region)
        url, query = token_url(token)
        assert (urlsplit(url).netloc, query["X-Amz-Credential"][0].split("/")[2]) == expected

    same()


@pytest.mark.parametrize(
    ("region", "host"),
    [
        ("us-iso-east-1", "sts.us-iso-east-1.c2s.ic.gov"),
        ("us-isob-east-1", "sts.us-isob-east-1.sc2s.sgov.gov"),
        ("eu-isoe-west-1", "sts.eu-isoe-west-1.cloud.adc-e.uk"),
        ("us-isof-south-1", "sts.us-isof-south-1.csp.hci.ic.gov"),
        ("eusc-de-east-1", "sts.eusc-de-east-1.amazonaws.eu"),
        ("cn-north-1", "sts.cn-north-1.amazonaws.com.cn"),
        ("us-gov-west-1", "sts.us-gov-west-1.amazonaws.com"),
    ],
)
def test_each_partitions_sts_takes_the_token(aws, user, real_sts, region, host) -> None:
    aws.answer_as_sts(host, region)
    plan = plan_for_request(PluginRequest(api_version="client.authentication.k8s.io/v1", interactive=False,
                                          cluster=ExecCluster(server="")), provider="aws", options={"region": region})
    token = AwsProvider({"region": region, "clusterName": CLUSTER}).get_credential(plan).token
    assert token is not None and aws.authenticator(CLUSTER)(token)
    assert aws.verified == [(CLUSTER, user.arn)]


def test_a_token_for_another_partitions_host_is_refused(aws, user, real_sts) -> None:
    # The fake answers as aws-partition hosts only: a token for us-iso-east-1 is for c2s.ic.gov.
    aws.answer_as_sts("sts.us-iso-east-1.amazonaws.com", "us-iso-east-1")
    aws.answer_as_sts("sts.us-west-2.amazonaws.com", "us-west-2")
    token, _ = eks_token(Keys(user.access_key, user.secret_key), CLUSTER, "us-iso-east-1")
    assert not aws.authenticator(CLUSTER)(token)
    # ... and one signed for us-west-2's host but scoped to another region is refused by STS.
    good, _ = eks_token(Keys(user.access_key, user.secret_key), CLUSTER, "us-west-2")
    assert aws.authenticator(CLUSTER)(good)
    aws.answer_as_sts("sts.us-west-2.amazonaws.com", "us-east-1")
    assert not aws.authenticator(CLUSTER)(good)


def test_fips_and_legacy_settings_reach_the_exec_plugin(aws, user, real_sts, run_command) -> None:
    aws.answer_as_sts("sts-fips.us-east-2.amazonaws.com", "us-east-2")
    aws.answer_as_sts("sts.amazonaws.com", "us-east-1")
    fips = run_command([CPCREDS_AWS, "eks-token", "--cluster-name", CLUSTER, "--region", "us-east-2"], AWS_USE_FIPS_ENDPOINT="true")
    legacy = run_command([CPCREDS_AWS, "eks-token", "--cluster-name", CLUSTER, "--region", "us-west-2"], AWS_STS_REGIONAL_ENDPOINTS="legacy")
    for result, host in ((fips, "sts-fips.us-east-2.amazonaws.com"), (legacy, "sts.amazonaws.com")):
        assert result.returncode == 0, result.stderr
        token = json.loads(result.stdout)["status"]["token"]
        assert urlsplit(token_url(token)[0]).netloc == host
        assert aws.authenticator(CLUSTER)(token)


def test_an_sts_regional_endpoints_value_botocore_refuses_is_one_line(aws, user, real_sts, run_command) -> None:
    result = run_command([CPCREDS_AWS, "eks-token", "--cluster-name", CLUSTER], AWS_STS_REGIONAL_ENDPOINTS="sometimes")
    assert result.returncode == 1 and result.stdout == "" and result.stderr.count("\n") == 1
    assert "AWS_STS_REGIONAL_ENDPOINTS" in result.stderr


@pytest.mark.parametrize("region", ["eusc-de-east-1", "us-iso-east-1", "us-isob-east-1", "eu-isoe-west-1", "us-isof-south-1", "cn-northwest-1"])
def test_every_partitions_regions_are_taken(region) -> None:
    assert AwsOptions.read({"region": region}).region == region


def _refusal(name: str) -> str:
    try:
        AwsOptions.read({"region": name})
    except ValueError as refused:
        return str(refused)
    raise AssertionError(f"{name!r} was taken")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40) | st.from_regex(r"[a-z]{2,4}(-[a-z]{1,6}){1,3}-[0-9]{1,2}\n?", fullmatch=True))
@example("-")
def test_a_region_is_one_of_a_partitions_or_refused(name) -> None:
    try:
        AwsOptions.read({"region": name})
    except ValueError as refused:
        # Never quoted: the name shows in the message only as part of the fixed wording every
        # refused name gets ("-" is in "such as us-west-2").
        assert name not in str(refused) or not name.strip() or name in _refusal("not a region")
        return
    # Taken: a partition's region pattern holds it whole (no newline, no non-ASCII letters).
    assert name.isascii() and "\n" not in name
    assert any(__import__("re").fullmatch(p["regionRegex"], name, __import__("re").ASCII) for p in _PARTITIONS)


def test_run_by_hand_it_answers_v1beta1(aws, user, run_command) -> None:
    result = run_command([CPCREDS_AWS, "eks-token", "--cluster-name", CLUSTER])
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["apiVersion"] == "client.authentication.k8s.io/v1beta1"


def test_settings_botocore_has_no_endpoint_for_are_one_error(aws, user, real_sts, monkeypatch) -> None:
    monkeypatch.setenv("AWS_USE_DUALSTACK_ENDPOINT", "true")
    monkeypatch.setenv("AWS_USE_FIPS_ENDPOINT", "true")
    provider = AwsProvider({"clusterName": CLUSTER, "region": "us-west-2"})
    plan = plan_for_request(PluginRequest(api_version="client.authentication.k8s.io/v1", interactive=False, cluster=None), provider="aws")
    try:
        token = provider.get_credential(plan).token
    except ProviderError as refused:
        assert str(refused).count("\n") == 0
    else:
        assert token is not None and urlsplit(token_url(token)[0]).netloc == "sts-fips.us-west-2.api.aws"
