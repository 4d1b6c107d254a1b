"""The options are validated with one-line errors naming the option, never quoting a secret."""

from __future__ import annotations

import pytest

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
