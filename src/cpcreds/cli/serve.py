"""``cpcreds serve``'s entry: its flags, made from :class:`~cpcreds.serve.settings.ServeSettings`
(flag, variable, ``serve:`` field, default and help are that declaration's), and the start."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import ConfigError
from ..serve.settings import ServeSettings
from ..config.settings import Settings, describe
from .common import config_path

__all__ = ["add_serve_options", "serve_flags", "serve"]

#: Given by the options every config-reading command has (cpcreds.cli.parser.add_config_option).
_SHARED = frozenset({"config"})
_DEST = "serve_"


def add_serve_options(parser: Any) -> None:
    """One flag per setting of ServeSettings, its help the field's description and default."""
    group = parser.add_argument_group("serve settings")
    for info in describe(ServeSettings, section="serve"):
        if info.name in _SHARED:
            continue
        text = info.description + (f" (default: {info.default})" if info.default else "") + f" [{info.variable}, {info.field}]"
        if info.switch:
            group.add_argument(info.flag, dest=_DEST + info.name, action=argparse.BooleanOptionalAction, default=None, help=text)
        else:
            group.add_argument(info.flag, dest=_DEST + info.name, metavar=info.metavar, default=None, help=text)


def serve_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The serve settings given as flags in ``args`` (None: not given), by setting name."""
    return {name: getattr(args, _DEST + name, None) for name in ServeSettings.model_fields if name not in _SHARED}


def serve(args: argparse.Namespace, settings: Settings) -> int:
    import asyncio

    from ..config import load_config
    from ..logs import configure_logging
    from ..serve.service import Service
    from ..serve.settings import UnusableFolder

    if args.access_providers:
        raise ConfigError("serve reads its providers from --config only (it reloads that file)", source="--clusterprofile-access-provider")
    path = config_path(args, settings)
    if not path:
        raise ConfigError("serve needs a provider config: --config FILE or CPCREDS_CONFIG")
    config = load_config(path)
    serve_settings = ServeSettings.load({**serve_flags(args), "config": path}, config.serve)
    configure_logging(serve_settings.log_level, serve_settings.log_format)
    try:
        return asyncio.run(Service(serve_settings, config).run())
    except UnusableFolder as exc:  # a folder flag naming the wrong thing: a usage error
        sys.stderr.write(f"cpcreds: usage error: {exc} (see cpcreds serve --help)\n")
        return 2
