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
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .._show import quoted, type_name
from ..errors import ConfigError
from ..kep import API_VERSION_V1
from .documents import load_or_raise, read_or_raise
from .entries import (
    CONFIG_LIMITS,
    MAX_CONFIG_BYTES,
    MAX_CONFIG_DEPTH,
    AllowlistEntry,
    ExecConfig,
    ExecEnvVar,
    PluginPolicy,
    ProviderEntry,
    entry_label,
    read_policy,
    validate_entry,
)
from .rules import (
    DEFAULT_TIMEOUT,
    CLIArgsPolicy,
    EnvVarsPolicy,
    InteractiveMode,
    PolicyType,
    parse_duration,
)
from .wording import describe_validation_error, did_you_mean

__all__ = [
    "AllowlistEntry",
    "ExecConfig",
    "ExecEnvVar",
    "InteractiveMode",
    "PluginPolicy",
    "PolicyType",
    "CLIArgsPolicy",
    "EnvVarsPolicy",
    "ProviderEntry",
    "ProviderConfig",
    "load_config",
    "parse_access_provider_flag",
    "parse_duration",
    "json_type_name",
    "DEFAULT_TIMEOUT",
    "FLAG_SOURCE",
    "MAX_CONFIG_BYTES",
    "MAX_CONFIG_DEPTH",
    "describe_validation_error",
]

#: How errors name providers that came from the command line rather than a file.
FLAG_SOURCE = "--clusterprofile-access-provider"


def _format_duration(seconds: float) -> str:
    return f"{seconds:g}s"


@dataclass(frozen=True)
class ProviderConfig:
    """The validated provider list, in config order (order decides which provider a profile uses)."""

    providers: tuple[ProviderEntry, ...]
    #: Where it came from (a file path, ``--clusterprofile-access-provider`` or ``<dict>``).
    source: str = "<dict>"
    #: The ``serve:`` section, as written (``cpcreds serve`` validates it; nothing else reads it).
    serve: Mapping[str, Any] | None = field(default=None, compare=False)
    #: Which exec plugins may run (top-level ``pluginPolicy``).
    plugin_policy: PluginPolicy = field(default_factory=PluginPolicy)
    #: Top-level ``failover``: the default of every entry's ``failover``.
    failover: bool = False
    _by_name: Mapping[str, ProviderEntry] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", MappingProxyType({p.name: p for p in self.providers}))

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.providers]

    def get(self, name: str) -> ProviderEntry | None:
        return self._by_name.get(name)

    def fails_over(self, name: str) -> bool:
        """Whether a failure of provider ``name`` moves on to the next provider a profile offers."""
        entry = self._by_name.get(name)
        if entry is None or entry.failover is None:
            return self.failover
        return entry.failover

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
        unknown = sorted((key for key in data if key not in _TOP_LEVEL_FIELDS), key=repr)
        if unknown:
            hint = did_you_mean(unknown[0], _TOP_LEVEL_FIELDS)
            shown = ", ".join(_show_key(key) for key in unknown)
            raise ConfigError(f"unknown top-level field(s) {shown}{hint}", source=source)
        raw_providers = data.get("providers") or []
        if not isinstance(raw_providers, list):
            raise ConfigError("must be a list", source=source, field="providers")
        entries: list[ProviderEntry] = []
        seen: dict[str, int] = {}
        for index, raw in enumerate(raw_providers):
            entry = validate_entry(raw, index, source, base_dir)
            if entry.name in seen:
                raise ConfigError(
                    f"duplicate provider name (first at providers[{seen[entry.name]}])",
                    source=source,
                    entry=entry_label(entry.name, index),
                    field="name",
                )
            seen[entry.name] = index
            entries.append(entry)
        serve = data.get("serve")
        if serve is not None and not isinstance(serve, dict):
            raise ConfigError(f"must be a mapping, not {json_type_name(serve)}", source=source, field="serve")
        failover = data.get("failover", False)
        if not isinstance(failover, bool):
            raise ConfigError(f"must be true or false, not {json_type_name(failover)}", source=source, field="failover")
        return cls(
            tuple(entries),
            source=source,
            serve=MappingProxyType(dict(serve)) if serve is not None else None,
            plugin_policy=_validate_policy(data.get("pluginPolicy"), source, base_dir),
            failover=failover,
        )

    def merged_with(self, other: ProviderConfig) -> ProviderConfig:
        """This config's providers, then ``other``'s; a name in both is an error. The policy and
        the failover default are this config's (flags cannot loosen a file's policy)."""
        return ProviderConfig.from_entries(
            [*self.providers, *other.providers],
            source=f"{self.source}, {other.source}",
            plugin_policy=self.plugin_policy,
            failover=self.failover,
        )

    @classmethod
    def from_entries(
        cls,
        entries: Iterable[ProviderEntry],
        *,
        source: str = "<dict>",
        plugin_policy: PluginPolicy | None = None,
        failover: bool = False,
    ) -> ProviderConfig:
        entries = tuple(entries)
        seen: set[str] = set()
        for index, entry in enumerate(entries):
            if entry.name in seen:
                raise ConfigError("duplicate provider name", source=source, entry=entry_label(entry.name, index))
            seen.add(entry.name)
        return cls(entries, source=source, plugin_policy=plugin_policy or PluginPolicy(), failover=failover)


def _validate_policy(raw: Any, source: str, base_dir: Path | None) -> PluginPolicy:
    """The top-level ``pluginPolicy``, checked so that a misconfigured policy fails closed: the
    config does not load, rather than running with a policy other than the one meant."""
    if raw is None:
        return PluginPolicy()
    if not isinstance(raw, dict):
        raise ConfigError(f"must be a mapping, not {json_type_name(raw)}", source=source, field="pluginPolicy")
    policy = read_policy(raw, "pluginPolicy", source)
    if "policyType" not in raw and "policy_type" not in raw:
        # client-go: an allowlist without a policy is a misconfiguration, not an AllowAll.
        raise ConfigError("is required (AllowAll, DenyAll or Allowlist)", source=source, field="pluginPolicy.policyType")
    if policy.policy_type != "Allowlist":
        if policy.allowlist is not None:
            raise ConfigError(
                f"applies only with policyType Allowlist (policyType is {policy.policy_type})",
                source=source,
                field="pluginPolicy.allowlist",
            )
        return policy
    if not policy.allowlist:
        raise ConfigError(
            "must list at least one command when policyType is Allowlist (use DenyAll to run no plugin)",
            source=source,
            field="pluginPolicy.allowlist",
        )
    entries = []
    for entry in policy.allowlist:
        command = entry.command
        if base_dir is not None and "/" in command and not os.path.isabs(command):
            # As execConfig.command: a relative path is relative to the config file.
            entry = replace(entry, command=str((base_dir / command).resolve()))
        entries.append(entry)
    return replace(policy, allowlist=tuple(entries))


#: Top-level fields of a provider config file: the Go library's ``providers``, and cpcreds' own
#: ``serve`` section, plugin policy and failover default.
_TOP_LEVEL_FIELDS = ("providers", "serve", "pluginPolicy", "failover")


def _show_key(key: Any) -> str:
    return quoted(key, 60)


def json_type_name(value: Any) -> str:
    """How messages name what was given instead of a value: its JSON type ("a list", "null"),
    never the value itself, which may be a secret (:func:`cpcreds._show.type_name`)."""
    return type_name(value)


def _parse_document(text: str | bytes, source: str) -> Any:
    return load_or_raise(
        text,
        lambda problem: ConfigError(problem, source=source),
        source=source,
        syntax="json" if source.endswith(".json") else "auto",
        limits=CONFIG_LIMITS,
    )


def _read_config_file(source: str) -> bytes:
    return read_or_raise(source, lambda problem: ConfigError(problem, source=source), max_bytes=MAX_CONFIG_BYTES)


def load_config(path: str | os.PathLike[str]) -> ProviderConfig:
    """Read and validate a provider config file (YAML or JSON, at most :data:`MAX_CONFIG_BYTES`).

    A file that defines no providers (empty, ``{}``, ``providers: []``) is a
    :class:`~cpcreds.errors.ConfigError`: a config that can never give a credential is a mistake.
    """
    source = os.fspath(path)
    data = _parse_document(_read_config_file(source), source)
    config = ProviderConfig.from_dict(data, source=source, base_dir=Path(source).resolve().parent)
    if not config.providers:
        raise ConfigError("defines no providers (add at least one entry under providers:)", source=source)
    return config


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
    split_error: str | None = None
    try:
        import shlex  # only for an --access-provider flag

        argv = shlex.split(command_line)
    except ValueError as exc:
        split_error = str(exc)
    if split_error is not None:
        raise ConfigError(f"cannot split the command line: {split_error}", source=FLAG_SOURCE, entry=f'"{name}"')
    if not argv:
        raise ConfigError("no command after '='", source=FLAG_SOURCE, entry=f'"{name}"')
    raw = {
        "name": name,
        "execConfig": {"apiVersion": api_version, "command": argv[0], "args": argv[1:], "provideClusterInfo": True},
        "timeout": _format_duration(timeout),
    }
    return validate_entry(raw, None, FLAG_SOURCE, None)
