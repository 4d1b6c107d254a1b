"""A provider config's values: the plain, frozen entries (:class:`ProviderEntry` with its
:class:`ExecConfig`, :class:`PluginPolicy` with its :class:`AllowlistEntry` items), each read from
its pydantic model (:mod:`.models`, the one schema) and checked across fields, with errors that name
the entry and the field and never quote a value. :mod:`.provider` builds the whole config from them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .._show import type_name
from ..errors import ConfigError
from ..kep import SUPPORTED_API_VERSIONS
from .documents import Limits, plain_copy
from .models import PluginPolicyModel, ProviderEntryModel
from .rules import DEFAULT_TIMEOUT, CLIArgsPolicy, EnvVarsPolicy, InteractiveMode, PolicyType
from .wording import read_with

__all__ = [
    "AllowlistEntry",
    "ExecConfig",
    "ExecEnvVar",
    "PluginPolicy",
    "ProviderEntry",
    "CONFIG_LIMITS",
    "MAX_CONFIG_BYTES",
    "MAX_CONFIG_DEPTH",
    "entry_label",
    "read_policy",
    "validate_entry",
]

#: The bounds on a provider config file: at most 1 MiB (a config with hundreds of providers is
#: a few tens of KiB), nesting 64 deep (``options`` included), 100 YAML aliases and 100,000
#: values once aliases are expanded.
CONFIG_LIMITS = Limits(max_bytes=1024 * 1024, max_depth=64, max_aliases=100, max_nodes=100_000)
MAX_CONFIG_BYTES, MAX_CONFIG_DEPTH, MAX_CONFIG_ALIASES, MAX_CONFIG_NODES = CONFIG_LIMITS


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
        return read_policy(data, "pluginPolicy")


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


def _entry_of(model: Any) -> ProviderEntry:
    """The plain entry of a :class:`~cpcreds.config.models.ProviderEntryModel` (same fields)."""
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
    """The plain policy of a :class:`~cpcreds.config.models.PluginPolicyModel` (same fields)."""
    allowlist = model.allowlist
    if allowlist is not None:
        allowlist = tuple(AllowlistEntry(entry.command, entry.sha256) for entry in allowlist)
    return PluginPolicy(policy_type=model.policy_type, allowlist=allowlist)


def read_policy(raw: Any, where: str, source: str | None = None) -> PluginPolicy:
    """``pluginPolicy`` read field by field (none of the file's rules across fields)."""
    model, problems = read_with(PluginPolicyModel, raw)
    if model is not None:
        return _policy_of(model)
    at, what = problems[0] if problems else ("", "is invalid")
    raise ConfigError(what, source=source, field=f"{where}.{at}" if at else where)

def entry_label(name: Any, index: int | None) -> str:
    shown = isinstance(name, str) and 0 < len(name) <= 100 and name.isprintable()
    if index is None:  # from a flag: there is no providers list to point into
        return f'"{name}"' if shown else "(a name that is not shown)"
    return f'"{name}" (providers[{index}])' if shown else f"providers[{index}]"


def validate_entry(raw: Any, index: int | None, source: str, base_dir: Path | None) -> ProviderEntry:
    label = entry_label(raw.get("name") if isinstance(raw, dict) else None, index)
    if not isinstance(raw, dict):
        raise ConfigError(f"must be a mapping, not {type_name(raw)}", source=source, entry=label)
    model, problems = read_with(ProviderEntryModel, raw)
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
