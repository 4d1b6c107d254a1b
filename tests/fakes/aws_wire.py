"""The AWS fake's wire helpers (:mod:`tests.fakes.aws`): SigV4 as AWS documents it (written apart
from botocore, which the code under test uses), STS's XML documents, an EKS token's URL, ECR's
registry domain per partition."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from datetime import UTC, datetime
from urllib.parse import quote

from .http import Reply

__all__ = ["sigv4_signature", "Refused", "parse_amz_date", "iso", "ecr_domain", "token_url", "sts_document", "xml", "request_id", "TOKEN_PREFIX", "STS_NS"]

STS_NS = "https://sts.amazonaws.com/doc/2011-06-15/"
TOKEN_PREFIX = "k8s-aws-v1."


# -- SigV4, as AWS documents it (written apart from botocore, which the code under test uses) ---


def _uri_encode(text: str) -> str:
    return quote(text, safe="-_.~")


def _signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    key = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def sigv4_signature(
    secret: str,
    *,
    method: str,
    path: str,
    query: list[tuple[str, str]],
    headers: dict[str, str],
    signed_headers: list[str],
    payload_hash: str,
    amz_date: str,
    scope: str,
) -> str:
    """The hex SigV4 signature of a request (``query`` without ``X-Amz-Signature``; ``headers``
    by lower-case name; ``scope`` is ``date/region/service/aws4_request``)."""
    canonical_query = "&".join(f"{_uri_encode(k)}={_uri_encode(v)}" for k, v in sorted((k, v) for k, v in query))
    canonical_headers = "".join(f"{name}:{' '.join(headers.get(name, '').split())}\n" for name in signed_headers)
    canonical = "\n".join([method, path or "/", canonical_query, canonical_headers, ";".join(signed_headers), payload_hash])
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    date, region, service, _ = scope.split("/")
    return hmac.new(_signing_key(secret, date, region, service), to_sign.encode(), hashlib.sha256).hexdigest()


class Refused(Exception):
    """A request AWS would refuse: ``status``, error ``code`` and message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code = status, code


def parse_amz_date(text: str) -> datetime:
    try:
        return datetime.strptime(text, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        raise Refused(400, "IncompleteSignature", "X-Amz-Date is not a date") from None


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


#: The DNS suffix of ECR's registries in each partition, by region prefix (the aws partition's otherwise).
_PARTITION_DOMAINS = (("cn-", "amazonaws.com.cn"), ("eusc-", "amazonaws.eu"), ("us-isob-", "sc2s.sgov.gov"),
                      ("us-isof-", "csp.hci.ic.gov"), ("us-iso-", "c2s.ic.gov"), ("eu-isoe-", "cloud.adc-e.uk"))


def ecr_domain(region: str) -> str:
    return next((domain for prefix, domain in _PARTITION_DOMAINS if region.startswith(prefix)), "amazonaws.com")


def token_url(token: str) -> str | None:
    if not token.startswith(TOKEN_PREFIX):
        return None
    encoded = token[len(TOKEN_PREFIX) :]
    if "=" in encoded:  # the token is unpadded; aws-iam-authenticator decodes with RawURLEncoding
        return None
    try:
        return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode("utf-8")
    except ValueError:
        return None


def request_id() -> str:
    return secrets.token_hex(16)


def sts_document(action: str, result: str) -> str:
    return (
        f'<{action}Response xmlns="{STS_NS}"><{action}Result>{result}</{action}Result>'
        f"<ResponseMetadata><RequestId>{request_id()}</RequestId></ResponseMetadata></{action}Response>"
    )


def xml(status: int, document: str) -> Reply:
    return Reply(status, document.encode(), "text/xml")
