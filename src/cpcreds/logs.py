"""Logging: structlog loggers for the library, output chosen by the application.

structlog is imported the first time an event is actually logged (a level the standard logger
lets through), not when a module asks for its logger: ``cpcreds get-credential`` and a library
that logs nothing never pay for it. :mod:`logging` itself is imported by the first event the
standard logger may let through: an event below WARNING before anything imported :mod:`logging`
(and with no :func:`configure_logging` waiting) is dropped without it, as the root logger's
default level would drop it (or by :func:`configure_logging`, unless it is asked to wait).

Library modules call :func:`get_logger`; the events go to the standard :mod:`logging` logger of
the same name and nowhere else, so an application that configures nothing sees only warnings on
stderr (Python's last-resort handler) and never a line on stdout. Secrets are redacted before an
event leaves the library. :func:`configure_logging` is for the CLI and ``serve`` only: it installs
one stderr handler rendering console or JSON lines, with the same redaction.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import sys
from collections.abc import Callable, MutableMapping
from typing import TYPE_CHECKING, Any
from ._patterns import LazyPattern

if TYPE_CHECKING:
    import logging

__all__ = ["get_logger", "redact_secrets", "redact_text", "is_secret_name", "configure_logging", "configure_logging_when_used", "stdlib_logging", "REDACTED"]


REDACTED = "[REDACTED]"
_MASKED = "***"  # how cpcreds.config.access masks values it shows (resolve, errors)

# -- what is a secret ------------------------------------------------------------------------------
#
# A *name* is secret when it ends with one of these words, compared without case and without
# "_", "-" and ".": ``VAULT_TOKEN``, ``access_token``, ``clientSecret``, ``--client-secret``,
# ``AWS_SECRET_ACCESS_KEY``, ``X-Auth-Token``, ``api_key`` and ``apikey`` are; ``token_file``,
# ``refresh_token_file``, ``tokenType`` and ``expires_in`` are not.
_SECRET_ENDINGS = (
    "token",
    "secret",
    "password",
    "passwd",
    "passphrase",
    "key",
    "keydata",
    "keyid",
    "credential",
    "credentials",
    "authorization",
    "auth",
    "cookie",
    "signature",
    "sig",
    "private",
)
# The same, as a regular expression (separators allowed anywhere inside a word).
_ENDING_RE = "|".join(r"[_.-]?".join(word) for word in sorted(_SECRET_ENDINGS, key=len, reverse=True))
_SECRET_NAME = LazyPattern(rf"(?i)(?:{_ENDING_RE})$")


def is_secret_name(name: str) -> bool:
    """Whether a value under ``name`` (a field, flag, variable or URL parameter) is a secret:
    the one rule for names (:func:`cpcreds._show.shown_url` uses it for query parameters)."""
    return bool(_SECRET_NAME.search(name.replace("_", "").replace("-", "").replace(".", "")))


# Text between quotes, with backslash escapes; or one "word" of text without quotes.
_QUOTED = r'"(?:[^"\\]|\\.)*"|\'[^\'\n]*\''
_ESCAPED_QUOTED = r'\\"(?:[^"\\]|\\(?!"))*\\"'  # \"...\" inside a JSON string
_BARE = r'[^\s"\'`]+'
# How cpcreds itself describes a value it will not show ("<a str of length 12, not shown>"): not a
# secret, and kept whole so that the message stays readable.
_PLACEHOLDER = r"<a [A-Za-z]+ of length \d+, not shown>"
_VALUE = rf"(?:{_ESCAPED_QUOTED}|{_QUOTED}|{_PLACEHOLDER}|{_BARE})"
# A name that ends with a secret word; it must start a word (so "get-token:" is not "token:").
_NAME_START = r"(?<![A-Za-z0-9_.\-])"
_NAME = rf"[A-Za-z0-9_.\-]*?(?:{_ENDING_RE})"
_NAME_NO_HYPHEN = rf"[A-Za-z0-9_.]*?(?:{_ENDING_RE})"

_B64 = "A-Za-z0-9+/"
_PEM_END = LazyPattern(r"-----END [A-Z0-9 ]*PRIVATE KEY-----")
_PEM_BLOCK = LazyPattern(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.S)
# Body lines of a key whose BEGIN line is gone and whose END never came (a plugin killed while
# writing it): two or more full 64-character base64 lines, maybe a partial first line at the start.
_SEP = r"(?:\s+|(?:\\[rn])+)"
_PEM_LINES = LazyPattern(
    rf"(?:\A\s*[{_B64}]{{1,64}}{_SEP})?(?<![{_B64}=])[{_B64}]{{64}}(?:{_SEP}[{_B64}]{{64}})+(?:{_SEP}[{_B64}]{{1,63}}=*)?(?![{_B64}=])"
)
# kubeconfig's client-key-data: base64 of the PEM text ("-----BEGIN " is "LS0tLS1CRUdJTi").
_PEM_BASE64 = LazyPattern(r"LS0tLS1CRUdJTi[A-Za-z0-9+/]*={0,2}")

_AUTHORIZATION = LazyPattern(
    r"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?"
    r"(?:(?:bearer|basic|token|negotiate|digest|aws4-hmac-sha256|sso-key)\s+)?)[^\s\"']+"
)
_BEARER = LazyPattern(r"(?i)\b(bearer)\s+(?!\[REDACTED\])[^\s\"']+")
_BASIC = LazyPattern(rf"(?i)\b(basic)\s+([{_B64}]{{4,}}={{0,2}})(?![{_B64}=])")
_HEADER = LazyPattern(
    r"(?<![\w.\-])((?:[Xx]-[A-Za-z0-9\-]*(?i:token|key|secret|password|auth|signature)"
    r"|(?:[A-Z][A-Za-z0-9]*-)+(?:Token|Key|Secret|Password|Passwd|Signature|Credential|Credentials))"
    r"\s*:\s*)[^\s\"']+"
)
# (a password may hold an unescaped "?" or "#": people paste them so, and they must not leak)
_URL_PASSWORD = LazyPattern(r"(?i)\b([a-z][a-z0-9+.\-]*://[^\s/?#@:\"']*:)[^\s/@\"']+@")
_URL_USER = LazyPattern(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^\s/?#@:\"'\[]+@")
_JWT = LazyPattern(r"\beyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{2,}\.[A-Za-z0-9_\-]*")
# "access_token": "...", 'password': '...', \"token\": \"...\" (JSON, Python reprs, JSON in JSON)
# Only a quoted value: in JSON a secret is a string, and 'provider "x-token": field type: ...' (how
# cpcreds names a provider in its errors) is not JSON.
_QUOTED_KEY = LazyPattern(rf"(?i)(\\?[\"'])({_NAME})\1(\s*:\s*)({_ESCAPED_QUOTED}|{_QUOTED})")
# token: ..., clientKeyData: ... (YAML, logfmt-ish); a hyphenated name is a program's prefix.
# Not after "provider ", "field " or "option " (lowercase, as cpcreds writes them): cpcreds' own
# "provider my_token: exec: ...", "field options.clientSecret: Field required" and "option key:
# is not a known field" name things, they do not assign them. Text from outside (a plugin's
# stderr or Status message) is redacted with strict=True, which has no such exception: there,
# "provider token: abc" is a secret.
_COLON_PATTERN = rf"{_NAME_START}((?i:{_NAME_NO_HYPHEN}))(\s*:\s+|:)((?i:{_VALUE}))"
_COLON = LazyPattern(rf"(?<!provider )(?<!field )(?<!option ){_COLON_PATTERN}")
_COLON_STRICT = LazyPattern(_COLON_PATTERN)
# --token VALUE, --client-secret VALUE (the "=" form is an assignment below)
_FLAG = LazyPattern(rf"(?i)(?<![\w\-])(--?{_NAME})(\s+)(?!-)({_VALUE})")
# VAULT_TOKEN=..., api_key=..., --password=..., ?access_token=...&
_ASSIGN = LazyPattern(rf"(?i){_NAME_START}(-{{0,2}}{_NAME})(\s*=\s*)({_VALUE})")
# curl -u user:pass, --user/--proxy-user user:pass (the user stays, the password goes)
_USER_FLAG = LazyPattern(r"""(?<![\w\-])(-[uU]|--user|--proxy-user)(\s+|=)?(["']?)([^\s:"'@]*:)([^\s"']+)""")
# user:pass@host without a scheme (a proxy or docker-style address)
_USERINFO = LazyPattern(r"(?<![\w.\-/:@%])([A-Za-z0-9._~%+\-]+:)([^\s/@:\"'\[\]]+)@(?=[A-Za-z0-9\[])")
# Only in text from outside (strict), where a program's own way of echoing its command line shows:
# docker login -p PASS (also -pPASS, -p=PASS), --pass PASS, and the prose "password PASS"
# (but not "password is incorrect": common words after the word are kept).
_SHORT_PASSWORD = LazyPattern(rf"(?<![\w\-])(-p|--pass(?![\w\-]))(\s+|=)?(?!-)({_VALUE})")
_PROSE_WORDS = frozenset(
    "a an and are as at be been but by can cannot could did do does for from given had has have "
    "here if in invalid incorrect is it may missing must needed no not of on or please prompt provided "
    "rejected required set should stdin than that the this to too was were will with wrong would "
    "expired mismatch denied empty length policy change reset file field hash authentication login".split()
)
_PROSE_PASSWORD = LazyPattern(rf"(?i)(?<![\w\-])(password|passwd|passphrase)([ \t]+)(?![:=])({_VALUE})")


def _blank(value: str) -> str:
    """REDACTED in place of ``value``, keeping its quotes (a value already masked stays as it is)."""
    if value in (REDACTED, _MASKED) or re.fullmatch(_PLACEHOLDER, value):
        return value
    for quote in ('\\"', '"', "'"):
        if len(value) >= 2 * len(quote) and value.startswith(quote) and value.endswith(quote):
            inner = value[len(quote) : -len(quote)]
            return value if inner in ("", REDACTED) else f"{quote}{REDACTED}{quote}"
    return REDACTED


def _sub_quoted_key(match: re.Match[str]) -> str:
    if match.group(2).lower().endswith("authorization"):
        return match.group(0)  # the scheme is kept by _AUTHORIZATION
    return f"{match.group(1)}{match.group(2)}{match.group(1)}{match.group(3)}{_blank(match.group(4))}"


def _sub_colon(match: re.Match[str]) -> str:
    name = match.group(1)
    if name.lower().endswith("authorization") or not is_secret_name(name):
        return match.group(0)
    return f"{name}{match.group(2)}{_blank(match.group(3))}"


def _sub_flag(match: re.Match[str]) -> str:
    if not is_secret_name(match.group(1)):
        return match.group(0)
    return f"{match.group(1)}{match.group(2)}{_blank(match.group(3))}"


def _sub_assign(match: re.Match[str]) -> str:
    name, sep, value = match.group(1), match.group(2), match.group(3)
    if name.lower().endswith("authorization"):
        return match.group(0)
    rest = ""
    before = match.string[match.start() - 1] if match.start() else ""
    if before in "?&;" and before and not value.startswith(("'", '"')):
        # A query or form parameter ends at the next "&" (or the URL's fragment); the rest of the
        # URL may hold more parameters, so it is redacted on its own.
        cut = min((i for i in (value.find("&"), value.find("#")) if i >= 0), default=len(value))
        value, rest = value[:cut], _ASSIGN.sub(_sub_assign, value[cut:])
    return f"{name}{sep}{_blank(value)}{rest}"


def _sub_user_flag(match: re.Match[str]) -> str:
    flag, sep, quote, user, password = match.groups()
    if password.startswith(REDACTED):
        return match.group(0)
    return f"{flag}{sep or ''}{quote}{user}{REDACTED}"  # a closing quote is not part of the match


def _sub_blank_last(match: re.Match[str]) -> str:
    """Groups (name, separator, value): the value blanked."""
    name, sep, value = match.group(1), match.group(2) or "", match.group(3)
    return f"{name}{sep}{_blank(value)}"


def _sub_prose(match: re.Match[str]) -> str:
    # "password is incorrect" says nothing secret: a whole common word after it is kept.
    if match.group(3).lower().rstrip(".,;:!?)") in _PROSE_WORDS:
        return match.group(0)
    return _sub_blank_last(match)


def _sub_basic(match: re.Match[str]) -> str:
    # "Basic" is an ordinary word; it introduces a credential only when base64 "user:password" follows.
    try:
        decoded = base64.b64decode(match.group(2) + "=" * (-len(match.group(2)) % 4), validate=True)
    except (binascii.Error, ValueError):
        return match.group(0)
    return f"{match.group(1)} {REDACTED}" if b":" in decoded else match.group(0)


def _sub_pem_lines(match: re.Match[str]) -> str:
    body = match.group(0)
    if re.fullmatch(r"[0-9a-fA-F\s\\rn]+", body):
        return body  # hex digests side by side (sha256 pins) are not a key
    return REDACTED


def _sub_pem_base64(match: re.Match[str]) -> str:
    head = match.group(0)[:64]
    try:
        decoded = base64.b64decode(head[: len(head) // 4 * 4])
    except (binascii.Error, ValueError):
        return REDACTED
    return REDACTED if b"PRIVATE KEY" in decoded or b"-----BEGIN" not in decoded[:11] else match.group(0)


def _redact_headless_pem(text: str) -> str:
    """Blank the body before each ``-----END … PRIVATE KEY-----`` whose BEGIN line is not in ``text``.

    The kept tail of a plugin's stderr can start in the middle of a key. Going back from the END
    line, everything that can be part of a PEM block (base64, whitespace, dashes, ``\\n`` escapes,
    a cut BEGIN line) is the body.
    """
    out, pos = [], 0
    for end in _PEM_END.finditer(text):
        if end.start() < pos:
            continue
        start = end.start()
        while start > pos and (text[start - 1] in _PEM_BODY_CHARS):
            start -= 1
        out.append(text[pos:start])
        lead = len(text[start : end.start()]) - len(text[start : end.start()].lstrip())
        out.append(text[start : start + lead] + REDACTED)
        pos = end.end()
    out.append(text[pos:])
    return "".join(out)


_PEM_BODY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=- \t\r\n\\")


def redact_text(text: str, *, strict: bool = False) -> str:
    """``text`` with secrets blanked: private keys (whole or cut), bearer/basic credentials, JWTs,
    passwords in URLs, and the values of secret-named headers, flags, JSON/YAML keys and
    ``NAME=value`` assignments (``VAULT_TOKEN=…``, ``--password=…``, ``?access_token=…``).

    ``strict=True`` is for text cpcreds did not write (a plugin's output, a server's message):
    it drops the exceptions kept for cpcreds' own wording (``provider my_token: exec: …``)."""
    if "PRIVATE KEY" in text:
        text = _PEM_BLOCK.sub(REDACTED, text)
        if "PRIVATE KEY" in text:
            text = _redact_headless_pem(text)
    text = _PEM_LINES.sub(_sub_pem_lines, text)
    if "LS0tLS1CRUdJTi" in text:
        text = _PEM_BASE64.sub(_sub_pem_base64, text)
    text = _AUTHORIZATION.sub(rf"\1{REDACTED}", text)
    text = _BEARER.sub(rf"\1 {REDACTED}", text)
    text = _BASIC.sub(_sub_basic, text)
    text = _HEADER.sub(rf"\1{REDACTED}", text)
    if "://" in text:
        text = _URL_PASSWORD.sub(rf"\1{REDACTED}@", text)
        text = _URL_USER.sub(rf"\1{REDACTED}@", text)
    text = _JWT.sub(REDACTED, text)
    text = _QUOTED_KEY.sub(_sub_quoted_key, text)
    text = (_COLON_STRICT if strict else _COLON).sub(_sub_colon, text)
    text = _FLAG.sub(_sub_flag, text)
    text = _ASSIGN.sub(_sub_assign, text)
    if ":" in text:
        text = _USER_FLAG.sub(_sub_user_flag, text)
        if "@" in text:
            text = _USERINFO.sub(rf"\1{REDACTED}@", text)
    if strict:
        text = _SHORT_PASSWORD.sub(_sub_blank_last, text)
        text = _PROSE_PASSWORD.sub(_sub_prose, text)
    return text


def _redact_value(key: str, value: Any) -> Any:
    if key and is_secret_name(key) and value not in (None, "", b""):
        return REDACTED
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, BaseException):
        return redact_text(f"{type(value).__name__}: {value}")
    if isinstance(value, dict):
        return {k: _redact_value(str(k), v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redact_value("", v) for v in value]
    return value


def redact_secrets(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: blank values under secret-named keys and secret-shaped text anywhere."""
    for key in list(event_dict):
        event_dict[key] = _redact_value("" if key == "event" else key, event_dict[key])
    return event_dict


def _to_stdlib(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> dict[str, Any]:
    # The whole event travels in one `extra` attribute, so keys such as "name" or "args" cannot
    # collide with LogRecord's own attributes; the message alone is readable without our formatter.
    event = dict(event_dict)
    message = str(event.pop("event", ""))
    fields = " ".join(f"{k}={v}" for k, v in event.items())
    return {"msg": f"{message} {fields}".rstrip(), "extra": {"cpcreds_event": {"event": message, **event}}}


def get_logger(name: str) -> Any:
    """A structlog logger for library code: events go to ``logging.getLogger(name)``, redacted.

    The structlog logger is built (and structlog imported) on the first event the standard logger
    of ``name`` is enabled for; an event below its level is dropped without running a processor.
    :mod:`logging` itself is imported by the first event at WARNING or above, or of any level
    once :mod:`logging` is imported or :func:`configure_logging` waits for its first use."""
    return _DeferredLogger(name)


# The standard levels' numbers (logging.DEBUG ...), written out so that naming a level needs no
# import of logging.
_LEVELS = {"debug": 10, "info": 20, "warning": 30, "warn": 30, "error": 40, "exception": 40, "critical": 50, "fatal": 50}
#: The root logger's level until someone sets one (logging.WARNING).
_ROOT_DEFAULT_LEVEL = 30

#: configure_logging(..., on_first_use=True)'s arguments until logging is first used (or what
#: gives them: configure_logging_when_used).
_pending: tuple[str, str, Any] | Callable[[], tuple[str, str, Any]] | None = None


def stdlib_logging() -> Any:
    """The :mod:`logging` module, with the configuration ``configure_logging(...,
    on_first_use=True)`` put off installed first. Call it before running code that may log
    through the standard logger without cpcreds' loggers (a third-party plugin's import)."""
    global _pending
    import logging

    pending, _pending = _pending, None
    if callable(pending):
        pending = pending()
    if pending is not None:
        _install(logging, *pending)
    return logging


class _DeferredLogger:
    """Stands for structlog's ``BoundLogger`` of one name until an event gets through."""

    __slots__ = ("_name", "_stdlib", "_bound")

    def __init__(self, name: str) -> None:
        self._name = name
        self._stdlib: logging.Logger | None = None
        self._bound: Any = None

    def _logger(self) -> logging.Logger:
        stdlib = self._stdlib
        if stdlib is None:
            stdlib = self._stdlib = stdlib_logging().getLogger(self._name)
        return stdlib

    def _structlog(self) -> Any:
        bound = self._bound
        if bound is None:  # two threads may both build one: equal loggers, either will do
            import structlog

            bound = self._bound = structlog.wrap_logger(
                self._logger(), processors=[redact_secrets, _to_stdlib], wrapper_class=structlog.stdlib.BoundLogger
            )
        return bound

    def __getattr__(self, attribute: str) -> Any:
        level = _LEVELS.get(attribute)
        if level is None:  # bind(), new(), ...: structlog's own
            return getattr(self._structlog(), attribute)

        def log(event: Any = None, *args: Any, **fields: Any) -> Any:
            if level < _ROOT_DEFAULT_LEVEL and _pending is None and "logging" not in sys.modules:
                # Nothing can have configured a level yet (logging is not imported, and no
                # configure_logging(on_first_use=True) waits): the root logger's default,
                # WARNING, drops this event. Said without importing logging, which a plugin's
                # run whose provider logs only a debug event would otherwise load for nothing.
                return None
            if not self._logger().isEnabledFor(level):  # what the standard logger would decide anyway
                return None
            return getattr(self._structlog(), attribute)(event, *args, **fields)

        return log


def _formatter(logging: Any, fmt: str) -> logging.Formatter:
    class _Formatter(logging.Formatter):  # type: ignore[name-defined,misc]
        def format(self, record: logging.LogRecord) -> str:
            event = getattr(record, "cpcreds_event", None)
            if event is None:  # a record from another library: redact it too
                event = {"event": record.getMessage()}
                if record.exc_info:
                    event["exception"] = self.formatException(record.exc_info)
            event = dict(redact_secrets(None, "", dict(event)))
            if fmt == "json":
                payload = {"level": record.levelname.lower(), "logger": record.name, **event}
                return json.dumps(payload, default=str, sort_keys=False)
            message = event.pop("event", "")
            fields = " ".join(f"{k}={v}" for k, v in event.items())
            return f"cpcreds: {record.levelname.lower()}: {message} {fields}".rstrip()

    return _Formatter()


def configure_logging(level: str = "warning", fmt: str = "console", stream: Any = None, *, on_first_use: bool = False) -> None:
    """Send every log record to stderr (or ``stream``) as console or JSON lines. CLI/serve only.

    ``on_first_use=True`` (``cpcreds get-credential``, which usually logs nothing) puts the
    handler off until :mod:`logging` is first used through cpcreds (an event of its loggers, or
    :func:`stdlib_logging` before a third-party plugin is imported), if it is not imported yet:
    a run that logs nothing does not import it (the disk-cache hit must stay close to a bare
    interpreter start)."""
    global _pending
    if on_first_use and "logging" not in sys.modules:
        _pending = (level, fmt, stream or sys.stderr)
        return
    _pending = None
    _install(stdlib_logging(), level, fmt, stream)


def configure_logging_when_used(read: Callable[[], tuple[str, str]], stream: Any = None) -> None:
    """``configure_logging(level, fmt, on_first_use=True)`` with ``(level, fmt) = read()`` called
    only when logging is first used: a ``get-credential`` run reads its settings only if it logs."""
    global _pending
    if "logging" in sys.modules:
        configure_logging(*read(), stream)
        return
    out = stream or sys.stderr
    _pending = lambda: (*read(), out)


def _install(logging: Any, level: str, fmt: str, stream: Any) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(_formatter(logging, fmt))
    root = logging.getLogger()
    for existing in list(root.handlers):
        if getattr(existing, "_cpcreds", False):
            root.removeHandler(existing)
    handler._cpcreds = True
    root.addHandler(handler)
    root.setLevel(level.upper())
