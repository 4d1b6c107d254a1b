"""Workload identity federation (``external_account`` files): a subject token from a file, a URL,
an executable or AWS, exchanged at STS, optionally impersonating a service account; and the other
file types application default credentials may hold (gcloud's user credentials, workforce users,
impersonated service accounts)."""

from __future__ import annotations

import json
import stat
import sys
import time

import pytest

pytest.importorskip("cpcreds_gcp", reason="install plugins-contrib/gcp")

from cpcreds import ProviderError  # noqa: E402
from tests.fakes.google import AWS_TOKEN_TYPE, IAM_SCOPE  # noqa: E402

AUDIENCE = "//iam.googleapis.com/projects/123456789/locations/global/workloadIdentityPools/fleet/providers/hub"
SUBJECT = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6ZmxlZXQ6Y29udHJvbGxlciJ9.c2lnbmF0dXJl"


@pytest.fixture
def subject_file(tmp_path):
    path = tmp_path / "projected-token"
    path.write_text(SUBJECT)
    return path


def test_a_subject_token_file_is_exchanged_at_sts(google, write_json, make_engine, gke_profile, subject_file):
    principal = google.add_external_subject(SUBJECT, AUDIENCE)
    path = write_json(google.external_account_info(AUDIENCE, {"file": str(subject_file)}))
    credential = make_engine({"credentialsFile": str(path)}).get_credential(gke_profile())
    [issued] = google.issued
    assert credential.token == issued.token
    assert issued.principal == principal and issued.grant == "token-exchange"
    assert issued.scopes == ("https://www.googleapis.com/auth/cloud-platform", "https://www.googleapis.com/auth/userinfo.email")


def test_a_subject_token_url_is_read_with_its_headers(google, write_json, make_engine, gke_profile):
    google.add_external_subject(SUBJECT, AUDIENCE)
    google.subject_token_body, google.subject_token_header = SUBJECT, ("Metadata", "True")
    source = {"url": google.subject_token_url, "headers": {"Metadata": "True"}, "format": {"type": "text"}}
    credential = make_engine({"credentialsFile": str(write_json(google.external_account_info(AUDIENCE, source)))}).get_credential(gke_profile())
    assert credential.token == google.issued[0].token
    assert [call.endpoint for call in google.seen] == ["subject", "sts"]


def test_federation_with_service_account_impersonation_returns_the_service_accounts_token(
    google, target_key, write_json, make_engine, gke_profile, subject_file
):
    principal = google.add_external_subject(SUBJECT, AUDIENCE)
    google.allow_impersonation(principal, target_key.email)
    info = google.external_account_info(AUDIENCE, {"file": str(subject_file)}, impersonate=target_key.email)
    credential = make_engine({"credentialsFile": str(write_json(info))}).get_credential(gke_profile())
    federated, impersonated = google.issued
    assert federated.scopes == (IAM_SCOPE,)  # STS is asked for what IAM Credentials needs
    assert impersonated.principal == target_key.email and credential.token == impersonated.token
    assert abs((credential.expiration_timestamp - impersonated.expires_at).total_seconds()) < 2


def test_an_sts_refusal_names_the_endpoint_and_the_oauth_error(google, write_json, make_engine, gke_profile, subject_file):
    path = write_json(google.external_account_info(AUDIENCE, {"file": str(subject_file)}))  # subject never registered
    with pytest.raises(ProviderError) as caught:
        make_engine({"credentialsFile": str(path)}).get_credential(gke_profile())
    assert str(caught.value) == (
        f"provider google: gcp: STS token endpoint {google.sts_url} answered HTTP 400 "
        "(invalid_grant: The audience in ID Token does not match the expected audience.)"
    )


def test_an_sts_that_echoes_the_subject_token_does_not_leak_it(google, write_json, make_engine, gke_profile, subject_file):
    google.fail("sts", echo=True, status=400)
    with pytest.raises(ProviderError) as caught:
        make_engine({"credentialsFile": str(write_json(google.external_account_info(AUDIENCE, {"file": str(subject_file)})))}).get_credential(
            gke_profile()
        )
    assert SUBJECT not in str(caught.value) and SUBJECT[:20] not in str(caught.value)
    assert str(caught.value).endswith("answered HTTP 400 (invalid_request)")


def test_a_missing_subject_token_file_is_named(google, write_json, make_engine, gke_profile, tmp_path):
    missing = tmp_path / "no-such-token"
    path = write_json(google.external_account_info(AUDIENCE, {"file": str(missing)}))
    with pytest.raises(ProviderError) as caught:
        make_engine({"credentialsFile": str(path)}).get_credential(gke_profile())
    assert str(caught.value) == (
        f"provider google: gcp: cannot get a token from external_account from {path} (credentialsFile): File '{missing}' was not found."
    )


def test_aws_credentials_from_the_environment_sign_the_subject_token(google, write_json, make_engine, gke_profile, monkeypatch):
    principal = google.add_aws_identity("AKIAFAKEFLEET0000001", AUDIENCE)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFAKEFLEET0000001")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fake/secret/key/0123456789abcdefghijklmno")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    source = {
        "environment_id": "aws1",
        "region_url": "http://169.254.169.254/latest/meta-data/placement/availability-zone",
        "url": "http://169.254.169.254/latest/meta-data/iam/security-credentials",
        "regional_cred_verification_url": "https://sts.{region}.amazonaws.com?Action=GetCallerIdentity&Version=2011-06-15",
    }
    info = google.external_account_info(AUDIENCE, source, subject_token_type=AWS_TOKEN_TYPE)
    credential = make_engine({"credentialsFile": str(write_json(info))}).get_credential(gke_profile())
    assert google.issued[0].principal == principal and credential.token == google.issued[0].token


def _executable(tmp_path, subject: str):
    script = tmp_path / "subject-token-helper"
    answer = {
        "version": 1,
        "success": True,
        "token_type": "urn:ietf:params:oauth:token-type:jwt",
        "id_token": subject,
        "expiration_time": int(time.time()) + 3600,
    }
    script.write_text(f"#!{sys.executable}\nimport json\nprint(json.dumps({answer!r}))\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return {"executable": {"command": str(script), "timeout_millis": 10000}}


def test_an_executable_subject_token_source_runs_when_allowed(google, write_json, make_engine, gke_profile, tmp_path, monkeypatch):
    google.add_external_subject(SUBJECT, AUDIENCE)
    monkeypatch.setenv("GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES", "1")
    path = write_json(google.external_account_info(AUDIENCE, _executable(tmp_path, SUBJECT)))
    assert make_engine({"credentialsFile": str(path)}).get_credential(gke_profile()).token == google.issued[0].token


def test_an_executable_subject_token_source_is_refused_unless_allowed(google, write_json, make_engine, gke_profile, tmp_path):
    path = write_json(google.external_account_info(AUDIENCE, _executable(tmp_path, SUBJECT)))
    with pytest.raises(ProviderError, match=r"GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES"):
        make_engine({"credentialsFile": str(path)}).get_credential(gke_profile())
    assert google.seen == []


def test_x509_federation_is_refused_with_a_clear_error(google, write_json, make_engine, gke_profile):
    info = google.external_account_info(AUDIENCE, {"certificate": {"use_default_certificate_config": True}})
    path = write_json(info)
    with pytest.raises(ProviderError) as caught:
        make_engine({"credentialsFile": str(path)}).get_credential(gke_profile())
    assert str(caught.value) == (
        f"provider google: gcp: credentials file {path} (credentialsFile) uses X.509 workload identity federation "
        "(credential_source.certificate), which is not supported"
    )


def test_gclouds_user_credentials_are_refreshed_at_googles_token_endpoint(google_via_proxy, make_engine, gke_profile, no_outside_credentials):
    # What `gcloud auth application-default login` writes. google-auth sends the refresh token to
    # https://oauth2.googleapis.com/token whatever the file says: here, through the proxy.
    google = google_via_proxy
    user = google.add_user("developer@example.com") | {"token_uri": "https://elsewhere.example/token"}
    (no_outside_credentials / "application_default_credentials.json").write_text(json.dumps(user))
    credential = make_engine().get_credential(gke_profile())
    [issued] = google.issued
    assert issued.principal == "developer@example.com" and issued.grant == "refresh_token"
    assert credential.token == issued.token
    assert [(call.endpoint, call.host) for call in google.seen] == [("proxy", "oauth2.googleapis.com"), ("token", "oauth2.googleapis.com")]


def test_a_revoked_refresh_token_is_an_invalid_grant(google_via_proxy, write_json, make_engine, gke_profile):
    user = google_via_proxy.add_user() | {"refresh_token": "1//revoked"}
    with pytest.raises(ProviderError) as caught:
        make_engine({"credentialsFile": str(write_json(user))}).get_credential(gke_profile())
    assert str(caught.value) == (
        "provider google: gcp: token endpoint https://oauth2.googleapis.com/token answered HTTP 400 "
        "(invalid_grant: Token has been expired or revoked.)"
    )


def test_a_workforce_users_refresh_token_is_redeemed_with_client_authentication(google, write_json, make_engine, gke_profile):
    info = google.external_account_authorized_user_info("contractor@workforce.example.com")
    credential = make_engine({"credentialsFile": str(write_json(info))}).get_credential(gke_profile())
    assert google.issued[0].principal == "contractor@workforce.example.com" and credential.token == google.issued[0].token
    assert google.calls("token")[0].path == "/v1/oauthtoken"


def test_an_impersonated_service_account_file_impersonates_from_its_source(google_via_proxy, sa_key, target_key, write_json, make_engine, gke_profile):
    # What `gcloud auth application-default login --impersonate-service-account` writes.
    google = google_via_proxy
    google.add_service_account(sa_key)
    google.allow_impersonation(sa_key.email, target_key.email)
    info = {
        "type": "impersonated_service_account",
        "service_account_impersonation_url": f"https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/{target_key.email}:generateAccessToken",
        "source_credentials": sa_key.info(google.token_uri),
        "delegates": [],
    }
    credential = make_engine({"credentialsFile": str(write_json(info))}).get_credential(gke_profile())
    source, impersonated = google.issued
    assert source.principal == sa_key.email and impersonated.principal == target_key.email
    assert credential.token == impersonated.token
    assert google.calls("iam")[0].host == "iamcredentials.googleapis.com"
