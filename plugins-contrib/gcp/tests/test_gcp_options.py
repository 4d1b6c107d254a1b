"""Options: defaults, the two spellings of lists (YAML lists, comma-separated flag strings), and
errors that name the option without quoting what was given."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("cpcreds_gcp", reason="install plugins-contrib/gcp")

from cpcreds import ConfigError  # noqa: E402
from cpcreds.sdk import OptionError  # noqa: E402
from cpcreds_gcp import DEFAULT_SCOPES, GcpOptions, GcpProvider  # noqa: E402

SA = "deployer@fake-project.iam.gserviceaccount.com"


def test_the_defaults_are_gke_gcloud_auth_plugins():
    options = GcpOptions()
    assert options.scopes == DEFAULT_SCOPES
    assert options.credentials_file is None and options.impersonate_service_account is None
    assert options.impersonation_url() is None


@pytest.mark.parametrize(
    "given_scopes",
    [
        ["https://www.googleapis.com/auth/cloud-platform", "openid"],
        "https://www.googleapis.com/auth/cloud-platform,openid",
        "https://www.googleapis.com/auth/cloud-platform, openid",
        "https://www.googleapis.com/auth/cloud-platform openid",  # OAuth's own spelling
        ["https://www.googleapis.com/auth/cloud-platform,openid", "openid"],  # a flag given twice
    ],
)
def test_scopes_are_a_list_or_comma_or_space_separated(given_scopes):
    assert GcpOptions(scopes=given_scopes).scopes == ("https://www.googleapis.com/auth/cloud-platform", "openid")


def test_building_the_provider_does_no_io(tmp_path):
    # `cpcreds validate` builds providers: a credentials file that does not exist yet is fine.
    provider = GcpProvider({"credentialsFile": str(tmp_path / "mounted-later.json")})
    assert provider.options.credentials_file == tmp_path / "mounted-later.json"


def test_the_credentials_file_expands_the_home_directory():
    assert GcpOptions(credentialsFile="~/key.json").credentials_file == Path.home() / "key.json"


def test_delegates_take_emails_or_resource_names():
    options = GcpOptions(
        impersonateServiceAccount=SA, delegates="a@p.iam.gserviceaccount.com,projects/-/serviceAccounts/b@p.iam.gserviceaccount.com"
    )
    assert options.delegates == (
        "projects/-/serviceAccounts/a@p.iam.gserviceaccount.com",
        "projects/-/serviceAccounts/b@p.iam.gserviceaccount.com",
    )


@pytest.mark.parametrize(("value", "seconds"), [("30m", 1800), ("1h", 3600), ("90s", 90), (600, 600), ("1.5s", 2)])
def test_lifetime_is_a_duration_in_whole_seconds(value, seconds):
    assert GcpOptions(impersonateServiceAccount=SA, lifetime=value).lifetime == seconds


def test_the_impersonation_url_is_built_from_the_iam_endpoint():
    options = GcpOptions(impersonateServiceAccount=SA, iamEndpoint="https://iamcredentials.example.internal/")
    assert options.impersonation_url() == (
        f"https://iamcredentials.example.internal/v1/projects/-/serviceAccounts/{SA}:generateAccessToken"
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"scopes": ""}, "field options.scopes: must name at least one scope"),
        ({"scopes": ['"openid"']}, "field options.scopes: each scope must be printable ASCII"),
        ({"scopes": [42]}, "field options.scopes: must be a list of scopes or a comma-separated string"),
        ({"credentialsFile": " "}, "field options.credentialsFile: must not be empty"),
        ({"impersonateServiceAccount": "a/b@c"}, "field options.impersonateServiceAccount: the value must be a service account email or unique ID"),
        ({"impersonateServiceAccount": SA, "lifetime": "13h"}, "field options.lifetime: must be between 1s and 12h"),
        ({"impersonateServiceAccount": SA, "lifetime": True}, "field options.lifetime: must be a duration such as 30s, 2m or 1h30m, not a boolean"),
        ({"impersonateServiceAccount": SA, "iamEndpoint": "ftp://x"}, "field options.iamEndpoint: must be an http(s) URL"),
        ({"delegates": "a@b.c"}, "options: delegates applies only with impersonateServiceAccount"),
        ({"lifetime": "1h", "iamEndpoint": "https://x"}, "options: lifetime and iamEndpoint apply only with impersonateServiceAccount"),
        ({"scope": "openid"}, "field options.scope: is not a known field; did you mean 'scopes'?"),
    ],
)
def test_a_bad_option_is_a_config_error_naming_it(make_engine, options, message):
    with pytest.raises(ConfigError) as caught:
        make_engine(options)
    assert message in str(caught.value)
    assert str(caught.value).startswith('providers.yaml: provider "google": ')


def test_an_option_error_never_quotes_the_value(make_engine):
    secretish = "ya29.a0AfB_byDoNotShowThisValue0123456789"
    for options in ({"scopes": [secretish + "ü"]}, {"impersonateServiceAccount": secretish}, {"iamEndpoint": secretish}):
        with pytest.raises(ConfigError) as caught:
            make_engine(options)
        assert secretish not in str(caught.value)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=200), st.lists(st.text(max_size=40), max_size=8), st.integers(), st.none()))
def test_any_scopes_value_is_accepted_or_refused_with_a_validation_error(value):
    try:
        options = GcpOptions(scopes=value)
    except OptionError:
        return
    assert options.scopes and all(scope and "," not in scope and not any(c.isspace() for c in scope) for scope in options.scopes)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_an_accepted_impersonation_target_cannot_change_the_iam_url(value):
    try:
        options = GcpOptions(impersonateServiceAccount=value)
    except OptionError:
        return
    url = options.impersonation_url()
    assert url == f"https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/{value}:generateAccessToken"
    assert not set("/?#%:\\ ") & set(value)
