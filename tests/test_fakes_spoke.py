"""The spoke fake speaks the real protocol: proven with the official kubernetes clients."""

from __future__ import annotations

import json
import socket
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.aio import client as aio_client
from kubernetes.client.exceptions import ApiException

from tests.fakes.fixtures import SPOKE_TOKEN
from tests.fakes.pki import PKI, ClientCert, KeyType
from tests.fakes.spoke import UNAUTHORIZED_STATUS, SeenRequest, SpokeServer


def make_configuration(
    spoke: SpokeServer,
    tmp_path: Path,
    *,
    token: str | None = None,
    cert: ClientCert | None = None,
) -> client.Configuration:
    """A client configuration the way a kubeconfig loader would build one."""
    ca_file = tmp_path / "ca.pem"
    ca_file.write_bytes(spoke.ca_pem)
    configuration = client.Configuration(host=spoke.url, ssl_ca_cert=str(ca_file))
    if token is not None:
        # No api_key_prefix is set, so the value is sent as the header verbatim.
        configuration.api_key = {"authorization": f"Bearer {token}"}
    if cert is not None:
        cert_file, key_file = tmp_path / "client.crt", tmp_path / "client.key"
        cert_file.write_text(cert.cert_pem)
        key_file.write_text(cert.key_pem)
        configuration.cert_file, configuration.key_file = str(cert_file), str(key_file)
    return configuration


def list_namespace_names(configuration: client.Configuration) -> list[str]:
    with client.ApiClient(configuration) as api:
        return [ns.metadata.name for ns in client.CoreV1Api(api).list_namespace().items]


def test_bearer_token_lists_namespaces(spoke: SpokeServer, tmp_path: Path) -> None:
    names = list_namespace_names(make_configuration(spoke, tmp_path, token=SPOKE_TOKEN))

    assert names == ["default", "kube-system", "kube-public", "kube-node-lease"]
    assert spoke.requests == [
        SeenRequest("GET", "/api/v1/namespaces", "token", SPOKE_TOKEN, None, 200)
    ]


def test_unknown_token_gets_the_api_servers_401_status(
    spoke: SpokeServer, tmp_path: Path
) -> None:
    with pytest.raises(ApiException) as raised:
        list_namespace_names(make_configuration(spoke, tmp_path, token="wrong"))

    assert raised.value.status == 401
    assert json.loads(raised.value.body) == UNAUTHORIZED_STATUS
    assert spoke.requests == [
        SeenRequest("GET", "/api/v1/namespaces", "rejected", "wrong", None, 401)
    ]


def test_no_credentials_is_anonymous_and_unauthorized(spoke: SpokeServer, tmp_path: Path) -> None:
    with pytest.raises(ApiException) as raised:
        list_namespace_names(make_configuration(spoke, tmp_path))

    assert raised.value.status == 401
    assert [(r.auth, r.token, r.client_cn) for r in spoke.requests] == [("anonymous", None, None)]


@pytest.mark.parametrize("key_type", ["ec", "rsa"])
def test_client_certificate_lists_namespaces(
    spoke: SpokeServer, pki: PKI, tmp_path: Path, key_type: KeyType
) -> None:
    spoke.accept_client_cn("alice")
    cert = pki.issue_client_cert("alice", key_type=key_type)

    names = list_namespace_names(make_configuration(spoke, tmp_path, cert=cert))

    assert "default" in names
    assert spoke.requests == [
        SeenRequest("GET", "/api/v1/namespaces", "client-cert", None, "alice", 200)
    ]


def test_expired_client_certificate_is_unauthorized(
    spoke: SpokeServer, pki: PKI, tmp_path: Path
) -> None:
    spoke.accept_client_cn("alice")
    now = datetime.now(UTC)
    cert = pki.issue_client_cert(
        "alice", not_before=now - timedelta(days=2), not_after=now - timedelta(days=1)
    )
    assert cert.expired

    # Like kube-apiserver, the handshake succeeds and authentication says 401.
    with pytest.raises(ApiException) as raised:
        list_namespace_names(make_configuration(spoke, tmp_path, cert=cert))

    assert raised.value.status == 401
    assert json.loads(raised.value.body) == UNAUTHORIZED_STATUS
    assert [(r.auth, r.client_cn) for r in spoke.requests] == [("rejected", "alice")]


def test_client_certificate_beats_a_bad_token(
    spoke: SpokeServer, pki: PKI, tmp_path: Path
) -> None:
    # kube-apiserver tries x509 before tokens and takes the first success.
    spoke.accept_client_cn("alice")
    configuration = make_configuration(
        spoke, tmp_path, token="wrong", cert=pki.issue_client_cert("alice")
    )

    list_namespace_names(configuration)

    assert [(r.auth, r.token, r.client_cn) for r in spoke.requests] == [
        ("client-cert", "wrong", "alice")
    ]


def test_runtime_changes_apply_to_an_open_keepalive_connection(
    spoke: SpokeServer, pki: PKI, tmp_path: Path
) -> None:
    spoke.accept_client_cn("alice")
    configuration = make_configuration(
        spoke, tmp_path, token=SPOKE_TOKEN, cert=pki.issue_client_cert("alice")
    )
    with client.ApiClient(configuration) as api:
        v1 = client.CoreV1Api(api)
        v1.read_namespace("default")

        spoke.revoke_client_cn("alice")
        v1.read_namespace("default")  # the token still works

        spoke.revoke_token(SPOKE_TOKEN)
        with pytest.raises(ApiException) as raised:
            v1.read_namespace("default")
        assert raised.value.status == 401

        spoke.accept_token("refreshed")
        configuration.api_key = {"authorization": "Bearer refreshed"}
        v1.read_namespace("default")

    assert [(r.auth, r.token, r.status) for r in spoke.requests] == [
        ("client-cert", SPOKE_TOKEN, 200),
        ("token", SPOKE_TOKEN, 200),
        ("rejected", SPOKE_TOKEN, 401),
        ("token", "refreshed", 200),
    ]
    assert spoke.connections == 1  # urllib3 reused one connection throughout


def test_each_api_client_opens_its_own_connection(spoke: SpokeServer, tmp_path: Path) -> None:
    configuration = make_configuration(spoke, tmp_path, token=SPOKE_TOKEN)

    list_namespace_names(configuration)
    list_namespace_names(configuration)

    assert spoke.connections == 2
    spoke.clear_requests()
    assert spoke.requests == []


def test_read_namespace_version_discovery_and_not_found(
    spoke: SpokeServer, tmp_path: Path
) -> None:
    with client.ApiClient(make_configuration(spoke, tmp_path, token=SPOKE_TOKEN)) as api:
        v1 = client.CoreV1Api(api)
        namespace = v1.read_namespace("kube-system")
        version = client.VersionApi(api).get_code()
        api_versions = client.CoreApi(api).get_api_versions()
        with pytest.raises(ApiException) as missing:
            v1.read_namespace("nope")
        with pytest.raises(ApiException) as unserved:
            v1.list_pod_for_all_namespaces()

    assert namespace.metadata.name == "kube-system"
    assert namespace.status.phase == "Active"
    assert version.git_version.startswith("v1.")
    assert api_versions.versions == ["v1"]
    assert missing.value.status == 404
    assert json.loads(missing.value.body)["reason"] == "NotFound"
    assert json.loads(missing.value.body)["message"] == 'namespaces "nope" not found'
    assert unserved.value.status == 404
    assert [(r.path, r.status) for r in spoke.requests] == [
        ("/api/v1/namespaces/kube-system", 200),
        ("/version/", 200),
        ("/api/", 200),
        ("/api/v1/namespaces/nope", 404),
        ("/api/v1/pods", 404),
    ]


def test_server_certificate_covers_spoke_test(spoke: SpokeServer, tmp_path: Path) -> None:
    configuration = make_configuration(spoke, tmp_path, token=SPOKE_TOKEN)
    configuration.tls_server_name = "spoke.test"  # SNI and hostname check, still 127.0.0.1

    assert "default" in list_namespace_names(configuration)


def test_stop_ends_keepalive_connections_and_threads(pki: PKI, tmp_path: Path) -> None:
    threads_before = set(threading.enumerate())
    server = SpokeServer(pki, tokens=["t"]).start()
    port = server.port
    # The ApiClient stays open, so its pooled connection idles on a server thread.
    with client.ApiClient(make_configuration(server, tmp_path, token="t")) as api:
        client.CoreV1Api(api).list_namespace()
        server.stop()

    assert set(threading.enumerate()) == threads_before
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    server.stop()  # idempotent


@pytest.mark.asyncio
async def test_aio_client_with_in_memory_ca(spoke: SpokeServer) -> None:
    # kubernetes.aio builds one ssl.SSLContext from ca_cert_data: no CA file needed.
    # It must be str: the value goes to ssl's cadata unchanged, which reads
    # bytes as DER, so PEM bytes fail with "cadata does not contain a certificate".
    configuration = aio_client.Configuration(host=spoke.url, ca_cert_data=spoke.ca_pem.decode())
    configuration.api_key = {"authorization": f"Bearer {SPOKE_TOKEN}"}
    async with aio_client.ApiClient(configuration) as api:
        v1 = aio_client.CoreV1Api(api)
        namespaces = await v1.list_namespace()
        spoke.revoke_token(SPOKE_TOKEN)
        # kubernetes.aio has its own exception classes, not kubernetes.client's.
        with pytest.raises(aio_client.ApiException) as raised:
            await v1.list_namespace()

    assert [ns.metadata.name for ns in namespaces.items][0] == "default"
    assert raised.value.status == 401
    assert [(r.auth, r.status) for r in spoke.requests] == [("token", 200), ("rejected", 401)]
    assert spoke.connections == 1  # aiohttp kept the connection alive too
