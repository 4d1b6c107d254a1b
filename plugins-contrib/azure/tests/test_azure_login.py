"""Each login mode end to end: the in-process provider gets a token from the Entra ID fake (or
its managed identity endpoint, or a fake ``az``), and the kubernetes client opens the spoke fake,
which accepts only tokens the Entra fake issued for AKS's server ID."""

from __future__ import annotations

import json
import time

import pytest
from cryptography.hazmat.primitives import serialization
from kubernetes import client as kclient

from cpcreds import CredentialError
from tests.fakes.azure import AKS_SERVER_ID

from azure_helpers import CLIENT_ID, SECRET, profile


def _list(engine, spoke) -> None:
    with engine.api_client(profile(spoke)) as api:
        assert kclient.CoreV1Api(api).list_namespace().items
    assert spoke.requests and all(seen.auth == "token" for seen in spoke.requests)


def test_workload_identity(entra, spoke, make_engine, workload_identity) -> None:
    engine = make_engine({"login": "workloadidentity", "disableInstanceDiscovery": True})
    _list(engine, spoke)
    (issued,) = entra.issued
    assert (issued.client_id, issued.grant, issued.audience) == (CLIENT_ID, "federated", AKS_SERVER_ID)
    credential = engine.get_credential(profile(spoke))
    assert credential.token == issued.token
    assert abs(credential.expiration_timestamp.timestamp() - issued.expires) < 2  # expiry from the token


def test_workload_identity_options_as_kubelogin_flags(entra, spoke, make_engine, workload_identity, monkeypatch) -> None:
    for name in ("AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_FEDERATED_TOKEN_FILE"):
        monkeypatch.delenv(name)
    engine = make_engine({"login": "workloadidentity", "clientId": CLIENT_ID, "tenantId": entra.tenant,
                          "federatedTokenFile": str(workload_identity), "authorityHost": entra.authority,
                          "disableInstanceDiscovery": "true", "serverId": AKS_SERVER_ID})
    _list(engine, spoke)


def test_spn_secret(entra, spoke, make_engine) -> None:
    entra.add_secret(CLIENT_ID, SECRET)
    engine = make_engine({"login": "spn", "clientId": CLIENT_ID, "tenantId": entra.tenant, "clientSecret": SECRET,
                          "disableInstanceDiscovery": True})
    _list(engine, spoke)
    assert [issued.grant for issued in entra.issued] == ["secret"]


def test_spn_secret_from_kubelogins_environment_variable(entra, spoke, make_engine, monkeypatch) -> None:
    entra.add_secret(CLIENT_ID, SECRET)
    monkeypatch.setenv("AAD_SERVICE_PRINCIPAL_CLIENT_SECRET", SECRET)
    engine = make_engine({"login": "spn", "clientId": CLIENT_ID, "tenantId": entra.tenant, "disableInstanceDiscovery": True})
    _list(engine, spoke)


def test_spn_certificate(entra, spoke, make_engine, tmp_path) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID
    import datetime as dt

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fleet-spn")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + dt.timedelta(days=1)).sign(key, hashes.SHA256()))
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    pem = tmp_path / "spn.pem"
    pem.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()) + cert_pem)
    entra.add_certificate(CLIENT_ID, cert_pem)
    engine = make_engine({"login": "spn", "clientId": CLIENT_ID, "tenantId": entra.tenant, "clientCertificate": str(pem),
                          "disableInstanceDiscovery": True})
    _list(engine, spoke)
    assert [issued.grant for issued in entra.issued] == ["certificate"]


def test_spn_certificate_the_tenant_does_not_know_is_refused(entra, spoke, make_engine, tmp_path) -> None:
    from tests.fakes.pki import make_key_pair

    cert_pem, key_pem, _ = make_key_pair()  # an EC key: not a certificate Entra has for the client
    pem = tmp_path / "other.pem"
    pem.write_text(key_pem + cert_pem)
    engine = make_engine({"login": "spn", "clientId": CLIENT_ID, "tenantId": entra.tenant, "clientCertificate": str(pem),
                          "disableInstanceDiscovery": True})
    with pytest.raises(CredentialError) as caught:
        engine.get_credential(profile(spoke))
    assert str(caught.value).count("\n") == 0


def test_msi_app_service_endpoint(entra, spoke, make_engine, monkeypatch) -> None:
    entra.add_managed_identity(CLIENT_ID)
    monkeypatch.setenv("IDENTITY_ENDPOINT", entra.identity_endpoint)
    monkeypatch.setenv("IDENTITY_HEADER", entra.identity_header)
    engine = make_engine({"login": "msi"})
    _list(engine, spoke)
    assert [(issued.grant, issued.audience) for issued in entra.issued] == [("msi", AKS_SERVER_ID)]
    assert ("msi", "GET", "/msi/token") in entra.seen


def test_msi_user_assigned_by_client_id(entra, spoke, make_engine, monkeypatch) -> None:
    entra.add_managed_identity("system-assigned")
    entra.add_managed_identity(CLIENT_ID)
    monkeypatch.setenv("IDENTITY_ENDPOINT", entra.identity_endpoint)
    monkeypatch.setenv("IDENTITY_HEADER", entra.identity_header)
    engine = make_engine({"login": "msi", "clientId": CLIENT_ID})
    _list(engine, spoke)
    assert [issued.client_id for issued in entra.issued] == [CLIENT_ID]


def test_msi_instance_metadata_service(entra, spoke, make_engine, monkeypatch) -> None:
    # A VM or an AKS node: no IDENTITY_ENDPOINT, so azure-identity asks IMDS (pointed at the fake).
    entra.add_managed_identity(CLIENT_ID)
    monkeypatch.setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", entra.imds_authority)
    engine = make_engine({"login": "msi"})
    _list(engine, spoke)
    assert [(issued.client_id, issued.grant, issued.audience) for issued in entra.issued] == [(CLIENT_ID, "imds", AKS_SERVER_ID)]
    assert [seen for seen in entra.seen if seen[0] != "imds"] == []


def test_msi_instance_metadata_service_user_assigned_by_client_id(entra, spoke, make_engine, monkeypatch) -> None:
    entra.add_managed_identity("system-assigned")
    entra.add_managed_identity(CLIENT_ID)
    monkeypatch.setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", entra.imds_authority)
    _list(make_engine({"login": "msi", "clientId": CLIENT_ID}), spoke)
    assert [(issued.client_id, issued.grant) for issued in entra.issued] == [(CLIENT_ID, "imds")]


def test_msi_instance_metadata_service_without_the_identity_is_one_line(entra, spoke, make_engine, monkeypatch) -> None:
    entra.add_managed_identity("system-assigned")
    monkeypatch.setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", entra.imds_authority)
    with pytest.raises(CredentialError) as caught:
        make_engine({"login": "msi", "clientId": CLIENT_ID}, timeout="3s").get_credential(profile(spoke))
    message = str(caught.value)
    assert "managed identity endpoint (IMDS)" in message and "HTTP 400" in message and "\n" not in message
    assert entra.issued == []


def test_azurecli(entra, spoke, make_engine, fake_az) -> None:
    minted = entra._issue("az-user", "cli", AKS_SERVER_ID)  # what Entra gave the signed-in CLI
    expires = int(time.time()) + 3000
    fake_az(json.dumps({"accessToken": minted["access_token"], "expiresOn": "2099-01-01 00:00:00.000000",
                        "expires_on": expires, "subscription": "sub", "tenant": entra.tenant, "tokenType": "Bearer"}))
    engine = make_engine({"login": "azurecli"})
    _list(engine, spoke)
    assert engine.get_credential(profile(spoke)).expiration_timestamp.timestamp() == pytest.approx(expires, abs=1)


def test_azurecli_not_signed_in_is_one_line(make_engine, fake_az, spoke) -> None:
    fake_az("", exit_code=1, stderr="ERROR: Please run 'az login' to setup account.\n")
    engine = make_engine({"login": "azurecli"})
    with pytest.raises(CredentialError) as caught:
        engine.get_credential(profile(spoke))
    assert "\n" not in str(caught.value)


def test_default_chain_finds_workload_identity(entra, spoke, make_engine, workload_identity) -> None:
    engine = make_engine({"disableInstanceDiscovery": True})
    _list(engine, spoke)
    assert [issued.grant for issued in entra.issued] == ["federated"]


def test_the_token_is_shared_across_clusters(entra, make_spoke, make_engine, workload_identity) -> None:
    spokes = [make_spoke() for _ in range(2)]
    for server in spokes:
        server.verify_tokens_with(lambda token: entra.verify(token, AKS_SERVER_ID))
    engine = make_engine({"login": "workloadidentity", "disableInstanceDiscovery": True})
    for index, server in enumerate(spokes):
        with engine.api_client(profile(server, name=f"aks-{index}")) as api:
            kclient.CoreV1Api(api).list_namespace()
    assert len(entra.issued) == 1


def test_a_hanging_az_is_stopped_within_the_timeout(make_engine, fake_az, spoke, azure_env) -> None:
    script = fake_az("{}")
    script.write_text("#!/bin/sh\nexec sleep 30\n")  # `az` that never answers
    engine = make_engine({"login": "azurecli"}, timeout="2s")
    started = time.monotonic()
    with pytest.raises(CredentialError) as caught:
        engine.get_credential(profile(spoke))
    assert time.monotonic() - started < 2 + 3 and "\n" not in str(caught.value)  # not az's 30 s
