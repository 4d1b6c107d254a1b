"""A token is handed out only if it is for what was asked: its ``aud`` claim (and a managed identity
answer's ``resource``) must name the server ID (or, for ACR, the ARM scope), in any spelling Entra
gives one resource (the application ID, ``api://<application ID>``, a trailing slash, any case).
A token for another audience (Graph, ARM) never reaches a cluster or a registry."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpcreds import CredentialError
from cpcreds.images.protocol import API_VERSION_V1, encode_request
from tests.fakes.azure import AKS_SERVER_ID

from azure_helpers import CLIENT_ID, CPCREDS_AZURE_KUBELET, SECRET, profile

GRAPH = "https://graph.microsoft.com"


@pytest.fixture
def spn(entra, make_engine):
    entra.add_secret(CLIENT_ID, SECRET)

    def make(**options):
        return make_engine({"login": "spn", "clientId": CLIENT_ID, "tenantId": entra.tenant, "clientSecret": SECRET,
                            "disableInstanceDiscovery": True, **options}, timeout="5s")

    return make


def _refused(engine, spoke) -> str:
    with pytest.raises(CredentialError) as caught:
        engine.get_credential(profile(spoke))
    message = str(caught.value)
    assert "\n" not in message and SECRET not in message and "audience" in message
    return message


def test_a_token_for_graph_is_refused(entra, spoke, spn) -> None:
    entra.answer_for(GRAPH)
    message = _refused(spn(), spoke)
    assert GRAPH in message and AKS_SERVER_ID in message
    assert [issued.audience for issued in entra.issued] == [GRAPH]  # one was issued, none handed out


@pytest.mark.parametrize("audience", [[GRAPH, AKS_SERVER_ID], [], None, 42, {"aud": AKS_SERVER_ID}],
                         ids=["list-with-another", "empty-list", "null", "number", "object"])
def test_an_audience_that_is_not_only_the_server_id_is_refused(entra, spoke, spn, audience) -> None:
    entra.answer_for(audience)
    _refused(spn(), spoke)


def test_a_token_without_an_audience_claim_is_refused(entra, spoke, fake_az, make_engine) -> None:
    # The Azure CLI's answer is read as is: an opaque token has no audience to check.
    fake_az(json.dumps({"accessToken": "opaque-token-for-someone", "expires_on": int(time.time()) + 3000, "tokenType": "Bearer"}))
    _refused(make_engine({"login": "azurecli"}), spoke)


def test_the_azure_cli_handing_a_graph_token_is_refused(entra, spoke, fake_az, make_engine) -> None:
    minted = entra._issue("az-user", "cli", GRAPH)
    fake_az(json.dumps({"accessToken": minted["access_token"], "expires_on": int(time.time()) + 3000, "tokenType": "Bearer"}))
    _refused(make_engine({"login": "azurecli"}), spoke)


@pytest.mark.parametrize("resource, audience", [(GRAPH, GRAPH), (GRAPH, AKS_SERVER_ID), (AKS_SERVER_ID, GRAPH)],
                         ids=["both", "resource-only", "aud-only"])
def test_a_managed_identity_answer_for_another_resource_is_refused(entra, spoke, make_engine, monkeypatch, resource, audience) -> None:
    entra.add_managed_identity(CLIENT_ID)
    monkeypatch.setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", entra.imds_authority)
    entra.answer_for(audience, resource=resource)
    _refused(make_engine({"login": "msi"}, timeout="5s"), spoke)


@pytest.mark.parametrize(
    "server_id, audience",
    [
        (AKS_SERVER_ID, AKS_SERVER_ID),
        (AKS_SERVER_ID, AKS_SERVER_ID.upper()),
        (AKS_SERVER_ID, f"api://{AKS_SERVER_ID}"),
        (f"api://{AKS_SERVER_ID}", AKS_SERVER_ID),
        (f"api://{AKS_SERVER_ID}", f"API://{AKS_SERVER_ID}/"),
        (f"{AKS_SERVER_ID}/.default", AKS_SERVER_ID),
        ("https://aks.example.com/", "https://aks.example.com"),
    ],
)
def test_every_spelling_entra_gives_the_resource_is_accepted(entra, make_spoke, spn, server_id, audience) -> None:
    entra.answer_for(audience)
    server = make_spoke()
    server.verify_tokens_with(lambda token: entra.verify(token, audience))
    engine = spn(serverId=server_id)
    from kubernetes import client as kclient

    with engine.api_client(profile(server)) as api:
        kclient.CoreV1Api(api).list_namespace()


def _same_resource(value: object) -> bool:
    # What the provider must accept for the AKS server ID, spelled out independently of it: one
    # spelling of it, or a list of nothing else (a JWT's aud may be a list).
    if isinstance(value, list):
        return bool(value) and all(_same_resource(item) for item in value if not isinstance(item, list)) and not any(
            isinstance(item, list) for item in value)
    if not isinstance(value, str):
        return False
    text = value.lower().removesuffix("/")
    return text in (AKS_SERVER_ID, f"api://{AKS_SERVER_ID}")


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=60),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=6)
_near = st.builds(lambda prefix, middle, suffix: f"{prefix}{middle}{suffix}",
                  st.sampled_from(["", "api://", "API://", "spn:", "https://", " "]),
                  st.sampled_from([AKS_SERVER_ID, AKS_SERVER_ID.upper(), AKS_SERVER_ID[:-1], AKS_SERVER_ID + "0", "graph.microsoft.com"]),
                  st.sampled_from(["", "/", "//", "/.default", " ", "\x00", "#", "?x"]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(audience=_near | _json | _near.map(lambda aud: [aud]))
def test_any_audience_is_handed_out_only_if_it_is_the_server_id(entra, spoke, spn, audience) -> None:
    entra.answer_for(audience)
    engine = spn()
    try:
        token = engine.get_credential(profile(spoke)).token
    except CredentialError as exc:
        assert "\n" not in str(exc) and SECRET not in str(exc)
        assert not _same_resource(audience)
    else:
        assert _same_resource(audience) and token in {issued.token for issued in entra.issued}


def test_the_acr_exchange_gets_no_token_for_another_audience(entra, registry, workload_identity) -> None:
    entra.answer_for(GRAPH)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CPCREDS_")}
    result = subprocess.run([str(CPCREDS_AZURE_KUBELET), "--login=workloadidentity", "--disable-instance-discovery",
                             f"--registries={registry.host}"], input=encode_request(f"{registry.host}/team/app:1", API_VERSION_V1),
                            capture_output=True, env=environ, timeout=60)
    assert result.returncode == 1 and result.stderr.count(b"\n") == 1 and b"audience" in result.stderr
    assert registry.exchanges == []
