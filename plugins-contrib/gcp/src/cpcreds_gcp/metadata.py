"""Tokens from the GCE metadata server (Compute Engine, GKE workload identity, Cloud Run).

google-auth's ``compute_engine`` module reads ``GCE_METADATA_HOST`` once, when it is first
imported, and retries for up to 15 s with its own timeouts. Here the address is read for each
provider (so a process can be pointed elsewhere without a restart, as Go's metadata client
allows), each call is bounded by the fetch's deadline, and proxies are bypassed (the server is
link-local). The credentials class is an ordinary google-auth ``Credentials``, so impersonation
works on top of it like on any other source.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from urllib.parse import quote

import google.auth.credentials
import google.auth.exceptions
import google.auth.transport

from cpcreds.sdk import Abort

from .transport import BoundedRequest

__all__ = [
    "MetadataCredentials",
    "UnusableAnswer",
    "metadata_host",
    "probe",
    "probe_address",
    "parse_token_answer",
    "DEFAULT_METADATA_IP",
    "MAX_TOKEN_SECONDS",
]

DEFAULT_METADATA_IP = "169.254.169.254"
#: Google access tokens live at most 12 hours; a longer ``expires_in`` is not believed.
MAX_TOKEN_SECONDS = 12 * 3600
_FLAVOR = {"Metadata-Flavor": "Google"}
_HOST = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9.\-]{0,251}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]{2,45}\])(?::[0-9]{1,5})?")
# Bearer tokens are RFC 6750 b64token characters; anything else (a space, a newline, a quote)
# would corrupt an Authorization header.
_TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_PROBE_SECONDS = 3.0  # google-auth's GCE_METADATA_TIMEOUT default


class UnusableAnswer(google.auth.exceptions.RefreshError):
    """The endpoint answered 2xx, but not with a usable token. The message is ours, never the body."""


def metadata_host(environ: Mapping[str, str]) -> tuple[str | None, str]:
    """``(host, variable)`` from ``GCE_METADATA_HOST`` (or the older ``GCE_METADATA_ROOT``), or
    ``(None, "")`` when neither is set. ``ValueError`` when the value is not ``host[:port]``."""
    for variable in ("GCE_METADATA_HOST", "GCE_METADATA_ROOT"):
        value = environ.get(variable, "").strip()
        if value:
            if not _HOST.fullmatch(value):
                raise ValueError(f"{variable} is not a host or host:port")
            return value, variable
    return None, ""


def probe_address(environ: Mapping[str, str]) -> str:
    """Where to look for a metadata server when ``GCE_METADATA_HOST`` is unset: ``GCE_METADATA_IP``
    or the link-local address. ``ValueError`` when the variable is not ``host[:port]``."""
    value = environ.get("GCE_METADATA_IP", "").strip() or DEFAULT_METADATA_IP
    if not _HOST.fullmatch(value):
        raise ValueError("GCE_METADATA_IP is not a host or host:port")
    return value


def probe(request: BoundedRequest, host: str) -> str | None:
    """``None`` when a metadata server answers at ``host``, else why not (a few words)."""
    try:
        response = request(url=f"http://{host}/", method="GET", headers=dict(_FLAVOR), timeout=_PROBE_SECONDS)
    except Abort:
        last = request.last
        return last.failure if last is not None and last.failure else "no answer"
    if response.headers.get("Metadata-Flavor") != "Google":
        return f"HTTP {response.status} without the Metadata-Flavor: Google header"
    if response.status != 200:
        return f"HTTP {response.status}"
    return None


def parse_token_answer(body: bytes, now: datetime | None = None) -> tuple[str, datetime]:
    """The token and its expiry (naive UTC, as google-auth keeps it) from a metadata server's
    ``{"access_token", "expires_in", "token_type"}``. ``UnusableAnswer`` says what is wrong
    without quoting anything."""
    try:
        document = json.loads(body.decode("utf-8")) if len(body) <= 64 * 1024 else None
    except (ValueError, UnicodeDecodeError, RecursionError):
        document = None
    if not isinstance(document, dict):
        raise UnusableAnswer("answered with something that is not a JSON token object")
    token = document.get("access_token")
    if not isinstance(token, str) or not token or len(token) > 16 * 1024 or not _TOKEN.fullmatch(token):
        raise UnusableAnswer("answered without a usable access_token")
    token_type = document.get("token_type", "Bearer")
    if not isinstance(token_type, str) or token_type.lower() != "bearer":
        raise UnusableAnswer("answered with a token_type other than Bearer")
    expires_in = document.get("expires_in")
    if isinstance(expires_in, bool) or not isinstance(expires_in, (int, float)) or not math.isfinite(expires_in):
        raise UnusableAnswer("answered without a numeric expires_in")
    if not 1 <= expires_in <= MAX_TOKEN_SECONDS:
        raise UnusableAnswer(f"answered with expires_in outside 1 to {MAX_TOKEN_SECONDS} seconds")
    moment = (now or datetime.now(timezone.utc)).astimezone(timezone.utc).replace(tzinfo=None)
    return token, moment + timedelta(seconds=expires_in)


class MetadataCredentials(google.auth.credentials.Scoped, google.auth.credentials.Credentials):
    """The instance's service account (``default``) as google-auth credentials.

    ``refresh`` asks ``/computeMetadata/v1/instance/service-accounts/<account>/token`` with the
    scopes (Compute Engine ignores them; GKE and Cloud Run honour them) and the
    ``Metadata-Flavor: Google`` header, and accepts only an answer that carries it back.
    """

    def __init__(self, host: str, scopes: Sequence[str] | None = None, account: str = "default") -> None:
        super().__init__()
        self.host, self.account = host, account
        self._scopes = list(scopes) if scopes else None

    @property
    def requires_scopes(self) -> bool:
        return False

    def with_scopes(self, scopes: Sequence[str] | None, default_scopes: Sequence[str] | None = None) -> MetadataCredentials:
        return MetadataCredentials(self.host, scopes or default_scopes, self.account)

    @property
    def token_url(self) -> str:
        return f"http://{self.host}/computeMetadata/v1/instance/service-accounts/{quote(self.account, safe='@')}/token"

    def refresh(self, request: google.auth.transport.Request) -> None:
        url = self.token_url
        if self._scopes:
            url += "?scopes=" + quote(",".join(self._scopes), safe=",")
        response = request(url=url, method="GET", headers=dict(_FLAVOR))
        if response.status != 200:
            raise google.auth.exceptions.RefreshError(f"metadata server answered HTTP {response.status}")
        if response.headers.get("Metadata-Flavor") != "Google":
            raise UnusableAnswer("answered without the Metadata-Flavor: Google header (not a metadata server)")
        self.token, self.expiry = parse_token_answer(response.data)
