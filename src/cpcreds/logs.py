"""Logging: structlog loggers for the library, output chosen by the application.

Library modules call :func:`get_logger`; the events go to the standard :mod:`logging` logger of
the same name and nowhere else, so an application that configures nothing sees only warnings on
stderr (Python's last-resort handler) and never a line on stdout. Secrets are redacted before an
event leaves the library. :func:`configure_logging` is for the CLI and ``serve`` only: it installs
one stderr handler rendering console or JSON lines, with the same redaction.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog

__all__ = ["get_logger", "redact_secrets", "redact_text", "configure_logging", "REDACTED"]

REDACTED = "[REDACTED]"

# Keys whose values are secrets by name; matched as whole words inside snake/camel/kebab names.
_SECRET_KEY = re.compile(r"(token|secret|password|passwd|authorization|private|key_data|keydata|credential_data)", re.I)
# Secret-shaped text inside any string value.
_SECRET_TEXT = [
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|$)", re.S), REDACTED),
    (re.compile(r"(?i)\b(bearer)\s+[^\s\"',;]+"), r"\1 " + REDACTED),
    (re.compile(r"(?i)((?<![\w-])\"?(?:token|clientKeyData|password|secret)\"?\s*[:=]\s*\"?)[^\s\"',;}]+"), r"\1" + REDACTED),
]


def redact_text(text: str) -> str:
    """``text`` with bearer tokens, private keys and ``token=...``-style values blanked."""
    for pattern, replacement in _SECRET_TEXT:
        text = pattern.sub(replacement, text)
    return text


def _redact_value(key: str, value: Any) -> Any:
    if key and _SECRET_KEY.search(key) and value not in (None, "", b""):
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
    """A structlog logger for library code: events go to ``logging.getLogger(name)``, redacted."""
    return structlog.wrap_logger(
        logging.getLogger(name),
        processors=[redact_secrets, _to_stdlib],
        wrapper_class=structlog.stdlib.BoundLogger,
    )


class _Formatter(logging.Formatter):
    def __init__(self, fmt: str) -> None:
        super().__init__()
        self._json = fmt == "json"

    def format(self, record: logging.LogRecord) -> str:
        event = getattr(record, "cpcreds_event", None)
        if event is None:  # a record from another library: redact it too
            event = {"event": record.getMessage()}
            if record.exc_info:
                event["exception"] = self.formatException(record.exc_info)
        event = dict(redact_secrets(None, "", dict(event)))
        if self._json:
            payload = {"level": record.levelname.lower(), "logger": record.name, **event}
            return json.dumps(payload, default=str, sort_keys=False)
        message = event.pop("event", "")
        fields = " ".join(f"{k}={v}" for k, v in event.items())
        return f"cpcreds: {record.levelname.lower()}: {message} {fields}".rstrip()


def configure_logging(level: str = "warning", fmt: str = "console", stream: Any = None) -> None:
    """Send every log record to stderr (or ``stream``) as console or JSON lines. CLI/serve only."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(_Formatter(fmt))
    root = logging.getLogger()
    for existing in list(root.handlers):
        if getattr(existing, "_cpcreds", False):
            root.removeHandler(existing)
    handler._cpcreds = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level.upper())
