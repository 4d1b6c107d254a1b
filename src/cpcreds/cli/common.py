"""What several commands share: the provider config from ``--config``, ``CPCREDS_CONFIG`` and
``--clusterprofile-access-provider``, the profiles of ``--profile``, and printing."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from ..config import FLAG_SOURCE, ProviderConfig, load_config, parse_access_provider_flag
from ..errors import ConfigError
from ..logs import redact_text

__all__ = ["config_path", "flag_config", "load_provider_config", "profiles", "engine", "render", "print_value", "warn"]

if TYPE_CHECKING:  # pydantic-settings is imported where the settings are read (cpcreds.cli.main)
    from ..config.settings import Settings


def config_path(args: argparse.Namespace, settings: Settings) -> str | None:
    return args.config or (os.fspath(settings.config) if settings.config else None)


def flag_config(args: argparse.Namespace, settings: Settings) -> ProviderConfig | None:
    if not args.access_providers:
        return None
    entries = [
        parse_access_provider_flag(spec, api_version=settings.default_api_version, timeout=settings.default_timeout_seconds)
        for spec in args.access_providers
    ]
    return ProviderConfig.from_entries(entries, source=FLAG_SOURCE)


def load_provider_config(args: argparse.Namespace, settings: Settings) -> ProviderConfig:
    path = config_path(args, settings)
    config: ProviderConfig | None = load_config(path) if path else None  # its errors name the file
    flags = flag_config(args, settings)
    if flags is not None:
        config = flags if config is None else config.merged_with(flags)
    if config is None:
        raise ConfigError("no provider config: give --config FILE, set CPCREDS_CONFIG, or use --clusterprofile-access-provider")
    return config


def profiles(args: argparse.Namespace) -> list[dict[str, Any]]:
    from ..config.profiles import load_profiles, select_profile

    loaded = load_profiles(args.profile)
    if args.name is not None or args.command == "get-credential":
        return [select_profile(loaded, args.name, "<stdin>" if args.profile == "-" else args.profile)]
    return loaded


def engine(config: ProviderConfig) -> Any:
    from ..engine import CredentialEngine

    return CredentialEngine(config)


def render(value: Any, output: str, *, compact: bool = False) -> str:
    if output == "yaml":
        import yaml

        return yaml.safe_dump(value, sort_keys=False)
    if compact:
        return json.dumps(value) + "\n"
    return json.dumps(value, indent=2) + "\n"


def print_value(value: Any, output: str, *, compact: bool = False) -> None:
    sys.stdout.write(render(value, output, compact=compact))


def warn(message: str) -> None:
    sys.stderr.write(f"cpcreds: warning: {redact_text(message)}\n")
