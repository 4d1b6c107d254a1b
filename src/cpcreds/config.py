"""The provider config: which access provider names cpcreds serves, and how.

Three ways in, one result (:class:`ProviderConfig`):

- a YAML or JSON file (:func:`load_config`); the Go reference library's JSON file loads unchanged;
- the KEP-5339 repeated flag ``--clusterprofile-access-provider "google='/usr/bin/plugin --flag v'"``
  (:func:`parse_access_provider_flag`);
- a dict in Python (:meth:`ProviderConfig.from_dict`).

Everything is validated at load time; a :class:`~cpcreds.errors.ConfigError` names the file, the
provider entry and the field. Process settings (``CPCREDS_*`` environment variables) are
:class:`Settings`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .api import API_VERSION_V1, SUPPORTED_API_VERSIONS, YAML_LOADER, ExecConfig
from .errors import ConfigError

__all__ = [
    "CLIArgsPolicy",
    "EnvVarsPolicy",
    "ProviderEntry",
    "ProviderConfig",
    "Settings",
    "load_config",
    "parse_access_provider_flag",
    "parse_duration",
    "DEFAULT_TIMEOUT",
    "FLAG_SOURCE",
]

CLIArgsPolicy = Literal["Ignore", "Append"]
EnvVarsPolicy = Literal["Ignore", "AppendIfNotExists", "Replace"]

#: Bound on one credential fetch when an entry names no ``timeout`` (seconds).
DEFAULT_TIMEOUT = 60.0
#: Longest allowed ``timeout``: a fetch that may take a day is a misconfiguration.
MAX_TIMEOUT = 24 * 3600.0
#: How errors name providers that came from the command line rather than a file.
FLAG_SOURCE = "--clusterprofile-access-provider"

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Parse a Go duration (``30s``, ``1m30s``, ``1.5h``, ``500ms``) into seconds."""
    if not isinstance(text, str) or not text:
        raise ValueError("must be a duration such as 30s, 2m or 1h30m")
    pos, total = 0, 0.0
    while pos < len(text):
        match = _DURATION_PART.match(text, pos)
        if not match:
            raise ValueError(f"{text!r} is not a duration such as 30s, 2m or 1h30m")
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    return total


def _format_duration(seconds: float) -> str:
    return f"{seconds:g}s"


class ProviderEntry(BaseModel):
    """One ``providers[]`` entry: an access-provider name and how to get its credential.

    Exactly one of ``exec_config`` (a KEP-541 exec plugin) and ``type`` (an in-process provider
    registered by a plugin) is set.
    """

    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    exec_config: ExecConfig | None = Field(default=None, alias="execConfig")
    profile_sourced_cli_args_policy: CLIArgsPolicy = Field(default="Ignore", alias="profileSourcedCLIArgsPolicy")
    profile_sourced_env_vars_policy: EnvVarsPolicy = Field(default="Ignore", alias="profileSourcedEnvVarsPolicy")
    timeout: float = DEFAULT_TIMEOUT
    type: str | None = None
    options: Mapping[str, Any] = Field(default_factory=dict)

    @field_validator("profile_sourced_cli_args_policy", "profile_sourced_env_vars_policy", mode="before")
    @classmethod
    def _empty_policy_is_ignore(cls, value: Any) -> Any:
        return "Ignore" if value in ("", None) else value  # the Go library treats "" as Ignore

    @field_validator("timeout", mode="before")
    @classmethod
    def _parse_timeout(cls, value: Any) -> Any:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            raise ValueError("must be a duration string such as 30s (a bare number has no unit)")
        seconds = parse_duration(value)
        if not 0 < seconds <= MAX_TIMEOUT:
            raise ValueError("must be longer than zero and at most 24h")
        return seconds

    @field_validator("options", mode="before")
    @classmethod
    def _null_options(cls, value: Any) -> Any:
        return {} if value is None else value

    @property
    def kind(self) -> str:
        """``"exec"`` for exec plugins, else the in-process provider type."""
        return "exec" if self.exec_config is not None else str(self.type)


@dataclass(frozen=True)
class ProviderConfig:
    """The validated provider list, in config order (order decides which provider a profile uses)."""

    providers: tuple[ProviderEntry, ...]
    #: Where it came from (a file path, ``--clusterprofile-access-provider`` or ``<dict>``).
    source: str = "<dict>"
    _by_name: Mapping[str, ProviderEntry] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", MappingProxyType({p.name: p for p in self.providers}))

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.providers]

    def get(self, name: str) -> ProviderEntry | None:
        return self._by_name.get(name)

    @classmethod
    def from_dict(
        cls,
        data: Any,
        *,
        source: str = "<dict>",
        base_dir: Path | None = None,
    ) -> ProviderConfig:
        """Validate a parsed config document (``{"providers": [...]}``).

        A relative ``command`` that contains a ``/`` is resolved against ``base_dir`` (the config
        file's folder), as kubectl resolves exec commands in a kubeconfig; bare names are looked
        up on ``PATH`` when the plugin runs.
        """
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ConfigError("must be a mapping with a 'providers' list", source=source)
        unknown = sorted(set(data) - {"providers"})
        if unknown:
            raise ConfigError(f"unknown top-level field(s) {', '.join(map(repr, unknown))}", source=source)
        raw_providers = data.get("providers") or []
        if not isinstance(raw_providers, list):
            raise ConfigError("must be a list", source=source, field="providers")
        entries: list[ProviderEntry] = []
        seen: dict[str, int] = {}
        for index, raw in enumerate(raw_providers):
            entry = _validate_entry(raw, index, source, base_dir)
            if entry.name in seen:
                raise ConfigError(
                    f"duplicate provider name (first at providers[{seen[entry.name]}])",
                    source=source,
                    entry=_label(entry.name, index),
                    field="name",
                )
            seen[entry.name] = index
            entries.append(entry)
        return cls(tuple(entries), source=source)

    def merged_with(self, other: ProviderConfig) -> ProviderConfig:
        """This config's providers, then ``other``'s; a name in both is an error."""
        return ProviderConfig.from_entries([*self.providers, *other.providers], source=f"{self.source}, {other.source}")

    @classmethod
    def from_entries(cls, entries: Iterable[ProviderEntry], *, source: str = "<dict>") -> ProviderConfig:
        entries = tuple(entries)
        seen: set[str] = set()
        for index, entry in enumerate(entries):
            if entry.name in seen:
                raise ConfigError("duplicate provider name", source=source, entry=_label(entry.name, index))
            seen.add(entry.name)
        return cls(entries, source=source)


def _label(name: Any, index: int | None) -> str:
    if index is None:  # from a flag: there is no providers list to point into
        return f'"{name}"'
    return f'"{name}" (providers[{index}])' if isinstance(name, str) and name else f"providers[{index}]"


def _validate_entry(raw: Any, index: int | None, source: str, base_dir: Path | None) -> ProviderEntry:
    label = _label(raw.get("name") if isinstance(raw, dict) else None, index)
    if not isinstance(raw, dict):
        raise ConfigError("must be a mapping", source=source, entry=label)
    try:
        entry = ProviderEntry.model_validate(raw)
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False, include_input=False):
            where = ".".join(str(part) for part in err["loc"]) or "(entry)"
            message = err["msg"].removeprefix("Value error, ")
            problems.append(f"field {where}: {message}")
        raise ConfigError("; ".join(problems), source=source, entry=label) from None
    return _check_entry(entry, label, source, base_dir)


def _check_entry(entry: ProviderEntry, label: str, source: str, base_dir: Path | None) -> ProviderEntry:
    def fail(message: str, field_name: str | None) -> ConfigError:
        return ConfigError(message, source=source, entry=label, field=field_name)

    exec_config = entry.exec_config
    if exec_config is None and entry.type is None:
        raise fail("needs execConfig (an exec plugin) or type (an in-process provider)", None)
    if exec_config is not None and entry.type is not None:
        raise fail("has both execConfig and type; an entry is one or the other", "type")
    if exec_config is None:
        if entry.profile_sourced_cli_args_policy != "Ignore":
            raise fail("profile-sourced policies apply only to execConfig providers", "profileSourcedCLIArgsPolicy")
        if entry.profile_sourced_env_vars_policy != "Ignore":
            raise fail("profile-sourced policies apply only to execConfig providers", "profileSourcedEnvVarsPolicy")
        if not entry.type:
            raise fail("must not be empty", "type")
        return entry
    if entry.options:
        raise fail("options apply only to in-process providers (type:); exec plugins take args and env", "options")
    if not exec_config.command:
        raise fail("is required", "execConfig.command")
    if exec_config.api_version is None:
        raise fail(f"is required ({' or '.join(SUPPORTED_API_VERSIONS)})", "execConfig.apiVersion")
    if exec_config.api_version not in SUPPORTED_API_VERSIONS:
        raise fail(
            f"{exec_config.api_version!r} is not supported; use {' or '.join(SUPPORTED_API_VERSIONS)}",
            "execConfig.apiVersion",
        )
    updates: dict[str, Any] = {}
    if exec_config.interactive_mode is None:
        # The Go library runs every ClusterProfile plugin with interactiveMode Never; a controller
        # has no terminal, and a plugin that wants one must say so explicitly.
        updates["interactive_mode"] = "Never"
    command = exec_config.command
    if base_dir is not None and "/" in command and not os.path.isabs(command):
        updates["command"] = str((base_dir / command).resolve())
    if updates:
        entry = entry.model_copy(update={"exec_config": exec_config.model_copy(update=updates)})
    return entry


def _parse_document(text: str, source: str) -> Any:
    stripped = text.lstrip()
    if source.endswith(".json") or stripped.startswith("{"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            if source.endswith(".json"):
                raise ConfigError(f"not valid JSON: line {exc.lineno} column {exc.colno}: {exc.msg}", source=source) from None
    try:
        return yaml.load(text, Loader=YAML_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"not valid YAML: {where}{problem}", source=source) from None




def load_config(path: str | os.PathLike[str]) -> ProviderConfig:
    """Read and validate a provider config file (YAML or JSON)."""
    source = os.fspath(path)
    try:
        text = Path(source).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("file not found", source=source) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read: {exc.strerror if isinstance(exc, OSError) else exc}", source=source) from None
    data = _parse_document(text, source)
    return ProviderConfig.from_dict(data, source=source, base_dir=Path(source).resolve().parent)


def parse_access_provider_flag(
    spec: str,
    *,
    api_version: str = API_VERSION_V1,
    timeout: float = DEFAULT_TIMEOUT,
) -> ProviderEntry:
    """Parse one ``--clusterprofile-access-provider`` value: ``NAME='COMMAND ARG...'`` (KEP-5339).

    The command line after ``=`` is split as a POSIX shell would (quotes optional). Flag-defined
    providers use ``api_version``, receive the profile's cluster (``provideClusterInfo: true``:
    KEP-5339 has the library pass the ClusterProfile's cluster to the plugin, and a flag has no
    way to ask for it), and ignore profile-sourced args and env (the KEP's default).
    """
    name, sep, command_line = spec.partition("=")
    name = name.strip()
    if not sep or not name:
        raise ConfigError(f"{spec!r} is not NAME='COMMAND [ARG...]'", source=FLAG_SOURCE)
    command_line = command_line.strip()
    if len(command_line) >= 2 and command_line[0] == command_line[-1] and command_line[0] in "'\"":
        # The KEP quotes the whole command line: google='/usr/bin/plugin --flag1 value1'.
        command_line = command_line[1:-1]
    try:
        argv = shlex.split(command_line)
    except ValueError as exc:
        raise ConfigError(f"cannot split the command line: {exc}", source=FLAG_SOURCE, entry=f'"{name}"') from None
    if not argv:
        raise ConfigError("no command after '='", source=FLAG_SOURCE, entry=f'"{name}"')
    raw = {
        "name": name,
        "execConfig": {"apiVersion": api_version, "command": argv[0], "args": argv[1:], "provideClusterInfo": True},
        "timeout": _format_duration(timeout),
    }
    return _validate_entry(raw, None, FLAG_SOURCE, None)


class Settings(BaseSettings):
    """Process settings, from ``CPCREDS_*`` environment variables (read by the CLI and ``serve``).

    Library code takes these values as arguments; only :class:`~cpcreds.registry.ProviderRegistry`
    reads the two plugin-loading variables itself, as pytest does with its autoload switch.
    """

    model_config = SettingsConfigDict(env_prefix="CPCREDS_", extra="ignore")

    #: Provider config file used when ``--config`` is not given.
    config: Path | None = None
    log_level: Literal["debug", "info", "warning", "error"] = "warning"
    log_format: Literal["console", "json"] = "console"
    #: ``host:port`` for the Prometheus endpoint of ``serve`` (empty: none).
    metrics_address: str = ""
    #: Timeout of providers given by ``--clusterprofile-access-provider`` (file entries that name
    #: none get 60s, so that a config file means the same everywhere).
    default_timeout: str = "60s"
    #: apiVersion used for providers given by ``--clusterprofile-access-provider``.
    default_api_version: str = API_VERSION_V1
    #: Comma-separated entry-point names not to load, or ``*`` for all third-party plugins.
    disable_plugins: str = ""
    #: Comma-separated allow-list of entry-point names to load (unset: all).
    plugins: str | None = None

    @field_validator("log_level", "log_format", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

    @property
    def default_timeout_seconds(self) -> float:
        try:
            return parse_duration(self.default_timeout)
        except ValueError as exc:
            raise ConfigError(str(exc), source="CPCREDS_DEFAULT_TIMEOUT") from None
