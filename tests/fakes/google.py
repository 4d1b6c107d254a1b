"""Fake Google authentication endpoints on loopback, speaking the real protocols.

:class:`FakeGoogle` is one plain-HTTP server holding

- an OAuth 2.0 token endpoint (``/token``): the service-account JWT-bearer grant (RFC 7523; the
  assertion's RS256 signature is verified against the registered service account's public key,
  and its ``iss``, ``aud``, ``iat``/``exp`` and ``scope`` claims are checked as Google does) and
  the refresh-token grant of gcloud's user credentials (``/v1/oauthtoken`` takes the same grant
  with HTTP Basic client authentication, as workforce identity's STS endpoint does);
- an STS token exchange (``/v1/token``, RFC 8693) for workload identity federation, accepting the
  registered subject tokens (OIDC/SAML tokens, or AWS-signed GetCallerIdentity requests);
- IAM Credentials ``generateAccessToken``
  (``/v1/projects/-/serviceAccounts/<account>:generateAccessToken``) for impersonation, checking the
  caller's bearer token, its scopes, the impersonation grants and the requested lifetime;
- a subject-token URL (``/subject-token``) for URL-sourced federation credentials;
- workload identity pool providers for a Kubernetes cluster's service-account tokens
  (:meth:`~FakeGoogle.add_pool_provider`, :meth:`~FakeGoogle.add_identity_namespace`): STS checks
  such a subject token's signature, issuer, audience and lifetime as the real one does
  (:mod:`tests.fakes.google_federation`);
- Artifact Registry's Docker API root (``/v2/``, :attr:`~FakeGoogle.registry_url`): basic auth
  with the username ``oauth2accesstoken`` and an access token this fake (or a trusted metadata
  server) issued to a principal granted reading (:meth:`~FakeGoogle.grant_registry_reader`);
  ``401`` without a token it knows, ``403`` for a principal without the grant.

google-auth sends its assertions with ``aud`` = ``https://oauth2.googleapis.com/token`` whatever the
key file's ``token_uri`` says, and so does Google's endpoint expect: that is what is checked.

:class:`FakeMetadataServer` is a GCE metadata server (plain HTTP, like the real one): it refuses a
request without ``Metadata-Flavor: Google`` (or with ``X-Forwarded-For``) with 403, answers
``/computeMetadata/v1/instance/service-accounts/default/token`` (``?scopes=`` recorded),
``.../email``, ``.../?recursive=true`` and ``/project/project-id``, and marks every answer with
``Metadata-Flavor: Google``. Its :attr:`~FakeMetadataServer.host` is what ``GCE_METADATA_HOST``
(or ``GCE_METADATA_IP``) takes.

:class:`FakeGoogle` is also an HTTPS proxy for Google's real host names
(``oauth2.googleapis.com``, ``sts.googleapis.com``, ``iamcredentials.googleapis.com``): a client
given ``HTTPS_PROXY`` = its :attr:`~FakeGoogle.url` and ``REQUESTS_CA_BUNDLE`` = its
:meth:`~FakeGoogle.write_ca` file reaches the same endpoints at their real URLs, so code paths that
always call Google (google-auth never lets a user's refresh token go anywhere else) are tested
as they run.

Both record what they issued (:attr:`issued`) and saw (:attr:`seen`), issue tokens whose lifetime
is :attr:`token_lifetime`, and take faults for their next requests (:meth:`fail`): an error status
with an OAuth or API error body, any body, an answer that never comes (held until :meth:`stop`,
so a test of a timeout needs no sleep), a body cut off midway, or a body without end.
"""

from __future__ import annotations

import base64
import json
import secrets
import ssl
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from .google_federation import PoolProvider, ServiceAccountIssuer, unb64url
from .http import Fault, Handler, LoopbackServer, Reply, SeenCall
from .registry import basic_credentials

__all__ = [
    "GOOGLE_TOKEN_AUDIENCE",
    "JWT_BEARER_GRANT",
    "TOKEN_EXCHANGE_GRANT",
    "ACCESS_TOKEN_TYPE",
    "JWT_TOKEN_TYPE",
    "AWS_TOKEN_TYPE",
    "CLOUD_PLATFORM",
    "IAM_SCOPE",
    "GOOGLE_HOSTS",
    "ServiceAccountKey",
    "ServiceAccountIssuer",
    "IssuedToken",
    "SeenCall",
    "Fault",
    "FakeGoogle",
    "FakeMetadataServer",
]

GOOGLE_TOKEN_AUDIENCE = "https://oauth2.googleapis.com/token"
JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE_GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
JWT_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:jwt"
AWS_TOKEN_TYPE = "urn:ietf:params:aws:token-type:aws4_request"
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
#: The real host names :class:`FakeGoogle` answers for when used as an HTTPS proxy.
GOOGLE_HOSTS = ("oauth2.googleapis.com", "sts.googleapis.com", "iamcredentials.googleapis.com")
IAM_SCOPE = "https://www.googleapis.com/auth/iam"
#: Google refuses assertions valid for longer than an hour.
MAX_ASSERTION_SECONDS = 3600
#: Clock skew Google tolerates on ``iat``/``exp``.
ASSERTION_SKEW_SECONDS = 300


@dataclass(frozen=True)
class ServiceAccountKey:
    """A service account and its RSA key, as in a downloaded key file."""

    email: str
    key_id: str
    private_key_pem: str
    public_key: rsa.RSAPublicKey
    project_id: str = "fake-project"
    client_id: str = "100000000000000000001"

    @classmethod
    def generate(cls, email: str = "fleet-reader@fake-project.iam.gserviceaccount.com", *, project_id: str = "fake-project") -> ServiceAccountKey:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        return cls(email, secrets.token_hex(20), pem.decode("ascii"), key.public_key(), project_id)

    def info(self, token_uri: str) -> dict[str, Any]:
        """The key file's JSON, with ``token_uri`` pointing where the test wants."""
        return {
            "type": "service_account",
            "project_id": self.project_id,
            "private_key_id": self.key_id,
            "private_key": self.private_key_pem,
            "client_email": self.email,
            "client_id": self.client_id,
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            "token_uri": token_uri,
            "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
            "client_x509_cert_url": f"https://www.googleapis.com/robot/v1/metadata/x509/{self.email}",
            "universe_domain": "googleapis.com",
        }


@dataclass(frozen=True)
class IssuedToken:
    """An access token the fake handed out: to whom, with which scopes, until when, and how
    (``jwt-bearer``, ``refresh_token``, ``token-exchange``, ``generateAccessToken``, ``metadata``)."""

    token: str
    principal: str
    scopes: tuple[str, ...]
    expires_at: datetime
    grant: str
    delegates: tuple[str, ...] = ()


def _json_reply(status: int, document: Any) -> Reply:
    return Reply(status, json.dumps(document).encode("utf-8"))


def _oauth_error(error: str, description: str, status: int = 400) -> Reply:
    return _json_reply(status, {"error": error, "error_description": description})


def _api_error(status: int, code: str, message: str) -> Reply:
    return _json_reply(status, {"error": {"code": status, "message": message, "status": code}})


class _IssuingServer(LoopbackServer):
    """The shared loopback server, plus the access tokens both Google fakes issue."""

    def __init__(self, *, token_lifetime: int) -> None:
        super().__init__(token_lifetime=token_lifetime)
        #: Tokens to hand out next, in order, before random ones (for a server that must know
        #: the token in advance, such as a fake kube-apiserver).
        self.preset_tokens: list[str] = []
        self._issued: list[IssuedToken] = []

    @property
    def issued(self) -> list[IssuedToken]:
        with self._lock:
            return list(self._issued)

    def _issue(self, principal: str, scopes: tuple[str, ...], grant: str, *, lifetime: int | None = None, delegates: tuple[str, ...] = ()) -> IssuedToken:
        seconds = self.token_lifetime if lifetime is None else lifetime
        with self._lock:
            preset = self.preset_tokens.pop(0) if self.preset_tokens else None
        issued = IssuedToken(
            token=preset or "ya29.fake-" + secrets.token_urlsafe(32),
            principal=principal,
            scopes=scopes,
            expires_at=datetime.now(UTC) + timedelta(seconds=seconds),
            grant=grant,
            delegates=delegates,
        )
        with self._lock:
            self._issued.append(issued)
        return issued

    def _token(self, value: str | None) -> IssuedToken | None:
        if not value:
            return None
        with self._lock:
            found = next((t for t in self._issued if t.token == value), None)
        return found if found is not None and found.expires_at > datetime.now(UTC) else None


class FakeGoogle(_IssuingServer):
    """OAuth 2.0 token endpoint, STS and IAM Credentials on one loopback HTTP server.

    Fault endpoints (for :meth:`fail`): ``token`` (``/token`` and ``/v1/oauthtoken``), ``sts``,
    ``iam`` and ``subject``.
    """

    def __init__(self, *, token_lifetime: int = 3600, max_impersonation_lifetime: int = 3600) -> None:
        super().__init__(token_lifetime=token_lifetime)
        #: Longest ``lifetime`` generateAccessToken grants (IAM's default limit is one hour).
        self.max_impersonation_lifetime = max_impersonation_lifetime
        #: What ``/subject-token`` answers (text), and the header it requires, if any.
        self.subject_token_body = ""
        self.subject_token_header: tuple[str, str] | None = None
        self._accounts: dict[str, ServiceAccountKey] = {}
        self._users: dict[tuple[str, str, str], str] = {}
        self._subjects: dict[tuple[str, str], str] = {}
        self._aws_keys: dict[tuple[str, str], str] = {}
        self._grants: set[tuple[str, str, tuple[str, ...]]] = set()
        self._pools: dict[str, PoolProvider] = {}
        self._readers: set[str] = set()
        self._trusted: list[LoopbackServer] = []
        self._tls: tuple[bytes, ssl.SSLContext] | None = None

    # -- addresses ------------------------------------------------------------

    @property
    def token_uri(self) -> str:
        return f"{self.url}/token"

    @property
    def oauthtoken_url(self) -> str:
        """The refresh-token grant with Basic client authentication (external_account_authorized_user)."""
        return f"{self.url}/v1/oauthtoken"

    @property
    def sts_url(self) -> str:
        return f"{self.url}/v1/token"

    @property
    def subject_token_url(self) -> str:
        return f"{self.url}/subject-token"

    @property
    def iam_endpoint(self) -> str:
        """Base URL of the IAM Credentials API (``iamcredentials.googleapis.com`` for real)."""
        return self.url

    @property
    def registry_url(self) -> str:
        """Artifact Registry's Docker API root (``https://<region>-docker.pkg.dev/v2/`` for real)."""
        return f"{self.url}/v2/"

    def generate_access_token_url(self, account: str) -> str:
        return f"{self.url}/v1/projects/-/serviceAccounts/{account}:generateAccessToken"

    def write_ca(self, path: Path) -> Path:
        """Write the CA that signs this fake's certificates for :data:`GOOGLE_HOSTS` (for
        ``REQUESTS_CA_BUNDLE``); returns ``path``."""
        path.write_bytes(self._tls_context()[0])
        return path

    def _tls_context(self) -> tuple[bytes, ssl.SSLContext]:
        import trustme  # only tests that use the proxy pay for a CA

        with self._lock:
            if self._tls is None:
                ca = trustme.CA()
                context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
                ca.issue_cert(*GOOGLE_HOSTS).configure_cert(context)
                self._tls = (ca.cert_pem.bytes(), context)
            return self._tls

    def _connect(self, handler: Handler) -> None:
        # An HTTPS proxy for Google's names only: the tunnel ends here, in TLS with a certificate
        # for the name asked, and the requests inside it reach the same endpoints.
        host, _, port = handler.path.rpartition(":")
        with self._lock:
            self._seen.append(SeenCall("proxy", "CONNECT", handler.path, {}, None, None, host))
        if host not in GOOGLE_HOSTS or port != "443":
            handler.send_error(403, "this proxy reaches Google's token endpoints only")
            return
        context = self._tls_context()[1]
        handler.send_response(200, "Connection established")
        handler.end_headers()
        handler.wfile.flush()
        handler.close_connection = True
        try:
            tunnel = context.wrap_socket(handler.connection, server_side=True)
        except (ssl.SSLError, OSError):
            return
        handler.server.track(tunnel)
        try:
            Handler(tunnel, handler.client_address, handler.server)
        except OSError:
            pass
        finally:
            handler.server.untrack(tunnel)
            tunnel.close()

    # -- identities -----------------------------------------------------------

    def add_service_account(self, key: ServiceAccountKey) -> ServiceAccountKey:
        """Accept assertions signed by ``key`` (for ``iss`` = its email)."""
        with self._lock:
            self._accounts[key.email] = key
        return key

    def service_account_info(self, key: ServiceAccountKey) -> dict[str, Any]:
        """A key file for ``key`` (registered if it was not) whose ``token_uri`` is this server."""
        self.add_service_account(key)
        return key.info(self.token_uri)

    def add_user(self, email: str = "someone@example.com", *, client_id: str = "fake-client.apps.googleusercontent.com") -> dict[str, Any]:
        """Register a user's refresh token; returns the ``authorized_user`` file gcloud would write."""
        client_secret, refresh_token = "d-" + secrets.token_urlsafe(18), "1//fake-" + secrets.token_urlsafe(40)
        with self._lock:
            self._users[(client_id, client_secret, refresh_token)] = email
        return {
            "type": "authorized_user",
            "client_id": client_id,
            "client_secret": client_secret,
            "refresh_token": refresh_token,
            "token_uri": self.token_uri,
            "account": "",
            "universe_domain": "googleapis.com",
        }

    def external_account_authorized_user_info(self, email: str = "someone@workforce.example.com") -> dict[str, Any]:
        """A workforce identity user's file (``gcloud auth application-default login`` with a
        workforce pool): a refresh token redeemed at ``/v1/oauthtoken`` with Basic client auth."""
        user = self.add_user(email, client_id="fake-workforce-client")
        return {
            "type": "external_account_authorized_user",
            "audience": "//iam.googleapis.com/locations/global/workforcePools/fake-pool/providers/fake-provider",
            "refresh_token": user["refresh_token"],
            "token_url": self.oauthtoken_url,
            "token_info_url": f"{self.url}/v1/introspect",
            "client_id": user["client_id"],
            "client_secret": user["client_secret"],
            "universe_domain": "googleapis.com",
        }

    def add_external_subject(self, subject_token: str, audience: str, principal: str | None = None) -> str:
        """Accept ``subject_token`` in a token exchange for ``audience``; returns the principal."""
        principal = principal or f"principal://iam.googleapis.com/{audience.removeprefix('//iam.googleapis.com/')}/subject/{secrets.token_hex(4)}"
        with self._lock:
            self._subjects[(subject_token, audience)] = principal
        return principal

    def add_aws_identity(self, access_key_id: str, audience: str) -> str:
        """Accept AWS-signed GetCallerIdentity requests made with ``access_key_id`` for ``audience``."""
        principal = f"principal://iam.googleapis.com/{audience.removeprefix('//iam.googleapis.com/')}/subject/aws-{access_key_id}"
        with self._lock:
            self._aws_keys[(access_key_id, audience)] = principal
        return principal

    def external_account_info(
        self,
        audience: str,
        credential_source: dict[str, Any],
        *,
        subject_token_type: str = JWT_TOKEN_TYPE,
        impersonate: str | None = None,
        lifetime: int | None = None,
    ) -> dict[str, Any]:
        """A workload identity federation config (``gcloud iam workload-identity-pools
        create-cred-config`` output) whose STS and impersonation URLs are this server."""
        info: dict[str, Any] = {
            "universe_domain": "googleapis.com",
            "type": "external_account",
            "audience": audience,
            "subject_token_type": subject_token_type,
            "token_url": self.sts_url,
            "credential_source": credential_source,
        }
        if impersonate is not None:
            info["service_account_impersonation_url"] = self.generate_access_token_url(impersonate)
            if lifetime is not None:
                info["service_account_impersonation"] = {"token_lifetime_seconds": lifetime}
        return info

    def add_pool_provider(
        self,
        issuer: ServiceAccountIssuer,
        *,
        project_number: str = "123456789012",
        pool: str = "fleet-pool",
        provider: str = "fleet-cluster",
        allowed_audiences: tuple[str, ...] | None = None,
    ) -> str:
        """A workload identity pool OIDC provider trusting ``issuer``'s tokens; returns its STS
        audience (``//iam.googleapis.com/projects/N/locations/global/workloadIdentityPools/POOL/providers/P``).
        Without ``allowed_audiences``, a token must be for the provider's default audience, its URL
        (``https://iam.googleapis.com/projects/...``)."""
        name = f"projects/{project_number}/locations/global/workloadIdentityPools/{pool}"
        audience = f"//iam.googleapis.com/{name}/providers/{provider}"
        allowed = allowed_audiences or (f"https:{audience}",)
        with self._lock:
            self._pools[audience] = PoolProvider.for_issuer(issuer, audience, name, allowed)
        return audience

    def add_identity_namespace(self, issuer: ServiceAccountIssuer, project_id: str, identity_provider: str, *, project_number: str = "123456789012") -> str:
        """GKE's identity namespace ``PROJECT.svc.id.goog`` trusting ``issuer`` as the cluster
        ``identity_provider`` (auth-provider-gcp's flow); returns the STS audience
        ``identitynamespace:PROJECT.svc.id.goog:IDENTITY_PROVIDER``. Tokens are for ``PROJECT.svc.id.goog``."""
        namespace = f"{project_id}.svc.id.goog"
        audience = f"identitynamespace:{namespace}:{identity_provider}"
        name = f"projects/{project_number}/locations/global/workloadIdentityPools/{namespace}"
        with self._lock:
            self._pools[audience] = PoolProvider.for_issuer(issuer, audience, name, (namespace,))
        return audience

    @staticmethod
    def pool_principal(audience: str, namespace: str, name: str) -> str:
        """The principal STS makes of a token of ``namespace/name`` for the provider ``audience``."""
        if audience.startswith("identitynamespace:"):
            return f"principal://iam.googleapis.com/projects/123456789012/locations/global/workloadIdentityPools/{audience.split(':')[1]}/subject/system:serviceaccount:{namespace}:{name}"
        pool = audience.removeprefix("//iam.googleapis.com/").rsplit("/providers/", 1)[0]
        return f"principal://iam.googleapis.com/{pool}/subject/system:serviceaccount:{namespace}:{name}"

    def grant_registry_reader(self, principal: str) -> None:
        """Let ``principal`` (an email or a principal) read from the registry."""
        with self._lock:
            self._readers.add(principal)

    def trust(self, issuer: LoopbackServer) -> None:
        """Accept access tokens ``issuer`` (a :class:`FakeMetadataServer`) issued, as Google's
        APIs accept tokens from the metadata server."""
        with self._lock:
            self._trusted.append(issuer)

    def _token(self, value: str | None) -> IssuedToken | None:
        with self._lock:
            issuers = list(self._trusted)
        for issuer in (super(), *issuers):
            found = issuer._token(value)
            if found is not None:
                return found
        return None

    def allow_impersonation(self, caller: str, target: str, delegates: tuple[str, ...] = ()) -> None:
        """Let ``caller`` (an email or principal) get tokens for ``target`` through ``delegates``
        (emails, in order)."""
        with self._lock:
            self._grants.add((caller, target, tuple(delegates)))

    # -- handling -----------------------------------------------------------------

    def _endpoint(self, method: str, path: str) -> str:
        if path in ("/token", "/v1/oauthtoken"):
            return "token"
        if path == "/v1/token":
            return "sts"
        if path == "/subject-token":
            return "subject"
        if path.startswith("/v1/projects/-/serviceAccounts/"):
            return "iam"
        if path == "/v2/" or path.startswith("/v2/"):
            return "registry"
        return "other"

    def _answer(self, endpoint: str, handler: Handler, path: str, query: dict[str, list[str]], body: bytes) -> Reply:
        if endpoint == "subject" and handler.command == "GET":
            required = self.subject_token_header
            if required is not None and handler.headers.get(required[0]) != required[1]:
                return Reply(401, b"missing header", "text/plain")
            return Reply(200, self.subject_token_body.encode("utf-8"), "text/plain")
        if endpoint == "registry" and handler.command in ("GET", "HEAD"):
            return self._registry(handler.headers.get("Authorization"))
        if handler.command != "POST":
            return Reply(404, b"Not Found", "text/html")
        if endpoint == "token":
            return self._token_grant(_form(body), handler.headers.get("Authorization"), basic=path == "/v1/oauthtoken")
        if endpoint == "sts":
            return self._token_exchange(_form(body))
        if endpoint == "iam" and path.endswith(":generateAccessToken"):
            target = path.removeprefix("/v1/projects/-/serviceAccounts/").removesuffix(":generateAccessToken")
            return self._generate_access_token(target, handler.headers.get("Authorization"), body)
        return Reply(404, b"Not Found", "text/html")

    def _granted(self, principal: str, scopes: tuple[str, ...], grant: str, **kwargs: Any) -> Reply:
        issued = self._issue(principal, scopes, grant, **kwargs)
        answer: dict[str, Any] = {"access_token": issued.token, "expires_in": self.token_lifetime, "token_type": "Bearer"}
        if grant == "token-exchange":
            answer["issued_token_type"] = ACCESS_TOKEN_TYPE
        elif scopes:
            answer["scope"] = " ".join(scopes)
        return _json_reply(200, answer)

    def _token_grant(self, form: dict[str, str], authorization: str | None, *, basic: bool) -> Reply:
        grant_type = form.get("grant_type")
        if grant_type == JWT_BEARER_GRANT and not basic:
            return self._jwt_bearer(form.get("assertion", ""))
        if grant_type == "refresh_token":
            client_id, client_secret = form.get("client_id", ""), form.get("client_secret", "")
            if basic:
                try:
                    scheme, _, encoded = (authorization or "").partition(" ")
                    client_id, _, client_secret = base64.b64decode(encoded).decode().partition(":") if scheme == "Basic" else ("", "", "")
                except ValueError:
                    client_id = client_secret = ""
            with self._lock:
                email = self._users.get((client_id, client_secret, form.get("refresh_token", "")))
            if email is None:
                return _oauth_error("invalid_grant", "Token has been expired or revoked.")
            scopes = tuple(form.get("scope", "").split()) or (CLOUD_PLATFORM, "openid", "https://www.googleapis.com/auth/userinfo.email")
            return self._granted(email, scopes, "refresh_token")
        return _oauth_error("unsupported_grant_type", "Invalid grant_type.")

    def _jwt_bearer(self, assertion: str) -> Reply:
        parts = assertion.split(".")
        try:
            header, claims = json.loads(unb64url(parts[0])), json.loads(unb64url(parts[1]))
            signature = unb64url(parts[2])
        except (IndexError, ValueError):
            return _oauth_error("invalid_grant", "Invalid JWT: malformed.")
        if not isinstance(header, dict) or not isinstance(claims, dict) or header.get("alg") != "RS256":
            return _oauth_error("invalid_grant", "Invalid JWT Signature.")
        with self._lock:
            key = self._accounts.get(claims.get("iss"))  # type: ignore[arg-type]
        if key is None:
            return _oauth_error("invalid_grant", "Invalid grant: account not found")
        if header.get("kid") not in (None, key.key_id):
            return _oauth_error("invalid_grant", "Invalid JWT Signature.")
        try:
            key.public_key.verify(signature, f"{parts[0]}.{parts[1]}".encode("ascii"), padding.PKCS1v15(), hashes.SHA256())
        except (InvalidSignature, ValueError):
            return _oauth_error("invalid_grant", "Invalid JWT Signature.")
        if claims.get("aud") != GOOGLE_TOKEN_AUDIENCE:
            return _oauth_error("invalid_grant", "Invalid JWT: Failed audience check.")
        now = datetime.now(UTC).timestamp()
        iat, exp = claims.get("iat"), claims.get("exp")
        if (
            not isinstance(iat, int)
            or not isinstance(exp, int)
            or exp - iat > MAX_ASSERTION_SECONDS
            or iat > now + ASSERTION_SKEW_SECONDS
            or exp < now - ASSERTION_SKEW_SECONDS
        ):
            return _oauth_error(
                "invalid_grant",
                "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. "
                "Check your iat and exp values in the JWT claim.",
            )
        scope = claims.get("scope")
        if not isinstance(scope, str) or not scope.split():
            return _oauth_error("invalid_scope", "Invalid OAuth scope or ID token audience provided.")
        return self._granted(key.email, tuple(scope.split()), "jwt-bearer")

    def _token_exchange(self, form: dict[str, str]) -> Reply:
        if form.get("grant_type") != TOKEN_EXCHANGE_GRANT:
            return _oauth_error("unsupported_grant_type", "Invalid grant_type.")
        if form.get("requested_token_type") != ACCESS_TOKEN_TYPE:
            return _oauth_error("invalid_request", "Invalid requested_token_type.")
        audience, subject, subject_type = form.get("audience", ""), form.get("subject_token", ""), form.get("subject_token_type")
        with self._lock:
            pool = self._pools.get(audience)
        if subject_type == AWS_TOKEN_TYPE:
            principal = self._aws_principal(subject, audience)
        elif pool is not None:
            principal = pool.principal(subject) if subject_type == JWT_TOKEN_TYPE else None
        else:
            with self._lock:
                principal = self._subjects.get((subject, audience))
        if principal is None:
            return _oauth_error("invalid_grant", "The audience in ID Token does not match the expected audience.")
        return self._granted(principal, tuple(form.get("scope", "").split()), "token-exchange")

    def _aws_principal(self, subject: str, audience: str) -> str | None:
        # google-auth sends the signed GetCallerIdentity request as URL-encoded JSON; STS would
        # replay it to AWS. Here: its shape, its target resource and the key that signed it.
        try:
            request = json.loads(unquote(subject))
            headers = {h["key"].lower(): h["value"] for h in request["headers"]}
        except (ValueError, KeyError, TypeError):
            return None
        if "GetCallerIdentity" not in str(request.get("url")) or headers.get("x-goog-cloud-target-resource") != audience:
            return None
        credential = headers.get("authorization", "").partition("Credential=")[2].split("/", 1)[0]
        with self._lock:
            return self._aws_keys.get((credential, audience))

    def _generate_access_token(self, target: str, authorization: str | None, body: bytes) -> Reply:
        caller = self._token((authorization or "").removeprefix("Bearer ")) if (authorization or "").startswith("Bearer ") else None
        if caller is None:
            return _api_error(401, "UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 access token.")
        if not {CLOUD_PLATFORM, IAM_SCOPE} & set(caller.scopes):
            return _api_error(403, "PERMISSION_DENIED", "Request had insufficient authentication scopes.")
        try:
            request = json.loads(body)
            scopes = tuple(request["scope"])
            delegates = tuple(d.removeprefix("projects/-/serviceAccounts/") for d in request.get("delegates") or ())
            lifetime = int(str(request.get("lifetime", "3600s")).removesuffix("s"))
        except (ValueError, KeyError, TypeError):
            return _api_error(400, "INVALID_ARGUMENT", "Invalid JSON payload received.")
        if not scopes:
            return _api_error(400, "INVALID_ARGUMENT", "Scope required.")
        if not 0 < lifetime <= self.max_impersonation_lifetime:
            return _api_error(400, "INVALID_ARGUMENT", f"The lifetime must be between 1s and {self.max_impersonation_lifetime}s.")
        with self._lock:
            allowed = (caller.principal, target, delegates) in self._grants
        if not allowed:
            return _api_error(
                403, "PERMISSION_DENIED", "Permission 'iam.serviceAccounts.getAccessToken' denied on resource (or it may not exist)."
            )
        issued = self._issue(target, scopes, "generateAccessToken", lifetime=lifetime, delegates=delegates)
        return _json_reply(200, {"accessToken": issued.token, "expireTime": issued.expires_at.strftime("%Y-%m-%dT%H:%M:%SZ")})


    def _registry(self, authorization: str | None) -> Reply:
        # Artifact Registry: an access token as the password of oauth2accesstoken, then IAM.
        credentials = basic_credentials(authorization)
        caller = self._token(credentials[1]) if credentials is not None and credentials[0] == "oauth2accesstoken" else None
        if caller is None:
            challenge = {"WWW-Authenticate": 'Bearer realm="https://us-docker.pkg.dev/v2/token",service="us-docker.pkg.dev"'}
            return Reply(401, json.dumps({"errors": [{"code": "UNAUTHORIZED", "message": "authentication failed"}]}).encode(), headers=challenge)
        with self._lock:
            allowed = caller.principal in self._readers
        if not allowed:
            denied = {"errors": [{"code": "DENIED", "message": "Permission 'artifactregistry.repositories.downloadArtifacts' denied"}]}
            return Reply(403, json.dumps(denied).encode())
        return Reply(200, b"{}", headers={"Docker-Distribution-API-Version": "registry/2.0"})


def _form(body: bytes) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True).items()}


class FakeMetadataServer(_IssuingServer):
    """A GCE metadata server on loopback. Fault endpoints: ``token``, ``email``, ``info``,
    ``project`` and ``root``."""

    _response_headers = {"Metadata-Flavor": "Google", "Server": "Metadata Server for VM"}

    def __init__(
        self,
        *,
        email: str = "123456789-compute@developer.gserviceaccount.com",
        scopes: tuple[str, ...] = (CLOUD_PLATFORM,),
        project_id: str = "fake-project",
        token_lifetime: int = 3599,
    ) -> None:
        super().__init__(token_lifetime=token_lifetime)
        self.email, self.scopes, self.project_id = email, scopes, project_id

    @property
    def host(self) -> str:
        """``127.0.0.1:<port>``, for ``GCE_METADATA_HOST`` or ``GCE_METADATA_IP``."""
        return f"127.0.0.1:{self.port}"

    def token_scopes(self) -> list[tuple[str, ...]]:
        """The ``scopes`` query of each token request, split (empty when none was given)."""
        return [tuple(",".join(call.query.get("scopes", [])).split(",")) if call.query.get("scopes") else () for call in self.calls("token")]

    def _endpoint(self, method: str, path: str) -> str:
        prefix = "/computeMetadata/v1/instance/service-accounts/"
        if path == "/":
            return "root"
        if path.startswith(prefix):
            tail = path.removeprefix(prefix).split("/", 1)[-1] if "/" in path.removeprefix(prefix) else ""
            return {"token": "token", "email": "email", "": "info"}.get(tail, "other")
        if path == "/computeMetadata/v1/project/project-id":
            return "project"
        return "other"

    def _account(self, path: str) -> bool:
        name = path.removeprefix("/computeMetadata/v1/instance/service-accounts/").split("/", 1)[0]
        return name in ("default", self.email)

    def _answer(self, endpoint: str, handler: Handler, path: str, query: dict[str, list[str]], body: bytes) -> Reply:
        if handler.headers.get("X-Forwarded-For") is not None:
            return Reply(403, b"Request denied: X-Forwarded-For header present.", "text/html")
        if handler.headers.get("Metadata-Flavor") != "Google":
            return Reply(403, b"Missing Metadata-Flavor:Google header.", "text/html")
        if handler.command != "GET" or endpoint == "other" or (endpoint in ("token", "email", "info") and not self._account(path)):
            return Reply(404, b"Not Found", "text/html")
        if endpoint == "root":
            return Reply(200, b"computeMetadata/\n", "application/text")
        if endpoint == "project":
            return Reply(200, self.project_id.encode(), "application/text")
        if endpoint == "email":
            return Reply(200, self.email.encode(), "application/text")
        if endpoint == "info":
            return _json_reply(200, {"aliases": ["default"], "email": self.email, "scopes": list(self.scopes)})
        requested = tuple(s for s in ",".join(query.get("scopes", [])).split(",") if s)
        issued = self._issue(self.email, requested or self.scopes, "metadata")
        return _json_reply(200, {"access_token": issued.token, "expires_in": self.token_lifetime, "token_type": "Bearer"})
