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
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from .models import PluginPolicyModel, ProviderEntryModel
from .rules import (
    DEFAULT_TIMEOUT,
    CLIArgsPolicy,
    EnvVarsPolicy,
    InteractiveMode,
    PolicyType,
    parse_duration,
)
from .wording import describe_validation_error, did_you_mean
from .documents import Limits, load_or_raise, plain_copy, read_or_raise
from .._show import quoted, type_name
from ..errors import ConfigError
from ..kep import API_VERSION_V1, SUPPORTED_API_VERSIONS


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
#: The bounds on a provider config file: at most 1 MiB (a config with hundreds of providers is
#: a few tens of KiB), nesting 64 deep (``options`` included), 100 YAML aliases and 100,000
#: values once aliases are expanded.
CONFIG_LIMITS = Limits(max_bytes=1024 * 1024, max_depth=64, max_aliases=100, max_nodes=100_000)
MAX_CONFIG_BYTES, MAX_CONFIG_DEPTH, MAX_CONFIG_ALIASES, MAX_CONFIG_NODES = CONFIG_LIMITS

def _format_duration(seconds: float) -> str:
    return f"{seconds:g}s"


@dataclass(frozen=True, slots=True)
class ExecEnvVar:
    """One ``env`` entry of an ExecConfig: a variable the plugin gets."""

    name: str
    value: str


@dataclass(frozen=True, slots=True)
class ExecConfig:
    """kubeconfig's ``users[].user.exec`` (KEP-541), as read from a provider config's ``execConfig``.

    The reader accepts the keys Go's ``json.Marshal`` writes for client-go's internal ExecConfig,
    whose later fields had no JSON tags (``Config``, ``InteractiveMode``, ``StdinUnavailable``,
    ``StdinUnavailableMessage``), so that a file written by the Go library loads unchanged.
    """

    api_version: str | None = None
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[ExecEnvVar, ...] = ()
    install_hint: str = ""
    provide_cluster_info: bool = False
    interactive_mode: InteractiveMode | None = None
    stdin_unavailable: bool = False


@dataclass(frozen=True, slots=True)
class AllowlistEntry:
    """One ``pluginPolicy.allowlist`` entry: a command that may run, optionally pinned.

    ``command`` is compared as client-go compares it: both it and the plugin's command are
    resolved on the controller's ``PATH`` (a name without ``/``) or made absolute (a path,
    relative ones against the config file's folder), and the results must be equal.
    ``sha256`` (cpcreds' addition, lower-case hex) pins the executable's content: it then runs
    only if its bytes hash to this digest, and exactly the bytes that were hashed run.

    In a file, ``name`` (client-go 1.35's spelling, renamed ``command`` in 1.36) is read as
    ``command``, with a warning once per process; an entry with both is refused.
    """

    command: str
    sha256: str | None = None


@dataclass(frozen=True, slots=True)
class PluginPolicy:
    """Which exec plugins may run (top-level ``pluginPolicy``; client-go's ``PluginPolicy``).

    ``AllowAll`` (the default, as in client-go) runs any configured command; ``DenyAll`` runs
    none; ``Allowlist`` runs only the commands of ``allowlist``. In-process providers are not
    subject to it: they are code the controller imported.
    """

    policy_type: PolicyType = "AllowAll"
    allowlist: tuple[AllowlistEntry, ...] | None = None

    @classmethod
    def model_validate(cls, data: Any) -> PluginPolicy:
        """Read a ``pluginPolicy`` mapping (``{"policyType": ..., "allowlist": [...]}``) field by
        field, as a config file's is read; commands are kept as given (a file's relative ones
        are made absolute by :func:`load_config`). A :class:`ConfigError` names what is wrong."""
        return _read_policy(data, "pluginPolicy")


@dataclass(frozen=True, slots=True, weakref_slot=True)  # weakref: what plans derive from an entry is cached per entry
class ProviderEntry:
    """One ``providers[]`` entry: an access-provider name and how to get its credential.

    Exactly one of ``exec_config`` (a KEP-541 exec plugin) and ``type`` (an in-process provider
    registered by a plugin) is set. Read from a file or a dict by :class:`ProviderConfig`
    (:meth:`ProviderConfig.from_dict`), which checks every field.
    """

    name: str
    exec_config: ExecConfig | None = None
    profile_sourced_cli_args_policy: CLIArgsPolicy = "Ignore"
    profile_sourced_env_vars_policy: EnvVarsPolicy = "Ignore"
    #: Bound on one credential fetch, in seconds.
    timeout: float = DEFAULT_TIMEOUT
    type: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    #: When this provider fails, try the next one the profile offers (None: the top-level setting).
    failover: bool | None = None

    @property
    def kind(self) -> str:
        """``"exec"`` for exec plugins, else the in-process provider type."""
        return "exec" if self.exec_config is not None else str(self.type)


# -- reading: the pydantic models are the one schema ------------------------------------------------


def _worded(model: Any, raw: Any) -> tuple[Any, list[tuple[str, str]]]:
    """``raw`` read by the pydantic ``model`` of :mod:`.models`: (the model, []) or (None, the
    problems in cpcreds' words)."""
    problems: list[tuple[str, str]] = []
    try:
        return model.model_validate(raw), []
    except ValidationError as exc:
        problems = describe_validation_error(exc, model)
    except (TypeError, ValueError, OverflowError, RecursionError):  # a value pydantic cannot even look at
        problems = [("", "holds a value that cannot be read")]
    # Returned outside the except blocks: pydantic's error quotes the input, which may be a secret.
    return None, problems


def _entry_of(model: Any) -> ProviderEntry:
    """The plain entry of a :class:`~cpcreds._configmodels.ProviderEntryModel` (same fields)."""
    exec_model = model.exec_config
    exec_config = None
    if exec_model is not None:
        exec_config = ExecConfig(
            api_version=exec_model.api_version,
            command=exec_model.command,
            args=tuple(exec_model.args),
            env=tuple(ExecEnvVar(var.name, var.value) for var in exec_model.env),
            install_hint=exec_model.install_hint,
            provide_cluster_info=exec_model.provide_cluster_info,
            interactive_mode=exec_model.interactive_mode,
            stdin_unavailable=exec_model.stdin_unavailable,
        )
    return ProviderEntry(
        name=model.name,
        exec_config=exec_config,
        profile_sourced_cli_args_policy=model.profile_sourced_cli_args_policy,
        profile_sourced_env_vars_policy=model.profile_sourced_env_vars_policy,
        timeout=model.timeout,
        type=model.type,
        options=dict(model.options),
        failover=model.failover,
    )


def _policy_of(model: Any) -> PluginPolicy:
    """The plain policy of a :class:`~cpcreds._configmodels.PluginPolicyModel` (same fields)."""
    allowlist = model.allowlist
    if allowlist is not None:
        allowlist = tuple(AllowlistEntry(entry.command, entry.sha256) for entry in allowlist)
    return PluginPolicy(policy_type=model.policy_type, allowlist=allowlist)


def _read_policy(raw: Any, where: str, source: str | None = None) -> PluginPolicy:
    """``pluginPolicy`` read field by field (none of the file's rules across fields)."""
    model, problems = _worded(PluginPolicyModel, raw)
    if model is not None:
        return _policy_of(model)
    at, what = problems[0] if problems else ("", "is invalid")
    raise ConfigError(what, source=source, field=f"{where}.{at}" if at else where)


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
                raise ConfigError("duplicate provider name", source=source, entry=_label(entry.name, index))
            seen.add(entry.name)
        return cls(entries, source=source, plugin_policy=plugin_policy or PluginPolicy(), failover=failover)


def _validate_policy(raw: Any, source: str, base_dir: Path | None) -> PluginPolicy:
    """The top-level ``pluginPolicy``, checked so that a misconfigured policy fails closed: the
    config does not load, rather than running with a policy other than the one meant."""
    if raw is None:
        return PluginPolicy()
    if not isinstance(raw, dict):
        raise ConfigError(f"must be a mapping, not {json_type_name(raw)}", source=source, field="pluginPolicy")
    policy = _read_policy(raw, "pluginPolicy", source)
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


def _label(name: Any, index: int | None) -> str:
    shown = isinstance(name, str) and 0 < len(name) <= 100 and name.isprintable()
    if index is None:  # from a flag: there is no providers list to point into
        return f'"{name}"' if shown else "(a name that is not shown)"
    return f'"{name}" (providers[{index}])' if shown else f"providers[{index}]"


def _show_key(key: Any) -> str:
    return quoted(key, 60)


def json_type_name(value: Any) -> str:
    """How messages name what was given instead of a value: its JSON type ("a list", "null"),
    never the value itself, which may be a secret (:func:`cpcreds._show.type_name`)."""
    return type_name(value)


def _validate_entry(raw: Any, index: int | None, source: str, base_dir: Path | None) -> ProviderEntry:
    label = _label(raw.get("name") if isinstance(raw, dict) else None, index)
    if not isinstance(raw, dict):
        raise ConfigError(f"must be a mapping, not {json_type_name(raw)}", source=source, entry=label)
    model, problems = _worded(ProviderEntryModel, raw)
    if model is None:
        text = "; ".join(f"field {where}: {message}" if where else message for where, message in problems)
        raise ConfigError(text or "is invalid", source=source, entry=label)
    return _check_entry(_entry_of(model), label, source, base_dir)


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
        options_problem: str | None = None
        try:
            options = plain_copy(dict(entry.options), max_depth=MAX_CONFIG_DEPTH, max_nodes=MAX_CONFIG_NODES, read_only=False)
        except ValueError as exc:
            options_problem = str(exc)
        if options_problem is not None:
            raise fail(options_problem, "options")
        return replace(entry, options=options)
    if entry.options:
        raise fail("options apply only to in-process providers (type:); exec plugins take args and env", "options")
    if not exec_config.command:
        raise fail("is required", "execConfig.command")
    if exec_config.api_version is None:
        raise fail(f"is required ({' or '.join(SUPPORTED_API_VERSIONS)})", "execConfig.apiVersion")
    if exec_config.api_version not in SUPPORTED_API_VERSIONS:
        raise fail(
            f"is not supported; use {' or '.join(SUPPORTED_API_VERSIONS)}",
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
        entry = replace(entry, exec_config=replace(exec_config, **updates))
    return entry


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
    return _validate_entry(raw, None, FLAG_SOURCE, None)
