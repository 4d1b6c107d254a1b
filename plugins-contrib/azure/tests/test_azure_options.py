"""The options are validated with one-line errors naming the option, never quoting a secret."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpcreds import ConfigError
from cpcreds_azure.options import AKS_SERVER_ID, AzureOptions
from cpcreds_azure.plugin import kubelogin_args

from azure_helpers import SECRET


def test_defaults_are_aks_and_the_default_chain() -> None:
    options = AzureOptions()
    assert (options.login, options.scope) == ("default", f"{AKS_SERVER_ID}/.default")


@pytest.mark.parametrize(
    "options, named",
    [
        ({"login": "devicecode"}, "login"),
        ({"serverId": "a b"}, "serverId"),
        ({"clientId": "../x"}, "clientId"),
        ({"authorityHost": "http://login.example"}, "authorityHost"),
        ({"authorityHost": "https://login.example/tenant"}, "authorityHost"),
        ({"login": "msi", "clientSecret": SECRET}, "clientSecret"),
        ({"login": "spn", "clientSecret": SECRET, "clientCertificate": "/x.pem"}, "clientCertificate"),
        ({"login": "msi", "clientId": "a", "identityResourceId": "/subscriptions/x"}, "identityResourceId"),
        ({"environment": "AzureChinaCloud", "authorityHost": "login.example"}, "environment"),
        ({"registries": "not a host!"}, "registries"),
        ({"unknown": 1}, "unknown"),
    ],
)
def test_bad_options_name_the_option(make_engine, options, named) -> None:
    with pytest.raises(ConfigError) as caught:
        make_engine(options)
    message = str(caught.value)
    assert named in message and "\n" not in message and SECRET not in message


def test_kubelogin_arguments_carry_over() -> None:
    assert kubelogin_args(["get-token", "-l", "msi", "--server-id", "x"]) == ["--login", "msi", "--server-id", "x"]
    assert kubelogin_args(["-l=spn"]) == ["--login=spn"]


def test_the_secret_is_not_in_the_options_repr() -> None:
    assert SECRET not in repr(AzureOptions(login="spn", clientSecret=SECRET))


_KEYS = ("login", "serverId", "clientId", "tenantId", "clientCertificate", "federatedTokenFile", "authorityHost",
         "environment", "identityResourceId", "disableInstanceDiscovery", "registries", "acrScope", "clientSecret")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(_KEYS), st.one_of(st.text(max_size=40), st.integers(), st.booleans(), st.none(),
                                                           st.lists(st.text(max_size=10), max_size=3)), max_size=5))
def test_any_options_are_accepted_or_one_line_naming_a_field(make_engine, options) -> None:
    marked = dict(options, clientSecret=SECRET) if "clientSecret" in options else options
    try:
        make_engine(marked).close()
    except ConfigError as exc:
        message = str(exc)
        assert "\n" not in message and SECRET not in message and "options" in message


def test_the_package_is_found_by_its_entry_point() -> None:
    from cpcreds import ProviderRegistry

    assert "azure" in ProviderRegistry().types
