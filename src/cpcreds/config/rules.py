"""Rules of the provider config that its pydantic models (:mod:`cpcreds.config.models`) apply:
the values a field may take (policies, durations, environment variable names) and the rules
across fields, as plain functions the validators call.
"""

from __future__ import annotations

from typing import Any, Literal

from .durations import duration_or_none, parse_duration

__all__ = [
    "DEFAULT_TIMEOUT",
    "MAX_TIMEOUT",
    "INTERACTIVE_MODES",
    "CLI_ARGS_POLICIES",
    "ENV_VARS_POLICIES",
    "POLICY_TYPES",
    "InteractiveMode",
    "CLIArgsPolicy",
    "EnvVarsPolicy",
    "PolicyType",
    "SHA256_PATTERN",
    "parse_duration",
    "entry_timeout",
    "env_name_problem",
    "go_marshalled_exec_config",
]

#: Bound on one credential fetch when an entry names no ``timeout`` (seconds).
DEFAULT_TIMEOUT = 60.0
#: Longest allowed ``timeout``: a fetch that may take a day is a misconfiguration.
MAX_TIMEOUT = 24 * 3600.0

#: KEP-541's interactiveMode values.
INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")
#: KEP-5339's profileSourcedCLIArgsPolicy and profileSourcedEnvVarsPolicy values.
CLI_ARGS_POLICIES = ("Ignore", "Append")
ENV_VARS_POLICIES = ("Ignore", "AppendIfNotExists", "Replace")
#: client-go's ``PluginPolicy.PolicyType`` values, spelled as client-go (and kubectl's kuberc) spell them.
POLICY_TYPES = ("AllowAll", "DenyAll", "Allowlist")
# The same values as types, for the plain reader and the worded one alike.
InteractiveMode = Literal[INTERACTIVE_MODES]  # type: ignore[valid-type]
CLIArgsPolicy = Literal[CLI_ARGS_POLICIES]  # type: ignore[valid-type]
EnvVarsPolicy = Literal[ENV_VARS_POLICIES]  # type: ignore[valid-type]
PolicyType = Literal[POLICY_TYPES]  # type: ignore[valid-type]
#: An allowlist entry's ``sha256``: 64 hex digits (any case; kept lower-case).
SHA256_PATTERN = r"^[0-9a-fA-F]{64}$"

def entry_timeout(value: Any) -> float:
    """A provider entry's ``timeout`` in seconds; ``ValueError`` says what is wrong with it."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raise ValueError("must be a duration string such as 30s (a bare number has no unit)")
    seconds = duration_or_none(value)
    if seconds is None:
        raise ValueError("is not a duration such as 30s, 2m or 1h30m")
    if not 0 < seconds <= MAX_TIMEOUT:
        raise ValueError("must be longer than zero and at most 24h")
    return seconds


def env_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be an ``execConfig.env`` name beyond being passable text, or None."""
    if "=" in name:
        return "must not contain '=' (it separates a variable's name from its value)"
    return None


def go_marshalled_exec_config(data: dict[str, Any]) -> dict[str, Any]:
    """An ``execConfig`` mapping with the keys Go's ``json.Marshal`` writes for client-go's
    internal ExecConfig (whose later fields have no JSON tags: ``Config``, ``InteractiveMode``,
    ``StdinUnavailable``, ``StdinUnavailableMessage``) in their kubeconfig spelling, and Go's
    zero values (``""``, ``null`` slices) as not set. A copy; ``ValueError`` for a ``Config``
    that is not null (plugin config comes from the ClusterProfile)."""
    data = dict(data)
    legacy_mode = data.pop("InteractiveMode", None)
    if legacy_mode and "interactiveMode" not in data:
        data["interactiveMode"] = legacy_mode
    if data.get("interactiveMode") == "":
        data.pop("interactiveMode")  # Go's zero value means "not set"
    legacy_config = data.pop("Config", None)
    if legacy_config is not None:
        raise ValueError("Config must be null (plugin config comes from the ClusterProfile extension)")
    if data.pop("StdinUnavailable", False):
        data["stdinUnavailable"] = True
    data.pop("StdinUnavailableMessage", None)
    for key in ("args", "env"):
        if key in data and data[key] is None:
            data.pop(key)  # Go writes nil slices as null
    return data
