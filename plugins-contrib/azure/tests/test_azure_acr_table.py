"""cloud-provider-azure's acr-credential-provider test tables (pkg/credentialprovider
azure_credentials_test.go: TestParseACRLoginServerFromImage, TestProcessImageWithMirrorMapping,
TestProcessMirrorMapping, TestGetCredentialsConfig's non-ACR case) replayed against cpcreds' azure
provider: each row through ``AzureProvider.get_image_credential`` (what
``cpcreds-azure-credential-provider`` runs), and rows of each kind through the console script as
the kubelet runs it, with the same options as its flags.

An image the plugin serves makes it exchange a token at ``https://<login server>/oauth2/exchange``:
a proxy that records the host each tunnel asks for (and opens none) says which login server that
is, without leaving loopback. An image it does not serve is answered with no credentials."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpcreds.images.protocol import encode_request
from cpcreds.sdk import CredentialError, CredentialProviderRequest
from cpcreds_azure import AzureProvider

from azure_helpers import run_kubelet_plugin

#: Their table, with the custom cloud's suffix and the mirror their test configures: as flags,
#: and as the same options in-process.
CUSTOM = ("--container-registry-dns-suffix=.azurecr.my.cloud", "--registry-mirror=mcr.microsoft.com:abc.azurecr.io")
FLAGS = ("--login=workloadidentity", "--disable-instance-discovery")
OPTIONS = {"login": "workloadidentity", "disableInstanceDiscovery": True}
CUSTOM_OPTIONS = {**OPTIONS, "containerRegistryDnsSuffix": ".azurecr.my.cloud", "registryMirror": "mcr.microsoft.com:abc.azurecr.io"}
LOGIN_SERVERS = [
    ("invalidImage", ""),
    ("docker.io/library/busybox:latest", ""),
    ("busybox", ""),
    ("foo.azurecr.io/bar/image:version", "foo.azurecr.io"),
    ("foo.azurecr.cn/bar/image:version", "foo.azurecr.cn"),
    ("foo.azurecr.de/bar/image:version", "foo.azurecr.de"),
    ("foo.azurecr.us/bar/image:version", "foo.azurecr.us"),
    ("foo.azurecr.my.cloud/bar/image:version", "foo.azurecr.my.cloud"),
    ("foo.azurecr.us/foo.azurecr.io/bar/image:version", "foo.azurecr.us"),
    ("foo.azurecr.io.example/bar/image:version", ""),
    ("docker/foo.azurecr.io/bar/image:version", ""),
    ("foo.azurecr.io", "foo.azurecr.io"),
    ("foo.azurecr.io.azurecr.cn", ""),
    ("foo-azurecr-io.azurecr.cn", ""),
    # TestProcessImageWithMirrorMapping
    ("mcr.microsoft.com/bar/image:version", "abc.azurecr.io"),
]


def _served(result, tunnels) -> str:
    """The login server the console script went to ("" when it answered no credentials)."""
    if result.returncode == 0:
        document = json.loads(result.stdout)
        assert not document.get("auth") and document["cacheDuration"] == "0s", document
        assert tunnels.tunnels == []
        return ""
    assert result.stderr.count(b"\n") == 1 and b"ACR token exchange" in result.stderr
    return _tunneled(tunnels.tunnels)


def _served_in_process(options: dict, image: str, tunnels) -> str:
    """The login server the provider went to for ``image`` ("" when it answered no credentials)."""
    before = len(tunnels.tunnels)
    try:
        response = AzureProvider(options).get_image_credential(CredentialProviderRequest(image=image), timeout=10)
    except CredentialError as failure:
        assert "\n" not in str(failure) and "ACR token exchange" in str(failure)
        return _tunneled(tunnels.tunnels[before:])
    assert not response.auth and response.cache_duration == 0
    assert tunnels.tunnels[before:] == []
    return ""


def _tunneled(tunnels: list[str]) -> str:
    (tunnel,) = tunnels
    host, _, port = tunnel.rpartition(":")
    assert port == "443"
    return host


@pytest.mark.parametrize("image, expected", LOGIN_SERVERS)
def test_their_login_server_table(entra, workload_identity, tunnels, image, expected) -> None:
    assert _served_in_process(CUSTOM_OPTIONS, image, tunnels) == expected


@pytest.mark.parametrize("image, expected", [LOGIN_SERVERS[1], LOGIN_SERVERS[7], LOGIN_SERVERS[-1]])
def test_the_console_script_serves_as_the_table_says(entra, workload_identity, tunnels, image, expected) -> None:
    assert _served(run_kubelet_plugin(encode_request(image), *FLAGS, *CUSTOM), tunnels) == expected


#: TestProcessMirrorMapping's shapes, with registry hosts as sources and ACR login servers as
#: targets (cpcreds refuses a mirror that is no ACR: its credential would go nowhere).
MIRRORS = [
    ("", {}),
    ("aaa.example:bbb.azurecr.io,ccc.example:ddd.azurecr.io", {"aaa.example": "bbb.azurecr.io", "ccc.example": "ddd.azurecr.io"}),
    ("aaa.example: bbb.azurecr.io, ccc.example:ddd.azurecr.io", {"aaa.example": "bbb.azurecr.io", "ccc.example": "ddd.azurecr.io"}),
    ("aaa.example:bbb.azurecr.io", {"aaa.example": "bbb.azurecr.io"}),
]


@pytest.mark.parametrize("mirror, expected", MIRRORS)
def test_their_mirror_mapping_table(entra, workload_identity, tunnels, mirror, expected) -> None:
    for source in ("aaa.example", "ccc.example"):
        assert _served_in_process({**OPTIONS, "registryMirror": mirror}, f"{source}/app:1", tunnels) == expected.get(source, "")


def test_the_console_script_takes_their_mirror_flag(entra, workload_identity, tunnels) -> None:
    mirror, expected = MIRRORS[2]
    for source in ("aaa.example", "ccc.example"):
        before = list(tunnels.tunnels)
        result = run_kubelet_plugin(encode_request(f"{source}/app:1"), *FLAGS, f"--registry-mirror={mirror}")
        assert result.returncode == 1 and tunnels.tunnels == [*before, f"{expected[source]}:443"]


_ACR_HOST = re.compile(r"[A-Za-z0-9]+(\.azurecr\.io|\.azurecr\.cn|\.azurecr\.de|\.azurecr\.us|\.azurecr\.my\.cloud)", re.IGNORECASE)


@settings(max_examples=200, deadline=None)
@given(name=st.text(max_size=30), suffix=st.sampled_from([".azurecr.io", ".AzureCR.cn", ".azurecr.us", ".azurecr.my.cloud", ".example", ""]),
       rest=st.text(max_size=30))
def test_hostile_image_names_are_served_only_when_their_host_is_an_acr_name(name, suffix, rest) -> None:
    from cpcreds_azure.acr import ACR_SUFFIXES, target_of

    image = f"{name}{suffix}{rest}"
    host = image.partition("/")[0]
    served = target_of(image, (*ACR_SUFFIXES, ".azurecr.my.cloud")).login_server
    assert served == (host if _ACR_HOST.fullmatch(host) and host.isascii() else "")
