"""``cpcreds get-credential`` past the disk cache (a miss, or a run the cache does not serve);
``cpcreds cache`` is :mod:`cpcreds.cli.cachelist`. kubectl runs get-credential before every request; a hit is answered earlier,
by :mod:`cpcreds._entry` and :mod:`cpcreds.cli.diskcache`, before this module is imported."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from ..kep import API_VERSION_V1, EXEC_INFO_ENV, SUPPORTED_API_VERSIONS
from . import diskcache
from .common import config_path, engine, load_provider_config, profiles, render

__all__ = ["get_credential"]

if TYPE_CHECKING:  # pydantic-settings is imported where the settings are read (cpcreds.cli.main)
    from ..config.settings import Settings


def _disk_cache_key(args: argparse.Namespace, settings: Settings) -> diskcache.CacheKey | None:
    """The disk cache key of this get-credential run, or None when the answer is not to be
    cached: the cache is off, or the key would not describe this run."""
    argv = getattr(args, "argv", None)
    # --no-cache first: the settings are then not read for it (see cpcreds.cli.main).
    if args.no_cache or not argv or argv[0] != "get-credential" or settings.cache == "off":
        return None
    key = diskcache.cache_key(argv[1:], os.environ)
    if key is None:
        return None
    # The key hashed the files its own reading of the arguments found; cache only if argparse and
    # the settings chose the same ones, or a change to the file really used would go unseen.
    path = config_path(args, settings)
    if key.config != (os.path.realpath(path) if path else None) or key.profile != os.path.realpath(args.profile):
        return None
    return key


#: The requests kubectl sends are small; a longer one is left to the full reader.
_PLAIN_REQUEST_BYTES = 4096


def _plain_request_api_version(raw: str) -> str | None:
    """The apiVersion of a request of the usual shape (``apiVersion``, ``kind``, at most
    ``spec.interactive``: nothing else the CLI would read), or None for anything else, which
    :func:`cpcreds.exec.plugin.read_request` reads or refuses in its words."""
    if len(raw) > _PLAIN_REQUEST_BYTES:
        return None
    try:
        document = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if type(document) is not dict or not document.keys() <= {"apiVersion", "kind", "spec"} or document.get("kind") != "ExecCredential":
        return None
    spec = document.get("spec", {})
    if type(spec) is not dict or not spec.keys() <= {"interactive"} or type(spec.get("interactive", False)) is not bool:
        return None
    api_version = document.get("apiVersion")
    return api_version if api_version in SUPPORTED_API_VERSIONS else None


def _requested_api_version(args: argparse.Namespace) -> str:
    """The apiVersion to answer in: ``--api-version``, else the one KUBERNETES_EXEC_INFO asks for."""
    raw = os.environ.get(EXEC_INFO_ENV, "")
    plain = _plain_request_api_version(raw) if raw.strip() else args.api_version or API_VERSION_V1
    if plain is not None:
        return args.api_version or plain
    from ..exec.plugin import PluginRequestError, read_request

    problem = ""
    try:
        request = read_request(default_api_version=args.api_version or API_VERSION_V1)
    except PluginRequestError as exc:
        problem = str(exc)
    if problem:
        raise ConfigError(problem)
    return args.api_version or request.api_version


def get_credential(args: argparse.Namespace, settings: Settings) -> int:
    api_version = _requested_api_version(args)
    cache_key = _disk_cache_key(args, settings)  # before the files are read: see diskcache.store
    config = load_provider_config(args, settings)
    (profile,) = profiles(args)
    with engine(config) as running:
        answer = running.get_answer(profile)  # with the plan that answered, for cache list
    credential = answer.credential
    text = render(credential.to_exec_credential(api_version), args.output, compact=True)
    sys.stdout.write(text)
    sys.stdout.flush()
    if cache_key is not None and credential.expiration_timestamp is not None:  # never one without expiry
        import time

        from ..engine.policies import RefreshPolicy

        now = time.time()
        # Served until a running engine would refresh it: e.g. 55 min of a 1 h token.
        serve_until = RefreshPolicy().refresh_at(now, credential.expiration_timestamp.timestamp())
        from .cachelist import describe

        printed = text.encode("utf-8")
        about = describe(profile, answer.plan, credential, api_version, cache_key.profile, len(printed))
        diskcache.store(cache_key, printed, serve_until, os.environ, now=now, about=about)
    return 0
