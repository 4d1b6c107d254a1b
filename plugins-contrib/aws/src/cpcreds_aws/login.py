"""Which AWS credentials sign: botocore's chain, optionally followed by AssumeRole.

The chain is botocore's own (``botocore.session.Session().get_credentials()``), so it finds
what the AWS CLI finds, in its order: ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``
(``AWS_SESSION_TOKEN``), the shared credentials and config files (``profile``; ``role_arn`` with
``source_profile``, ``credential_process``, SSO), web identity (``AWS_WEB_IDENTITY_TOKEN_FILE``
and ``AWS_ROLE_ARN``: IRSA), the container credentials endpoint (``AWS_CONTAINER_CREDENTIALS_FULL_URI``
or ``_RELATIVE_URI``: EKS Pod Identity, ECS), then the instance metadata service (IMDSv2).

When the keys are in the environment and no profile is named (neither the ``profile`` option
nor ``AWS_PROFILE``/``AWS_DEFAULT_PROFILE``), the session is not built at all: botocore's chain
takes those keys first anyway (``AWS_SECURITY_TOKEN`` before ``AWS_SESSION_TOKEN``, as botocore
reads them), and building it costs more than everything else a token needs (an exec plugin's
start is most of its answer). The session is still built for what only it knows: keys with
``AWS_CREDENTIAL_EXPIRATION`` (botocore refreshes them), and the region when no variable names
one and a shared config file exists (its default profile's ``region``). The one difference: the
shared files are then not read, so a malformed one that botocore would refuse goes unnoticed.

botocore's credentials object refreshes itself (web identity, container and instance credentials
expire); an assumed role's keys are kept until fifteen minutes before they expire. What the
instance metadata service and the container endpoint answer is read within the fetch's deadline
and a size limit (:mod:`cpcreds_aws.metadata`). Keys carry their expiry as their source gave it
(not as botocore extended it), so that no token is said to outlive them.
"""

from __future__ import annotations

import os
import threading
from datetime import datetime, timedelta, timezone
from typing import Any

from .failures import LOGIN_SOURCES, Unusable, operation
from .endpoints import EndpointSettings
from .options import AwsOptions
from .token import Keys

__all__ = ["Login", "WEB_IDENTITY_SESSION_NAME"]

#: The session name of a pod's role (ecr-credential-provider's).
WEB_IDENTITY_SESSION_NAME = "ecr-credential-provider"

# An assumed role's keys are renewed when less than this is left: STS checks the signing keys
# each time the cluster presents the token, for up to 15 minutes after it was signed.
_ROLE_MARGIN = timedelta(minutes=15)
_ROLE_SECONDS = 3600


class Login:
    """The credentials and region of one provider entry. Thread-safe; builds nothing until asked."""

    def __init__(self, options: AwsOptions) -> None:
        self.options = options
        self._lock = threading.Lock()
        self._session: Any = None
        self._credentials: Any = None
        self._role: tuple[Keys, datetime] | None = None
        self._metadata: tuple[Any, Any] | None = None  # MetadataHTTP of IMDS and the container endpoint

    def region(self) -> str | None:
        """The option, else ``AWS_REGION``, ``AWS_DEFAULT_REGION``, else the profile's."""
        found = self.options.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if found:
            return found
        if self._session is None and self._env_keys() is not None and not _config_file_exists():
            return None  # what the session would say: no variable and no file name a region
        with self._lock:
            return self._botocore_session(timeout=10.0).get_config_variable("region") or None

    def keys(self, timeout: float) -> Keys:
        """Keys to sign with: the chain's, then the assumed role's when ``roleArn`` is set.
        botocore's exceptions pass through (see :func:`cpcreds_aws.failures.describe`)."""
        with self._lock:
            for http in self._metadata or ():
                http.begin(timeout)
            base = self._chain_keys(timeout)
            if self.options.role_arn is None:
                return base
            now = datetime.now(timezone.utc)
            if self._role is None or self._role[1] - _ROLE_MARGIN <= now:
                self._role = self._assume_role(base, timeout)
            return self._role[0]

    def endpoint_settings(self) -> EndpointSettings:
        """FIPS, dual-stack and the legacy global STS endpoint: from the session (the environment,
        then the profile) when it is built, else from the environment (see :mod:`cpcreds_aws.endpoints`)."""
        with self._lock:
            session = self._session
        return EndpointSettings.read(session.get_config_variable if session is not None else None)

    def client(self, service: str, region: str, timeout: float, *, fips: bool = False, keys: Keys | None = None) -> Any:
        """A botocore client of ``service`` in ``region`` signing with ``keys`` (default:
        :meth:`keys`), every call bounded by ``timeout`` (connect, read, and at most one retry)."""
        keys = keys or self.keys(timeout)
        with self._lock:
            session = self._botocore_session(timeout)
            return session.create_client(
                service,
                region_name=region,
                aws_access_key_id=keys.access_key,
                aws_secret_access_key=keys.secret_key,
                aws_session_token=keys.token,
                config=_client_config(timeout, fips=fips),
            )

    def _env_keys(self) -> Keys | None:
        # botocore's EnvProvider, when botocore's chain would surely take its plain (not
        # refreshable) credentials: partial keys are left to it (to raise its error), and so is a
        # named profile (it takes the environment's keys only if the profile exists).
        environ = os.environ
        access, secret = environ.get("AWS_ACCESS_KEY_ID"), environ.get("AWS_SECRET_ACCESS_KEY")
        if not access or not secret or self.options.profile is not None:
            return None
        if any(environ.get(name) for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_CREDENTIAL_EXPIRATION")):
            return None
        return Keys(access, secret, environ.get("AWS_SECURITY_TOKEN") or environ.get("AWS_SESSION_TOKEN") or None)

    def _chain_keys(self, timeout: float) -> Keys:
        if self._session is None:
            keys = self._env_keys()
            if keys is not None:
                return keys
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

        try:
            if self._credentials is None:
                credentials = self._botocore_session(timeout).get_credentials()
                if credentials is None:
                    raise NoCredentialsError()
                self._credentials = credentials
            frozen = self._credentials.get_frozen_credentials()  # refreshes refreshable credentials
            source = LOGIN_SOURCES.get(str(getattr(self._credentials, "method", "")), "a login source")
            return Keys(frozen.access_key, frozen.secret_key, frozen.token, self._expiry(frozen.access_key), source)
        except (BotoCoreError, ClientError, Unusable):
            raise
        except Exception as exc:  # noqa: BLE001 - botocore trusts some answers' shape (KeyError, TypeError)
            source = LOGIN_SOURCES.get(str(getattr(self._credentials, "method", "")), "a login source")
            problem = f"{source} answered with credentials that are not usable ({type(exc).__name__})"
        raise Unusable(problem)

    def _botocore_session(self, timeout: float) -> Any:
        if self._session is None:
            import botocore.session

            from .quiet import quiet_botocore

            quiet_botocore()

            session = botocore.session.Session(profile=self.options.profile)
            # The clients the chain makes (web identity's STS) are bounded as ours are.
            session.set_default_client_config(_client_config(timeout))
            from .metadata import bound_metadata_fetchers

            self._metadata = bound_metadata_fetchers(session)
            for http in self._metadata:
                http.begin(timeout)
            self._session = session
        return self._session

    def _expiry(self, access_key: str) -> datetime | None:
        # As the endpoint that handed the keys out said it (botocore moves IMDS's forward when it
        # is near), else as botocore holds it: RefreshableCredentials has no public accessor.
        for http in self._metadata or ():
            said = http.expiry_of(access_key)
            if said is not None:
                return said
        held = getattr(self._credentials, "_expiry_time", None)
        if not isinstance(held, datetime):
            return None
        return held if held.tzinfo else held.replace(tzinfo=timezone.utc)

    def web_identity_keys(self, role_arn: str, token: str, region: str, timeout: float) -> Keys:
        """The keys of ``role_arn`` for a pod's service-account ``token`` (STS
        AssumeRoleWithWebIdentity in ``region``, session name ``ecr-credential-provider``, as the
        kubelet's ECR plugin names it). Unsigned: the token is the proof, no key of the node's is
        sent. Not kept: each token is exchanged for its own keys."""
        from botocore import UNSIGNED
        from botocore.config import Config

        with self._lock:
            session = self._botocore_session(timeout)
            sts = session.create_client("sts", region_name=region, config=_client_config(timeout).merge(Config(signature_version=UNSIGNED)))
        try:
            with operation("STS AssumeRoleWithWebIdentity"):
                answer = sts.assume_role_with_web_identity(
                    RoleArn=role_arn, RoleSessionName=WEB_IDENTITY_SESSION_NAME, WebIdentityToken=token, DurationSeconds=_ROLE_SECONDS
                )
        finally:
            sts.close()
        return _issued_keys(answer, "STS AssumeRoleWithWebIdentity", "the pod's service account (AssumeRoleWithWebIdentity)")

    def _assume_role(self, base: Keys, timeout: float) -> tuple[Keys, datetime]:
        session = self._botocore_session(timeout)
        region = self.options.region or os.environ.get("AWS_REGION") or session.get_config_variable("region") or "us-east-1"
        sts = session.create_client(
            "sts",
            region_name=region,
            aws_access_key_id=base.access_key,
            aws_secret_access_key=base.secret_key,
            aws_session_token=base.token,
            config=_client_config(timeout),
        )
        arguments: dict[str, Any] = {
            "RoleArn": self.options.role_arn,
            "RoleSessionName": self.options.role_session_name,
            "DurationSeconds": _ROLE_SECONDS,
        }
        if self.options.external_id is not None:
            arguments["ExternalId"] = self.options.external_id
        try:
            with operation("STS AssumeRole"):
                answer = sts.assume_role(**arguments)
        finally:
            sts.close()
        keys = _issued_keys(answer, "STS AssumeRole", "STS AssumeRole (roleArn)")
        assert keys.expires_at is not None
        return keys, keys.expires_at


def _issued_keys(answer: Any, name: str, source: str) -> Keys:
    # The Credentials of an AssumeRole or AssumeRoleWithWebIdentity answer (botocore's parsed dict).
    credentials = answer.get("Credentials") if isinstance(answer, dict) else None
    try:
        expiry = credentials["Expiration"]  # type: ignore[index]
        if not isinstance(expiry, datetime):
            raise TypeError
        expiry = expiry if expiry.tzinfo else expiry.replace(tzinfo=timezone.utc)
        keys = Keys(str(credentials["AccessKeyId"]), str(credentials["SecretAccessKey"]), str(credentials["SessionToken"]),  # type: ignore[index]
                    expiry, source)
        if not all(keys[:3]):
            raise TypeError
    except (KeyError, TypeError):
        raise Unusable(f"{name} answered without credentials") from None
    return keys


def _config_file_exists() -> bool:
    # Where botocore reads the shared config file from.
    return os.path.isfile(os.path.expanduser(os.environ.get("AWS_CONFIG_FILE") or "~/.aws/config"))


def _client_config(timeout: float, *, fips: bool = False) -> Any:
    """botocore's client settings for calls that must end within ``timeout`` seconds in all:
    one retry (standard mode: after throttling, a 5xx or a broken connection) only when two
    attempts and the pause before the second (at most 1 s) fit. Each attempt's connect and read
    timeouts get 60 % of its share: making the client (loading the service model) and the TLS
    handshake take the rest."""
    from botocore.config import Config

    seconds = max(0.1, float(timeout))
    attempts = 2 if seconds >= 3 else 1
    each = 0.6 * ((seconds - 1) / 2 if attempts == 2 else seconds)
    return Config(
        connect_timeout=each,
        read_timeout=each,
        retries={"mode": "standard", "total_max_attempts": attempts},
        use_fips_endpoint=fips or None,
    )
