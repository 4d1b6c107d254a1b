"""``cpcreds-azure-credential-provider`` as the kubelet runs it (KEP-2133): the Entra token is
exchanged at the registry fake's ``/oauth2/exchange`` for an ACR refresh token, which then opens
the registry's ``/v2/`` with ACR's username."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from cpcreds.images.protocol import API_VERSION_V1, encode_request, parse_response
from tests.fakes.registry import ACR_USERNAME, FakeRegistry

KUBELET_PLUGIN = Path(sys.executable).with_name("cpcreds-azure-credential-provider")


def _run(stdin: bytes, *args: str) -> subprocess.CompletedProcess[bytes]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CPCREDS_")}
    return subprocess.run([str(KUBELET_PLUGIN), *args], input=stdin, capture_output=True, env=environ, timeout=60)


def test_the_acr_refresh_token_opens_the_registry(entra, registry, workload_identity, azure_env) -> None:
    image = f"{registry.host}/team/app:1"
    result = _run(encode_request(image, API_VERSION_V1), "--login=workloadidentity", "--disable-instance-discovery",
                  f"--registries={registry.host}")
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["cacheKeyType"] == "Registry"
    response = parse_response(result.stdout, API_VERSION_V1)
    auth = response.auth[registry.host]
    assert auth.username == ACR_USERNAME
    assert 0 < response.cache_duration <= 3 * 3600
    opened = requests.get(f"{registry.url}/v2/", auth=(auth.username, auth.password), verify=azure_env["REQUESTS_CA_BUNDLE"], timeout=10)
    assert opened.status_code == 200
    assert registry.exchanges[0]["tenant"] == entra.tenant and registry.exchanges[0]["service"] == registry.host


def test_a_registry_that_is_no_acr_is_refused_in_one_line(entra, workload_identity) -> None:
    result = _run(encode_request("quay.io/team/app:1", API_VERSION_V1), "--login=workloadidentity", "--disable-instance-discovery")
    assert result.returncode == 1 and result.stderr.count(b"\n") == 1 and b"Azure Container Registry" in result.stderr
    assert entra.issued == []


def test_an_exchange_the_registry_refuses_is_one_line(entra, pki, workload_identity) -> None:
    with FakeRegistry(pki) as registry:
        registry.enable_acr_exchange(lambda token: False)
        result = _run(encode_request(f"{registry.host}/app:1", API_VERSION_V1), "--login=workloadidentity",
                      "--disable-instance-discovery", f"--registries={registry.host}")
    assert result.returncode == 1 and result.stderr.count(b"\n") == 1
    assert b"ACR token exchange" in result.stderr and b"HTTP 401 (UNAUTHORIZED)" in result.stderr


def test_sovereign_cloud_registries_get_their_clouds_scope() -> None:
    from cpcreds_azure.acr import default_scope, registry_of

    assert default_scope(registry_of("fleet.azurecr.io/app:1")) == "https://management.azure.com/.default"
    assert default_scope(registry_of("fleet.azurecr.cn/app:1")) == "https://management.chinacloudapi.cn/.default"
    assert default_scope(registry_of("fleet.azurecr.us/app:1")) == "https://management.usgovcloudapi.net/.default"
    assert default_scope(registry_of("azurecr.io.evil.example/app:1")) is None
    assert registry_of("library/nginx") == ""
