"""cloud-provider-azure's acr-credential-provider test tables (pkg/credentialprovider
azure_credentials_test.go: TestParseACRLoginServerFromImage, TestProcessImageWithMirrorMapping,
TestProcessMirrorMapping, TestGetCredentialsConfig's non-ACR case) replayed through
``cpcreds-azure-credential-provider`` as the kubelet runs it.

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

from azure_helpers import run_kubelet_plugin

#: Their table, with the custom cloud's suffix and the mirror their test configures.
CUSTOM = ("--container-registry-dns-suffix=.azurecr.my.cloud", "--registry-mirror=mcr.microsoft.com:abc.azurecr.io")
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
    """The login server the plugin went to ("" when it answered no credentials)."""
    if result.returncode == 0:
        document = json.loads(result.stdout)
        assert not document.get("auth") and document["cacheDuration"] == "0s", document
        assert tunnels.tunnels == []
        return ""
    assert result.stderr.count(b"\n") == 1 and b"ACR token exchange" in result.stderr
    (tunnel,) = tunnels.tunnels
    host, _, port = tunnel.rpartition(":")
    assert port == "443"
    return host


@pytest.mark.parametrize("image, expected", LOGIN_SERVERS)
def test_their_login_server_table(entra, workload_identity, tunnels, image, expected) -> None:
    result = run_kubelet_plugin(encode_request(image), "--login=workloadidentity", "--disable-instance-discovery", *CUSTOM)
    assert _served(result, tunnels) == expected


@pytest.mark.parametrize(
    "mirror, expected",
    [
        # TestProcessMirrorMapping's shapes, with registry hosts as sources and ACR login servers
        # as targets (cpcreds refuses a mirror that is no ACR: its credential would go nowhere).
        ("", {}),
        ("aaa.example:bbb.azurecr.io,ccc.example:ddd.azurecr.io", {"aaa.example": "bbb.azurecr.io", "ccc.example": "ddd.azurecr.io"}),
        ("aaa.example: bbb.azurecr.io, ccc.example:ddd.azurecr.io", {"aaa.example": "bbb.azurecr.io", "ccc.example": "ddd.azurecr.io"}),
        ("aaa.example:bbb.azurecr.io", {"aaa.example": "bbb.azurecr.io"}),
    ],
)
def test_their_mirror_mapping_table(entra, workload_identity, tunnels, mirror, expected) -> None:
    for source in ("aaa.example", "ccc.example"):
        before = list(tunnels.tunnels)
        result = run_kubelet_plugin(encode_request(f"{source}/app:1"), "--login=workloadidentity", "--disable-instance-discovery",
                                    f"--registry-mirror={mirror}")
        if source in expected:
            assert result.returncode == 1 and tunnels.tunnels == [*before, f"{expected[source]}:443"]
        else:
            assert result.returncode == 0 and not json.loads(result.stdout).get("auth") and tunnels.tunnels == before


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
