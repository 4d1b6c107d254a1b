"""``cpcreds-azure-credential-provider`` as the kubelet runs it (KEP-2133): the Entra token, for
the ACR audience, is exchanged at the registry fake's ``/oauth2/exchange`` for an ACR refresh
token, which then opens the registry's ``/v2/`` with ACR's username."""

from __future__ import annotations

import json

import pytest
import requests

from cpcreds.images.protocol import API_VERSION_V1, encode_request, parse_response
from tests.fakes.azure import ACR_AUDIENCE, ARM_AUDIENCE
from tests.fakes.registry import ACR_USERNAME, FakeRegistry

from azure_helpers import run_kubelet_plugin as _run

WI = ("--login=workloadidentity", "--disable-instance-discovery")


def opens(registry: FakeRegistry, auth, ca: str) -> bool:
    answer = requests.get(f"{registry.url}/v2/", auth=(auth.username, auth.password), verify=ca, timeout=10)
    return answer.status_code == 200


def test_the_acr_refresh_token_opens_the_registry(entra, registry, workload_identity, azure_env) -> None:
    image = f"{registry.host}/team/app:1"
    result = _run(encode_request(image, API_VERSION_V1), *WI, f"--registries={registry.host}")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["cacheKeyType"] == "Registry"
    response = parse_response(result.stdout, API_VERSION_V1)
    auth = response.auth[registry.host]
    assert auth.username == ACR_USERNAME
    assert 0 < response.cache_duration <= 3 * 3600
    assert opens(registry, auth, azure_env["REQUESTS_CA_BUNDLE"])
    assert registry.exchanges[0]["tenant"] == entra.tenant and registry.exchanges[0]["service"] == registry.host
    assert [issued.audience for issued in entra.issued] == [ACR_AUDIENCE]


def test_an_image_outside_acr_gets_an_empty_success(entra, workload_identity) -> None:
    # As acr-credential-provider answers: no credentials, cacheDuration 0, so that a broad
    # matchImages does not make the kubelet log an error on every pull.
    result = _run(encode_request("quay.io/team/app:1", API_VERSION_V1), *WI)
    assert result.returncode == 0 and result.stderr == b""
    document = json.loads(result.stdout)
    assert document["cacheKeyType"] == "Registry" and document["cacheDuration"] == "0s" and not document.get("auth")
    assert entra.issued == []


def test_an_exchange_the_registry_refuses_is_one_line(entra, pki, workload_identity) -> None:
    with FakeRegistry(pki) as registry:
        registry.enable_acr_exchange(lambda token: False)
        result = _run(encode_request(f"{registry.host}/app:1", API_VERSION_V1), *WI, f"--registries={registry.host}")
    assert result.returncode == 1 and result.stderr.count(b"\n") == 1
    assert b"ACR token exchange" in result.stderr and b"HTTP 401 (UNAUTHORIZED)" in result.stderr


@pytest.mark.parametrize("flag", ["--acr-audience=arm", f"--acr-audience={ARM_AUDIENCE}", f"--acrScope={ARM_AUDIENCE}/.default"])
def test_the_arm_audience_is_an_option_a_registry_may_refuse(entra, pki, workload_identity, azure_env, flag) -> None:
    with FakeRegistry(pki) as strict, FakeRegistry(pki) as lenient:
        strict.enable_acr_exchange(entra.registry_policy())
        lenient.enable_acr_exchange(entra.registry_policy(arm_audience=True))
        refused = _run(encode_request(f"{strict.host}/app:1"), *WI, f"--registries={strict.host}", flag)
        taken = _run(encode_request(f"{lenient.host}/app:1"), *WI, f"--registries={lenient.host}", flag)
        assert refused.returncode == 1 and b"HTTP 401" in refused.stderr
        assert taken.returncode == 0, taken.stderr
        assert opens(lenient, parse_response(taken.stdout, API_VERSION_V1).auth[lenient.host], azure_env["REQUESTS_CA_BUNDLE"])
    assert {issued.audience for issued in entra.issued} == {ARM_AUDIENCE}


def test_a_mirrored_registry_pulls_with_the_mirrors_credential(entra, registry, workload_identity, azure_env) -> None:
    # acr-credential-provider's --registry-mirror: docker.io images come from an ACR mirror, and
    # the credential answers for both names.
    for args in ([f"--registry-mirror=docker.io:{registry.host}"], ["-r", f"docker.io:{registry.host}"]):
        result = _run(encode_request("docker.io/library/nginx:1.27"), *WI, f"--registries={registry.host}", *args)
        assert result.returncode == 0, result.stderr
        response = parse_response(result.stdout, API_VERSION_V1)
        assert list(response.auth) == [registry.host, "docker.io"]
        assert response.auth["docker.io"] == response.auth[registry.host]
        assert opens(registry, response.auth["docker.io"], azure_env["REQUESTS_CA_BUNDLE"])


@pytest.mark.parametrize(
    "args, named",
    [
        (["--registry-mirror=docker.io"], b"registryMirror"),
        (["--registry-mirror=docker.io:quay.io"], b"registryMirror"),
        (["--container-registry-dns-suffix=cloud"], b"containerRegistryDnsSuffix"),
        (["--acr-audience=not a url"], b"acrAudience"),
    ],
)
def test_wrong_kubelet_options_are_one_line_naming_them(entra, args, named) -> None:
    result = _run(encode_request("fleet.azurecr.io/app:1"), *WI, *args)
    assert result.returncode == 1 and result.stderr.count(b"\n") == 1 and named in result.stderr
    assert entra.issued == []
