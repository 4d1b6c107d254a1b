"""Process settings of the ``cpcreds`` command, declared once with pydantic-settings.

Each setting is one field of :class:`Settings`: its ``CPCREDS_<NAME>`` variable, its default and
its description are written there and nowhere else; ``cpcreds --help``, the flags that stand for
settings and the docs' tables are made from the fields (:func:`describe`). ``cpcreds serve``
declares its own, longer list the same way (:mod:`cpcreds.serve.settings`).

Only kubectl's hit path reads a variable without this class: ``cpcreds get-credential`` answering
from the disk cache reads ``CPCREDS_CACHE`` and ``CPCREDS_CONFIG`` through
:mod:`cpcreds.cli.diskcache` before anything else is imported, with the same reading of
``CPCREDS_CACHE`` (:func:`cpcreds.config.switches.cache_setting`) as the field below.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple, get_args, get_origin

from pydantic import BeforeValidator, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, InitSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict, SettingsError

from .rules import entry_timeout
from .switches import cache_setting
from ..errors import ConfigError
from ..kep import API_VERSION_V1

__all__ = ["DeclaredSettings", "Settings", "SettingInfo", "describe", "ENV_PREFIX", "LogLevel", "LogFormat", "choices_text", "camel_case"]

ENV_PREFIX = "CPCREDS_"


def _lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


#: Log settings, shared by every command and serve (each with its own default).
LogLevel = Annotated[Literal["debug", "info", "warning", "error"], BeforeValidator(_lower)]
LogFormat = Annotated[Literal["console", "json"], BeforeValidator(_lower)]

#: What one construction of a :class:`DeclaredSettings` was handed besides its keywords (see
#: :meth:`DeclaredSettings.given_sources`): pydantic-settings asks for its sources from a
#: classmethod, so the mapping is set here for the duration of that construction.
_given: ContextVar[Mapping[str, Any] | None] = ContextVar("cpcreds_settings_given", default=None)


class DeclaredSettings(BaseSettings):
    """What the command's :class:`Settings` and serve's
    :class:`~cpcreds.serve.settings.ServeSettings` share: keyword arguments first, then
    ``CPCREDS_*`` variables and one mapping handed to the construction (``given=``), never a
    ``.env`` file or a secrets folder; a value that is not allowed is one
    :class:`~cpcreds.errors.ConfigError` (:meth:`refusal`), raised outside pydantic's
    ``except`` so the ``ValidationError``, which holds the values, is not chained to it."""

    def __init__(self, *, given: Mapping[str, Any] | None = None, **values: Any) -> None:
        token = _given.set(given)
        problems: list[tuple[str, str]] = []
        try:
            super().__init__(**values)
        except ValidationError as exc:
            problems = self.describe_problems(exc)
        except SettingsError:  # pydantic-settings could not decode a variable
            problems = [("", "a CPCREDS_* environment variable cannot be read")]
        finally:
            _given.reset(token)
        if problems:
            raise self.refusal(problems)

    @classmethod
    def describe_problems(cls, exc: ValidationError) -> list[tuple[str, str]]:
        """(setting, message) for each of pydantic's errors."""
        raise NotImplementedError

    @classmethod
    def refusal(cls, problems: list[tuple[str, str]]) -> ConfigError:
        """The one error for these problems."""
        raise NotImplementedError

    @classmethod
    def given_sources(
        cls, settings_cls: type[BaseSettings], env_settings: PydanticBaseSettingsSource, given: Mapping[str, Any] | None
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The sources after the keywords, given what the construction was handed."""
        raise NotImplementedError

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, *cls.given_sources(settings_cls, env_settings, _given.get()))


class _GivenEnvironment(InitSettingsSource):
    """``Settings(environ=...)``: that mapping instead of the process environment."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        prefix = ENV_PREFIX.lower()
        values = {key.lower()[len(prefix) :]: value for key, value in environ.items() if key.lower().startswith(prefix)}
        super().__init__(settings_cls, init_kwargs={k: v for k, v in values.items() if k in settings_cls.model_fields})


class Settings(DeclaredSettings):
    """Process settings, from ``CPCREDS_*`` environment variables (names in any case), overridden
    by keyword arguments (``Settings(log_level="debug")``); ``environ=`` reads another mapping
    instead of ``os.environ``. A value that is not allowed is a :class:`~cpcreds.errors.ConfigError`
    naming the variable (``CPCREDS_LOG_LEVEL: must be 'debug', 'info', 'warning' or 'error'
    (got 'loud')``). Read-only.

    Library code takes these values as arguments; only :class:`~cpcreds.ProviderRegistry`
    reads the two plugin-loading variables itself, as pytest does with its autoload switch.
    """

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, frozen=True, extra="forbid", validate_default=True)

    config: Path | None = Field(
        None,
        description="provider config file used when --config is not given",
        json_schema_extra={"metavar": "FILE", "unset": "none"},
    )
    log_level: LogLevel = Field("warning", description="logs on standard error: debug, info, warning or error")
    log_format: LogFormat = Field("console", description="log lines: console or json")
    metrics_address: str = Field("", description="host:port of a Prometheus endpoint; no command reads it yet", json_schema_extra={"unset": "none"})
    default_timeout: str = Field("60s", description="timeout of providers given by --clusterprofile-access-provider")
    default_api_version: str = Field(API_VERSION_V1, description="apiVersion of providers given by --clusterprofile-access-provider")
    disable_plugins: str = Field(
        "", description="third-party entry-point names not to load, comma-separated, or * for none of them", json_schema_extra={"unset": "none"}
    )
    plugins: str | None = Field(None, description="allow-list of entry-point names to load, comma-separated", json_schema_extra={"unset": "all"})
    cache: Literal["on", "off"] = Field("on", description="off (or 0, false, no): get-credential neither reads nor writes its disk cache")

    def __init__(self, *, environ: Mapping[str, str] | None = None, **values: Any) -> None:
        unknown = set(values) - set(type(self).model_fields)
        if unknown:
            raise TypeError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        super().__init__(given=environ, **values)

    @classmethod
    def describe_problems(cls, exc: ValidationError) -> list[tuple[str, str]]:
        return _problems(exc, cls)

    @classmethod
    def refusal(cls, problems: list[tuple[str, str]]) -> ConfigError:
        variables = ", ".join(f"{ENV_PREFIX}{name.upper()}" for name, _ in problems if name) or "CPCREDS_*"
        return ConfigError("; ".join(message for _, message in problems), source=variables)

    @classmethod
    def given_sources(
        cls, settings_cls: type[BaseSettings], env_settings: PydanticBaseSettingsSource, given: Mapping[str, Any] | None
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # environ= stands for the process environment.
        return (env_settings if given is None else _GivenEnvironment(settings_cls, given),)

    @field_validator("cache", mode="before")
    @classmethod
    def _cache_words(cls, value: Any) -> Any:
        # The hit path's reading of the variable, so that both paths agree on every spelling.
        if isinstance(value, str):
            setting = cache_setting({"CPCREDS_CACHE": value})
            if setting is not None:
                return "on" if setting else "off"
        return value

    @property
    def default_timeout_seconds(self) -> float:
        problem = ""
        try:
            return entry_timeout(self.default_timeout)  # a Go duration, > 0 and <= 24h
        except ValueError as exc:
            problem = str(exc)
        raise ConfigError(problem, source="CPCREDS_DEFAULT_TIMEOUT")


def choices_text(choices: tuple[Any, ...]) -> str:
    """``'a', 'b' or 'c'``."""
    quoted = [repr(choice) for choice in choices]
    return ", ".join(quoted[:-1]) + f" or {quoted[-1]}" if len(quoted) > 1 else quoted[0]


def _shown(value: Any) -> str:
    # Only a choice setting's value is shown (a level, a format): short, printable text.
    if isinstance(value, str) and len(value) <= 32 and value.isprintable():
        return repr(value.lower())
    return "a string" if isinstance(value, str) else type(value).__name__


def _problems(exc: ValidationError, model: type[BaseSettings]) -> list[tuple[str, str]]:
    """(setting, message) for each error, worded from pydantic's error structure."""
    problems = []
    for error in exc.errors(include_url=False, include_input=True):
        name = str(error["loc"][0]) if error["loc"] else ""
        info = model.model_fields.get(name)
        choices = _literal_choices(info.annotation) if info is not None else ()
        if error["type"] == "literal_error" and choices:
            message = f"must be {choices_text(choices)} (got {_shown(error.get('input'))})"
        elif error["type"] == "frozen_instance":
            message = "settings are read-only"
        else:
            message = str(error["msg"]).removeprefix("Value error, ")
        problems.append((name, message))
    return problems


def _literal_choices(annotation: Any) -> tuple[Any, ...]:
    for candidate in (annotation, *get_args(annotation)):
        args = get_args(candidate)
        if get_origin(candidate) is Literal and args and all(isinstance(arg, str) for arg in args):
            return args
    return ()


class SettingInfo(NamedTuple):
    """How one declared setting is given and shown: for ``--help`` and the docs' tables."""

    name: str
    flag: str
    variable: str
    #: The ``serve:`` field of the config file (``serve.profilesDir``), for serve's settings.
    field: str
    #: The default as a user writes it (``1s``, ``on``, ``32``), or what no value means (``all``).
    default: str
    description: str
    metavar: str | None
    switch: bool


def camel_case(name: str) -> str:
    """``profiles_dir`` as the config file's ``serve:`` section spells it: ``profilesDir``."""
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def describe(model: type[BaseSettings], *, section: str | None = None) -> list[SettingInfo]:
    """Every field of a settings model as its flag, variable, file field, default and help."""
    infos = []
    for name, info in model.model_fields.items():
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        switch = info.annotation is bool
        default = info.default
        if isinstance(default, bool):
            shown = "on" if default else "off"
        elif default is None or default == "" or info.default_factory is not None:
            shown = str(extra.get("unset", ""))
        else:
            shown = str(default)
        metavar = extra.get("metavar")
        infos.append(
            SettingInfo(
                name=name,
                flag="--" + name.replace("_", "-"),
                variable=ENV_PREFIX + name.upper(),
                field=f"{section}.{camel_case(name)}" if section else "",
                default=shown,
                description=info.description or "",
                metavar=None if switch else str(metavar or name.upper()),
                switch=switch,
            )
        )
    return infos
