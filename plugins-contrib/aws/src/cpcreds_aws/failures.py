"""What a botocore failure is, in one line fit for a log: never the text of botocore's
exception, which may quote an answer's body (the container endpoint's error, an unparsable STS
answer) or a presigned URL."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["describe", "operation", "Unusable", "LOGIN_SOURCES"]

# AWS error codes are words (Throttling, AccessDenied, InvalidIdentityToken.Expired).
_CODE = re.compile(r"[A-Za-z][A-Za-z0-9.]{0,63}")
#: Where botocore's credential providers (their METHOD) get credentials, in a user's words.
LOGIN_SOURCES = {
    "env": "the environment",
    "shared-credentials-file": "the shared credentials file",
    "config-file": "the shared config file",
    "assume-role": "a profile's role_arn (AssumeRole)",
    "assume-role-with-web-identity": "web identity (AssumeRoleWithWebIdentity)",
    "container-role": "the container credentials endpoint",
    "iam-role": "the instance metadata service",
    "custom-process": "a profile's credential_process",
    "sso": "IAM Identity Center (SSO)",
}
_NO_CREDENTIALS = (
    "found no AWS credentials (looked in the environment, the shared config and credentials files, web identity, "
    "the container credentials endpoint and the instance metadata service)"
)


class Unusable(Exception):
    """An answer that parsed but cannot be used; its message is ours and safe to show."""


@contextmanager
def operation(name: str) -> Iterator[None]:
    """Within it, an answer botocore cannot parse is said to be ``name``'s (``STS AssumeRole``):
    botocore's parser error does not say which call it was parsing."""
    try:
        yield
    except Exception as exc:
        if _is_parser_error(exc):
            raise Unusable(f"{name} answered with a body that is not a valid answer") from None
        raise


def _seconds(value: float) -> str:
    return f"{value:.3g}s"  # a kubelet plugin's timeout is what is left: 1.9996s reads 2s


def describe(exc: BaseException, timeout: float, *, service: str | None = None) -> str:
    """``exc`` (a botocore exception, or anything else) in a few safe words: the AWS operation and
    its HTTP status and error code, or which login source failed, or which kind of network
    failure; ``timeout`` is what a read or connect timeout is said to have been; ``service`` the
    botocore service called (``ecr-public``: its operation is named ECR Public's)."""
    if isinstance(exc, Unusable):
        return str(exc)
    from botocore import exceptions as e

    if isinstance(exc, e.ClientError):
        error = exc.response.get("Error") or {}
        status = (exc.response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
        code = error.get("Code")
        shown = f" ({code})" if isinstance(code, str) and _CODE.fullmatch(code) else ""
        return f"{_operation(exc.operation_name, service)} answered HTTP {status}{shown}"
    if isinstance(exc, (e.ReadTimeoutError, e.ConnectTimeoutError)):
        return f"{_endpoint(exc)} did not answer within the {_seconds(timeout)} timeout"
    if isinstance(exc, e.SSLError):
        return f"{_endpoint(exc)}: TLS handshake failed"
    if isinstance(exc, e.ConnectionClosedError):
        return f"{_endpoint(exc)} broke off its answer"
    if isinstance(exc, e.EndpointConnectionError):
        return f"{_endpoint(exc)} cannot be reached"
    if _is_parser_error(exc):
        return "an AWS endpoint answered with a body that is not a valid answer"
    if isinstance(exc, e.NoCredentialsError):
        return _NO_CREDENTIALS
    if isinstance(exc, e.CredentialRetrievalError):
        source = LOGIN_SOURCES.get(str(exc.kwargs.get("provider")), "a login source")
        detail = str(exc.kwargs.get("error_msg") or "").lower()
        why = "did not answer in time" if "timeout" in detail or "timed out" in detail else "failed"
        return f"getting credentials from {source} {why}"
    if isinstance(exc, (e.PartialCredentialsError, e.ProfileNotFound, e.NoRegionError, e.InvalidConfigError)):
        return str(exc)  # names a variable, a profile or a setting; never a value
    if isinstance(exc, e.BotoCoreError):
        return f"botocore failed ({type(exc).__name__})"
    return type(exc).__name__


def _is_parser_error(exc: BaseException) -> bool:
    # botocore.parsers is loaded by any client that got an answer; a signing-only run never has it.
    import sys

    parsers = sys.modules.get("botocore.parsers")
    return parsers is not None and isinstance(exc, parsers.ResponseParserError)


def _operation(name: object, service: str | None = None) -> str:
    if service == "ecr-public" and name == "GetAuthorizationToken":
        return "ECR Public GetAuthorizationToken"
    known = {"AssumeRole": "STS AssumeRole", "AssumeRoleWithWebIdentity": "STS AssumeRoleWithWebIdentity",
             "GetAuthorizationToken": "ECR GetAuthorizationToken", "GetCallerIdentity": "STS GetCallerIdentity"}
    return known.get(str(name), "an AWS API")


def _endpoint(exc: BaseException) -> str:
    # The URL botocore called, without its query (a presigned URL's query holds a signature).
    url = str(getattr(exc, "kwargs", {}).get("endpoint_url") or "")
    base = url.split("?", 1)[0]
    return base if re.fullmatch(r"https?://[A-Za-z0-9.\-:\[\]]+(/[A-Za-z0-9._\-/]*)?", base) else "an AWS endpoint"

