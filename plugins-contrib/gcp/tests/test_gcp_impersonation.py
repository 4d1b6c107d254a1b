"""The ``impersonateServiceAccount`` option: whatever credentials are found get a token of another
service account from IAM Credentials, with the configured scopes, delegates and lifetime."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

pytest.importorskip("cpcreds_gcp", reason="install plugins-contrib/gcp")

from cpcreds import ProviderError  # noqa: E402
from tests.fakes.google import IAM_SCOPE  # noqa: E402

DELEGATE = "middle@fake-project.iam.gserviceaccount.com"


def _options(google, path, target, **more):
    return {"credentialsFile": str(path), "impersonateServiceAccount": target, "iamEndpoint": google.iam_endpoint, **more}


def test_the_token_is_the_impersonated_service_accounts(google, sa_key, target_key, write_json, make_engine, gke_profile):
    google.allow_impersonation(sa_key.email, target_key.email)
    path = write_json(google.service_account_info(sa_key))
    credential = make_engine(_options(google, path, target_key.email)).get_credential(gke_profile())
    source, impersonated = google.issued
    assert source.principal == sa_key.email and source.scopes == (IAM_SCOPE,)
    assert impersonated.principal == target_key.email and impersonated.grant == "generateAccessToken"
    assert credential.token == impersonated.token


def test_the_configured_scopes_are_the_impersonated_tokens(google, sa_key, target_key, write_json, make_engine, gke_profile):
    google.allow_impersonation(sa_key.email, target_key.email)
    path = write_json(google.service_account_info(sa_key))
    make_engine(_options(google, path, target_key.email, scopes=["openid", "email"])).get_credential(gke_profile())
    assert google.issued[-1].scopes == ("openid", "email")


def test_delegates_are_sent_as_iam_resource_names(google, sa_key, target_key, write_json, make_engine, gke_profile):
    google.allow_impersonation(sa_key.email, target_key.email, delegates=(DELEGATE,))
    path = write_json(google.service_account_info(sa_key))
    make_engine(_options(google, path, target_key.email, delegates=DELEGATE)).get_credential(gke_profile())
    assert google.issued[-1].delegates == (DELEGATE,)


def test_the_lifetime_option_is_the_tokens_lifetime(google, sa_key, target_key, write_json, make_engine, gke_profile):
    google.allow_impersonation(sa_key.email, target_key.email)
    path = write_json(google.service_account_info(sa_key))
    before = datetime.now(UTC)
    credential = make_engine(_options(google, path, target_key.email, lifetime="20m")).get_credential(gke_profile())
    assert before + timedelta(minutes=20) - timedelta(seconds=2) <= credential.expiration_timestamp <= datetime.now(UTC) + timedelta(minutes=20)


def test_a_lifetime_iam_refuses_is_reported_with_its_status(google, sa_key, target_key, write_json, make_engine, gke_profile):
    google.allow_impersonation(sa_key.email, target_key.email)
    path = write_json(google.service_account_info(sa_key))
    with pytest.raises(ProviderError) as caught:
        make_engine(_options(google, path, target_key.email, lifetime="2h")).get_credential(gke_profile())
    assert str(caught.value) == (
        f"provider google: gcp: IAM Credentials endpoint {google.generate_access_token_url(target_key.email)} answered HTTP 400 "
        "(INVALID_ARGUMENT: The lifetime must be between 1s and 3600s.)"
    )


def test_permission_denied_is_reported_with_iams_status(google, sa_key, target_key, write_json, make_engine, gke_profile):
    path = write_json(google.service_account_info(sa_key))  # no impersonation grant
    with pytest.raises(ProviderError) as caught:
        make_engine(_options(google, path, target_key.email)).get_credential(gke_profile())
    assert str(caught.value).endswith(
        "answered HTTP 403 (PERMISSION_DENIED: Permission 'iam.serviceAccounts.getAccessToken' denied on resource (or it may not exist).)"
    )


def test_impersonation_on_top_of_the_metadata_server(google, metadata, target_key, make_engine, gke_profile, monkeypatch):
    monkeypatch.setenv("GCE_METADATA_HOST", metadata.host)
    google.allow_impersonation(metadata.email, target_key.email)
    credential = make_engine({"impersonateServiceAccount": target_key.email, "iamEndpoint": google.iam_endpoint}).get_credential(gke_profile())
    assert google.issued[-1].principal == target_key.email and credential.token == google.issued[-1].token
    assert metadata.token_scopes() == [(IAM_SCOPE,)]


def test_the_default_iam_endpoint_is_googles(google_via_proxy, sa_key, target_key, write_json, make_engine, gke_profile):
    google = google_via_proxy
    google.allow_impersonation(sa_key.email, target_key.email)
    path = write_json(google.service_account_info(sa_key))
    make_engine({"credentialsFile": str(path), "impersonateServiceAccount": target_key.email}).get_credential(gke_profile())
    [call] = google.calls("iam")
    assert call.host == "iamcredentials.googleapis.com"
    assert call.path == f"/v1/projects/-/serviceAccounts/{target_key.email}:generateAccessToken"


def test_the_iam_endpoint_that_echoes_the_bearer_token_does_not_leak_it(google, sa_key, target_key, write_json, make_engine, gke_profile):
    google.fail("iam", echo=True, status=400)
    path = write_json(google.service_account_info(sa_key))
    with pytest.raises(ProviderError) as caught:
        make_engine(_options(google, path, target_key.email)).get_credential(gke_profile())
    [source] = google.issued
    assert source.token not in str(caught.value) and source.token[10:30] not in str(caught.value)
    assert str(caught.value).endswith("answered HTTP 400 (invalid_request)")
