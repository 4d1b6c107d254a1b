"""SigV4 query presigning of a body-less GET, byte for byte as botocore's ``SigV4QueryAuth``.

An EKS token is one such URL. botocore's signer module is slow to import (``botocore.auth``
loads ``botocore.compat``: urllib3, ``xml.etree``, botocore's regular expressions), several
times a bare interpreter's start, for some twenty lines of HMAC; so an exec plugin's run signs
here with the standard library. The steps and their order are botocore's (1.3x-1.4x), so the
URL is the one ``aws eks get-token`` prints for the same keys and second;
``tests/test_aws_sigv4.py`` compares the two for a wide range of inputs.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import datetime
from urllib.parse import quote, urlsplit, urlunsplit

__all__ = ["presign_get"]

_ALGORITHM = "AWS4-HMAC-SHA256"
#: sha256 of the empty body: a GET has none (botocore's EMPTY_SHA256_HASH).
_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _encode(value: str) -> str:
    return quote(value.encode("utf-8"), safe="-_.~")  # botocore.utils.percent_encode


def _hmac(key: bytes, message: str) -> bytes:
    return hmac.new(key, message.encode("utf-8"), hashlib.sha256).digest()


def _host(url: str) -> str:
    # botocore.auth._host_from_url: lower case, IPv6 in brackets, the port only if not the default.
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    if parts.port is not None and parts.port != _DEFAULT_PORTS.get(parts.scheme):
        host = f"{host}:{parts.port}"
    return host


def _canonical_path(path: str) -> str:
    # botocore.utils.normalize_url_path (RFC 3986 dot segments and empty segments removed), quoted.
    if not path:
        return "/"
    kept: list[str] = []
    for segment in path.split("/"):
        if segment == "..":
            if kept:
                kept.pop()
        elif segment and segment != ".":
            kept.append(segment)
    normal = ("/" if path[0] == "/" else "") + "/".join(kept) + ("/" if path[-1] == "/" and kept else "")
    return quote(normal, safe="/~")


def presign_get(
    url: str,
    params: dict[str, str],
    headers: dict[str, str],
    *,
    access_key: str,
    secret_key: str,
    token: str | None,
    service: str,
    region: str,
    expires: int,
    now: datetime,
) -> str:
    """``url`` (scheme, host and path, no query) with the query ``params`` (in their order) and
    the SigV4 query parameters signing them, ``headers`` (lower-case names) and ``host``, valid
    for ``expires`` seconds from ``now`` (UTC). A session ``token`` is sent as
    ``X-Amz-Security-Token``."""
    timestamp = now.strftime("%Y%m%dT%H%M%SZ")
    scope = f"{timestamp[:8]}/{region}/{service}/aws4_request"
    signed = dict(headers)
    signed.setdefault("host", _host(url))
    names = sorted(signed)
    auth = {
        "X-Amz-Algorithm": _ALGORITHM,
        "X-Amz-Credential": f"{access_key}/{scope}",
        "X-Amz-Date": timestamp,
        "X-Amz-Expires": str(expires),
        "X-Amz-SignedHeaders": ";".join(names),
    }
    if token is not None:
        auth["X-Amz-Security-Token"] = token
    pairs = [(_encode(key), _encode(value)) for key, value in (*params.items(), *auth.items())]
    parts = urlsplit(url)
    signed_url = urlunsplit((parts.scheme, parts.netloc, parts.path, "&".join(f"{k}={v}" for k, v in pairs), parts.fragment))
    canonical = "\n".join(
        (
            "GET",
            _canonical_path(parts.path),
            "&".join(f"{k}={v}" for k, v in sorted(pairs)),
            "".join(f"{name}:{' '.join(signed[name].split())}\n" for name in names),
            ";".join(names),
            _EMPTY_SHA256,
        )
    )
    to_sign = "\n".join((_ALGORITHM, timestamp, scope, hashlib.sha256(canonical.encode("utf-8")).hexdigest()))
    key = _hmac(f"AWS4{secret_key}".encode(), timestamp[:8])
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    signature = hmac.new(key, to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
    return f"{signed_url}&X-Amz-Signature={signature}"
