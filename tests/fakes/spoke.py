"""A fake spoke kube-apiserver: real HTTPS, real authentication, canned API objects.

Good enough for the official ``kubernetes`` client (urllib3) and ``kubernetes.aio``
(aiohttp) to talk to it unmodified, so tests exercise real TLS, real headers and
real keep-alive connection pools rather than mocks.

Authentication follows kube-apiserver's union authenticator: a client
certificate is tried first, then a bearer token; the first that succeeds wins.
Anonymous access is off (as with ``--anonymous-auth=false``), so requests
without valid credentials get the API server's 401 ``Status``.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from cryptography import x509
from cryptography.x509.oid import NameOID

from .apiserver import UNAUTHORIZED_STATUS, FakeAPIServer, JSONHandler, bearer_token, status_body
from .pki import PKI

AuthKind = Literal["token", "client-cert", "anonymous", "rejected"]

DEFAULT_NAMESPACES: tuple[str, ...] = ("default", "kube-system", "kube-public", "kube-node-lease")

VERSION_INFO: dict[str, str] = {
    "major": "1",
    "minor": "33",
    "gitVersion": "v1.33.1",
    "gitCommit": "8adc0f041b8e7ad1d30e29cc59c6ae7a15e19828",
    "gitTreeState": "clean",
    "buildDate": "2025-05-15T08:19:08Z",
    "goVersion": "go1.24.2",
    "compiler": "gc",
    "platform": "linux/amd64",
}

__all__ = ["SpokeServer", "SeenRequest", "AuthKind", "DEFAULT_NAMESPACES", "VERSION_INFO", "UNAUTHORIZED_STATUS"]

_NAMESPACE_PATH = re.compile(r"/api/v1/namespaces/([^/]+)")


@dataclass(frozen=True)
class SeenRequest:
    """One HTTP request as the spoke saw it.

    ``token`` is the bearer token presented and ``client_cn`` the CN of the
    client certificate presented, whether or not they were accepted. ``auth``
    says which one authenticated the request: "anonymous" means no credentials
    were presented at all, "rejected" that some were but none was accepted.
    ``path`` excludes the query string.
    """

    method: str
    path: str
    auth: AuthKind
    token: str | None
    client_cn: str | None
    status: int


@dataclass(frozen=True)
class _PeerCert:
    common_name: str | None
    not_before: datetime
    not_after: datetime

    def valid_now(self) -> bool:
        # Checked per request, not per connection, like kube-apiserver: a
        # certificate can expire while its keep-alive connection is open.
        return self.not_before <= datetime.now(UTC) <= self.not_after


class SpokeServer(FakeAPIServer):
    """An HTTPS fake kube-apiserver on 127.0.0.1 with an OS-assigned port.

    One-shot: ``start()`` once, ``stop()`` (idempotent) when done, or use it as
    a context manager. All methods are safe to call from any thread.
    """

    label = "SpokeServer"

    def __init__(
        self,
        pki: PKI | None = None,
        *,
        tokens: Iterable[str] = (),
        client_cns: Iterable[str] = (),
        namespaces: Iterable[str] = DEFAULT_NAMESPACES,
        require_client_cert: bool = False,
    ) -> None:
        super().__init__(pki, require_client_cert=require_client_cert)
        self._namespaces = tuple(namespaces)
        self._tokens = set(tokens)
        self._client_cns = set(client_cns)
        self._requests: list[SeenRequest] = []
        self._verifiers: list[Callable[[str], bool]] = []

    # -- what is accepted --------------------------------------------------

    def accept_token(self, token: str) -> None:
        with self._lock:
            self._tokens.add(token)

    def revoke_token(self, token: str) -> None:
        with self._lock:
            self._tokens.discard(token)

    def verify_tokens_with(self, verifier: Callable[[str], bool]) -> None:
        """Also accept a bearer token ``verifier`` says yes to, as a webhook or OIDC
        authenticator does (a cloud fake's check that it issued the token, e.g.
        ``FakeEntra.verify``). Called outside the server's lock."""
        with self._lock:
            self._verifiers.append(verifier)

    def accept_client_cn(self, common_name: str) -> None:
        with self._lock:
            self._client_cns.add(common_name)

    def revoke_client_cn(self, common_name: str) -> None:
        with self._lock:
            self._client_cns.discard(common_name)

    # -- what was seen -----------------------------------------------------

    @property
    def requests(self) -> list[SeenRequest]:
        with self._lock:
            return list(self._requests)

    def clear_requests(self) -> None:
        with self._lock:
            self._requests.clear()

    # -- used by the request handler ---------------------------------------

    def _authenticate(
        self, authorization: str | None, token: str | None, cert: _PeerCert | None
    ) -> AuthKind:
        # Same order as kube-apiserver's union authenticator: x509, then token.
        with self._lock:
            if cert is not None and cert.common_name in self._client_cns and cert.valid_now():
                return "client-cert"
            if token is not None and token in self._tokens:
                return "token"
            verifiers = list(self._verifiers)
        if token is not None and any(verify(token) for verify in verifiers):
            return "token"
        if authorization is None and cert is None:
            return "anonymous"
        return "rejected"

    def _record(self, seen: SeenRequest) -> None:
        with self._lock:
            self._requests.append(seen)

    def _namespace(self, name: str) -> dict[str, Any] | None:
        if name not in self._namespaces:
            return None
        return {
            "kind": "Namespace",
            "apiVersion": "v1",
            "metadata": {
                "name": name,
                # Stable across runs and servers, so tests may compare them.
                "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"spoke.test/namespaces/{name}")),
                "resourceVersion": str(10 + self._namespaces.index(name)),
                "creationTimestamp": "2025-01-01T00:00:00Z",
                "labels": {"kubernetes.io/metadata.name": name},
            },
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        }

    def _respond(self, method: str, path: str) -> tuple[int, dict[str, Any]]:
        """Route an authenticated request."""
        # The generated client asks for "/version/" and "/api/"; kube-apiserver
        # serves those with or without the trailing slash.
        path = path.rstrip("/") or "/"
        if method == "GET":
            if path == "/version":
                return 200, VERSION_INFO
            if path == "/api":
                return 200, {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": f"127.0.0.1:{self.port}"}
                    ],
                }
            if path == "/apis":  # no API groups: clients fall back to the core group only
                return 200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": []}
            if path == "/api/v1":  # legacy discovery of the core group, as kubectl reads it
                return 200, {
                    "kind": "APIResourceList",
                    "groupVersion": "v1",
                    "resources": [
                        {
                            "name": "namespaces",
                            "singularName": "namespace",
                            "namespaced": False,
                            "kind": "Namespace",
                            "verbs": ["get", "list"],
                            "shortNames": ["ns"],
                        }
                    ],
                }
            if path == "/api/v1/namespaces":
                return 200, {
                    "kind": "NamespaceList",
                    "apiVersion": "v1",
                    "metadata": {"resourceVersion": "100"},
                    "items": [self._namespace(name) for name in self._namespaces],
                }
            if match := _NAMESPACE_PATH.fullmatch(path):
                name = unquote(match.group(1))
                namespace = self._namespace(name)
                if namespace is not None:
                    return 200, namespace
                return 404, _status(
                    404,
                    "NotFound",
                    f'namespaces "{name}" not found',
                    details={"name": name, "kind": "namespaces"},
                )
        return 404, _status(404, "NotFound", "the server could not find the requested resource")


#: kube-apiserver's Status body (kept under this name for scripts/dev-cluster.py).
_status = status_body


class _Handler(JSONHandler):
    def setup(self) -> None:
        super().setup()
        # One handler per connection, so the client certificate is read once.
        der = self.connection.getpeercert(binary_form=True)
        self._peer_cert = _parse_peer_cert(der) if der else None

    def do_GET(self) -> None:
        self._handle()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def _handle(self) -> None:
        self._discard_body()
        spoke = self.server.owner
        assert isinstance(spoke, SpokeServer)
        path = urlsplit(self.path).path
        authorization = self.headers.get("Authorization")
        token = bearer_token(authorization)
        auth = spoke._authenticate(authorization, token, self._peer_cert)
        if auth in ("token", "client-cert"):
            status, body = spoke._respond(self.command, path)
        else:
            status, body = 401, UNAUTHORIZED_STATUS
        # Record before answering: once the client has the response, the test
        # may look at `requests`, and it must already be there.
        spoke._record(
            SeenRequest(
                method=self.command,
                path=path,
                auth=auth,
                token=token,
                client_cn=self._peer_cert.common_name if self._peer_cert else None,
                status=status,
            )
        )
        self._send_json(status, body)


def _parse_peer_cert(der: bytes) -> _PeerCert:
    # The handshake already checked the chain to our CA but not the validity
    # period (see PKI.server_ssl_context); that is left to _authenticate.
    cert = x509.load_der_x509_certificate(der)
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return _PeerCert(
        common_name=str(names[0].value) if names else None,
        not_before=cert.not_valid_before_utc,
        not_after=cert.not_valid_after_utc,
    )


SpokeServer.handler_class = _Handler
