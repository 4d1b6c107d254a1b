"""The provider config as pydantic models: the one schema every config file, dict and flag is
read through (:mod:`cpcreds.config.provider` builds the config from what they validated, and
:mod:`cpcreds.config.wording` words what they refuse). The values and cross-field rules they apply
are in :mod:`cpcreds.config.rules`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator, model_validator

from .rules import (
    DEFAULT_TIMEOUT,
    SHA256_PATTERN,
    CLIArgsPolicy,
    EnvVarsPolicy,
    InteractiveMode,
    PolicyType,
    entry_timeout,
    env_name_problem,
    go_marshalled_exec_config,
)
from ..kep import unpassable_text

__all__ = ["ExecEnvVarModel", "ExecConfigModel", "AllowlistEntryModel", "PluginPolicyModel", "ProviderEntryModel"]


def _passable(value: Any) -> Any:
    if isinstance(value, str):
        problem = unpassable_text(value)
        if problem is not None:
            raise ValueError(problem)
    return value


class ExecEnvVarModel(BaseModel):
    """One ``env`` entry of an ExecConfig."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    value: str

    @field_validator("name", mode="after")
    @classmethod
    def _name_can_be_set(cls, value: str) -> str:
        _passable(value)
        problem = env_name_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    _value_can_be_set = field_validator("value", mode="after")(_passable)


class ExecConfigModel(BaseModel):
    """kubeconfig's ``users[].user.exec`` (KEP-541), as used in a provider config's ``execConfig``."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)

    api_version: str | None = Field(default=None, alias="apiVersion")
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[ExecEnvVarModel, ...] = ()
    install_hint: str = Field(default="", alias="installHint")
    provide_cluster_info: bool = Field(default=False, alias="provideClusterInfo")
    interactive_mode: InteractiveMode | None = Field(default=None, alias="interactiveMode")
    stdin_unavailable: bool = Field(default=False, alias="stdinUnavailable")

    _command_can_run = field_validator("command", mode="after")(_passable)

    @field_validator("args", mode="after")
    @classmethod
    def _args_can_be_passed(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for index, arg in enumerate(value):
            problem = unpassable_text(arg)
            if problem is not None:
                raise ValueError(f"item {index} {problem}")
        return value

    @model_validator(mode="before")
    @classmethod
    def _accept_go_marshalled_keys(cls, data: Any) -> Any:
        return go_marshalled_exec_config(data) if isinstance(data, dict) else data


_allowlist_name_warned = False


def _warn_allowlist_name() -> None:
    global _allowlist_name_warned
    if _allowlist_name_warned:
        return
    _allowlist_name_warned = True
    from ..logs import get_logger  # only a config that needs the warning pays for logging

    get_logger("cpcreds.config").warning(
        "pluginPolicy.allowlist[].name is deprecated (client-go 1.35's spelling); client-go 1.36 and cpcreds call it command"
    )


class AllowlistEntryModel(BaseModel):
    """One ``pluginPolicy.allowlist`` entry. ``name`` (client-go 1.35's spelling, renamed
    ``command`` in 1.36) is read as ``command``, with a warning once per process; an entry with
    both is refused. (The plain reader leaves ``name`` to this model.)"""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: str = Field(min_length=1)
    sha256: str | None = Field(default=None, pattern=SHA256_PATTERN)

    @model_validator(mode="before")
    @classmethod
    def _deprecated_name(cls, data: Any) -> Any:
        if not isinstance(data, Mapping) or "name" not in data:
            return data
        if "command" in data:  # which one was meant is a guess; a policy must not guess
            raise ValueError("has both command and name (name is the deprecated client-go 1.35 spelling of command): keep only command")
        _warn_allowlist_name()
        return {("command" if key == "name" else key): value for key, value in data.items()}

    @field_validator("sha256", mode="after")
    @classmethod
    def _lower(cls, value: str | None) -> str | None:
        return value.lower() if value is not None else None


class PluginPolicyModel(BaseModel):
    """The top-level ``pluginPolicy``."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)

    policy_type: PolicyType = Field(default="AllowAll", alias="policyType")
    allowlist: tuple[AllowlistEntryModel, ...] | None = None


class ProviderEntryModel(BaseModel):
    """One ``providers[]`` entry."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    exec_config: ExecConfigModel | None = Field(default=None, alias="execConfig")
    profile_sourced_cli_args_policy: CLIArgsPolicy = Field(default="Ignore", alias="profileSourcedCLIArgsPolicy")
    profile_sourced_env_vars_policy: EnvVarsPolicy = Field(default="Ignore", alias="profileSourcedEnvVarsPolicy")
    timeout: float = DEFAULT_TIMEOUT
    type: str | None = None
    options: Mapping[str, Any] = Field(default_factory=dict)
    failover: StrictBool | None = None

    @field_validator("profile_sourced_cli_args_policy", "profile_sourced_env_vars_policy", mode="before")
    @classmethod
    def _empty_policy_is_ignore(cls, value: Any) -> Any:
        return "Ignore" if value in ("", None) else value  # the Go library treats "" as Ignore

    @field_validator("timeout", mode="before")
    @classmethod
    def _parse_timeout(cls, value: Any) -> Any:
        return entry_timeout(value)

    @field_validator("options", mode="before")
    @classmethod
    def _null_options(cls, value: Any) -> Any:
        return {} if value is None else value
