"""The metadata server as the application default credentials of last resort: found through
GCE_METADATA_HOST or by probing GCE_METADATA_IP, asked with Metadata-Flavor and the scopes,
bypassing proxies; and what is said when it is not there or misbehaves."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

pytest.importorskip("cpcreds_gcp", reason="install plugins-contrib/gcp")

from cpcreds import ProviderError  # noqa: E402
from cpcreds_gcp import DEFAULT_SCOPES  # noqa: E402
from tests.fakes.google import FakeMetadataServer  # noqa: E402


def test_gce_metadata_host_names_the_metadata_server(metadata, make_engine, gke_profile, monkeypatch):
    monkeypatch.setenv("GCE_METADATA_HOST", metadata.host)
    credential = make_engine().get_credential(gke_profile())
    [issued] = metadata.issued
    assert credential.token == issued.token and issued.principal == metadata.email
    assert abs((credential.expiration_timestamp - issued.expires_at).total_seconds()) < 2


def test_the_token_request_carries_metadata_flavor_and_the_scopes(metadata, make_engine, gke_profile, monkeypatch):
    monkeypatch.setenv("GCE_METADATA_HOST", metadata.host)
    make_engine({"scopes": "https://www.googleapis.com/auth/cloud-platform"}).get_credential(gke_profile())
    [call] = metadata.calls("token")
    assert call.metadata_flavor == "Google"
    assert call.path == "/computeMetadata/v1/instance/service-accounts/default/token"
    assert metadata.token_scopes() == [("https://www.googleapis.com/auth/cloud-platform",)]


def test_the_default_scopes_are_asked_for(metadata, make_engine, gke_profile, monkeypatch):
    monkeypatch.setenv("GCE_METADATA_HOST", metadata.host)
    make_engine().get_credential(gke_profile())
    assert metadata.token_scopes() == [DEFAULT_SCOPES]


def test_gce_metadata_root_is_the_older_name_of_the_host_variable(metadata, make_engine, gke_profile, monkeypatch):
    monkeypatch.setenv("GCE_METADATA_ROOT", metadata.host)
    assert make_engine().get_credential(gke_profile()).token == metadata.issued[0].token


def test_without_a_host_variable_a_probe_of_gce_metadata_ip_finds_the_server(metadata, make_engine, gke_profile, monkeypatch):
    monkeypatch.setenv("GCE_METADATA_IP", metadata.host)
    assert make_engine().get_credential(gke_profile()).token == metadata.issued[0].token
    assert [call.endpoint for call in metadata.seen] == ["root", "token"]
    assert all(call.metadata_flavor == "Google" for call in metadata.seen)


def test_a_file_found_first_means_the_metadata_server_is_never_asked(google, metadata, sa_key, write_json, make_engine, gke_profile, monkeypatch):
    monkeypatch.setenv("GCE_METADATA_HOST", metadata.host)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(write_json(google.service_account_info(sa_key))))
    make_engine().get_credential(gke_profile())
    assert metadata.seen == []


def test_the_metadata_server_is_reached_without_the_proxy(metadata, make_engine, gke_profile, monkeypatch, refused_address):
    # A proxy that refuses everything: the link-local metadata server is never called through it.
    monkeypatch.setenv("GCE_METADATA_HOST", metadata.host)
    monkeypatch.setenv("HTTP_PROXY", f"http://{refused_address}")
    monkeypatch.setenv("http_proxy", f"http://{refused_address}")
    assert make_engine().get_credential(gke_profile()).token == metadata.issued[0].token


def test_one_metadata_token_serves_every_cluster(metadata, make_engine, gke_profile, monkeypatch):
    monkeypatch.setenv("GCE_METADATA_HOST", metadata.host)
    engine = make_engine()
    tokens = {engine.get_credential(gke_profile(f"gke-{i}", server=f"https://10.0.2.{i}")).token for i in range(4)}
    assert len(tokens) == 1 and len(metadata.calls("token")) == 1


def test_no_application_default_credentials_says_what_was_looked_for(make_engine, gke_profile, no_outside_credentials, google):
    with pytest.raises(ProviderError) as caught:
        make_engine().get_credential(gke_profile())
    probed = google.url.removeprefix("http://")
    assert str(caught.value) == (
        "provider google: gcp: found no application default credentials (GOOGLE_APPLICATION_CREDENTIALS is not set, "
        f"{no_outside_credentials / 'application_default_credentials.json'} does not exist, and no metadata server answered "
        f"at {probed}: HTTP 404 without the Metadata-Flavor: Google header); set credentialsFile or "
        "GOOGLE_APPLICATION_CREDENTIALS, run `gcloud auth application-default login`, or run on Google Cloud"
    )


def test_no_metadata_server_at_the_probed_address_is_said_in_few_words(make_engine, gke_profile, monkeypatch, refused_address):
    monkeypatch.setenv("GCE_METADATA_IP", refused_address)
    with pytest.raises(ProviderError, match=rf"no metadata server answered at {refused_address}: connection refused\)"):
        make_engine().get_credential(gke_profile())


def test_an_unreachable_metadata_host_is_named(make_engine, gke_profile, monkeypatch, refused_address):
    monkeypatch.setenv("GCE_METADATA_HOST", refused_address)
    with pytest.raises(ProviderError) as caught:
        make_engine().get_credential(gke_profile())
    assert str(caught.value) == (
        f"provider google: gcp: metadata server http://{refused_address}/computeMetadata/v1/instance/service-accounts/default/token: "
        "connection refused"
    )


def test_a_metadata_server_that_hangs_fails_within_the_timeout(metadata, make_engine, gke_profile, monkeypatch):
    monkeypatch.setenv("GCE_METADATA_HOST", metadata.host)
    metadata.fail("token", hang="headers")
    began = time.monotonic()
    with pytest.raises(ProviderError):
        make_engine(timeout="0.5s").get_credential(gke_profile())
    assert time.monotonic() - began < 10  # not google-auth's 3 s x 5 attempts


def test_a_server_error_is_reported_with_its_status(metadata, make_engine, gke_profile, monkeypatch):
    monkeypatch.setenv("GCE_METADATA_HOST", metadata.host)
    metadata.fail("token", status=503, body=b"service account token not available")
    with pytest.raises(ProviderError) as caught:
        make_engine().get_credential(gke_profile())
    assert str(caught.value).endswith("/computeMetadata/v1/instance/service-accounts/default/token answered HTTP 503")
    assert "not available" not in str(caught.value)  # the body is never quoted


def test_an_answer_without_metadata_flavor_is_not_from_a_metadata_server(google, make_engine, gke_profile, monkeypatch):
    # Something else listens where GCE_METADATA_HOST points and happens to answer 200 with JSON.
    monkeypatch.setenv("GCE_METADATA_HOST", google.url.removeprefix("http://"))
    google.fail("other", status=200, body={"access_token": "ya29.from-elsewhere", "expires_in": 3600})
    with pytest.raises(ProviderError, match=r"answered without the Metadata-Flavor: Google header \(not a metadata server\)$"):
        make_engine().get_credential(gke_profile())


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (b"not json", "answered with something that is not a JSON token object"),
        (b'{"access_token": "ya29.a b", "expires_in": 3600}', "answered without a usable access_token"),
        (b'{"access_token": "ya29.x", "expires_in": "3600"}', "answered without a numeric expires_in"),
        (b'{"access_token": "ya29.x", "expires_in": true}', "answered without a numeric expires_in"),
        (b'{"access_token": "ya29.x", "expires_in": 0}', "answered with expires_in outside 1 to 43200 seconds"),
        (b'{"access_token": "ya29.x", "expires_in": 1e-300}', "answered with expires_in outside 1 to 43200 seconds"),
        (b'{"access_token": "ya29.x", "expires_in": 3600, "token_type": "MAC"}', "answered with a token_type other than Bearer"),
    ],
)
def test_a_broken_metadata_answer_says_what_is_wrong_without_quoting_it(metadata, make_engine, gke_profile, monkeypatch, answer, problem):
    monkeypatch.setenv("GCE_METADATA_HOST", metadata.host)
    metadata.fail("token", status=200, body=answer)
    with pytest.raises(ProviderError) as caught:
        make_engine().get_credential(gke_profile())
    assert str(caught.value).endswith(f"/default/token {problem}")
    assert "ya29" not in str(caught.value)


def test_the_fake_refuses_requests_without_metadata_flavor_as_the_real_one_does(metadata):
    import requests

    assert requests.get(f"http://{metadata.host}/computeMetadata/v1/instance/service-accounts/default/email", timeout=5).status_code == 403
    answer = requests.get(
        f"http://{metadata.host}/computeMetadata/v1/instance/service-accounts/default/email", headers={"Metadata-Flavor": "Google"}, timeout=5
    )
    assert answer.text == metadata.email and answer.headers["Metadata-Flavor"] == "Google"
    forwarded = requests.get(
        f"http://{metadata.host}/computeMetadata/v1/project/project-id",
        headers={"Metadata-Flavor": "Google", "X-Forwarded-For": "10.0.0.1"},
        timeout=5,
    )
    assert forwarded.status_code == 403


def test_a_short_lived_metadata_token_keeps_its_own_expiry(make_engine, gke_profile, monkeypatch):
    with FakeMetadataServer(token_lifetime=300) as short:
        monkeypatch.setenv("GCE_METADATA_HOST", short.host)
        credential = make_engine().get_credential(gke_profile())
    assert credential.expiration_timestamp <= datetime.now(UTC) + timedelta(seconds=301)
