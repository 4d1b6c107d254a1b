"""Process settings of the ``cpcreds`` command: the ``CPCREDS_*`` environment variables.

Read without pydantic-settings (``cpcreds get-credential`` runs before every kubectl request, and
reading eight variables needs no framework): each setting is one :class:`Setting` of
:data:`SETTINGS`, its name, default and allowed values written once; help text and docs name
the same variables. ``cpcreds serve`` reads its own, longer list (:mod:`cpcreds.serve.settings`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from .config.rules import entry_timeout
from .errors import ConfigError
from .kep import API_VERSION_V1

__all__ = ["Settings", "Setting", "SETTINGS", "ENV_PREFIX"]

ENV_PREFIX = "CPCREDS_"


class Setting(NamedTuple):  # not a dataclass: defining one costs ~0.5 ms of every command's start
    """One ``CPCREDS_<NAME>`` variable: its default, and the values allowed (None: any text)."""

    name: str
    default: str | None
    choices: tuple[str, ...] | None = None
    #: Read case-insensitively and kept lower-case (log levels and formats).
    lower: bool = False


#: Every setting of the command, in the order ``cpcreds --help`` lists them.
SETTINGS: tuple[Setting, ...] = (
    #: Provider config file used when ``--config`` is not given.
    Setting("config", None),
    Setting("log_level", "warning", ("debug", "info", "warning", "error"), lower=True),
    Setting("log_format", "console", ("console", "json"), lower=True),
    #: ``host:port`` for the Prometheus endpoint of ``serve`` (empty: none).
    Setting("metrics_address", ""),
    #: Timeout of providers given by ``--clusterprofile-access-provider`` (file entries that name
    #: none get 60s, so that a config file means the same everywhere).
    Setting("default_timeout", "60s"),
    #: apiVersion used for providers given by ``--clusterprofile-access-provider``.
    Setting("default_api_version", API_VERSION_V1),
    #: Comma-separated entry-point names not to load, or ``*`` for all third-party plugins.
    Setting("disable_plugins", ""),
    #: Comma-separated allow-list of entry-point names to load (unset: all).
    Setting("plugins", None),
)


def _choices(choices: tuple[str, ...]) -> str:
    quoted = [repr(choice) for choice in choices]
    return ", ".join(quoted[:-1]) + f" or {quoted[-1]}" if len(quoted) > 1 else quoted[0]


def _shown(value: str) -> str:
    return repr(value) if len(value) <= 40 and value.isprintable() else "a string"


class Settings:
    """Process settings, from ``CPCREDS_*`` environment variables (names in any case), overridden
    by keyword arguments (``Settings(log_level="debug")``). A value that is not allowed is a
    :class:`~cpcreds.errors.ConfigError` naming the variable (``CPCREDS_LOG_LEVEL: must be
    'debug', 'info', 'warning' or 'error' (got 'loud')``).

    Library code takes these values as arguments; only :class:`~cpcreds.registry.ProviderRegistry`
    reads the two plugin-loading variables itself, as pytest does with its autoload switch.
    """

    config: Path | None
    log_level: str
    log_format: str
    metrics_address: str
    default_timeout: str
    default_api_version: str
    disable_plugins: str
    plugins: str | None

    def __init__(self, *, environ: Mapping[str, str] | None = None, **values: Any) -> None:
        environ = os.environ if environ is None else environ
        given = {key.lower(): value for key, value in environ.items() if key[: len(ENV_PREFIX)].upper() == ENV_PREFIX}
        problems: list[tuple[str, str]] = []
        for setting in SETTINGS:
            value = values.get(setting.name, given.get(ENV_PREFIX.lower() + setting.name, setting.default))
            if setting.lower and isinstance(value, str):
                value = value.lower()
            if setting.choices is not None and value not in setting.choices:
                got = _shown(value) if isinstance(value, str) else type(value).__name__
                problems.append((setting.name, f"must be {_choices(setting.choices)} (got {got})"))
            if setting.name == "config" and value is not None:
                value = Path(value)
            object.__setattr__(self, setting.name, value)
        unknown = set(values) - {setting.name for setting in SETTINGS}
        if unknown:
            raise TypeError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        if problems:
            variables = ", ".join(f"{ENV_PREFIX}{name.upper()}" for name, _ in problems)
            raise ConfigError("; ".join(message for _, message in problems), source=variables)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Settings are read-only")

    def __repr__(self) -> str:
        shown = ", ".join(f"{setting.name}={getattr(self, setting.name)!r}" for setting in SETTINGS)
        return f"Settings({shown})"

    @property
    def default_timeout_seconds(self) -> float:
        problem = ""
        try:
            return entry_timeout(self.default_timeout)  # a Go duration, > 0 and <= 24h
        except ValueError as exc:
            problem = str(exc)
        raise ConfigError(problem, source="CPCREDS_DEFAULT_TIMEOUT")
