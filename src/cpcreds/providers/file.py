"""The ``file`` provider: a token, or a client certificate and key, read from files.

For credentials that something else keeps fresh on disk: projected service-account tokens,
SPIFFE/Vault agent sinks, cert-manager secrets mounted into the pod. The files are re-read after
``refreshInterval`` (default ``1m``) so a rotation on disk reaches callers without a restart;
the credential never outlives a JWT's ``exp`` or the certificate's ``notAfter``.

Options::

    type: file
    options:
      tokenFile: /var/run/secrets/tokens/fleet        # and/or
      clientCertificateFile: /etc/fleet/tls.crt
      clientKeyFile: /etc/fleet/tls.key
      refreshInterval: 1m
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from .credfile import MAX_FILE_BYTES, read_credential_file
from ..config.access import AccessPlan
from ..config import parse_duration
from ..credential import Credential
from ..errors import ProviderError
from .hookspecs import hookimpl
from .jwt import jwt_expiry

__all__ = ["FileProvider", "FileOptions", "FilePlugin", "read_credential_file", "MAX_FILE_BYTES"]

MAX_REFRESH_INTERVAL = 365 * 24 * 3600.0


_OPTION_KEYS = frozenset(("tokenFile", "clientCertificateFile", "clientKeyFile", "refreshInterval"))


def _refresh_interval(value: Any) -> float:
    seconds = parse_duration(value)
    if not 0 < seconds <= MAX_REFRESH_INTERVAL:
        raise ValueError("must be longer than zero and at most 8760h (a year)")
    return seconds


def _pairing_problem(token_file: Any, certificate_file: Any, key_file: Any) -> str | None:
    if token_file is None and certificate_file is None and key_file is None:
        return "set tokenFile, or clientCertificateFile and clientKeyFile"
    if (certificate_file is None) != (key_file is None):
        return "clientCertificateFile and clientKeyFile go together"
    return None


@dataclass(frozen=True, slots=True)
class FileOptions:
    """The ``file`` provider's options (``tokenFile``, ``clientCertificateFile``,
    ``clientKeyFile``, ``refreshInterval``), read by :meth:`read`."""

    token_file: Path | None = None
    client_certificate_file: Path | None = None
    client_key_file: Path | None = None
    #: Seconds until the files are read again.
    refresh_interval: float = 60.0

    @classmethod
    def read(cls, options: Mapping[str, Any]) -> FileOptions:
        """The options of a config entry. Well-formed ones are read as they are; anything else
        goes through a pydantic model, whose ``ValidationError`` (a ``ValueError``) the registry
        words as a config error naming the field."""
        plain = _plain_options(options)
        if plain is not None:
            return plain
        model = _options_model().model_validate(dict(options))  # raises what is wrong, worded by the registry
        return cls(model.token_file, model.client_certificate_file, model.client_key_file, model.refresh_interval)


def _plain_options(options: Mapping[str, Any]) -> FileOptions | None:
    """Options as written in a well-formed file, or None for the model to read or word."""
    if type(options) is not dict or not options.keys() <= _OPTION_KEYS:
        return None
    paths = []
    for key in ("tokenFile", "clientCertificateFile", "clientKeyFile"):
        value = options.get(key)
        if value is not None and (type(value) is not str or not (value.isascii() or value.isprintable())):
            return None  # text that may not encode (a lone surrogate): the model decides
        paths.append(None if value is None else Path(value))
    if _pairing_problem(*paths) is not None:
        return None
    interval = 60.0
    if "refreshInterval" in options:
        try:
            interval = _refresh_interval(options["refreshInterval"])
        except ValueError:
            return None
    return FileOptions(*paths, refresh_interval=interval)


@functools.cache
def _options_model() -> Any:
    """The pydantic model of the options: imported and built only for options the plain reader
    does not take (a misspelt key, a number for a duration, ...), to word what is wrong."""
    from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

    class FileOptionsModel(BaseModel):
        model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)

        token_file: Path | None = Field(default=None, alias="tokenFile")
        client_certificate_file: Path | None = Field(default=None, alias="clientCertificateFile")
        client_key_file: Path | None = Field(default=None, alias="clientKeyFile")
        refresh_interval: float = Field(default=60.0, alias="refreshInterval")

        @field_validator("refresh_interval", mode="before")
        @classmethod
        def _duration(cls, value: Any) -> Any:
            return _refresh_interval(value)

        @model_validator(mode="after")
        def _something_to_read(self) -> Any:
            problem = _pairing_problem(self.token_file, self.client_certificate_file, self.client_key_file)
            if problem is not None:
                raise ValueError(problem)
            return self

    return FileOptionsModel


class FileProvider:
    """Reads the configured files on every call; the engine decides how often that is."""

    kind = "file"

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.options = FileOptions.read(options)

    def _read(self, path: Path, what: str, provider: str) -> str:
        try:
            return read_credential_file(path)
        except FileNotFoundError:
            message = f"file provider: {what} {path} does not exist"
        except (OSError, ValueError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            message = f"file provider: cannot read {what} {path}: {reason}"
        # Raised outside the except block so that nothing chains onto it.
        raise ProviderError(message, provider=provider)

    def get_credential(self, plan: AccessPlan) -> Credential:
        opts = self.options
        token = cert = key = None
        if opts.token_file is not None:
            token = self._read(opts.token_file, "tokenFile", plan.provider).strip()
            if not token:
                raise ProviderError(f"file provider: tokenFile {opts.token_file} is empty", provider=plan.provider)
        if opts.client_certificate_file is not None and opts.client_key_file is not None:
            cert = self._read(opts.client_certificate_file, "clientCertificateFile", plan.provider)
            key = self._read(opts.client_key_file, "clientKeyFile", plan.provider)
        expiry = datetime.now(timezone.utc) + timedelta(seconds=opts.refresh_interval)
        if token is not None:
            jwt_exp = jwt_expiry(token)
            if jwt_exp is not None:
                expiry = min(expiry, jwt_exp)
        problem = ""
        try:
            credential = Credential(token=token, client_certificate_data=cert, client_key_data=key, expiration_timestamp=expiry)
        except ValueError as exc:
            problem = str(exc)
        if problem:
            raise ProviderError(f"file provider: {problem}", provider=plan.provider)
        if credential.certificate_not_after is not None and credential.certificate_not_after < expiry:
            credential = Credential(
                token=token, client_certificate_data=cert, client_key_data=key, expiration_timestamp=credential.certificate_not_after
            )
        return credential


class FilePlugin:
    """Registers the ``file`` provider type."""

    # tryfirst: the built-ins register before the plugins without it (their names are reserved too).
    @hookimpl(tryfirst=True)
    def cpcreds_register_providers(self, register: Any) -> None:
        register("file", FileProvider)
