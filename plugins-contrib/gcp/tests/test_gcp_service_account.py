"""A service account key file, in-process through the engine: where the file is found, what the
token endpoint is sent (the fake verifies the signed assertion), scopes, expiry, sharing one token
across clusters, and every way the token endpoint can fail."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

pytest.importorskip("cpcreds_gcp", reason="install plugins-contrib/gcp")

from cpcreds import ProviderError  # noqa: E402
from cpcreds_gcp import DEFAULT_SCOPES  # noqa: E402
from tests.fakes.google import GOOGLE_TOKEN_AUDIENCE, Fault  # noqa: E402


def _assert_expiry_matches(credential, issued) -> None:
    # Kubernetes timestamps have whole seconds; google-auth computed its expiry a moment after
    # the fake did.
    assert credential.expiration_timestamp.tzinfo is not None
    assert abs((credential.expiration_timestamp - issued.expires_at).total_seconds()) < 2


def test_a_key_file_from_the_credentials_file_option_gives_the_service_accounts_token(google, sa_key, write_json, make_engine, gke_profile):
    path = write_json(google.service_account_info(sa_key))
    credential = make_engine({"credentialsFile": str(path)}).get_credential(gke_profile())
    [issued] = google.issued
    assert credential.token == issued.token
    assert issued.principal == sa_key.email and issued.grant == "jwt-bearer"
    _assert_expiry_matches(credential, issued)


def test_the_default_scopes_are_gke_gcloud_auth_plugins(google, sa_key, write_json, make_engine, gke_profile):
    path = write_json(google.service_account_info(sa_key))
    make_engine({"credentialsFile": str(path)}).get_credential(gke_profile())
    assert google.issued[0].scopes == DEFAULT_SCOPES == (
        "https://www.googleapis.com/auth/cloud-platform",
        "https://www.googleapis.com/auth/userinfo.email",
    )


def test_configured_scopes_are_the_ones_in_the_assertion(google, sa_key, write_json, make_engine, gke_profile):
    path = write_json(google.service_account_info(sa_key))
    scopes = ["https://www.googleapis.com/auth/cloud-platform.read-only", "openid"]
    make_engine({"credentialsFile": str(path), "scopes": scopes}).get_credential(gke_profile())
    assert google.issued[0].scopes == tuple(scopes)


def test_google_application_credentials_names_the_key_file(google, sa_key, write_json, make_engine, gke_profile, monkeypatch):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(write_json(google.service_account_info(sa_key))))
    assert make_engine().get_credential(gke_profile()).token == google.issued[0].token


def test_gclouds_well_known_file_is_used_when_nothing_else_is_set(google, sa_key, make_engine, gke_profile, no_outside_credentials):
    (no_outside_credentials / "application_default_credentials.json").write_text(json.dumps(google.service_account_info(sa_key)))
    assert make_engine().get_credential(gke_profile()).token == google.issued[0].token


def test_the_credentials_file_option_wins_over_the_environment(google, sa_key, target_key, write_json, make_engine, gke_profile, monkeypatch):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(write_json(google.service_account_info(target_key))))
    make_engine({"credentialsFile": str(write_json(google.service_account_info(sa_key)))}).get_credential(gke_profile())
    assert [t.principal for t in google.issued] == [sa_key.email]


def test_the_assertion_is_signed_for_googles_token_audience_and_verified(google, sa_key, target_key, write_json, make_engine, gke_profile):
    # A key file whose key is not the service account's: the fake checks the RS256 signature.
    google.add_service_account(sa_key)
    forged = target_key.info(google.token_uri) | {"client_email": sa_key.email, "private_key_id": sa_key.key_id}
    with pytest.raises(ProviderError) as caught:
        make_engine({"credentialsFile": str(write_json(forged))}).get_credential(gke_profile())
    assert str(caught.value) == (
        f"provider google: gcp: token endpoint {google.token_uri} answered HTTP 400 (invalid_grant: Invalid JWT Signature.)"
    )
    assert GOOGLE_TOKEN_AUDIENCE == "https://oauth2.googleapis.com/token"


def test_a_service_account_google_does_not_know_is_an_invalid_grant(google, target_key, write_json, make_engine, gke_profile):
    path = write_json(target_key.info(google.token_uri))  # never registered with the fake
    with pytest.raises(ProviderError, match=r"answered HTTP 400 \(invalid_grant: Invalid grant: account not found\)$"):
        make_engine({"credentialsFile": str(path)}).get_credential(gke_profile())


def test_one_token_serves_every_cluster_of_the_provider(google, sa_key, write_json, make_engine, gke_profile):
    engine = make_engine({"credentialsFile": str(write_json(google.service_account_info(sa_key)))})
    tokens = {engine.get_credential(gke_profile(f"gke-{i}", server=f"https://10.0.0.{i}")).token for i in range(5)}
    assert len(tokens) == 1
    assert len(google.calls("token")) == 1


def test_concurrent_first_fetches_for_many_clusters_make_one_token_request(google, sa_key, write_json, make_engine, gke_profile):
    engine = make_engine({"credentialsFile": str(write_json(google.service_account_info(sa_key)))})
    start, tokens, errors = threading.Barrier(16), [], []

    def fetch(i: int) -> None:
        start.wait()
        try:
            tokens.append(engine.get_credential(gke_profile(f"gke-{i}", server=f"https://10.0.1.{i}")).token)
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=fetch, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(tokens) == 16 and len(set(tokens)) == 1
    assert len(google.calls("token")) == 1


def test_a_cluster_that_asks_again_gets_a_new_token_which_the_others_then_share(
    google, sa_key, write_json, make_engine, gke_profile
):
    # The engine asks again for a cluster when its credential expires or a 401 invalidated it:
    # handing back the same token would not help.
    engine = make_engine({"credentialsFile": str(write_json(google.service_account_info(sa_key)))})
    first = engine.get_credential(gke_profile("gke-1"))
    assert engine.invalidate(gke_profile("gke-1"), first)
    second = engine.get_credential(gke_profile("gke-1"))
    third = engine.get_credential(gke_profile("gke-2", server="https://10.0.0.2"))
    assert second.token != first.token and third.token == second.token
    assert len(google.calls("token")) == 2


def test_a_token_google_auth_no_longer_calls_valid_is_refreshed_not_reused(google, sa_key, write_json, make_engine, gke_profile):
    # google-auth treats a token as expired 3m45s early; a 200 s token is never "valid" to it.
    google.token_lifetime = 200
    engine = make_engine({"credentialsFile": str(write_json(google.service_account_info(sa_key)))})
    first = engine.get_credential(gke_profile("gke-1"))
    second = engine.get_credential(gke_profile("gke-2", server="https://10.0.0.2"))
    assert first.token != second.token
    assert len(google.calls("token")) == 2


def test_a_rotated_key_file_is_read_again_at_the_next_refresh(google, sa_key, target_key, write_json, make_engine, gke_profile):
    google.token_lifetime = 200  # never "valid" to google-auth: every fetch refreshes
    path = write_json(google.service_account_info(sa_key))
    engine = make_engine({"credentialsFile": str(path)})
    engine.get_credential(gke_profile("gke-1"))
    rotated = path.with_name("rotated.json")
    rotated.write_text(json.dumps(google.service_account_info(target_key)))
    rotated.replace(path)  # as a Secret volume swaps its files: a new inode under the same name
    engine.get_credential(gke_profile("gke-2", server="https://10.0.0.2"))
    assert [t.principal for t in google.issued] == [sa_key.email, target_key.email]


def test_expiry_is_the_tokens_expires_in_read_as_utc(google, sa_key, write_json, make_engine, gke_profile):
    google.token_lifetime = 1800
    before = datetime.now(UTC)
    credential = make_engine({"credentialsFile": str(write_json(google.service_account_info(sa_key)))}).get_credential(gke_profile())
    after = datetime.now(UTC)
    assert before + timedelta(seconds=1799) <= credential.expiration_timestamp <= after + timedelta(seconds=1801)


def test_an_expiry_beyond_twelve_hours_is_not_believed(google, sa_key, write_json, make_engine, gke_profile):
    google.fail("token", status=200, body={"access_token": "ya29.long-lived", "expires_in": 10**9, "token_type": "Bearer"})
    credential = make_engine({"credentialsFile": str(write_json(google.service_account_info(sa_key)))}).get_credential(gke_profile())
    assert credential.expiration_timestamp <= datetime.now(UTC) + timedelta(hours=12)


def test_a_token_without_expires_in_has_no_expiry_and_is_never_reused(google, sa_key, write_json, make_engine, gke_profile):
    google.fail("token", status=200, body={"access_token": "ya29.no-expiry", "token_type": "Bearer"})
    engine = make_engine({"credentialsFile": str(write_json(google.service_account_info(sa_key)))})
    first = engine.get_credential(gke_profile("gke-1"))
    assert first.token == "ya29.no-expiry" and first.expiration_timestamp is None
    second = engine.get_credential(gke_profile("gke-2", server="https://10.0.0.2"))
    assert second.token == google.issued[0].token


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ({"access_token": "ya29.x", "expires_in": -60}, "answered with a token that has already expired"),
        ({"access_token": "ya29.line\nX-Injected: 1", "expires_in": 3600}, "answered with a token that is not a bearer token"),
        ({"access_token": "", "expires_in": 3600}, "answered with a token that is not a bearer token"),
        ({"expires_in": 3600}, "answered without a usable token"),
        ({"access_token": "ya29.x", "expires_in": "soon"}, "answered without a usable token"),
        ({"access_token": "ya29.x", "expires_in": 10**30}, "answered without a usable token"),
        ({"access_token": ["ya29.x"], "expires_in": 3600}, "answered with a token that is not a bearer token"),
        (b"<html>Service Unavailable</html>", "answered without a usable token"),
    ],
    ids=["expired", "newline", "empty", "missing", "expires-in-text", "expires-in-huge", "list", "html"],
)
def test_a_broken_token_answer_is_an_error_naming_the_endpoint(google, sa_key, write_json, make_engine, gke_profile, answer, problem):
    google.fail("token", status=200, body=answer)
    with pytest.raises(ProviderError) as caught:
        make_engine({"credentialsFile": str(write_json(google.service_account_info(sa_key)))}).get_credential(gke_profile())
    assert str(caught.value) == f"provider google: gcp: token endpoint {google.token_uri} {problem}"


def test_a_server_error_is_reported_with_its_status_and_code_when_no_time_is_left_to_retry(
    google, sa_key, write_json, make_engine, gke_profile
):
    google.fail("token", status=503, body={"error": "temporarily_unavailable"}, times=5)
    with pytest.raises(ProviderError) as caught:
        make_engine({"credentialsFile": str(write_json(google.service_account_info(sa_key)))}, timeout="1s").get_credential(gke_profile())
    assert str(caught.value) == f"provider google: gcp: token endpoint {google.token_uri} answered HTTP 503 (temporarily_unavailable)"
    # google-auth would pause 1 s and try again; the pause would end past the deadline, so the
    # first answer is the last.
    assert len(google.calls("token")) == 1


def test_a_server_error_is_retried_by_google_auth_while_time_allows(google, sa_key, write_json, make_engine, gke_profile):
    google.fail("token", status=500)
    credential = make_engine({"credentialsFile": str(write_json(google.service_account_info(sa_key)))}, timeout="5s").get_credential(gke_profile())
    assert credential.token == google.issued[0].token
    assert len(google.calls("token")) == 2


@pytest.mark.parametrize("hang", ["headers", "body"])
def test_a_token_endpoint_that_does_not_answer_fails_within_the_timeout(google, sa_key, write_json, make_engine, gke_profile, hang):
    google.token_lifetime = 200  # never "valid" to google-auth: the second cluster's fetch refreshes
    engine = make_engine({"credentialsFile": str(write_json(google.service_account_info(sa_key)))}, timeout="0.5s")
    engine.get_credential(gke_profile("gke-1"))  # loads the key file: the next fetch is the request alone
    google.fail("token", hang=hang)
    began = time.monotonic()
    with pytest.raises(ProviderError) as caught:
        engine.get_credential(gke_profile("gke-2", server="https://10.0.0.2"))
    assert time.monotonic() - began < 10  # not google-auth's 120 s default
    # The provider's bounded call and the engine's own timeout end together: either says so.
    what = "did not answer" if hang == "headers" else "did not finish its answer"
    assert str(caught.value) in (
        f"provider google: gcp: token endpoint {google.token_uri}: {what} within the 0.5s timeout",
        "provider google: did not answer within 0.5s; the call was abandoned",
    )


def test_the_provider_itself_gives_up_at_its_deadline(google, sa_key, write_json):
    from cpcreds.exec.plugin import PluginRequest, plan_for_request
    from cpcreds_gcp import GcpProvider

    google.token_lifetime = 200
    provider = GcpProvider({"credentialsFile": str(write_json(google.service_account_info(sa_key)))})
    plan = plan_for_request(PluginRequest(api_version="client.authentication.k8s.io/v1"), provider="gcp", timeout=0.5)
    provider.get_credential(plan)
    google.fail("token", hang="headers")
    began = time.monotonic()
    with pytest.raises(ProviderError) as caught:
        provider.get_credential(plan)
    assert time.monotonic() - began < 10
    assert str(caught.value) == f"provider gcp: gcp: token endpoint {google.token_uri}: did not answer within the 0.5s timeout"
    provider.close()


def test_an_answer_without_end_is_cut_off_at_one_mebibyte(google, sa_key, write_json, make_engine, gke_profile):
    google.fail("token", Fault(status=200, endless=True))
    with pytest.raises(ProviderError) as caught:
        make_engine({"credentialsFile": str(write_json(google.service_account_info(sa_key)))}).get_credential(gke_profile())
    assert str(caught.value).endswith(f"token endpoint {google.token_uri}: answered with more than 1024 KiB")


def test_an_unreachable_token_endpoint_is_named(sa_key, write_json, make_engine, gke_profile, refused_address):
    path = write_json(sa_key.info(f"http://{refused_address}/token"))
    with pytest.raises(ProviderError) as caught:
        make_engine({"credentialsFile": str(path)}).get_credential(gke_profile())
    assert str(caught.value) == f"provider google: gcp: token endpoint http://{refused_address}/token: connection refused"


def test_no_assertion_token_or_key_reaches_the_error_or_its_chain(google, sa_key, write_json, make_engine, gke_profile, caplog):
    # The endpoint echoes the whole request (the signed assertion) into its error description.
    google.fail("token", echo=True, status=400)
    with caplog.at_level("DEBUG"):
        with pytest.raises(ProviderError) as caught:
            make_engine({"credentialsFile": str(write_json(google.service_account_info(sa_key)))}).get_credential(gke_profile())
    error = caught.value
    assert str(error) == f"provider google: gcp: token endpoint {google.token_uri} answered HTTP 400 (invalid_request)"
    assert error.__cause__ is None and error.__context__ is None
    key_body = "".join(sa_key.private_key_pem.splitlines()[1:-1])
    for text in (str(error), repr(error), caplog.text):
        assert "eyJ" not in text and "assertion=" not in text
        assert key_body[:40] not in text
