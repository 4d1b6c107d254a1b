"""A fake Microsoft Entra ID (and Azure managed identity endpoint) on loopback, over HTTPS,
speaking the real protocols as msal and azure-identity use them.

:class:`FakeEntra` is one HTTPS server (the shared :class:`~tests.fakes.apiserver.FakeAPIServer`:
127.0.0.1, an OS-assigned port, the test PKI; trust it with ``REQUESTS_CA_BUNDLE``) holding

- ``GET /{tenant}/v2.0/.well-known/openid-configuration``: the tenant's OpenID configuration,
  which msal reads before its first token request (``token_endpoint`` points back here);
- ``GET /common/discovery/instance``: instance discovery as login.microsoftonline.com answers it
  (msal asks the public cloud's host for an authority it does not know, so a client pointed at
  this fake turns discovery off, as ``kubelogin --disable-instance-discovery`` does);
- ``POST /{tenant}/oauth2/v2.0/token``: the client credentials grant with a client secret, with a
  certificate's client assertion (a JWT signed by the registered certificate's key, RS256 or
  PS256, ``aud`` = this token endpoint, ``iss`` = ``sub`` = the client ID, not expired) or with a
  federated client assertion: a registered token (:meth:`~FakeEntra.add_federated`), or, for a
  federated identity credential (:meth:`~FakeEntra.add_federated_identity`: issuer, subject), a
  service-account token JWT signed (RS256) by the key of the cluster issuer the fake trusts
  (:meth:`~FakeEntra.service_account_token` mints them), ``iss``/``sub`` those of the credential,
  ``aud`` holding ``api://AzureADTokenExchange``, not expired; ``scope`` must be one
  ``<resource>/.default``;
- ``GET /msi/token``: a managed identity endpoint as App Service's (``IDENTITY_ENDPOINT`` = its
  :attr:`~FakeEntra.identity_endpoint`, ``IDENTITY_HEADER`` = :attr:`~FakeEntra.identity_header`,
  sent back as ``X-IDENTITY-HEADER``; ``api-version=2019-08-01``, ``resource``, optional
  ``client_id``/``mi_res_id``);
- ``GET /metadata/identity/oauth2/token``: the instance metadata service's (IMDS) managed identity
  endpoint as a VM or an AKS node answers it (``AZURE_POD_IDENTITY_AUTHORITY_HOST`` = its
  :attr:`~FakeEntra.imds_authority`, which azure-identity and msal use in place of
  ``http://169.254.169.254``): header ``Metadata: true`` required, ``api-version``,
  ``resource``, optional ``client_id`` or ``object_id`` (a user-assigned identity; else the
  system-assigned one); the answer's numbers are strings, as IMDS sends them.

Tokens are JWTs (``aud`` the resource, ``tid``, ``appid``, ``exp``) with a random signature
(:meth:`FakeEntra.answer_for` makes them, and managed identity answers' ``resource``, say another);
:meth:`FakeEntra.verify` says whether a token is one it issued, unexpired, for an audience: what
the spoke fake (``SpokeServer.verify_tokens_with``) accepts. :meth:`FakeEntra.registry_policy` is what
the registry fake's ACR exchange accepts, as a registry's own settings and role assignments decide:
tokens for the ACR audience (ARM-audience tokens only when ``arm_audience=True``, a registry's
``azureADAuthenticationAsArmPolicy``), of the identities given ``AcrPull`` (``pullers``; any when
``None``). :class:`TunnelRecorder` is an HTTPS proxy that records the registry host a client
tunnels to and reaches none: where a plugin would exchange a token, without leaving loopback.
Faults for the next requests of an endpoint (``token``, ``openid``, ``msi``, ``imds``): :meth:`FakeEntra.fail`
with a :class:`~tests.fakes.http.Fault` (an error status and body, an answer that never comes,
held until ``stop()``, a body cut off, a body without end, an echo of the request's secrets).
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from .apiserver import FakeAPIServer, JSONHandler
from .http import Fault, Handler, LoopbackServer, Reply, SeenCall, send_fault
from .pki import PKI

__all__ = [
    "FakeEntra", "IssuedToken", "TunnelRecorder", "CLIENT_ASSERTION_TYPE", "AKS_SERVER_ID", "ACR_AUDIENCE", "ARM_AUDIENCE",
    "TOKEN_EXCHANGE_AUDIENCE", "Fault",
]

CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
#: The audience of Entra tokens for ACR, and the public cloud's ARM one.
ACR_AUDIENCE = "https://containerregistry.azure.net"
ARM_AUDIENCE = "https://management.azure.com"
#: The audience a federated identity credential requires of a service-account token.
TOKEN_EXCHANGE_AUDIENCE = "api://AzureADTokenExchange"
_ASKED = object()  # answer_for's "as asked"
AKS_SERVER_ID = "6dae42f8-4368-4678-94ff-3960e28e3630"


@dataclass(frozen=True)
class IssuedToken:
    """A token the fake issued: to whom (client ID), by which grant, for which audience."""

    token: str
    client_id: str
    grant: str  # "secret", "certificate", "federated", "msi" (App Service shape), "imds"
    audience: str
    expires: float


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class FakeEntra(FakeAPIServer):
    """Entra ID's v2.0 endpoints and a managed identity endpoint. Register identities with
    :meth:`add_secret`, :meth:`add_certificate`, :meth:`add_federated` and :meth:`add_managed_identity`."""

    label: ClassVar[str] = "FakeEntra"

    def __init__(self, pki: PKI | None = None, *, tenant: str = "fake-tenant", token_lifetime: int = 3600) -> None:
        super().__init__(pki)
        self.tenant = tenant
        self.token_lifetime = token_lifetime
        self.identity_header = secrets.token_hex(16)
        self._secrets: dict[str, str] = {}
        self._certificates: dict[str, rsa.RSAPublicKey] = {}
        self._federated: dict[str, set[str]] = {}
        self._federated_identities: dict[str, set[tuple[str, str]]] = {}
        #: The issuer of the cluster whose service-account tokens the fake trusts, and its key.
        self.cluster_issuer = "https://oidc.fake-cluster.example/"
        self._cluster_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self._managed: set[str] = set()
        self._issued: dict[str, IssuedToken] = {}
        self._faults: dict[str, list[Fault]] = {}
        #: (endpoint, method, path) of every request, in order.
        self.seen: list[tuple[str, str, str]] = []
        self._release = threading.Event()
        self._aud: Any = _ASKED
        self._resource: Any = _ASKED

    # -- identities --------------------------------------------------------------------------

    def add_secret(self, client_id: str, secret: str) -> None:
        with self._lock:
            self._secrets[client_id] = secret

    def add_certificate(self, client_id: str, certificate_pem: bytes) -> None:
        key = x509.load_pem_x509_certificate(certificate_pem).public_key()
        assert isinstance(key, rsa.RSAPublicKey)
        with self._lock:
            self._certificates[client_id] = key

    def add_federated(self, client_id: str, subject_token: str) -> None:
        """Accept ``subject_token`` (a projected service account token) as ``client_id``'s assertion."""
        with self._lock:
            self._federated.setdefault(client_id, set()).add(subject_token)

    def add_federated_identity(self, client_id: str, subject: str, *, issuer: str | None = None) -> None:
        """A federated identity credential of ``client_id``: service-account tokens of ``issuer``
        (default :attr:`cluster_issuer`) for ``subject`` (``system:serviceaccount:<ns>:<name>``)."""
        with self._lock:
            self._federated_identities.setdefault(client_id, set()).add((issuer or self.cluster_issuer, subject))

    def service_account_token(
        self, subject: str, *, audience: Any = TOKEN_EXCHANGE_AUDIENCE, issuer: str | None = None, lifetime: int = 3600,
        key: rsa.RSAPrivateKey | None = None,
    ) -> str:
        """A projected service-account token as kube-apiserver signs it (RS256, by the cluster
        issuer's key unless ``key`` is another)."""
        now = int(time.time())
        claims = {"iss": issuer or self.cluster_issuer, "sub": subject, "aud": audience if isinstance(audience, list) else [audience],
                  "iat": now, "nbf": now, "exp": now + lifetime}
        head = _b64url(json.dumps({"alg": "RS256", "kid": "cluster", "typ": "JWT"}).encode())
        body = _b64url(json.dumps(claims).encode())
        signature = (key or self._cluster_key).sign(f"{head}.{body}".encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{head}.{body}.{_b64url(signature)}"

    def registry_policy(self, *, arm_audience: bool = False, pullers: set[str] | None = None) -> Any:
        """What a registry's ``/oauth2/exchange`` accepts (for ``FakeRegistry.enable_acr_exchange``):
        an unexpired token this fake issued for the ACR audience (or ARM's, when the registry
        accepts ARM-audience tokens), to one of ``pullers`` (client IDs; anyone when ``None``)."""
        audiences = {ACR_AUDIENCE, ARM_AUDIENCE} if arm_audience else {ACR_AUDIENCE}

        def accepts(token: str) -> bool:
            with self._lock:
                issued = self._issued.get(token)
            return (issued is not None and issued.expires > time.time() and issued.audience in audiences
                    and (pullers is None or issued.client_id in pullers))

        return accepts

    def add_managed_identity(self, client_id: str) -> None:
        """A managed identity; the first one added is the system-assigned one (no client_id asked)."""
        with self._lock:
            self._managed.add(client_id)
            self._system = getattr(self, "_system", None) or client_id

    def answer_for(self, audience: Any = _ASKED, *, resource: Any = _ASKED) -> None:
        """From now on, issue tokens whose ``aud`` claim is ``audience`` (any JSON value) whatever
        was asked, and managed identity answers whose ``resource`` is ``resource``: a misrouted
        or hostile authority. Either left out stays what was asked."""
        with self._lock:
            self._aud, self._resource = audience, resource

    def fail(self, endpoint: str, *faults: Fault) -> None:
        with self._lock:
            self._faults.setdefault(endpoint, []).extend(faults)

    # -- addresses -----------------------------------------------------------------------------

    @property
    def authority(self) -> str:
        """What ``AZURE_AUTHORITY_HOST`` (or ``--authority-host``) takes."""
        return self.url

    @property
    def token_endpoint(self) -> str:
        return f"{self.url}/{self.tenant}/oauth2/v2.0/token"

    @property
    def identity_endpoint(self) -> str:
        """What ``IDENTITY_ENDPOINT`` takes (App Service's managed identity shape)."""
        return f"{self.url}/msi/token"

    @property
    def imds_authority(self) -> str:
        """What ``AZURE_POD_IDENTITY_AUTHORITY_HOST`` takes (the IMDS shape of managed identity)."""
        return self.url

    # -- tokens --------------------------------------------------------------------------------

    @property
    def issued(self) -> list[IssuedToken]:
        with self._lock:
            return list(self._issued.values())

    def verify(self, token: str, audience: str | None = None) -> bool:
        """True for an unexpired token this fake issued (for ``audience``, when given)."""
        with self._lock:
            issued = self._issued.get(token)
        return issued is not None and issued.expires > time.time() and (audience is None or issued.audience == audience)

    def _issue(self, client_id: str, grant: str, audience: str) -> dict[str, Any]:
        now = int(time.time())
        with self._lock:
            audience = audience if self._aud is _ASKED else self._aud
        claims = {"aud": audience, "iss": f"{self.url}/{self.tenant}/v2.0", "tid": self.tenant, "appid": client_id,
                  "iat": now, "nbf": now, "exp": now + self.token_lifetime}
        header = {"alg": "RS256", "typ": "JWT", "kid": "fake"}
        token = ".".join((_b64url(json.dumps(header).encode()), _b64url(json.dumps(claims).encode()), _b64url(secrets.token_bytes(64))))
        with self._lock:
            self._issued[token] = IssuedToken(token, client_id, grant, audience, float(now + self.token_lifetime))
        return {"token_type": "Bearer", "expires_in": self.token_lifetime, "ext_expires_in": self.token_lifetime, "access_token": token}

    # -- answers -------------------------------------------------------------------------------

    def _openid(self, tenant: str) -> tuple[int, Any]:
        base = f"{self.url}/{tenant}"
        return 200, {
            "token_endpoint": f"{base}/oauth2/v2.0/token",
            "authorization_endpoint": f"{base}/oauth2/v2.0/authorize",
            "device_authorization_endpoint": f"{base}/oauth2/v2.0/devicecode",
            "issuer": f"{base}/v2.0",
            "jwks_uri": f"{base}/discovery/v2.0/keys",
            "response_types_supported": ["code", "id_token", "code id_token", "id_token token"],
            "token_endpoint_auth_methods_supported": ["client_secret_post", "private_key_jwt", "client_secret_basic"],
            "tenant_region_scope": "WW",
            "cloud_instance_name": "microsoftonline.com",
        }

    def _discovery(self) -> tuple[int, Any]:
        return 200, {
            "tenant_discovery_endpoint": f"{self.url}/{self.tenant}/v2.0/.well-known/openid-configuration",
            "api-version": "1.1",
            "metadata": [{"preferred_network": urlsplit(self.url).netloc, "preferred_cache": urlsplit(self.url).netloc,
                          "aliases": [urlsplit(self.url).netloc]}],
        }

    @staticmethod
    def _error(code: str, description: str, status: int = 400) -> tuple[int, Any]:
        return status, {"error": code, "error_description": description, "error_codes": [0], "timestamp": "now"}

    def _token(self, tenant: str, form: dict[str, str]) -> tuple[int, Any]:
        if tenant != self.tenant:
            return self._error("invalid_request", f"AADSTS90002: Tenant '{tenant}' not found.")
        if form.get("grant_type") != "client_credentials":
            return self._error("unsupported_grant_type", "AADSTS70003: only client_credentials here.")
        client_id = form.get("client_id", "")
        scopes = form.get("scope", "").split()
        resources = [scope[: -len("/.default")] for scope in scopes if scope.endswith("/.default")]
        if len(resources) != 1:
            return self._error("invalid_scope", "AADSTS1002012: the scope must be one <resource>/.default.")
        if "client_secret" in form:
            with self._lock:
                expected = self._secrets.get(client_id)
            if expected is None or not secrets.compare_digest(expected, form["client_secret"]):
                return self._error("invalid_client", "AADSTS7000215: Invalid client secret provided.", 401)
            return 200, self._issue(client_id, "secret", resources[0])
        assertion = form.get("client_assertion")
        if form.get("client_assertion_type") != CLIENT_ASSERTION_TYPE or not assertion:
            return self._error("invalid_client", "AADSTS7000218: no client_assertion or client_secret.", 401)
        with self._lock:
            federated = assertion in self._federated.get(client_id, set())
            identities = set(self._federated_identities.get(client_id, set()))
            key = self._certificates.get(client_id)
        if federated:
            return 200, self._issue(client_id, "federated", resources[0])
        if identities:
            problem = self._federated_problem(assertion, identities)
            if problem is not None:
                return self._error("invalid_client", problem, 401)
            return 200, self._issue(client_id, "federated", resources[0])
        if key is not None and self._assertion_valid(assertion, key, client_id):
            return 200, self._issue(client_id, "certificate", resources[0])
        return self._error("invalid_client", "AADSTS700027: Client assertion failed signature validation.", 401)

    def _assertion_valid(self, assertion: str, key: rsa.RSAPublicKey, client_id: str) -> bool:
        try:
            head, body, signature = assertion.split(".")
            header, claims = json.loads(_unb64url(head)), json.loads(_unb64url(body))
            signed, raw = f"{head}.{body}".encode(), _unb64url(signature)
            if header.get("alg") == "PS256":
                key.verify(raw, signed, padding.PSS(padding.MGF1(hashes.SHA256()), hashes.SHA256.digest_size), hashes.SHA256())
            elif header.get("alg") == "RS256":
                key.verify(raw, signed, padding.PKCS1v15(), hashes.SHA256())
            else:
                return False
        except (ValueError, InvalidSignature, UnicodeDecodeError):
            return False
        now = time.time()
        return (
            claims.get("aud") == self.token_endpoint
            and claims.get("iss") == client_id == claims.get("sub")
            and isinstance(claims.get("exp"), (int, float)) and claims["exp"] > now
            and ("x5t" in header or "x5t#S256" in header)
        )

    def _federated_problem(self, assertion: str, identities: set[tuple[str, str]]) -> str | None:
        """Why a service-account token is no assertion for these federated credentials (``None``: it is)."""
        try:
            head, body, signature = assertion.split(".")
            header, claims = json.loads(_unb64url(head)), json.loads(_unb64url(body))
            if header.get("alg") != "RS256":
                return "AADSTS50027: JWT token is invalid or malformed."
            self._cluster_key.public_key().verify(_unb64url(signature), f"{head}.{body}".encode(), padding.PKCS1v15(), hashes.SHA256())
        except (ValueError, InvalidSignature, UnicodeDecodeError, AttributeError):
            return "AADSTS50027: JWT token is invalid or malformed."
        if not isinstance(claims, dict) or (claims.get("iss"), claims.get("sub")) not in identities:
            return "AADSTS700213: No matching federated identity record found for presented assertion subject."
        audience = claims.get("aud")
        if TOKEN_EXCHANGE_AUDIENCE not in (audience if isinstance(audience, list) else [audience]):
            return "AADSTS700212: No matching federated identity record found for presented assertion audience."
        if not isinstance(claims.get("exp"), (int, float)) or claims["exp"] <= time.time():
            return "AADSTS700024: Client assertion is not within its valid time range."
        return None

    def _msi(self, query: dict[str, str], header: str | None) -> tuple[int, Any]:
        if header is None or not secrets.compare_digest(header, self.identity_header):
            return 401, {"statusCode": 401, "message": "X-IDENTITY-HEADER is missing or wrong"}
        if query.get("api-version") != "2019-08-01" or not query.get("resource"):
            return 400, {"statusCode": 400, "message": "api-version or resource is missing"}
        with self._lock:
            client_id = query.get("client_id") or getattr(self, "_system", None)
            known = client_id in self._managed
        if not known or "mi_res_id" in query and client_id is None:
            return 400, {"statusCode": 400, "message": "No managed identity found for the given client id."}
        answer = self._issue(client_id, "msi", query["resource"].removesuffix("/.default"))
        return 200, {"access_token": answer["access_token"], "expires_on": str(int(time.time()) + self.token_lifetime),
                     "resource": self._answered_resource(query["resource"]), "token_type": "Bearer", "client_id": client_id}

    def _answered_resource(self, asked: str) -> Any:
        with self._lock:
            return asked if self._resource is _ASKED else self._resource

    def _imds(self, query: dict[str, str], metadata: str | None) -> tuple[int, Any]:
        # IMDS's own errors: an OAuth-style JSON body, 400 for a request it will not serve.
        if metadata != "true":
            return self._error("invalid_request", "Required metadata header not specified")
        if not query.get("api-version") or not query.get("resource"):
            return self._error("invalid_request", "Required query variable 'api-version' or 'resource' is missing")
        asked = query.get("client_id") or query.get("object_id")
        with self._lock:
            client_id = asked or getattr(self, "_system", None)
            known = client_id in self._managed
        if not known or "msi_res_id" in query:  # resource ids are not modelled: none is found
            return self._error("invalid_request", "Identity not found")
        answer = self._issue(client_id, "imds", query["resource"].removesuffix("/.default"))
        now = int(time.time())
        lifetime = str(self.token_lifetime)
        return 200, {"access_token": answer["access_token"], "client_id": client_id, "expires_in": lifetime,
                     "expires_on": str(now + self.token_lifetime), "ext_expires_in": lifetime, "not_before": str(now),
                     "resource": self._answered_resource(query["resource"]), "token_type": "Bearer"}

    def _route(self, method: str, path: str) -> tuple[str, Any]:
        parts = [part for part in path.split("/") if part]
        if method == "GET" and parts == ["msi", "token"]:
            return "msi", None
        if method == "GET" and parts == ["metadata", "identity", "oauth2", "token"]:
            return "imds", None
        if method == "GET" and parts == ["common", "discovery", "instance"]:
            return "discovery", None
        if method == "GET" and len(parts) == 4 and parts[1:] == ["v2.0", ".well-known", "openid-configuration"]:
            return "openid", parts[0]
        if method == "POST" and len(parts) == 4 and parts[1:] == ["oauth2", "v2.0", "token"]:
            return "token", parts[0]
        return "unknown", None

    def _stopping(self) -> None:
        self._release.set()


class _EntraHandler(JSONHandler):
    server: Any

    def _handle(self) -> None:
        entra: FakeEntra = self.server.owner
        split = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(min(length, 256 * 1024)) if length else b""
        endpoint, argument = entra._route(self.command, split.path)
        with entra._lock:
            entra.seen.append((endpoint, self.command, split.path))
            queue = entra._faults.get(endpoint)
            fault = queue.pop(0) if queue else None
        if fault is not None:
            send_fault(self, fault, body, entra._release, echo_header="X-IDENTITY-HEADER", default_error="temporarily_unavailable")
            return
        query = {key: values[0] for key, values in parse_qs(split.query).items()}
        form = {key: values[0] for key, values in parse_qs(body.decode("utf-8", "replace")).items()}
        if endpoint == "openid":
            status, document = entra._openid(argument)
        elif endpoint == "discovery":
            status, document = entra._discovery()
        elif endpoint == "token":
            status, document = entra._token(argument, form)
        elif endpoint == "msi":
            status, document = entra._msi(query, self.headers.get("X-IDENTITY-HEADER"))
        elif endpoint == "imds":
            status, document = entra._imds(query, self.headers.get("Metadata"))
        else:
            status, document = 404, {"error": "not_found", "error_description": "no such endpoint"}
        self._send_json(status, document)

    do_GET = do_POST = _handle  # noqa: N815 - http.server's naming


FakeEntra.handler_class = _EntraHandler


class TunnelRecorder(LoopbackServer):
    """An HTTP proxy (``HTTPS_PROXY``) on loopback that records the ``host:port`` of each
    ``CONNECT`` and refuses it (``403``): which registry a client would have reached, without
    leaving loopback (``NO_PROXY`` keeps the other fakes direct)."""

    def __init__(self) -> None:
        super().__init__(token_lifetime=0)

    @property
    def tunnels(self) -> list[str]:
        """The ``host:port`` of each ``CONNECT``, in order."""
        return [call.path for call in self.seen if call.endpoint == "connect"]

    def _connect(self, handler: Handler) -> None:
        with self._lock:
            self._seen.append(SeenCall("connect", "CONNECT", handler.path, {}, None, None, handler.headers.get("Host")))
        handler.send_error(403, "this proxy reaches no registry")

    def _endpoint(self, method: str, path: str) -> str:
        return "other"

    def _answer(self, endpoint: str, handler: Handler, path: str, query: dict[str, list[str]], body: bytes) -> Reply:
        return Reply(405, b"{}")

