"""Fake AWS endpoints on loopback, speaking the real protocols.

:class:`FakeAWS` is one HTTPS server (its certificate from :class:`~tests.fakes.pki.PKI`: point
``AWS_CA_BUNDLE`` at :meth:`FakeAWS.write_ca`) holding the APIs botocore calls, reached through
``AWS_ENDPOINT_URL_STS`` and ``AWS_ENDPOINT_URL_ECR`` (both :attr:`FakeAWS.url`):

- STS ``GetCallerIdentity`` as a presigned GET (an EKS token's URL): checked as
  aws-iam-authenticator checks it before sending it on (host, path ``/``, only the allowed query
  parameters, ``Action=GetCallerIdentity``, ``x-k8s-aws-id`` among the signed headers,
  ``X-Amz-Expires`` at most 900, ``X-Amz-Date`` not older than 15 minutes) and then as STS does
  (the SigV4 signature recomputed, here independently of botocore, with the secret of the access
  key, and the session token of temporary keys); answers the caller's ARN in STS's XML;
- STS ``AssumeRole`` (SigV4-signed POST; the role must trust the caller, and the external id
  must match when the role wants one) and ``AssumeRoleWithWebIdentity`` (unsigned POST; the web
  identity token must be a JWT signed by the fake's OIDC issuer key (:meth:`FakeAWS.service_account_token`),
  for the audience ``sts.amazonaws.com``, not expired, whose subject the role trusts), answering
  temporary keys in STS's XML;
- ECR ``GetAuthorizationToken`` (SigV4-signed JSON 1.1 POST), answering base64 ``AWS:<password>``
  with ``expiresAt`` :attr:`FakeAWS.ecr_token_lifetime` from now, and ECR Public's
  (``SpencerFrontendService``, signed for ``ecr-public`` in ``us-east-1`` only). :meth:`FakeAWS.allow_ecr`
  limits who may get a token (as a registry's permissions do): any other caller is refused.

The presigned GetCallerIdentity may also be addressed to a real STS host name the fake answers
as (:meth:`FakeAWS.answer_as_sts`, e.g. ``sts.us-iso-east-1.c2s.ic.gov`` for ``us-iso-east-1``):
the authenticator then accepts only URLs for those hosts and sends them to the fake with that
``Host``, and STS refuses a signature scoped to another region than the host's.

:meth:`FakeAWS.authenticator` is the cluster side of an EKS token: a verifier for the spoke fake
(``spoke.verify_tokens_with(aws.authenticator(cluster))``) that does what aws-iam-authenticator does, the local
checks and then the GET of the URL, with the ``x-k8s-aws-id`` header, to the STS above; it
accepts only tokens STS verified for that cluster.

:class:`~tests.fakes.aws_metadata.FakeAWSMetadata` (IMDSv2 and the container credentials endpoint)
is in :mod:`tests.fakes.aws_metadata`.

FakeAWS records what it saw (:attr:`seen`) and takes faults for its next requests (:meth:`fail`,
with :class:`~tests.fakes.http.Fault`: an error status and body, an answer that never comes,
a body cut off, a body without end). Fault endpoints: ``sts`` (GetCallerIdentity), ``assume-role``,
``web-identity``, ``ecr``, ``ecr-public``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import ssl
import threading
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit
from xml.sax.saxutils import escape

import jwt
from cryptography.hazmat.primitives.asymmetric import ec

from .aws_wire import STS_NS, Refused, parse_amz_date, ecr_domain, iso, request_id, sigv4_signature, sts_document, token_url, xml
from .http import Fault, Handler, LoopbackServer, Reply, SeenCall
from .pki import PKI

__all__ = [
    "ACCOUNT",
    "ECR_TARGET",
    "ECR_PUBLIC_TARGET",
    "STS_AUDIENCE",
    "ALLOWED_QUERY",
    "AwsKeys",
    "FakeAWS",
    "Fault",
    "SeenCall",
    "sigv4_signature",
]

ACCOUNT = "111122223333"
ECR_TARGET = "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken"
ECR_PUBLIC_TARGET = "SpencerFrontendService.GetAuthorizationToken"
#: The audience STS wants in a web identity token (EKS's OIDC tokens, KEP-4412's serviceAccountTokenAudience).
STS_AUDIENCE = "sts.amazonaws.com"
#: aws-iam-authenticator's parameterWhitelist: the only query parameters an EKS token's URL may have.
ALLOWED_QUERY = frozenset(
    {"action", "version", "x-amz-algorithm", "x-amz-credential", "x-amz-date", "x-amz-expires",
     "x-amz-security-token", "x-amz-signature", "x-amz-signedheaders"}
)
#: aws-iam-authenticator accepts a presigned URL this long after its X-Amz-Date.
PRESIGNED_MAX_AGE = timedelta(minutes=15)
_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


@dataclass(frozen=True)
class AwsKeys:
    """An access key the fake knows: whose (``arn``), its secret, and for temporary keys the
    session token and expiry. ``env()`` is the environment botocore reads them from."""

    access_key: str
    secret_key: str
    arn: str
    token: str | None = None
    expires_at: datetime | None = None

    def __repr__(self) -> str:
        return f"AwsKeys({self.access_key!r}, arn={self.arn!r})"

    def env(self) -> dict[str, str]:
        env = {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key}
        if self.token:
            env["AWS_SESSION_TOKEN"] = self.token
        return env


class FakeAWS(LoopbackServer):
    """STS and ECR on one loopback HTTPS server. ``pki`` signs its certificate (a new one if not given)."""

    def __init__(self, pki: PKI | None = None, *, region: str = "us-west-2", ecr_token_lifetime: int = 12 * 3600) -> None:
        self.pki = pki or PKI()
        # HTTPS: its url (https://127.0.0.1:<port>) is AWS_ENDPOINT_URL_STS and AWS_ENDPOINT_URL_ECR.
        super().__init__(token_lifetime=3600, ssl_context=self.pki.server_ssl_context())
        #: The region STS expects in a signature's scope (the endpoint's region).
        self.region = region
        #: Lifetime, in seconds, of the ECR authorization tokens issued from now on.
        self.ecr_token_lifetime = ecr_token_lifetime
        self._keys: dict[str, AwsKeys] = {}
        self._trusts: dict[str, tuple[set[str], str | None]] = {}
        self._current = threading.local()  # the request each handler thread is dispatching
        #: ``(cluster, arn)`` of every GetCallerIdentity STS verified.
        self.verified: list[tuple[str, str]] = []
        #: ECR passwords issued, in order.
        self.ecr_passwords: list[str] = []
        #: ``(region, arn)`` of every GetAuthorizationToken: the region signed for, and the caller.
        self.ecr_calls: list[tuple[str, str]] = []
        #: ``arn`` of every ECR Public GetAuthorizationToken's caller.
        self.ecr_public_calls: list[str] = []
        #: ``(role_arn, subject, session_name)`` of every AssumeRoleWithWebIdentity granted.
        self.web_identity_calls: list[tuple[str, str, str]] = []
        #: The cluster's OIDC issuer: STS trusts the tokens its key signs.
        self.oidc_issuer = f"https://oidc.eks.{region}.amazonaws.com/id/FAKE{secrets.token_hex(8).upper()}"
        self._oidc_key = ec.generate_private_key(ec.SECP256R1())
        self._web_trusts: dict[str, set[str]] = {}
        self._ecr_allowed: set[str] | None = None
        self._sts_hosts: dict[str, str] = {}

    def write_ca(self, path: Path) -> Path:
        """Write the CA of this fake's certificate (for ``AWS_CA_BUNDLE``); returns ``path``."""
        path.write_bytes(self.pki.ca_pem)
        return path

    def env(self, ca_file: Path) -> dict[str, str]:
        """The variables that send botocore here: both endpoints and the CA bundle."""
        return {"AWS_ENDPOINT_URL_STS": self.url, "AWS_ENDPOINT_URL_ECR": self.url, "AWS_ENDPOINT_URL_ECR_PUBLIC": self.url,
                "AWS_CA_BUNDLE": str(self.write_ca(ca_file))}

    def clear_faults(self) -> None:
        """Forget the faults not used yet."""
        with self._lock:
            self._faults.clear()

    # -- identities -----------------------------------------------------------------------------

    def add_user(self, name: str = "fleet-reader") -> AwsKeys:
        """A long-term access key of IAM user ``name``."""
        keys = AwsKeys("AKIA" + secrets.token_hex(8).upper(), secrets.token_urlsafe(30), f"arn:aws:iam::{ACCOUNT}:user/{name}")
        with self._lock:
            self._keys[keys.access_key] = keys
        return keys

    def issue_session(self, role_arn: str, session_name: str = "session", lifetime: int | None = None) -> AwsKeys:
        """Temporary keys of ``role_arn`` (as AssumeRole, IMDS and the container endpoint give them)."""
        role = role_arn.rsplit("/", 1)[-1]
        keys = AwsKeys(
            "ASIA" + secrets.token_hex(8).upper(),
            secrets.token_urlsafe(30),
            f"arn:aws:sts::{ACCOUNT}:assumed-role/{role}/{session_name}",
            token="FwoGZXIvYXdzE" + secrets.token_urlsafe(48),
            expires_at=(datetime.now(UTC) + timedelta(seconds=lifetime or self.token_lifetime)).replace(microsecond=0),
        )
        with self._lock:
            self._keys[keys.access_key] = keys
        return keys

    def add_role(self, name: str, *, trusts: tuple[str, ...] = (), external_id: str | None = None) -> str:
        """Role ``name``, assumable by the ARNs in ``trusts`` (with ``external_id`` when given); returns its ARN."""
        arn = f"arn:aws:iam::{ACCOUNT}:role/{name}"
        with self._lock:
            self._trusts[arn] = (set(trusts), external_id)
        return arn

    def add_web_identity(self, role_arn: str) -> str:
        """A web identity token AssumeRoleWithWebIdentity accepts for ``role_arn`` (a service
        account's token, the role trusting that service account)."""
        name = "sa-" + secrets.token_hex(4)
        self.trust_service_account(role_arn, "irsa", name)
        return self.service_account_token("irsa", name)

    def trust_service_account(self, role_arn: str, namespace: str, name: str) -> None:
        """Let ``namespace/name``'s tokens assume ``role_arn`` (the role's trust policy on the OIDC provider)."""
        with self._lock:
            self._web_trusts.setdefault(role_arn, set()).add(f"system:serviceaccount:{namespace}:{name}")

    def service_account_token(
        self, namespace: str = "default", name: str = "default", *, audience: str = STS_AUDIENCE, lifetime: int = 3600,
        key: ec.EllipticCurvePrivateKey | None = None,
    ) -> str:
        """A projected service-account token of ``namespace/name`` for ``audience``, as the
        kubelet hands a plugin (KEP-4412), signed by the cluster's OIDC key (or ``key``)."""
        now = datetime.now(UTC)
        claims = {"iss": self.oidc_issuer, "sub": f"system:serviceaccount:{namespace}:{name}", "aud": [audience],
                  "iat": int(now.timestamp()), "nbf": int(now.timestamp()), "exp": int(now.timestamp()) + lifetime,
                  "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": name, "uid": secrets.token_hex(8)}}}
        return jwt.encode(claims, key or self._oidc_key, algorithm="ES256", headers={"kid": "fake-oidc"})

    def allow_ecr(self, *arns: str) -> None:
        """From now on only these IAM users' and roles' ARNs (an assumed role's session counts as
        its role) get ECR and ECR Public tokens; others are refused (AccessDeniedException)."""
        with self._lock:
            self._ecr_allowed = set(arns)

    def answer_as_sts(self, host: str, region: str) -> None:
        """Answer presigned GetCallerIdentity URLs for STS host ``host`` (its signature scoped to
        ``region``), as that partition's STS does."""
        with self._lock:
            self._sts_hosts[host.lower()] = region

    # -- the cluster side -----------------------------------------------------------------------

    def authenticator(self, cluster: str) -> Callable[[str], bool]:
        """A token verifier for ``cluster``, as aws-iam-authenticator: local checks of the token's
        URL, then the URL sent to STS with ``x-k8s-aws-id: <cluster>``; true when STS answered 200."""

        def verify(token: str) -> bool:
            url = token_url(token)
            if url is None or not self._url_acceptable(url):
                return False
            context = ssl.create_default_context(cadata=self.pki.ca_pem.decode())
            parts = urlsplit(url)
            headers = {"x-k8s-aws-id": cluster, "Accept": "application/json"}
            if parts.netloc != f"127.0.0.1:{self.port}":  # a real STS host name the fake answers as
                headers["Host"] = parts.netloc
                url = f"{self.url}{parts.path}?{parts.query}"
            request = urllib.request.Request(url, headers=headers)
            try:
                with urllib.request.urlopen(request, context=context, timeout=10) as answer:
                    return answer.status == 200
            except OSError:  # HTTPError (a refusal) included
                return False

        return verify

    def _url_acceptable(self, url: str) -> bool:
        # aws-iam-authenticator's token.go: before STS sees it.
        parts = urlsplit(url)
        with self._lock:
            hosts = {f"127.0.0.1:{self.port}", *self._sts_hosts}
        if parts.scheme != "https" or parts.netloc not in hosts or parts.path != "/":
            return False
        query = parse_qsl(parts.query, keep_blank_values=True)
        names = [k.lower() for k, _ in query]
        if len(names) != len(set(names)) or not set(names) <= ALLOWED_QUERY:
            return False
        params = {k.lower(): v for k, v in query}
        if params.get("action") != "GetCallerIdentity":
            return False
        if "x-k8s-aws-id" not in params.get("x-amz-signedheaders", "").split(";"):
            return False
        try:
            expires = int(params.get("x-amz-expires", ""))
            signed_at = parse_amz_date(params.get("x-amz-date", ""))
        except (ValueError, Refused):
            return False
        return 0 < expires <= 900 and datetime.now(UTC) - signed_at <= PRESIGNED_MAX_AGE

    # -- request handling -------------------------------------------------------------------------

    def _endpoint(self, method: str, path: str) -> str:
        # Which API is in the query (GET), the form body (STS POST) or a header (ECR): the
        # request being dispatched on this thread is in _current.
        handler, body = self._current.request
        target = handler.headers.get("X-Amz-Target")
        if target in (ECR_TARGET, ECR_PUBLIC_TARGET):
            return "ecr" if target == ECR_TARGET else "ecr-public"
        form = urlsplit(handler.path).query if method == "GET" else body.decode("utf-8", "replace")
        action = dict(parse_qsl(form)).get("Action")
        return {"GetCallerIdentity": "sts", "AssumeRole": "assume-role", "AssumeRoleWithWebIdentity": "web-identity"}.get(str(action), "unknown")

    def _dispatch(self, handler: Handler, body: bytes) -> None:
        self._current.request = (handler, body)
        super()._dispatch(handler, body)

    def _answer(self, endpoint: str, handler: Handler, path: str, query: dict[str, list[str]], body: bytes) -> Reply:
        try:
            if endpoint == "sts":
                return self._get_caller_identity(handler)
            if endpoint == "assume-role":
                return self._assume_role(handler, body)
            if endpoint == "web-identity":
                return self._assume_role_with_web_identity(body)
            if endpoint in ("ecr", "ecr-public"):
                return self._ecr_token(handler, body, public=endpoint == "ecr-public")
            raise Refused(400, "InvalidAction", "unknown action")
        except Refused as refused:
            if endpoint in ("ecr", "ecr-public"):
                document = {"__type": refused.code, "message": str(refused)}
                return Reply(refused.status, json.dumps(document).encode(), "application/x-amz-json-1.1")
            error = f"<Error><Type>Sender</Type><Code>{refused.code}</Code><Message>{escape(str(refused))}</Message></Error>"
            return xml(refused.status, f'<ErrorResponse xmlns="{STS_NS}">{error}<RequestId>{request_id()}</RequestId></ErrorResponse>')

    def _known(self, access_key: str, token: str | None) -> AwsKeys:
        with self._lock:
            keys = self._keys.get(access_key)
        if keys is None:
            raise Refused(403, "InvalidClientTokenId", "The security token included in the request is invalid.")
        if keys.token is not None and (token != keys.token or keys.expires_at is None or keys.expires_at <= datetime.now(UTC)):
            raise Refused(403, "ExpiredToken" if token == keys.token else "InvalidClientTokenId", "The security token is invalid or expired.")
        return keys

    def _check_scope(self, credential: str, service: str, host: str = "") -> tuple[str, str]:
        access_key, _, scope = credential.partition("/")
        fields = scope.split("/")
        if len(fields) != 4 or fields[2] != service or fields[3] != "aws4_request":
            raise Refused(403, "SignatureDoesNotMatch", "Credential should be scoped to a valid service and region.")
        # STS at the loopback address is the region's endpoint (or the global one, which signs as
        # us-east-1); at a real host name, that host's region only. ECR stands for every region's
        # endpoint, and records the region signed for; ECR Public is in us-east-1 only.
        with self._lock:
            host_region = self._sts_hosts.get(host.lower())
        allowed = {"sts": (host_region,) if host_region else (self.region, "us-east-1"), "ecr-public": ("us-east-1",)}.get(service)
        if allowed is not None and fields[1] not in allowed:
            raise Refused(403, "SignatureDoesNotMatch", "Credential should be scoped to a valid region.")
        return access_key, scope

    def _get_caller_identity(self, handler: Handler) -> Reply:
        # A presigned GET: every SigV4 value is in the query.
        parts = urlsplit(handler.path)
        query = parse_qsl(parts.query, keep_blank_values=True)
        params = dict(query)
        if params.get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" or "X-Amz-Signature" not in params:
            raise Refused(403, "MissingAuthenticationToken", "Request is missing Authentication Token")
        host = handler.headers.get("Host") or ""
        with self._lock:
            known_host = host.lower() in self._sts_hosts or host == f"127.0.0.1:{self.port}"
        if not known_host:
            raise Refused(403, "SignatureDoesNotMatch", "The request was not addressed to this STS endpoint.")
        access_key, scope = self._check_scope(params.get("X-Amz-Credential", ""), "sts", host)
        signed_at = parse_amz_date(params.get("X-Amz-Date", ""))
        try:
            expires = int(params.get("X-Amz-Expires", ""))
        except ValueError:
            raise Refused(400, "AuthorizationQueryParametersError", "X-Amz-Expires must be a number") from None
        if not 0 < expires <= 900 or datetime.now(UTC) > signed_at + PRESIGNED_MAX_AGE:
            # STS takes a presigned GetCallerIdentity for 15 minutes whatever its X-Amz-Expires
            # (60 s in an EKS token): what the 14-minute expirationTimestamp relies on.
            raise Refused(403, "ExpiredToken", "Signature expired")
        keys = self._known(access_key, params.get("X-Amz-Security-Token"))
        signed_headers = params.get("X-Amz-SignedHeaders", "").split(";")
        headers = {name.lower(): value for name, value in handler.headers.items()}
        expected = sigv4_signature(
            keys.secret_key,
            method="GET",
            path=parts.path,
            query=[(k, v) for k, v in query if k != "X-Amz-Signature"],
            headers=headers,
            signed_headers=signed_headers,
            payload_hash=_EMPTY_SHA256,
            amz_date=params["X-Amz-Date"],
            scope=scope,
        )
        if not hmac.compare_digest(expected, params["X-Amz-Signature"]):
            raise Refused(403, "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided.")
        with self._lock:
            self.verified.append((headers.get("x-k8s-aws-id", ""), keys.arn))
        user_id = keys.access_key if keys.token is None else f"AROA{keys.access_key[4:]}:{keys.arn.rsplit('/', 1)[-1]}"
        result = f"<Arn>{keys.arn}</Arn><UserId>{user_id}</UserId><Account>{ACCOUNT}</Account>"
        return xml(200, sts_document("GetCallerIdentity", result))

    def _signed_caller(self, handler: Handler, body: bytes, service: str) -> tuple[AwsKeys, str]:
        # A SigV4 Authorization header, as botocore's clients sign. Returns the caller and the
        # region signed for.
        authorization = handler.headers.get("Authorization") or ""
        algorithm, _, rest = authorization.partition(" ")
        fields = dict(item.strip().split("=", 1) for item in rest.split(",") if "=" in item)
        if algorithm != "AWS4-HMAC-SHA256" or not {"Credential", "SignedHeaders", "Signature"} <= set(fields):
            raise Refused(403, "MissingAuthenticationToken", "Request is missing Authentication Token")
        access_key, scope = self._check_scope(fields["Credential"], service)
        amz_date = handler.headers.get("X-Amz-Date") or ""
        if abs(datetime.now(UTC) - parse_amz_date(amz_date)) > timedelta(minutes=5):
            raise Refused(403, "SignatureDoesNotMatch", "Signature expired")
        keys = self._known(access_key, handler.headers.get("X-Amz-Security-Token"))
        parts = urlsplit(handler.path)
        headers = {name.lower(): value for name, value in handler.headers.items()}
        expected = sigv4_signature(
            keys.secret_key,
            method=handler.command,
            path=parts.path,
            query=parse_qsl(parts.query, keep_blank_values=True),
            headers=headers,
            signed_headers=fields["SignedHeaders"].split(";"),
            payload_hash=hashlib.sha256(body).hexdigest(),
            amz_date=amz_date,
            scope=scope,
        )
        if not hmac.compare_digest(expected, fields["Signature"]):
            raise Refused(403, "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided.")
        return keys, scope.split("/")[1]

    def _assume_role(self, handler: Handler, body: bytes) -> Reply:
        caller, _ = self._signed_caller(handler, body, "sts")
        form = dict(parse_qsl(body.decode("utf-8")))
        role_arn, session_name = form.get("RoleArn", ""), form.get("RoleSessionName", "")
        with self._lock:
            trust = self._trusts.get(role_arn)
        if trust is None or caller.arn not in trust[0]:
            raise Refused(403, "AccessDenied", f"User: {caller.arn} is not authorized to perform: sts:AssumeRole on resource: {role_arn}")
        if trust[1] is not None and form.get("ExternalId") != trust[1]:
            raise Refused(403, "AccessDenied", f"User: {caller.arn} is not authorized to perform: sts:AssumeRole on resource: {role_arn}")
        return self._credentials_reply("AssumeRole", role_arn, session_name, form)

    def _assume_role_with_web_identity(self, body: bytes) -> Reply:
        # Unsigned: the web identity token is the proof. STS checks its signature against the
        # issuer's keys, its audience, its expiry, then the role's trust in its subject.
        form = dict(parse_qsl(body.decode("utf-8")))
        role_arn, session_name = form.get("RoleArn", ""), form.get("RoleSessionName", "")
        if not 2 <= len(session_name) <= 64:
            raise Refused(400, "ValidationError", "RoleSessionName must be 2 to 64 characters")
        try:
            claims = jwt.decode(
                form.get("WebIdentityToken", ""), self._oidc_key.public_key(), algorithms=["ES256"], audience=STS_AUDIENCE,
                issuer=self.oidc_issuer, options={"require": ["exp", "iat", "sub", "aud", "iss"]},
            )
        except jwt.ExpiredSignatureError:
            raise Refused(400, "ExpiredTokenException", "Token expired") from None
        except jwt.PyJWTError:
            raise Refused(400, "InvalidIdentityToken", "Couldn't verify the web identity token") from None
        with self._lock:
            trusted = claims["sub"] in self._web_trusts.get(role_arn, set())
        if not trusted:
            raise Refused(403, "AccessDenied", "Not authorized to perform sts:AssumeRoleWithWebIdentity")
        with self._lock:
            self.web_identity_calls.append((role_arn, claims["sub"], session_name))
        return self._credentials_reply("AssumeRoleWithWebIdentity", role_arn, session_name, form)

    def _credentials_reply(self, action: str, role_arn: str, session_name: str, form: dict[str, str]) -> Reply:
        lifetime = int(form.get("DurationSeconds") or 3600)
        keys = self.issue_session(role_arn, session_name, lifetime)
        assert keys.expires_at is not None
        result = (
            f"<Credentials><AccessKeyId>{keys.access_key}</AccessKeyId><SecretAccessKey>{keys.secret_key}</SecretAccessKey>"
            f"<SessionToken>{keys.token}</SessionToken><Expiration>{iso(keys.expires_at)}</Expiration></Credentials>"
            f"<AssumedRoleUser><Arn>{keys.arn}</Arn><AssumedRoleId>AROA{keys.access_key[4:]}:{session_name}</AssumedRoleId></AssumedRoleUser>"
        )
        with self._lock:
            self._seen.append(SeenCall(f"{action}:issued", "POST", "/", {"RoleSessionName": [session_name]}, None, None))
        return xml(200, sts_document(action, result))

    def _ecr_token(self, handler: Handler, body: bytes, *, public: bool = False) -> Reply:
        caller, region = self._signed_caller(handler, body, "ecr-public" if public else "ecr")
        # An assumed role's session acts as its role.
        role = caller.arn.replace(":sts::", ":iam::").replace(":assumed-role/", ":role/").rsplit("/", 1)[0]
        with self._lock:
            allowed = self._ecr_allowed is None or caller.arn in self._ecr_allowed or role in self._ecr_allowed
            if allowed:
                (self.ecr_public_calls.append(caller.arn) if public else self.ecr_calls.append((region, caller.arn)))
        if not allowed:
            raise Refused(400, "AccessDeniedException", f"User: {caller.arn} is not authorized to perform: ecr:GetAuthorizationToken")
        password = "eyJwYXlsb2FkIjoi" + secrets.token_urlsafe(48)
        with self._lock:
            self.ecr_passwords.append(password)
        expires_at = datetime.now(UTC) + timedelta(seconds=self.ecr_token_lifetime)
        if public:  # ECR Public answers one entry, for public.ecr.aws
            token = base64.b64encode(f"AWS:{password}".encode()).decode()
            document = {"authorizationData": {"authorizationToken": token, "expiresAt": expires_at.timestamp()}}
            return Reply(200, json.dumps(document).encode(), "application/x-amz-json-1.1")
        data = {
            "authorizationToken": base64.b64encode(f"AWS:{password}".encode()).decode(),
            "expiresAt": expires_at.timestamp(),
            # ECR answers for the registry of the region it was asked in.
            "proxyEndpoint": f"https://{ACCOUNT}.dkr.ecr.{region}.{ecr_domain(region)}",
        }
        return Reply(200, json.dumps({"authorizationData": [data]}).encode(), "application/x-amz-json-1.1")
