"""Reading a plugin's answer: an ExecCredential in the requested apiVersion that holds a
credential (a token, or a client certificate and key that are valid now), as KEP-541 asks.
:func:`decode_answer` raises :class:`~cpcreds.errors.PluginOutputError` otherwise, in words that
describe what is wrong and never quote the answer (it may hold a token).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Any

from .._show import shown, type_name
from ..config.access import AccessPlan
from ..config.documents import Limits, load_or_raise
from ..credential import Credential, credential_from_status_fields, format_rfc3339
from ..errors import PluginOutputError
from .command import MAX_STDOUT_BYTES

__all__ = ["CLOCK_SKEW", "decode_answer"]

#: The bounds of an answer read with the default stdout bound (built once: decode runs right after
#: the plugin exits, when every step costs several times its usual).
_ANSWER_LIMITS = Limits(max_bytes=MAX_STDOUT_BYTES)
#: How far in the future a client certificate's notBefore may be (clock differences).
CLOCK_SKEW = timedelta(minutes=5)


def decode_answer(plan: AccessPlan, stdout: bytes, max_stdout_bytes: int = MAX_STDOUT_BYTES) -> Credential:
    """The credential of ``plan``'s plugin's answer ``stdout`` (read within ``max_stdout_bytes``),
    or :class:`PluginOutputError` naming the command."""
    spec = plan.exec
    assert spec is not None

    def bad(reason: str) -> PluginOutputError:
        return PluginOutputError(f"exec: {spec.command} answered {reason}", provider=plan.provider, exit_code=0)

    raw = stdout
    if not raw.strip():
        raise bad("nothing on stdout")
    # client-go's universal decoder takes YAML as well as JSON. The bounded loader keeps a
    # hostile answer (deep nesting, alias bombs) from costing more than its size; its errors
    # never quote the answer. Every error below is raised outside the except block that saw
    # the problem, so no exception chained to ours can carry the answer's text.
    limits = _ANSWER_LIMITS if max_stdout_bytes == MAX_STDOUT_BYTES else Limits(max_bytes=max_stdout_bytes)
    document = load_or_raise(
        raw, lambda detail: bad(f"{len(raw)} bytes that are neither JSON nor YAML ({detail})"), source="answer", limits=limits
    )
    if not isinstance(document, dict):
        raise bad(f"{type_name(document)}, not an ExecCredential object")
    api_version, kind = document.get("apiVersion"), document.get("kind")
    if kind != "ExecCredential":
        raise bad(f"kind {_shown(kind, _KIND_SHAPE)}, expected 'ExecCredential'")
    if api_version != spec.api_version:
        raise bad(
            f"apiVersion {_shown(api_version, _API_VERSION_SHAPE)}, but it is configured to use "
            f"{spec.api_version!r} (the answer must use the requested version)"
        )
    fields = _plain_status(document)
    if fields is None:  # anything unusual: the model reads it, and words what is wrong
        from ..config.wire import ExecCredential  # pydantic, imported only for such an answer
        from ..config.wording import field_problem, read_with

        answer, problems = read_with(ExecCredential, document)
        if answer is None:
            raise bad(field_problem("an invalid ExecCredential", problems))
        if answer.status is None:
            raise bad("no status field")
        status = answer.status
        fields = (status.expiration_timestamp, status.token, status.client_certificate_data, status.client_key_data)
    credential = None
    try:
        credential = credential_from_status_fields(Credential, *fields)
    except ValueError as exc:
        problem = f"an unusable credential: {exc}"
    if credential is None:
        raise bad(problem or "an unusable credential")
    not_after, not_before = credential.certificate_not_after, credential.certificate_not_before
    if not_after is not None and not_before is not None:
        # KEP-541: "The certificate must be valid at the time of execution." Clocks differ a
        # little between machines, so a certificate from the near future is accepted.
        now = datetime.now(timezone.utc)
        if not_after <= now:
            raise bad(f"a client certificate that expired at {format_rfc3339(not_after)}")
        if not_before > now + CLOCK_SKEW:
            raise bad(f"a client certificate that is not valid before {format_rfc3339(not_before)}")
    return credential


#: Fields the answer models also take under their Python names (``populate_by_name``).
_PYTHON_SPELLINGS = frozenset({"api_version", "client_certificate_data", "client_key_data", "expiration_timestamp"})
_STATUS_TEXT = ("token", "clientCertificateData", "clientKeyData")


def _plain_status(document: dict[str, Any]) -> tuple[str | None, str, str, str] | None:
    """(expirationTimestamp, token, clientCertificateData, clientKeyData) of an answer whose every
    value has exactly the type the ExecCredential model expects; None for anything else.

    Validating the usual answer through the model costs more than everything else decode does,
    right after the plugin ran, with nothing in the CPU's caches. What this accepts, the model
    accepts with the same values (tests/test_exec_answers.py compares them); the rest, and every
    error, is the model's.
    """
    if not _PYTHON_SPELLINGS.isdisjoint(document):
        return None
    if "spec" in document:
        spec = document["spec"]
        if type(spec) is not dict or spec.get("cluster") is not None or type(spec.get("interactive", False)) is not bool:
            return None
    status = document.get("status")
    if type(status) is not dict or not _PYTHON_SPELLINGS.isdisjoint(status):
        return None
    expiry = status.get("expirationTimestamp")
    if expiry is not None and type(expiry) is not str:
        return None
    for key in _STATUS_TEXT:
        if type(status.get(key, "")) is not str:
            return None
    return expiry, status.get("token", ""), status.get("clientCertificateData", ""), status.get("clientKeyData", "")


# Values of a rejected answer are quoted only when they have the shape of what belongs there; a
# lying plugin could put anything in them, a token included.
_API_VERSION_SHAPE = re.compile(r"(?:[a-z0-9-]+(?:\.[a-z0-9-]+)*/)?v\d+(?:(?:alpha|beta)\d+)?")
_KIND_SHAPE = re.compile(r"[A-Z][A-Za-z]{0,62}")


def _shown(value: Any, shape: re.Pattern[str]) -> str:
    if value is None:
        return "missing"
    # Anything but a short name of the expected shape: its type and size only (a placeholder
    # cpcreds.logs recognises as already redacted).
    hidden = f"<a {type(value).__name__} of length {len(str(value))}, not shown>"
    return shown(value, limit=256, shape=shape, otherwise=hidden) if isinstance(value, str) else hidden
