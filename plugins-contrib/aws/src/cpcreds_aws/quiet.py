"""Keep botocore's debug logging from writing secrets.

At DEBUG, botocore logs the canonical request and string to sign (``botocore.auth``: a session
token, a presigned URL's signature), each request's parameters (``botocore.endpoint``: a web
identity token, an external id), each answer's body (``botocore.parsers``: the keys AssumeRole
and AssumeRoleWithWebIdentity return) and a failed container or instance metadata endpoint's answer
(``botocore.utils`` and ``botocore.credentials``, which may echo its authorization token). An application that turns on DEBUG
for everything would write them to its logs. This adds a filter to those loggers that drops their records below
INFO; nothing else of logging is touched (no handler, no level), and only when botocore is used.
"""

from __future__ import annotations

import logging

__all__ = ["quiet_botocore"]

#: botocore's loggers whose debug records hold secrets.
LOGGERS = ("botocore.auth", "botocore.endpoint", "botocore.parsers", "botocore.utils", "botocore.credentials")


class _BelowInfo(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.INFO


_FILTER = _BelowInfo()


def quiet_botocore() -> None:
    """Add the filter to :data:`LOGGERS` (once; safe to call again)."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
