"""A fake container registry: the Docker Registry HTTP API V2 base endpoint, over HTTPS, with basic auth.

Only what a credential check needs: ``GET /v2/`` (and ``HEAD``) answers as a registry with
basic authentication does (distribution's ``htpasswd`` access controller):

- without an ``Authorization`` header, or with wrong credentials: ``401``, a
  ``WWW-Authenticate: Basic realm="<realm>"`` header, ``Docker-Distribution-API-Version:
  registry/2.0``, and the registry's error body (``{"errors":[{"code":"UNAUTHORIZED",...}]}``);
- with ``Authorization: Basic base64(user:password)`` of an accepted pair: ``200`` and ``{}``.

With :meth:`FakeRegistry.enable_acr_exchange` it is also an Azure Container Registry's token
exchange: ``POST /oauth2/exchange`` (a form with ``grant_type=access_token``, ``service`` = the
registry's host, ``access_token`` an Entra ID token the given verifier accepts, optional
``tenant``) answers ``{"refresh_token": <JWT>}``, and that refresh token is then a password for
the username ``00000000-0000-0000-0000-000000000000``; anything else is ACR's ``400``/``401``.

Any other path is ``404`` with the registry's ``NOT_FOUND`` error body (after the same
authentication). Credentials can change while it runs (:meth:`FakeRegistry.set_users`), to play
a rotated password. Every request is recorded (:attr:`FakeRegistry.requests`) with the username
it presented, never the password. TLS, threading and life cycle are the shared
:class:`~tests.fakes.apiserver.FakeAPIServer`'s: 127.0.0.1, an OS-assigned port, the test PKI.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from urllib.parse import parse_qs
from dataclasses import dataclass
from typing import Any, ClassVar

from .apiserver import FakeAPIServer, JSONHandler
from .pki import PKI

__all__ = ["FakeRegistry", "RegistryRequest", "basic_credentials", "UNAUTHORIZED_BODY", "ACR_USERNAME"]

#: The username ACR takes with a refresh token from ``/oauth2/exchange`` as the password.
ACR_USERNAME = "00000000-0000-0000-0000-000000000000"

#: distribution's body for a 401.
UNAUTHORIZED_BODY: dict[str, Any] = {
    "errors": [{"code": "UNAUTHORIZED", "message": "authentication required", "detail": None}]
}
_NOT_FOUND_BODY: dict[str, Any] = {"errors": [{"code": "NOT_FOUND", "message": "not found", "detail": None}]}


def basic_credentials(authorization: str | None) -> tuple[str, str] | None:
    """``(username, password)`` of an ``Authorization: Basic`` header, as Go's
    ``Request.BasicAuth`` reads it (scheme case-insensitive, standard base64, split at the first
    colon); ``None`` for anything else."""
    if not authorization:
        return None
    scheme, _, encoded = authorization.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    username, colon, password = decoded.partition(":")
    return (username, password) if colon else None


@dataclass(frozen=True)
class RegistryRequest:
    """One request as the registry saw it: method, path, the username presented (``None``
    without basic credentials) and whether it was let in."""

    method: str
    path: str
    username: str | None
    authenticated: bool


class FakeRegistry(FakeAPIServer):
    """A registry's ``/v2/`` endpoint accepting the ``users`` (username -> password) given.

    ``host`` is ``127.0.0.1:<port>``, the registry part of an image reference
    (``f"{registry.host}/team/app:1"``); :attr:`url` is ``https://`` + host. Trust
    :attr:`ca_pem`. ``realm`` is what the ``WWW-Authenticate`` challenge names.
    """

    label: ClassVar[str] = "FakeRegistry"

    def __init__(self, pki: PKI | None = None, *, users: Mapping[str, str] | None = None, realm: str = "fake-registry") -> None:
        super().__init__(pki)
        self.realm = realm
        self._users: dict[str, str] = dict(users or {})
        self._requests: list[RegistryRequest] = []
        self._state = threading.Lock()
        self._exchange_verifier: Callable[[str], bool] | None = None
        self.refresh_token_lifetime = 3 * 3600
        #: Each ``/oauth2/exchange`` form seen, without its access token (``tenant``, ``service``, ...).
        self.exchanges: list[dict[str, str]] = []

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def set_users(self, users: Mapping[str, str]) -> None:
        """Accept exactly these pairs from now on (a rotated password, a revoked user)."""
        with self._state:
            self._users = dict(users)

    def enable_acr_exchange(self, verify_access_token: Callable[[str], bool]) -> None:
        """Answer ``POST /oauth2/exchange`` as ACR does, for access tokens ``verify_access_token`` accepts."""
        with self._state:
            self._exchange_verifier = verify_access_token

    def _exchange(self, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        with self._state:
            verify = self._exchange_verifier
            self.exchanges.append({k: v for k, v in form.items() if k != "access_token"})
        if verify is None:
            return 404, _NOT_FOUND_BODY
        if form.get("grant_type") != "access_token" or form.get("service") != self.host or not form.get("access_token"):
            return 400, {"errors": [{"code": "UNSUPPORTED", "message": "grant_type, service or access_token is wrong"}]}
        if not verify(form["access_token"]):
            return 401, {"errors": [{"code": "UNAUTHORIZED", "message": "the access token is not valid"}]}
        now = int(time.time())
        claims = {"jti": secrets.token_hex(8), "sub": "fake", "aud": self.host, "iat": now, "exp": now + self.refresh_token_lifetime}
        encode = lambda part: base64.urlsafe_b64encode(json.dumps(part).encode()).rstrip(b"=").decode()  # noqa: E731
        token = f"{encode({'alg': 'RS256', 'typ': 'JWT'})}.{encode(claims)}.{secrets.token_urlsafe(32)}"
        with self._state:
            self._users[ACR_USERNAME] = token
        return 200, {"refresh_token": token}

    @property
    def requests(self) -> list[RegistryRequest]:
        """Every request so far, oldest first (a copy)."""
        with self._state:
            return list(self._requests)

    def authenticate(self, authorization: str | None) -> tuple[str | None, bool]:
        """(the username presented, whether the pair is accepted)."""
        presented = basic_credentials(authorization)
        if presented is None:
            return None, False
        username, password = presented
        with self._state:
            expected = self._users.get(username)
        # Constant time, as a real registry's htpasswd check is (bcrypt).
        ok = expected is not None and hmac.compare_digest(expected.encode("utf-8"), password.encode("utf-8"))
        return username, ok

    def _record(self, request: RegistryRequest) -> None:
        with self._state:
            self._requests.append(request)


class _RegistryHandler(JSONHandler):
    server: Any

    def _answer(self, *, body: bool) -> None:
        self._discard_body()
        registry: FakeRegistry = self.server.owner
        path = self.path.split("?", 1)[0]
        username, ok = registry.authenticate(self.headers.get("Authorization"))
        registry._record(RegistryRequest(self.command, path, username, ok))
        if not ok:
            status, document = 401, UNAUTHORIZED_BODY
        elif path in ("/v2/", "/v2"):
            status, document = 200, {}
        else:
            status, document = 404, _NOT_FOUND_BODY
        data = json.dumps(document, separators=(",", ":")).encode() + b"\n"
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Docker-Distribution-API-Version", "registry/2.0")
        if status == 401:
            self.send_header("WWW-Authenticate", f'Basic realm="{registry.realm}"')
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if body:
            self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._answer(body=True)

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer(body=False)

    def do_POST(self) -> None:  # noqa: N802
        registry: FakeRegistry = self.server.owner
        path = self.path.split("?", 1)[0]
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(min(length, 64 * 1024)) if length else b""
        registry._record(RegistryRequest(self.command, path, None, False))
        if path != "/oauth2/exchange":
            self._send_json(404, _NOT_FOUND_BODY)
            return
        form = {key: values[0] for key, values in parse_qs(body.decode("utf-8", "replace")).items()}
        self._send_json(*registry._exchange(form))


FakeRegistry.handler_class = _RegistryHandler
