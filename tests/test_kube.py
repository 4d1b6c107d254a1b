"""The ``kubernetes`` / ``kubernetes.aio`` adapters against a real HTTPS spoke and real plugins.

Every test talks to :class:`tests.fakes.spoke.SpokeServer` through the unmodified official
clients, with credentials from real exec plugin subprocesses (or the in-process ``file``
provider), and checks what the spoke saw: which identity, which token, which client certificate,
how many TLS connections, and - for failures - that no request was sent at all.
"""

from __future__ import annotations

import select
import socket
import socketserver
import stat
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Self

import pytest
from kubernetes import client as kclient
from kubernetes.aio import client as aclient
from prometheus_client import CollectorRegistry

from cpcreds import (
    CredentialEngine,
    CredentialError,
    PluginExecutionError,
    PluginOutputError,
    PluginTimeout,
    ProviderError,
    ProviderRegistry,
)
from tests.fakes.builders import access_provider, cluster_profile, config_of, exec_entry
from tests.fakes.pki import PKI, ClientCert
from tests.fakes.spoke import DEFAULT_NAMESPACES, SpokeServer

PROVIDER = "fleet"
NAMESPACES = list(DEFAULT_NAMESPACES)
_PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy")


# -- helpers -------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _no_proxy_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # Both clients honour HTTPS_PROXY; a developer's proxy must not sit between us and 127.0.0.1.
    for var in _PROXY_VARS:
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def make_engine() -> Iterator[Callable[..., CredentialEngine]]:
    """Engines with their own metrics registry and only the built-in provider types."""
    engines: list[CredentialEngine] = []

    def make(*entries: dict[str, Any]) -> CredentialEngine:
        engine = CredentialEngine(
            config_of(*entries),
            registry=ProviderRegistry(entry_points=False),
            prometheus_registry=CollectorRegistry(),
        )
        engines.append(engine)
        return engine

    yield make
    for engine in engines:
        engine.close()


def profile_for(spoke: SpokeServer, *, server: str | None = None, ca: bool = True, **cluster: Any) -> dict[str, Any]:
    """A ClusterProfile reaching ``spoke`` through provider ``fleet``; ``cluster`` adds kebab-case
    cluster fields (pass them as ``**{"tls-server-name": ...}``)."""
    return cluster_profile(
        "spoke-1",
        access_provider(PROVIDER, server or spoke.url, ca_pem=spoke.ca_pem if ca else None, **cluster),
    )


def runs(count_file: Path) -> int:
    return len(count_file.read_text().splitlines()) if count_file.exists() else 0


def names(namespace_list: Any) -> list[str]:
    return [item.metadata.name for item in namespace_list.items]


def token_plugin(count_file: Path, *args: str, **kwargs: Any) -> dict[str, Any]:
    return exec_entry(PROVIDER, "--count-file", str(count_file), *args, **kwargs)


def write_cert(tmp_path: Path, cert: ClientCert) -> tuple[Path, Path]:
    """(Re)write the files the certificate plugin answers from."""
    crt, key = tmp_path / "plugin-client.crt", tmp_path / "plugin-client.key"
    crt.write_text(cert.cert_pem)
    key.write_text(cert.key_pem)
    return crt, key


def cert_plugin(tmp_path: Path, cert: ClientCert, count_file: Path) -> dict[str, Any]:
    crt, key = write_cert(tmp_path, cert)
    return exec_entry(PROVIDER, "--no-token", "--cert", str(crt), "--key", str(key), "--count-file", str(count_file))


def force_refresh(engine: CredentialEngine, profile: dict[str, Any]) -> None:
    """What a 401 elsewhere in the process would do: drop the cached credential."""
    assert engine.invalidate(engine.resolve(profile), engine.get_credential(profile))


def assert_private_cert_files(conf: Any) -> Path:
    """The configuration's certificate (and key) files: in a 0700 directory, each file 0600."""
    assert conf.cert_file
    directory = Path(conf.cert_file).parent
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    if conf.key_file:
        assert Path(conf.key_file).parent == directory
    files = list(directory.iterdir())
    assert files, "no certificate file written"
    for path in files:
        assert not path.name.endswith(".tmp"), "a half-written file was left behind"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    return directory


class ConnectProxy:
    """A minimal HTTP CONNECT proxy on 127.0.0.1 (OS-assigned port), recording its targets."""

    def __init__(self) -> None:
        self.targets: list[str] = []
        proxy = self

        class Tunnel(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = self.request.recv(4096)
                    if not chunk:
                        return
                    head += chunk
                request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
                method, target, _ = request_line.split(" ", 2)
                proxy.targets.append(target)
                if method != "CONNECT":
                    self.request.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                    return
                host, _, port = target.rpartition(":")
                with socket.create_connection((host, int(port))) as upstream:
                    self.request.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    peers = {self.request: upstream, upstream: self.request}
                    while True:
                        readable, _, _ = select.select(list(peers), [], [])
                        for sock in readable:
                            data = sock.recv(65536)
                            if not data:
                                return
                            peers[sock].sendall(data)

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Tunnel)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02})

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


# -- bearer tokens (sync) ------------------------------------------------------------------------


def test_api_client_lists_namespaces_with_the_plugins_token(make_engine, spoke: SpokeServer, tmp_path: Path) -> None:
    count = tmp_path / "runs"
    engine = make_engine(token_plugin(count, "--token", "spoke-token"))
    with engine.api_client(profile_for(spoke)) as api:
        assert names(kclient.CoreV1Api(api).list_namespace()) == NAMESPACES
        assert names(kclient.CoreV1Api(api).list_namespace()) == NAMESPACES
        conf = api.configuration
        # In memory for the REST client; as a private file for kubernetes.stream's websockets.
        assert "BEGIN CERTIFICATE" in conf.ca_cert_data
        ca_file = Path(conf.ssl_ca_cert)
        assert ca_file.read_text() == conf.ca_cert_data and stat.S_IMODE(ca_file.stat().st_mode) == 0o600
    assert not ca_file.exists()  # removed on close
    assert [(r.auth, r.token, r.status) for r in spoke.requests] == [("token", "spoke-token", 200)] * 2
    assert runs(count) == 1  # the second request was a cache hit


def test_build_config_works_with_a_plain_api_client(make_engine, spoke: SpokeServer, tmp_path: Path) -> None:
    count = tmp_path / "runs"
    engine = make_engine(token_plugin(count, "--token", "spoke-token"))
    conf = engine.build_config(profile_for(spoke))
    with kclient.ApiClient(conf) as api:
        assert names(kclient.CoreV1Api(api).list_namespace()) == NAMESPACES
    assert [(r.auth, r.token) for r in spoke.requests] == [("token", "spoke-token")]
    assert runs(count) == 1


@pytest.mark.parametrize("plain", [False, True], ids=["api_client", "build_config"])
def test_token_hook_runs_on_every_request(make_engine, spoke: SpokeServer, tmp_path: Path, plain: bool) -> None:
    """A token the engine rotated between two requests is sent on the second one, by the same
    client: the refresh hook runs per request (with a plain ApiClient too)."""
    count = tmp_path / "runs"
    spoke.accept_token("t-1")
    spoke.accept_token("t-2")
    engine = make_engine(token_plugin(count, "--token", "t", "--token-per-run"))
    profile = profile_for(spoke)
    api = kclient.ApiClient(engine.build_config(profile)) if plain else engine.api_client(profile)
    with api:
        v1 = kclient.CoreV1Api(api)
        v1.list_namespace()
        force_refresh(engine, profile)
        v1.list_namespace()
    assert [(r.token, r.status) for r in spoke.requests] == [("t-1", 200), ("t-2", 200)]
    assert runs(count) == 2


# -- 401: refresh once, retry once ---------------------------------------------------------------


def test_401_refreshes_the_token_once_and_retries(make_engine, spoke: SpokeServer, tmp_path: Path) -> None:
    count = tmp_path / "runs"
    spoke.accept_token("t-2")  # the plugin's first token ("t-1") is already revoked
    engine = make_engine(token_plugin(count, "--token", "t", "--token-per-run"))
    with engine.api_client(profile_for(spoke)) as api:
        v1 = kclient.CoreV1Api(api)
        assert names(v1.list_namespace()) == NAMESPACES
        assert [(r.token, r.status) for r in spoke.requests] == [("t-1", 401), ("t-2", 200)]
        assert runs(count) == 2
        v1.list_namespace()  # the refreshed token is the cached one now
    assert [(r.token, r.status) for r in spoke.requests][2:] == [("t-2", 200)]
    assert runs(count) == 2


def test_401_with_the_fresh_token_too_surfaces_without_looping(make_engine, spoke: SpokeServer, tmp_path: Path) -> None:
    count = tmp_path / "runs"
    engine = make_engine(token_plugin(count, "--token", "t", "--token-per-run"))
    with engine.api_client(profile_for(spoke)) as api, pytest.raises(kclient.ApiException) as caught:
        kclient.CoreV1Api(api).list_namespace()
    assert caught.value.status == 401
    assert [(r.auth, r.token, r.status) for r in spoke.requests] == [("rejected", "t-1", 401), ("rejected", "t-2", 401)]
    assert runs(count) == 2


def test_401_then_a_failing_refresh_raises_a_credential_error(make_engine, spoke: SpokeServer, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("revoked-token")
    engine = make_engine({"name": PROVIDER, "type": "file", "options": {"tokenFile": str(token_file)}})
    with engine.api_client(profile_for(spoke)) as api:
        token_file.unlink()  # the refresh after the 401 cannot read a token
        with pytest.raises(CredentialError):
            kclient.CoreV1Api(api).list_namespace()
    # One rejected request, and no retry without a credential.
    assert [(r.auth, r.token) for r in spoke.requests] == [("rejected", "revoked-token")]


# -- client certificates (sync) ------------------------------------------------------------------


def test_client_certificate_from_private_files_removed_on_close(
    make_engine, spoke: SpokeServer, pki: PKI, tmp_path: Path
) -> None:
    count = tmp_path / "runs"
    spoke.accept_client_cn("fleet-a")
    engine = make_engine(cert_plugin(tmp_path, pki.issue_client_cert("fleet-a"), count))
    api = engine.api_client(profile_for(spoke))
    with api:
        assert names(kclient.CoreV1Api(api).list_namespace()) == NAMESPACES
        directory = assert_private_cert_files(api.configuration)
    assert [(r.auth, r.client_cn, r.token) for r in spoke.requests] == [("client-cert", "fleet-a", None)]
    assert not directory.exists()
    assert runs(count) == 1


def test_certificate_rotation_reaches_new_connections(make_engine, spoke: SpokeServer, pki: PKI, tmp_path: Path) -> None:
    count = tmp_path / "runs"
    spoke.accept_client_cn("fleet-a")
    engine = make_engine(cert_plugin(tmp_path, pki.issue_client_cert("fleet-a"), count))
    profile = profile_for(spoke)
    with engine.api_client(profile) as api:
        v1 = kclient.CoreV1Api(api)
        v1.list_namespace()
        first_file = api.configuration.cert_file
        connections = spoke.connections
        # The issuer rotates: the plugin now answers fleet-b, and fleet-a is no longer accepted.
        write_cert(tmp_path, pki.issue_client_cert("fleet-b"))
        spoke.accept_client_cn("fleet-b")
        spoke.revoke_client_cn("fleet-a")
        force_refresh(engine, profile)
        v1.list_namespace()
        assert spoke.connections > connections  # the keep-alive connection with fleet-a was dropped
        assert api.configuration.cert_file == first_file  # replaced in place, atomically
        assert_private_cert_files(api.configuration)
    assert [(r.client_cn, r.status) for r in spoke.requests] == [("fleet-a", 200), ("fleet-b", 200)]
    assert runs(count) == 2


# -- endpoint and TLS ----------------------------------------------------------------------------


def test_tls_server_name_is_the_name_verified(make_engine, spoke: SpokeServer, tmp_path: Path) -> None:
    engine = make_engine(token_plugin(tmp_path / "runs", "--token", "spoke-token"))
    with engine.api_client(profile_for(spoke, **{"tls-server-name": "spoke.test"})) as api:
        assert names(kclient.CoreV1Api(api).list_namespace()) == NAMESPACES
        assert api.configuration.tls_server_name == "spoke.test"
    # The name really is used: one the server certificate does not cover fails the handshake.
    with engine.api_client(profile_for(spoke, **{"tls-server-name": "other.test"})) as api:
        api.configuration.retries = 0
        api.rest_client = kclient.rest.RESTClientObject(api.configuration)
        with pytest.raises(Exception, match="(?i)certificate|hostname|ssl"):
            kclient.CoreV1Api(api).list_namespace()
    assert len(spoke.requests) == 1


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_insecure_skip_tls_verify_without_a_ca(make_engine, spoke: SpokeServer, tmp_path: Path) -> None:
    engine = make_engine(token_plugin(tmp_path / "runs", "--token", "spoke-token"))
    with engine.api_client(profile_for(spoke, ca=False, **{"insecure-skip-tls-verify": True})) as api:
        assert names(kclient.CoreV1Api(api).list_namespace()) == NAMESPACES
    # Without the flag, and without the CA, verification is on and fails.
    with engine.api_client(profile_for(spoke, ca=False)) as api:
        api.configuration.retries = 0
        api.rest_client = kclient.rest.RESTClientObject(api.configuration)
        with pytest.raises(Exception, match="(?i)certificate|ssl"):
            kclient.CoreV1Api(api).list_namespace()
    assert len(spoke.requests) == 1


def test_proxy_url_of_the_profile_is_used(make_engine, spoke: SpokeServer, tmp_path: Path) -> None:
    engine = make_engine(token_plugin(tmp_path / "runs", "--token", "spoke-token"))
    with ConnectProxy() as proxy, engine.api_client(profile_for(spoke, **{"proxy-url": proxy.url})) as api:
        assert names(kclient.CoreV1Api(api).list_namespace()) == NAMESPACES
    assert proxy.targets == [f"127.0.0.1:{spoke.port}"]
    assert [r.auth for r in spoke.requests] == ["token"]


def test_environment_proxy_applies_when_the_profile_names_none(
    make_engine, spoke: SpokeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = make_engine(token_plugin(tmp_path / "runs", "--token", "spoke-token"))
    profile = profile_for(spoke)
    with ConnectProxy() as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        with engine.api_client(profile) as api:
            kclient.CoreV1Api(api).list_namespace()
        assert proxy.targets == [f"127.0.0.1:{spoke.port}"]
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        with engine.api_client(profile) as api:
            kclient.CoreV1Api(api).list_namespace()
        assert proxy.targets == [f"127.0.0.1:{spoke.port}"]  # bypassed
    assert [r.status for r in spoke.requests] == [200, 200]


# -- failing providers: an error, never an anonymous request, never a hot loop --------------------

BROKEN_PLUGINS = [
    pytest.param(("--exit-code", "1", "--stderr", "boom"), PluginExecutionError, id="exit-1"),
    pytest.param(("--hang",), PluginTimeout, id="hang"),
    pytest.param(("--raw", "{not an ExecCredential"), PluginOutputError, id="garbage"),
]


@pytest.mark.parametrize(("plugin_args", "error"), BROKEN_PLUGINS)
def test_broken_plugin_raises_and_sends_nothing(
    make_engine, spoke: SpokeServer, tmp_path: Path, plugin_args: tuple[str, ...], error: type[Exception]
) -> None:
    count = tmp_path / "runs"
    engine = make_engine(token_plugin(count, *plugin_args, timeout="1s"))
    profile = profile_for(spoke)
    started = time.monotonic()
    with pytest.raises(error) as caught:
        engine.api_client(profile)
    assert isinstance(caught.value, CredentialError)
    assert time.monotonic() - started < 5  # bounded by the provider timeout, not by the plugin
    # Backing off: the next call fails at once with the same error, without running the plugin.
    started = time.monotonic()
    with pytest.raises(error):
        engine.api_client(profile)
    assert time.monotonic() - started < 0.5
    assert runs(count) == 1
    assert spoke.requests == [] and spoke.connections == 0


def test_plugin_breaking_later_fails_the_call_not_the_request(
    make_engine, spoke: SpokeServer, pki: PKI, tmp_path: Path
) -> None:
    """A client made while the plugin worked: when its refresh answers garbage, list_namespace
    raises the CredentialError and the spoke sees nothing (no request without a certificate)."""
    count = tmp_path / "runs"
    spoke.accept_client_cn("fleet-a")
    engine = make_engine(cert_plugin(tmp_path, pki.issue_client_cert("fleet-a"), count))
    profile = profile_for(spoke)
    with engine.api_client(profile) as api:
        v1 = kclient.CoreV1Api(api)
        v1.list_namespace()
        (tmp_path / "plugin-client.crt").write_text("not a certificate")
        force_refresh(engine, profile)
        with pytest.raises(PluginOutputError):
            v1.list_namespace()
        with pytest.raises(PluginOutputError):
            v1.list_namespace()  # backing off: not run again
    assert [(r.client_cn, r.status) for r in spoke.requests] == [("fleet-a", 200)]
    assert runs(count) == 2


# -- in-process providers ------------------------------------------------------------------------


def test_file_provider_goes_through_the_same_path(make_engine, spoke: SpokeServer, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("spoke-token\n")
    engine = make_engine({"name": PROVIDER, "type": "file", "options": {"tokenFile": str(token_file)}})
    with engine.api_client(profile_for(spoke)) as api:
        assert names(kclient.CoreV1Api(api).list_namespace()) == NAMESPACES
    assert [(r.auth, r.token) for r in spoke.requests] == [("token", "spoke-token")]


def test_file_provider_failure_is_a_credential_error_and_sends_nothing(
    make_engine, spoke: SpokeServer, tmp_path: Path
) -> None:
    engine = make_engine({"name": PROVIDER, "type": "file", "options": {"tokenFile": str(tmp_path / "missing")}})
    with pytest.raises(ProviderError):
        engine.api_client(profile_for(spoke))
    assert spoke.requests == []


# -- certificate directories at exit -------------------------------------------------------------


def test_certificate_directory_is_removed_at_exit_without_close(spoke: SpokeServer, pki: PKI, tmp_path: Path) -> None:
    spoke.accept_client_cn("fleet-a")
    crt, key = write_cert(tmp_path, pki.issue_client_cert("fleet-a"))
    script = textwrap.dedent(
        f"""
        import sys
        from kubernetes import client
        from prometheus_client import CollectorRegistry
        from cpcreds import CredentialEngine, ProviderRegistry
        from tests.fakes.builders import access_provider, cluster_profile, config_of, exec_entry

        config = config_of(exec_entry({PROVIDER!r}, "--no-token", "--cert", {str(crt)!r}, "--key", {str(key)!r}))
        engine = CredentialEngine(config, registry=ProviderRegistry(entry_points=False),
                                  prometheus_registry=CollectorRegistry())
        profile = cluster_profile("spoke-1", access_provider({PROVIDER!r}, {spoke.url!r}, ca_pem={spoke.ca_pem!r}))
        api = engine.api_client(profile)
        client.CoreV1Api(api).list_namespace()
        print(api.configuration.cert_file, flush=True)
        # exits without closing the client or the engine
        """
    )
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    cert_file = Path(done.stdout.strip())
    assert cert_file.is_absolute() and not cert_file.parent.exists()
    assert [r.client_cn for r in spoke.requests] == ["fleet-a"]


# -- kubernetes.aio ------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_aio_token_401_retry_and_close(make_engine, spoke: SpokeServer, tmp_path: Path) -> None:
    count = tmp_path / "runs"
    spoke.accept_token("t-2")
    engine = make_engine(token_plugin(count, "--token", "t", "--token-per-run"))
    api = await engine.aapi_client(profile_for(spoke))
    try:
        v1 = aclient.CoreV1Api(api)
        assert names(await v1.list_namespace()) == NAMESPACES
        assert [(r.token, r.status) for r in spoke.requests] == [("t-1", 401), ("t-2", 200)]
        assert runs(count) == 2
        await v1.list_namespace()
        assert [(r.token, r.status) for r in spoke.requests][2:] == [("t-2", 200)]
        assert runs(count) == 2
    finally:
        await api.close()
    session = api.rest_client.pool_manager
    assert session is None or session.closed


@pytest.mark.asyncio
async def test_aio_hook_runs_on_every_request(make_engine, spoke: SpokeServer, tmp_path: Path) -> None:
    count = tmp_path / "runs"
    spoke.accept_token("t-1")
    spoke.accept_token("t-2")
    engine = make_engine(token_plugin(count, "--token", "t", "--token-per-run"))
    profile = profile_for(spoke)
    async with aclient.ApiClient(await engine.abuild_config(profile)) as api:
        v1 = aclient.CoreV1Api(api)
        await v1.list_namespace()
        force_refresh(engine, profile)
        await v1.list_namespace()
    assert [(r.token, r.status) for r in spoke.requests] == [("t-1", 200), ("t-2", 200)]
    assert runs(count) == 2


@pytest.mark.asyncio
async def test_aio_401_with_the_fresh_token_too_surfaces(make_engine, spoke: SpokeServer, tmp_path: Path) -> None:
    count = tmp_path / "runs"
    engine = make_engine(token_plugin(count, "--token", "t", "--token-per-run"))
    api = await engine.aapi_client(profile_for(spoke))
    try:
        with pytest.raises(aclient.ApiException) as caught:
            await aclient.CoreV1Api(api).list_namespace()
    finally:
        await api.close()
    assert caught.value.status == 401
    assert [(r.token, r.status) for r in spoke.requests] == [("t-1", 401), ("t-2", 401)]
    assert runs(count) == 2


@pytest.mark.asyncio
async def test_aio_client_certificate_rotation_and_close(make_engine, spoke: SpokeServer, pki: PKI, tmp_path: Path) -> None:
    count = tmp_path / "runs"
    spoke.accept_client_cn("fleet-a")
    engine = make_engine(cert_plugin(tmp_path, pki.issue_client_cert("fleet-a"), count))
    profile = profile_for(spoke)
    api = await engine.aapi_client(profile)
    try:
        v1 = aclient.CoreV1Api(api)
        assert names(await v1.list_namespace()) == NAMESPACES
        directory = assert_private_cert_files(api.configuration)
        connections = spoke.connections
        write_cert(tmp_path, pki.issue_client_cert("fleet-b"))
        spoke.accept_client_cn("fleet-b")
        spoke.revoke_client_cn("fleet-a")
        force_refresh(engine, profile)
        await v1.list_namespace()
        assert spoke.connections > connections
        assert_private_cert_files(api.configuration)
    finally:
        await api.close()
    assert [(r.auth, r.client_cn, r.status) for r in spoke.requests] == [
        ("client-cert", "fleet-a", 200),
        ("client-cert", "fleet-b", 200),
    ]
    assert runs(count) == 2
    assert not directory.exists()


@pytest.mark.asyncio
async def test_aio_tls_server_name_and_proxy_url(make_engine, spoke: SpokeServer, tmp_path: Path) -> None:
    engine = make_engine(token_plugin(tmp_path / "runs", "--token", "spoke-token"))
    api = await engine.aapi_client(profile_for(spoke, **{"tls-server-name": "spoke.test"}))
    try:
        assert names(await aclient.CoreV1Api(api).list_namespace()) == NAMESPACES
    finally:
        await api.close()
    with ConnectProxy() as proxy:
        api = await engine.aapi_client(profile_for(spoke, **{"proxy-url": proxy.url}))
        try:
            assert names(await aclient.CoreV1Api(api).list_namespace()) == NAMESPACES
        finally:
            await api.close()
    assert proxy.targets == [f"127.0.0.1:{spoke.port}"]
    assert [r.status for r in spoke.requests] == [200, 200]


@pytest.mark.asyncio
async def test_aio_insecure_skip_tls_verify_without_a_ca(make_engine, spoke: SpokeServer, tmp_path: Path) -> None:
    engine = make_engine(token_plugin(tmp_path / "runs", "--token", "spoke-token"))
    api = await engine.aapi_client(profile_for(spoke, ca=False, **{"insecure-skip-tls-verify": True}))
    try:
        assert names(await aclient.CoreV1Api(api).list_namespace()) == NAMESPACES
    finally:
        await api.close()


@pytest.mark.asyncio
@pytest.mark.parametrize(("plugin_args", "error"), BROKEN_PLUGINS)
async def test_aio_broken_plugin_raises_and_sends_nothing(
    make_engine, spoke: SpokeServer, tmp_path: Path, plugin_args: tuple[str, ...], error: type[Exception]
) -> None:
    count = tmp_path / "runs"
    engine = make_engine(token_plugin(count, *plugin_args, timeout="1s"))
    profile = profile_for(spoke)
    with pytest.raises(error):
        await engine.aapi_client(profile)
    started = time.monotonic()
    with pytest.raises(error):
        await engine.aapi_client(profile)
    assert time.monotonic() - started < 0.5
    assert runs(count) == 1
    assert spoke.requests == [] and spoke.connections == 0


def test_clients_dropped_without_close_are_not_kept_alive_by_the_engine(spoke: Any, tmp_path: Path) -> None:
    import gc
    import weakref as _weakref

    engine = CredentialEngine(
        config_of(exec_entry("fake", "--token", "spoke-token")), prometheus_registry=CollectorRegistry()
    )
    try:
        profile = cluster_profile("spoke-1", access_provider("fake", spoke.url, ca_pem=spoke.ca_pem))
        conf = engine.build_config(profile)
        binding = _weakref.ref(conf.cpcreds_binding)
        del conf
        gc.collect()
        assert binding() is None
    finally:
        engine.close()


# -- configurations copied, made the default, used by kubernetes.stream, forked ------------------


def test_deepcopy_of_a_built_config_stays_fresh(make_engine, spoke: SpokeServer, tmp_path: Path) -> None:
    import copy

    count = tmp_path / "runs"
    engine = make_engine(token_plugin(count, "--token-per-run", "--token", "tok"))
    profile = profile_for(spoke)
    spoke.accept_token("tok-1")
    copied = copy.deepcopy(engine.build_config(profile))
    with kclient.ApiClient(copied) as api:
        kclient.CoreV1Api(api).list_namespace()
        spoke.accept_token("tok-2")
        force_refresh(engine, profile)
        kclient.CoreV1Api(api).list_namespace()  # the copy's hook refreshed the copy itself
    assert [(r.token, r.status) for r in spoke.requests] == [("tok-1", 200), ("tok-2", 200)]


def test_set_default_configuration_serves_plain_api_clients(make_engine, spoke: SpokeServer, tmp_path: Path) -> None:
    engine = make_engine(token_plugin(tmp_path / "runs", "--token", "spoke-token"))
    kclient.Configuration.set_default(engine.build_config(profile_for(spoke)))
    try:
        with kclient.ApiClient() as api:  # takes a deep copy of the default
            assert names(kclient.CoreV1Api(api).list_namespace()) == NAMESPACES
    finally:
        kclient.Configuration.set_default(None)
    assert [(r.auth, r.token) for r in spoke.requests] == [("token", "spoke-token")]


def test_stream_verifies_the_profiles_private_ca(make_engine, spoke: SpokeServer, tmp_path: Path) -> None:
    from kubernetes.client.rest import ApiException
    from kubernetes.stream import stream

    engine = make_engine(token_plugin(tmp_path / "runs", "--token", "spoke-token"))
    with engine.api_client(profile_for(spoke)) as api:
        # The spoke speaks no websocket, so the exec cannot succeed; what matters is that TLS
        # verified the profile's CA and the upgrade request reached the spoke with our token.
        with pytest.raises(ApiException) as failure:
            stream(kclient.CoreV1Api(api).connect_get_namespaced_pod_exec, "pod", "default", command=["true"],
                   stderr=True, stdin=False, stdout=True, tty=False)
    assert "CERTIFICATE_VERIFY_FAILED" not in str(failure.value)
    assert [(r.path, r.token) for r in spoke.requests] == [("/api/v1/namespaces/default/pods/pod/exec", "spoke-token")]


def test_forked_child_exiting_keeps_the_parents_certificate_files(make_engine, spoke: SpokeServer, pki: PKI, tmp_path: Path) -> None:
    import os

    spoke.accept_client_cn("fleet-a")
    engine = make_engine(cert_plugin(tmp_path, pki.issue_client_cert("fleet-a"), tmp_path / "runs"))
    with engine.api_client(profile_for(spoke)) as api:
        kclient.CoreV1Api(api).list_namespace()
        cert_file = Path(api.configuration.cert_file)
        pid = os.fork()
        if pid == 0:  # the child exits as a Python program does: exit handlers and finalizers run
            import atexit

            try:
                atexit._run_exitfuncs()
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert cert_file.exists()
        kclient.CoreV1Api(api).list_namespace()  # and still usable
    assert not cert_file.exists()


def test_remove_certificate_files_is_the_hook_for_a_signal_handler(spoke: SpokeServer, pki: PKI, tmp_path: Path) -> None:
    spoke.accept_client_cn("fleet-a")
    crt, key = write_cert(tmp_path, pki.issue_client_cert("fleet-a"))
    script = textwrap.dedent(
        f"""
        import os, signal, sys, time
        from kubernetes import client
        from prometheus_client import CollectorRegistry
        import cpcreds
        from tests.fakes.builders import access_provider, cluster_profile, config_of, exec_entry

        def on_term(signum, frame):
            cpcreds.remove_certificate_files()
            os._exit(143)  # as a service that must stop now would

        signal.signal(signal.SIGTERM, on_term)
        engine = cpcreds.CredentialEngine(
            config_of(exec_entry({PROVIDER!r}, "--no-token", "--cert", {str(crt)!r}, "--key", {str(key)!r})),
            registry=cpcreds.ProviderRegistry(entry_points=False), prometheus_registry=CollectorRegistry())
        api = engine.api_client(cluster_profile("spoke-1", access_provider({PROVIDER!r}, {spoke.url!r}, ca_pem={spoke.ca_pem!r})))
        client.CoreV1Api(api).list_namespace()
        print(api.configuration.cert_file, flush=True)
        # Idle as a service does. Not signal.pause(): a SIGTERM that lands after the check for
        # pending handlers and before pause() starts is consumed, and pause() then waits forever.
        while True:
            time.sleep(1)
        """
    )
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    cert_file = Path(proc.stdout.readline().strip())
    assert cert_file.exists()
    proc.terminate()
    assert proc.wait(10) == 143
    assert not cert_file.parent.exists()


def test_a_termination_handler_landing_while_a_certificate_folder_is_recorded_removes_it(pki: PKI, tmp_path: Path) -> None:
    # The handler of the test above runs in the main thread between two bytecodes: here, while
    # that thread holds the lock remove_certificate_files needs, recording the folder it has just
    # made for a client's certificate.
    crt, key = write_cert(tmp_path, pki.issue_client_cert("fleet-a"))
    script = textwrap.dedent(
        f"""
        import os, signal
        from prometheus_client import CollectorRegistry
        import cpcreds
        from tests.fakes.builders import access_provider, cluster_profile, config_of, exec_entry
        from tests.fakes.processes import at_lock_release

        def on_term(signum, frame):
            cpcreds.remove_certificate_files()
            os._exit(143)

        def land(frame):
            print(frame.f_locals["self"].private_dir(), flush=True)
            signal.getsignal(signal.SIGTERM)(signal.SIGTERM, frame)

        signal.signal(signal.SIGTERM, on_term)
        engine = cpcreds.CredentialEngine(
            config_of(exec_entry({PROVIDER!r}, "--no-token", "--cert", {str(crt)!r}, "--key", {str(key)!r})),
            registry=cpcreds.ProviderRegistry(entry_points=False), prometheus_registry=CollectorRegistry())
        at_lock_release("private_dir", land)
        engine.api_client(cluster_profile("spoke-1", access_provider({PROVIDER!r}, "https://127.0.0.1:1")))  # writes the certificate
        print("not stopped", flush=True)
        """
    )
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=60)
    assert done.returncode == 143, done.stderr[-2000:]
    folder = Path(done.stdout.split()[0])
    assert folder.name.startswith("cpcreds-cert-") and not folder.exists()


def test_exec_metric_code_is_zero_only_for_a_successful_call(spoke: SpokeServer, tmp_path: Path) -> None:
    metrics = CollectorRegistry()
    config = config_of(exec_entry("good"), exec_entry("garbled", "--raw", "not a credential"))
    with CredentialEngine(config, registry=ProviderRegistry(entry_points=False), prometheus_registry=metrics) as engine:
        engine.get_credential(cluster_profile("a", access_provider("good")))
        with pytest.raises(PluginOutputError):
            engine.get_credential(cluster_profile("b", access_provider("garbled")))
    assert metrics.get_sample_value("rest_client_exec_plugin_call_total", {"code": "0", "call_status": "no_error"}) == 1
    assert metrics.get_sample_value("rest_client_exec_plugin_call_total", {"code": "1", "call_status": "plugin_execution_error"}) == 1
    assert metrics.get_sample_value("rest_client_exec_plugin_call_total", {"code": "0", "call_status": "plugin_execution_error"}) is None
