"""Each login source end to end: the in-process provider signs an EKS token with credentials
from the environment, a shared profile, web identity, the container credentials endpoint,
IMDSv2 or an assumed role, and the kubernetes client opens the spoke fake, which accepts only
tokens the STS fake verified for the cluster (as aws-iam-authenticator does)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from kubernetes import client as kclient

pytest.importorskip("cpcreds_aws", reason="install plugins-contrib/aws")

from cpcreds import CredentialError  # noqa: E402
from tests.fakes.aws import ACCOUNT  # noqa: E402

from aws_helpers import CLUSTER, REGION, profile, token_url  # noqa: E402


def _list(engine, spoke, **kwargs) -> None:
    with engine.api_client(profile(spoke, **kwargs)) as api:
        assert kclient.CoreV1Api(api).list_namespace().items
    assert spoke.requests and all(seen.auth == "token" for seen in spoke.requests)


def test_environment_keys(aws, user, spoke, make_engine) -> None:
    engine = make_engine()
    began = datetime.now(UTC).replace(microsecond=0)
    _list(engine, spoke)
    assert aws.verified == [(CLUSTER, user.arn)]
    credential = engine.get_credential(profile(spoke))
    # aws eks get-token's shape: 60 s URL, the cluster header signed, expiry 14 minutes on.
    url, query = token_url(credential.token)
    assert url == f"{aws.url}/"
    assert query["Action"] == ["GetCallerIdentity"] and query["Version"] == ["2011-06-15"]
    assert query["X-Amz-Expires"] == ["60"] and query["X-Amz-SignedHeaders"] == ["host;x-k8s-aws-id"]
    assert query["X-Amz-Credential"][0].split("/")[2:] == [REGION, "sts", "aws4_request"]
    assert timedelta(minutes=14) <= credential.expiration_timestamp - began <= timedelta(minutes=14, seconds=2)


def test_a_token_for_another_cluster_is_refused(aws, user, spoke, make_engine) -> None:
    engine = make_engine()
    with pytest.raises(Exception), engine.api_client(profile(spoke, cluster="someone-elses")) as api:
        kclient.CoreV1Api(api).list_namespace()
    assert aws.verified == []  # STS saw the signature fail: the header differs
    assert spoke.requests and spoke.requests[-1].auth == "rejected"


def test_aws_security_token_wins_over_aws_session_token_as_botocore_reads_them(aws, spoke, make_engine, monkeypatch) -> None:
    keys = aws.issue_session(aws.add_role("ci-runner"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", keys.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", keys.secret_key)
    monkeypatch.setenv("AWS_SECURITY_TOKEN", keys.token)
    monkeypatch.setenv("AWS_SESSION_TOKEN", "stale-session-token")
    _list(make_engine(), spoke)
    assert aws.verified == [(CLUSTER, keys.arn)]


def test_a_named_profile_that_does_not_exist_fails_even_with_keys_in_the_environment(user, spoke, make_engine, monkeypatch) -> None:
    # As aws eks get-token: botocore refuses a profile it cannot find before looking at the keys.
    monkeypatch.setenv("AWS_PROFILE", "not-configured")
    with pytest.raises(CredentialError) as caught:
        make_engine().get_credential(profile(spoke))
    assert "\n" not in str(caught.value) and user.secret_key not in str(caught.value)


def test_the_config_files_region_signs_keys_from_the_environment(aws, user, spoke, make_engine, aws_env, monkeypatch) -> None:
    monkeypatch.delenv("AWS_REGION")
    with open(aws_env["AWS_CONFIG_FILE"], "w") as handle:
        handle.write(f"[default]\nregion = {REGION}\n")
    credential = make_engine().get_credential(profile(spoke))
    assert token_url(credential.token)[1]["X-Amz-Credential"][0].split("/")[2] == REGION
    assert aws.authenticator(CLUSTER)(credential.token)


def test_shared_profile(aws, spoke, make_engine, aws_env) -> None:
    keys = aws.add_user("fleet-ci")
    with open(aws_env["AWS_SHARED_CREDENTIALS_FILE"], "w") as handle:
        handle.write(f"[fleet]\naws_access_key_id = {keys.access_key}\naws_secret_access_key = {keys.secret_key}\n")
    with open(aws_env["AWS_CONFIG_FILE"], "w") as handle:
        handle.write(f"[profile fleet]\nregion = {REGION}\n")
    _list(make_engine({"profile": "fleet"}), spoke)
    assert aws.verified == [(CLUSTER, keys.arn)]


def test_shared_profile_assuming_a_role(aws, spoke, make_engine, aws_env) -> None:
    keys = aws.add_user("fleet-ci")
    role = aws.add_role("eks-admin", trusts=(keys.arn,))
    with open(aws_env["AWS_SHARED_CREDENTIALS_FILE"], "w") as handle:
        handle.write(f"[base]\naws_access_key_id = {keys.access_key}\naws_secret_access_key = {keys.secret_key}\n")
    with open(aws_env["AWS_CONFIG_FILE"], "w") as handle:
        handle.write(f"[profile admin]\nrole_arn = {role}\nsource_profile = base\nregion = {REGION}\n")
    _list(make_engine({"profile": "admin"}), spoke)
    [(cluster, arn)] = aws.verified
    assert cluster == CLUSTER and arn.startswith(f"arn:aws:sts::{ACCOUNT}:assumed-role/eks-admin/")


def test_web_identity(aws, spoke, make_engine, monkeypatch, tmp_path) -> None:
    role = aws.add_role("fleet-irsa")
    token_file = tmp_path / "eks.amazonaws.com-serviceaccount-token"
    token_file.write_text(aws.add_web_identity(role))
    monkeypatch.setenv("AWS_ROLE_ARN", role)
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(token_file))
    monkeypatch.setenv("AWS_ROLE_SESSION_NAME", "argocd")
    _list(make_engine(), spoke)
    assert aws.verified == [(CLUSTER, f"arn:aws:sts::{ACCOUNT}:assumed-role/fleet-irsa/argocd")]


def test_container_endpoint_as_eks_pod_identity_serves_it(aws, metadata, spoke, make_engine, monkeypatch, tmp_path) -> None:
    token_file = tmp_path / "eks-pod-identity-token"
    token_file.write_text(metadata.container_authorization)
    monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", metadata.container_url)
    monkeypatch.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", str(token_file))
    _list(make_engine(), spoke)
    [keys] = metadata.handed_out
    assert aws.verified == [(CLUSTER, keys.arn)]
    assert [call.endpoint for call in metadata.seen] == ["container"]


def test_instance_metadata_imdsv2(aws, metadata, spoke, make_engine, monkeypatch) -> None:
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "false")
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", metadata.url)
    _list(make_engine(), spoke)
    [keys] = metadata.handed_out
    assert aws.verified == [(CLUSTER, keys.arn)]
    endpoints = [call.endpoint for call in metadata.seen]
    assert endpoints[0] == "imds-token" and endpoints.count("imds-credentials") == 2  # the role's name, then its keys


def test_role_arn_option_assumes_the_role_as_aws_eks_get_token_does(aws, user, spoke, make_engine) -> None:
    role = aws.add_role("eks-reader", trusts=(user.arn,), external_id="fleet-7")
    engine = make_engine({"roleArn": role, "externalId": "fleet-7"})
    _list(engine, spoke)
    assert aws.verified == [(CLUSTER, f"arn:aws:sts::{ACCOUNT}:assumed-role/eks-reader/EKSGetTokenAuth")]
    # The assumed role's keys are kept for the next token (they live an hour).
    engine.get_credential(profile(spoke, name="eks-2", cluster="fleet-eks-2"))
    assert len([call for call in aws.seen if call.endpoint == "assume-role"]) == 1


def test_a_role_that_does_not_trust_the_caller_is_a_one_line_error(aws, user, spoke, make_engine) -> None:
    role = aws.add_role("eks-reader", trusts=(user.arn,), external_id="fleet-7")
    engine = make_engine({"roleArn": role, "externalId": "wrong-id", "roleSessionName": "ci"})
    with pytest.raises(CredentialError) as caught:
        engine.get_credential(profile(spoke))
    message = str(caught.value)
    assert "STS AssumeRole answered HTTP 403 (AccessDenied)" in message and "\n" not in message
    assert user.secret_key not in message and "wrong-id" not in message


def test_cluster_id_is_signed_for_eks_on_outposts(aws, user, make_spoke, make_engine) -> None:
    cluster_id = "0e5ab1c2-3d4e-4f5a-8b6c-7d8e9f0a1b2c"
    server = make_spoke()
    server.verify_tokens_with(aws.authenticator(cluster_id))
    _list(make_engine({"clusterId": cluster_id}), server, cluster=None)
    assert aws.verified == [(cluster_id, user.arn)]


def test_the_cluster_name_option_wins_over_the_extension(aws, user, spoke, make_engine) -> None:
    _list(make_engine({"clusterName": CLUSTER}), spoke, cluster="named-otherwise")
    assert aws.verified == [(CLUSTER, user.arn)]


def test_no_cluster_name_anywhere_says_where_to_put_one(user, spoke, make_engine) -> None:
    with pytest.raises(CredentialError, match="no cluster name: set the clusterName option"):
        make_engine().get_credential(profile(spoke, cluster=None))


@pytest.mark.parametrize(
    ("region", "host"),
    [("us-west-2", "sts.us-west-2.amazonaws.com"), ("cn-north-1", "sts.cn-north-1.amazonaws.com.cn"), (None, "sts.amazonaws.com")],
)
def test_the_regional_sts_endpoint_when_a_region_is_known(user, spoke, make_engine, monkeypatch, region, host) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL_STS")
    monkeypatch.delenv("AWS_REGION")
    credential = make_engine({"region": region} if region else {}).get_credential(profile(spoke))
    url, query = token_url(credential.token)
    assert url == f"https://{host}/"
    assert query["X-Amz-Credential"][0].split("/")[2] == (region or "us-east-1")


def test_botocores_debug_logging_writes_no_secret(aws, user, spoke, make_engine, caplog, monkeypatch, tmp_path) -> None:
    # An application logging everything at DEBUG: botocore would log the web identity token, the
    # assumed role's keys and the canonical request (with the session token).
    import logging

    caplog.set_level(logging.DEBUG)
    role = aws.add_role("fleet-irsa")
    web_identity = aws.add_web_identity(role)
    token_file = tmp_path / "token"
    token_file.write_text(web_identity)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_ROLE_ARN", role)
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(token_file))
    credential = make_engine().get_credential(profile(spoke))
    [issued] = [keys for keys in aws._keys.values() if keys.arn.startswith(f"arn:aws:sts::{ACCOUNT}:assumed-role/fleet-irsa/")]
    assert caplog.records  # botocore did log
    for secret in (web_identity, issued.secret_key, issued.token, credential.token, token_url(credential.token)[1]["X-Amz-Signature"][0]):
        assert secret not in caplog.text


def _retoken(url: str, query: dict[str, list[str]]) -> str:
    import base64
    from urllib.parse import urlencode

    text = f"{url}?{urlencode([(k, v) for k, values in query.items() for v in values])}"
    return "k8s-aws-v1." + base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "tamper",
    [
        lambda q: q.update({"X-Amz-Expires": ["901"]}),  # longer than aws-iam-authenticator allows
        lambda q: q.update({"X-Amz-SignedHeaders": ["host"]}),  # the cluster header not signed
        lambda q: q.update({"Action": ["GetSessionToken"]}),
        lambda q: q.update({"X-Amz-Date": ["20200101T000000Z"]}),  # older than 15 minutes
        lambda q: q.update({"X-Amz-Signature": ["0" * 64]}),
        lambda q: q.update({"Extra": ["1"]}),  # not an allowed parameter
    ],
)
def test_the_cluster_refuses_a_tampered_token(aws, user, spoke, make_engine, tamper) -> None:
    credential = make_engine().get_credential(profile(spoke))
    assert aws.authenticator(CLUSTER)(credential.token)
    url, query = token_url(credential.token)
    assert aws.authenticator(CLUSTER)(_retoken(url, query))  # re-encoding alone changes nothing
    tamper(query)
    assert not aws.authenticator(CLUSTER)(_retoken(url, query))
    assert not aws.authenticator(CLUSTER)(credential.token + "=")  # padded: not the token's encoding
