"""Image pulls with the pod's own identity (KEP-4412) through ``cpcreds-azure-credential-provider``
as the kubelet runs it: the pod's service-account token is the client assertion of the federated
identity its service account names, then ACR's exchange. The node's identity is a managed identity
at the IMDS fake; a registry that grants AcrPull to the pod's identity only refuses the node's."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpcreds import CredentialError
from cpcreds.images.protocol import API_VERSION_V1, CredentialProviderRequest, encode_request, parse_response
from tests.fakes.azure import ACR_AUDIENCE
from tests.fakes.registry import FakeRegistry

from azure_helpers import NODE_CLIENT_ID, POD_CLIENT_ID, POD_SUBJECT, run_kubelet_plugin

WI_CLIENT = "azure.workload.identity/client-id"
WI_TENANT = "azure.workload.identity/tenant-id"
ACR_CLIENT = "kubernetes.azure.com/acr-client-id"
ACR_TENANT = "kubernetes.azure.com/acr-tenant-id"


@pytest.fixture
def pod_registry(pki, entra, node_identity):
    """A registry that grants AcrPull to the pod's identity only, and the pod's federated identity."""
    entra.add_federated_identity(POD_CLIENT_ID, POD_SUBJECT)
    with FakeRegistry(pki) as registry:
        registry.enable_acr_exchange(entra.registry_policy(pullers={POD_CLIENT_ID}))
        yield registry


def _pull(registry, token=None, annotations=None, *args: str):
    request = encode_request(f"{registry.host}/shop/web:1", service_account_token=token, service_account_annotations=annotations)
    return run_kubelet_plugin(request, "--login=msi", "--disable-instance-discovery", f"--registries={registry.host}", *args)


def _grants(entra) -> list[tuple[str, str, str]]:
    return [(issued.client_id, issued.grant, issued.audience) for issued in entra.issued]


@pytest.mark.parametrize("keys", [(WI_CLIENT, WI_TENANT), (ACR_CLIENT, ACR_TENANT)])
def test_the_pods_token_pulls_as_the_pods_identity(entra, pod_registry, azure_env, keys) -> None:
    client_key, tenant_key = keys
    token = entra.service_account_token(POD_SUBJECT)
    result = _pull(pod_registry, token, {client_key: POD_CLIENT_ID, tenant_key: entra.tenant})
    assert result.returncode == 0, result.stderr
    assert token.encode() not in result.stdout + result.stderr
    response = parse_response(result.stdout, API_VERSION_V1)
    assert list(response.auth) == [pod_registry.host] and response.cache_key_type == "Registry"
    assert _grants(entra) == [(POD_CLIENT_ID, "federated", ACR_AUDIENCE)]
    assert pod_registry.exchanges[-1]["tenant"] == entra.tenant


def test_the_tenant_comes_from_the_config_when_not_annotated(entra, pod_registry) -> None:
    token = entra.service_account_token(POD_SUBJECT)
    result = _pull(pod_registry, token, {WI_CLIENT: POD_CLIENT_ID}, f"--tenant-id={entra.tenant}")
    assert result.returncode == 0, result.stderr
    assert _grants(entra) == [(POD_CLIENT_ID, "federated", ACR_AUDIENCE)]


def test_without_a_token_the_node_pulls_and_a_registry_for_the_pod_refuses_it(entra, pod_registry, pki) -> None:
    result = _pull(pod_registry)
    assert result.returncode == 1 and b"HTTP 401" in result.stderr
    assert _grants(entra) == [(NODE_CLIENT_ID, "imds", ACR_AUDIENCE)]
    with FakeRegistry(pki) as node_registry:
        node_registry.enable_acr_exchange(entra.registry_policy(pullers={NODE_CLIENT_ID}))
        assert _pull(node_registry).returncode == 0


def test_a_token_without_a_client_id_fails_naming_the_annotation(entra, pod_registry) -> None:
    token = entra.service_account_token(POD_SUBJECT)
    result = _pull(pod_registry, token, {WI_TENANT: entra.tenant})
    assert result.returncode == 1 and result.stderr.count(b"\n") == 1 and WI_CLIENT.encode() in result.stderr
    assert entra.issued == [] and pod_registry.exchanges == []


def test_require_service_account_false_lets_an_unannotated_pod_pull_as_the_node(entra, pki, node_identity) -> None:
    token = entra.service_account_token(POD_SUBJECT)
    with FakeRegistry(pki) as registry:
        registry.enable_acr_exchange(entra.registry_policy(pullers={NODE_CLIENT_ID}))
        result = _pull(registry, token, {}, "--require-service-account=false")
    assert result.returncode == 0, result.stderr
    assert _grants(entra) == [(NODE_CLIENT_ID, "imds", ACR_AUDIENCE)]


@pytest.mark.parametrize(
    "mint",
    [
        pytest.param(lambda entra: entra.service_account_token(POD_SUBJECT, key=rsa.generate_private_key(public_exponent=65537, key_size=2048)),
                     id="signed-by-another-key"),
        pytest.param(lambda entra: entra.service_account_token(POD_SUBJECT, audience="https://kubernetes.default.svc"), id="wrong-audience"),
        pytest.param(lambda entra: entra.service_account_token("system:serviceaccount:shop:other"), id="another-service-account"),
        pytest.param(lambda entra: entra.service_account_token(POD_SUBJECT, lifetime=-60), id="expired"),
    ],
)
def test_a_pod_identity_entra_refuses_fails_and_never_falls_back_to_the_node(entra, pod_registry, mint) -> None:
    result = _pull(pod_registry, mint(entra), {WI_CLIENT: POD_CLIENT_ID, WI_TENANT: entra.tenant})
    assert result.returncode == 1 and result.stderr.count(b"\n") == 1 and b"Entra ID token endpoint" in result.stderr
    assert entra.issued == [] and pod_registry.exchanges == []


def test_a_mirror_pulls_with_the_nodes_identity_as_acr_credential_provider_does(entra, pki, node_identity) -> None:
    token = entra.service_account_token(POD_SUBJECT)
    with FakeRegistry(pki) as mirror:
        mirror.enable_acr_exchange(entra.registry_policy(pullers={NODE_CLIENT_ID}))
        request = encode_request("docker.io/library/nginx:1", service_account_token=token,
                                 service_account_annotations={WI_CLIENT: POD_CLIENT_ID, WI_TENANT: entra.tenant})
        result = run_kubelet_plugin(request, "--login=msi", f"--registries={mirror.host}", f"--registry-mirror=docker.io:{mirror.host}")
    assert result.returncode == 0, result.stderr
    assert _grants(entra) == [(NODE_CLIENT_ID, "imds", ACR_AUDIENCE)]


def test_one_provider_never_gives_one_pods_credential_to_another(entra, pod_registry) -> None:
    # In-process (a program pulling on pods' behalf): the second pod's token is not trusted, and
    # the first pod's credential must not answer for it.
    from cpcreds_azure import AzureProvider

    provider = AzureProvider({"login": "msi", "registries": [pod_registry.host], "disableInstanceDiscovery": True})
    try:
        annotations = {WI_CLIENT: POD_CLIENT_ID, WI_TENANT: entra.tenant}
        first = CredentialProviderRequest(f"{pod_registry.host}/a:1", entra.service_account_token(POD_SUBJECT), annotations)
        assert provider.get_image_credential(first, timeout=20).auth
        second = CredentialProviderRequest(f"{pod_registry.host}/a:1", entra.service_account_token("system:serviceaccount:shop:other"),
                                           annotations)
        with pytest.raises(CredentialError):
            provider.get_image_credential(second, timeout=20)
        again = provider.get_image_credential(first, timeout=20)
        assert again.auth
    finally:
        provider.close()
    assert _grants(entra) == [(POD_CLIENT_ID, "federated", ACR_AUDIENCE)] * 2
    assert len(pod_registry.exchanges) == 2


_VALUES = st.text(max_size=80)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(client=_VALUES, tenant=_VALUES)
def test_hostile_annotations_never_reach_entra_unchecked(entra, tunnels, client, tenant) -> None:
    from cpcreds_azure import AzureProvider

    provider = AzureProvider({"login": "msi", "disableInstanceDiscovery": True})
    token = entra.service_account_token(POD_SUBJECT)
    request = CredentialProviderRequest("fleet.azurecr.io/app:1", token, {WI_CLIENT: client, WI_TENANT: tenant})
    before = len(entra.seen)
    try:
        with pytest.raises(CredentialError) as caught:
            provider.get_image_credential(request, timeout=5)
    finally:
        provider.close()
    message = str(caught.value)
    assert "\n" not in message and token not in message
    path_safe = all(part.strip() and part.strip().isascii() and all(c.isalnum() or c in ".-" for c in part.strip())
                    for part in (client, tenant))
    if not path_safe:
        assert len(entra.seen) == before  # refused before any request
    assert tunnels.tunnels == []
