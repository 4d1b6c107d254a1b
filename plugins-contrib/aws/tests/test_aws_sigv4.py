"""The EKS token's presigned URL is byte for byte botocore's ``SigV4QueryAuth`` URL (what
``aws eks get-token`` prints) for the same keys, cluster, endpoint and second: the package signs
with the standard library so that an exec plugin's run does not import botocore's signer."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("cpcreds_aws", reason="install plugins-contrib/aws")

from botocore.auth import SigV4QueryAuth  # noqa: E402
from botocore.awsrequest import AWSRequest  # noqa: E402
from botocore.credentials import Credentials  # noqa: E402

from cpcreds_aws.sigv4 import presign_get  # noqa: E402
from cpcreds_aws.token import Keys, eks_token  # noqa: E402

PARAMS = {"Action": "GetCallerIdentity", "Version": "2011-06-15"}

access_keys = st.from_regex(r"(AKIA|ASIA)[A-Z0-9]{12,16}", fullmatch=True)
secrets = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=60)
session_tokens = st.none() | st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=300)
clusters = st.from_regex(r"[0-9A-Za-z][A-Za-z0-9\-_]{0,99}", fullmatch=True)
regions = st.sampled_from(["us-east-1", "us-west-2", "eu-central-1", "cn-north-1", "us-gov-west-1", "ap-southeast-4"])
endpoints = st.sampled_from(
    [
        "https://sts.amazonaws.com/",
        "https://STS.us-west-2.AmazonAWS.com/",
        "https://sts.us-west-2.amazonaws.com:443/",
        "https://127.0.0.1:8443/",
        "http://localhost:80/",
        "http://localhost:8080/sts/",
        "https://[::1]:9443/a/./b/../c//",
        "https://[fd00::1]/",
        "https://sts.example/path with space/~x/",
    ]
)


def botocore_url(url: str, headers: dict[str, str], keys: Keys, region: str) -> tuple[str, datetime]:
    """botocore's presigned URL for a GET of ``url`` with :data:`PARAMS`, and the second it signed at."""
    query = "&".join(f"{key}={value}" for key, value in PARAMS.items())
    request = AWSRequest(method="GET", url=f"{url}?{query}", headers=headers)
    SigV4QueryAuth(Credentials(keys.access_key, keys.secret_key, keys.token), "sts", region, expires=60).add_auth(request)
    signed_at = datetime.strptime(parse_qs(urlsplit(request.url).query)["X-Amz-Date"][0], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    return request.url, signed_at


@settings(max_examples=150, deadline=None)
@given(access=access_keys, secret=secrets, token=session_tokens, cluster=clusters, region=regions, url=endpoints)
def test_presigned_url_is_botocores(access, secret, token, cluster, region, url) -> None:
    keys = Keys(access, secret, token)
    expected, signed_at = botocore_url(url, {"x-k8s-aws-id": cluster}, keys, region)
    ours = presign_get(
        url, PARAMS, {"x-k8s-aws-id": cluster}, access_key=access, secret_key=secret, token=token, service="sts", region=region, expires=60, now=signed_at
    )
    assert ours == expected


@pytest.mark.parametrize(("region", "endpoint", "scope_region"), [("us-west-2", "https://sts.us-west-2.amazonaws.com/", "us-west-2"),
                                                                   ("cn-north-1", "https://sts.cn-north-1.amazonaws.com.cn/", "cn-north-1"),
                                                                   (None, "https://sts.amazonaws.com/", "us-east-1")])
def test_eks_token_is_aws_eks_get_tokens(monkeypatch, region, endpoint, scope_region) -> None:
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_STS"):
        monkeypatch.delenv(name, raising=False)
    keys = Keys("ASIAEXAMPLEEXAMPLE01", "secret/with+chars=", "session/token+==")
    expected, signed_at = botocore_url(endpoint, {"x-k8s-aws-id": "fleet-eks-1"}, keys, scope_region)
    token, expiry = eks_token(keys, "fleet-eks-1", region, now=signed_at)
    assert token == "k8s-aws-v1." + base64.urlsafe_b64encode(expected.encode()).decode().rstrip("=")
    assert (expiry - signed_at).total_seconds() == 14 * 60
