"""The provider config and everything read at the boundary: the one schema (pydantic models),
the document loader with its bounds, ClusterProfile files, and providers' option declarations.

- :mod:`.provider`: the provider config (:class:`ProviderConfig`, :func:`load_config`, the
  ``--clusterprofile-access-provider`` flag) and its rules across fields;
- :mod:`.models`: the pydantic models of the provider config (the one schema);
- :mod:`.wording`: pydantic's error structure in cpcreds' words, never quoting a value;
- :mod:`.rules`: the values and rules the models apply (policies, durations, env names);
- :mod:`.options`: a provider's options declared once (:class:`~cpcreds.sdk.Options`);
- :mod:`.documents`: the bounded YAML/JSON loader every input goes through (with
  :mod:`.bounds`, :mod:`.jsonreader`, :mod:`.yamlbuilder` and :mod:`.plain` behind it);
- :mod:`.profiles`: ClusterProfile files.

The names below are loaded on first use, so a module that needs only the document loader (an exec
plugin reading its answer) does not load the models.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .provider import *  # noqa: F403

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
    "Settings",
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


def __getattr__(name: str) -> Any:
    if name in __all__:
        # Settings (pydantic-settings) live in cpcreds.config.settings; re-exported here as before.
        module = ".settings" if name == "Settings" else ".provider"
        value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
