"""The ``cpcreds`` command line.

Errors a user can cause (bad config, bad profile, failing plugin) print one line on stderr and exit
1; usage errors print one line naming the ``--help`` to read and exit 2. A traceback is shown only
for cpcreds' own bugs, and only with ``CPCREDS_LOG_LEVEL=debug``. ``cpcreds`` alone prints the
help and exits 0, as ``kubectl`` does.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

# What every command needs, and no more: the parser, the settings (plain, cpcreds.settings), the
# error types and the redaction of what is printed. Each command imports its own work when it
# runs, so `cpcreds get-credential` (run by kubectl before every request) loads no pydantic,
# pydantic-settings, structlog or prometheus-client for a well-formed config.
from .config import FLAG_SOURCE, ProviderConfig, load_config, parse_access_provider_flag
from .errors import ConfigError, CredentialError, NoMatchingProvider
from .kep import API_VERSION_V1, EXEC_INFO_ENV, SUPPORTED_API_VERSIONS
from ._patterns import LazyPattern
from .logs import configure_logging, redact_text
from .settings import Settings

if TYPE_CHECKING:
    from .plan import AccessPlan

__all__ = ["main", "build_parser"]

EXAMPLES = """\
examples:
  cpcreds get-credential --config providers.yaml --profile cluster.yaml
  cpcreds get-credential --clusterprofile-access-provider "google='/usr/bin/gke-gcloud-auth-plugin'" \\
      --profile cluster.yaml
  kubectl get clusterprofile -n fleet my-cluster -o yaml | cpcreds resolve --config providers.yaml --profile -
  cpcreds kubeconfig --config providers.yaml --profile fleet.yaml > fleet.kubeconfig
  KUBECONFIG=fleet.kubeconfig kubectl --context my-cluster get namespaces
  cpcreds validate --config providers.yaml
  cpcreds plugins
  cpcreds cache clear --profile fleet.yaml
  source <(cpcreds completion bash)

environment:
  CPCREDS_CONFIG            provider config used when --config is not given
  CPCREDS_LOG_LEVEL         debug | info | warning (default) | error
  CPCREDS_LOG_FORMAT        console (default) | json
  CPCREDS_DEFAULT_TIMEOUT   timeout of flag-defined providers (default 60s)
  CPCREDS_DEFAULT_API_VERSION  apiVersion of flag-defined providers (default client.authentication.k8s.io/v1)
  CPCREDS_DISABLE_PLUGINS   entry-point names not to load, comma-separated, or *
  CPCREDS_PLUGINS           allow-list of entry-point names to load
  CPCREDS_CACHE             off: get-credential neither reads nor writes its disk cache (default: on)
  XDG_CACHE_HOME            the disk cache is $XDG_CACHE_HOME/cpcreds (default: ~/.cache/cpcreds)
"""

#: The subcommands, in the order ``--help`` lists them.
COMMANDS = ("get-credential", "resolve", "kubeconfig", "validate", "plugins", "serve", "cache", "completion", "pin", "image-credential")
SHELLS = ("bash", "zsh", "fish")

_INVALID_CHOICE = LazyPattern(r"^argument (?P<arg>[^:]+): invalid choice: '(?P<value>.*)' \(choose from (?P<choices>.*)\)$")


def _did_you_mean(value: str, candidates: Sequence[str]) -> str:
    import difflib  # only for a mistyped argument: a get-credential run never loads it

    close = difflib.get_close_matches(value, list(candidates), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit 2, as argparse does but without usage spam
        match = _INVALID_CHOICE.match(message)
        if match:
            value = match["value"]
            # Python quotes the choices ('a', 'b'); newer versions may not (a, b).
            choices = re.findall(r"'([^']*)'", match["choices"]) or [c.strip() for c in match["choices"].split(",")]
            if match["arg"] == "COMMAND":
                hint = _did_you_mean(value, choices) or f"; commands: {', '.join(choices)}"
                message = f"unknown command {value!r}{hint}"
            else:
                message += _did_you_mean(value, choices)
        self.exit(2, f"cpcreds: usage error: {redact_text(message)} (see {self.prog} --help)\n")

    def unrecognized(self, extras: Sequence[str]) -> Any:
        """The usage error for arguments this (sub)command does not know, with a suggestion."""
        message = f"unrecognized arguments: {' '.join(extras)}"
        options = [o for action in self._actions for o in action.option_strings if o.startswith("--")]
        for extra in extras:
            if extra.startswith("--"):
                hint = _did_you_mean(extra.partition("=")[0], options)
                if hint:
                    message += hint
                    break
        self.error(message)


class _VersionAction(argparse._VersionAction):
    """``--version``: the installed version, looked up only when asked for (importlib.metadata
    costs every other run of the command ~10 ms, get-credential's cache misses included)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=dest, help="show program's version number and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        from . import __version__

        self.version = f"cpcreds {__version__}"
        super().__call__(parser, *args)


def _add_config_option(parser: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    group = parser.add_argument_group("provider config")
    group.add_argument(
        "--config",
        "--clusterprofile-provider-file",
        dest="config",
        metavar="FILE",
        help="provider config file, YAML or JSON (default: $CPCREDS_CONFIG); "
        "--clusterprofile-provider-file is the Go library's name for it",
    )
    group.add_argument(
        "--clusterprofile-access-provider",
        dest="access_providers",
        metavar="SPEC",
        action="append",
        default=[],
        help="NAME='COMMAND [ARG...]' (KEP-5339); repeatable; added after the file's providers",
    )
    return group


def _add_provider_options(parser: argparse.ArgumentParser) -> None:
    _add_config_option(parser)
    profile = parser.add_argument_group("cluster profile")
    profile.add_argument("--profile", metavar="FILE", required=True, help="ClusterProfile file (YAML/JSON, a List too); - for stdin")
    profile.add_argument("--name", metavar="NAME", help="which ClusterProfile of the file (name or namespace/name)")


def _add_format_option(parser: argparse.ArgumentParser, default_help: str) -> None:
    parser.add_argument(
        "--output", "-o", choices=["json", "yaml"], default="json", help=f"output format (default: json, {default_help})"
    )


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``cpcreds`` parser; with ``only``, one of :data:`COMMANDS`, the parser of that command
    alone (what :func:`main` parses a command's arguments with: its help, errors and results are
    the same, and kubectl's ``get-credential`` runs do not build the other nine)."""
    parser = _Parser(
        prog="cpcreds",
        description="Kubernetes credentials for every cluster of a fleet (KEP-5339 ClusterProfile credential plugins).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_VersionAction)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    subparsers: dict[str, _Parser] = {}

    def wanted(name: str) -> bool:
        return only is None or name == only

    def add(name: str, help: str, description: str) -> _Parser:
        sub = commands.add_parser(name, help=help, description=description)
        subparsers[name] = sub
        return sub

    if wanted("get-credential"):
        get = add(
            "get-credential",
            "print the ExecCredential for a ClusterProfile",
            "Print the ExecCredential for a ClusterProfile: pick its provider, run the exec plugin or "
            "in-process provider, print the answer. Run by a client as an exec plugin "
            "(KUBERNETES_EXEC_INFO set), it answers in the apiVersion the client asks for. An answer "
            "with an expiry is kept in $XDG_CACHE_HOME/cpcreds (else ~/.cache/cpcreds) and printed "
            "again, without running the provider, until shortly before it expires.",
        )
        _add_provider_options(get)
        get.add_argument(
            "--api-version",
            choices=SUPPORTED_API_VERSIONS,
            help="apiVersion of the answer (default: KUBERNETES_EXEC_INFO's, else client.authentication.k8s.io/v1)",
        )
        _add_format_option(get, "on one line, as exec clients read it")
        get.add_argument(
            "--no-cache",
            action="store_true",
            help="neither read nor write the disk cache (CPCREDS_CACHE=off does the same)",
        )
        get.set_defaults(handler=_cmd_get_credential)

    if wanted("resolve"):
        res = add(
            "resolve",
            "print the plan for a ClusterProfile (provider, cluster, exec) without running it",
            "Print what get-credential would do, without running anything: the chosen provider, the "
            "cluster from the profile, and the exec invocation or in-process provider. Env values and "
            "secret-looking args are shown as *** unless --show-values is given.",
        )
        _add_provider_options(res)
        _add_format_option(res, "indented")
        res.add_argument("--show-values", action="store_true", help="show env values and secret-looking args as they are")
        res.set_defaults(handler=_cmd_resolve)

    if wanted("kubeconfig"):
        kcfg = add(
            "kubeconfig",
            "print a kubeconfig whose users run cpcreds as their exec plugin",
            "Print a kubeconfig with one context per ClusterProfile of the file. Its users run "
            "`cpcreds get-credential`, referring to the config file; no credential, env value or "
            "secret-looking argument is written.",
        )
        _add_provider_options(kcfg)
        kcfg.add_argument("--output", "-o", metavar="FILE", help="write to FILE (mode 0600) instead of stdout")
        kcfg.add_argument(
            "--skip-unmatched",
            action="store_true",
            help="leave out profiles that no configured provider matches (one warning each on stderr) instead of failing",
        )
        kcfg.set_defaults(handler=_cmd_kubeconfig)

    if wanted("validate"):
        val = add(
            "validate",
            "check a provider config: fields, provider types, plugin options",
            "Load the provider config, check every field, and build every provider (is each type "
            "installed, are its options valid). With --profile, also resolve each ClusterProfile of "
            "the file and say which provider it uses and which form its additional-args take. "
            "Runs no plugin and reads no credential.",
        )
        _add_config_option(val)
        val.add_argument(
            "--profile",
            metavar="FILE",
            help="also check the ClusterProfiles of FILE (YAML/JSON, a List too; - for stdin) against the config",
        )
        val.set_defaults(handler=_cmd_validate)

    if wanted("plugins"):
        plug = add(
            "plugins",
            "list provider types, the packages that ship them, and load errors",
            "List every provider type this installation knows and where it comes from, and every "
            "plugin that failed to load (exit 1 if one did). Honours CPCREDS_DISABLE_PLUGINS and CPCREDS_PLUGINS.",
        )
        plug.add_argument("--output", "-o", choices=["text", "json"], default="text")
        plug.set_defaults(handler=_cmd_plugins)

    if wanted("serve"):
        srv = add(
            "serve",
            "keep every ClusterProfile's credential warm: status page, metrics, kubeconfigs",
            "Watch ClusterProfiles (a folder of files, or a hub), fetch each one's credential and refresh it "
            "ahead of expiry, probe the clusters, and serve a status page, /v1/clusters, /metrics, /healthz "
            "and /readyz. Every setting is also a CPCREDS_* environment variable and a field of the config "
            "file's serve: section (shown in brackets); flags win over the environment, which wins over the file.",
        )
        _add_serve_options(srv)
        srv.set_defaults(handler=_cmd_serve)

    if wanted("cache"):
        cache = add(
            "cache",
            "clear the credentials get-credential keeps on disk",
            "Manage the disk cache of get-credential ($XDG_CACHE_HOME/cpcreds, else ~/.cache/cpcreds). "
            "`cache clear` removes every cached credential; with --profile FILE, only those of that "
            "ClusterProfile file. Run it after revoking a token: the next get-credential runs the provider.",
        )
        cache.add_argument("action", metavar="ACTION", choices=("clear",), help="clear: remove cached credentials")
        cache.add_argument("--profile", metavar="FILE", help="only the credentials of this ClusterProfile file")
        cache.set_defaults(handler=_cmd_cache)

    if wanted("completion"):
        comp = add(
            "completion",
            "print a shell completion script (bash, zsh, fish)",
            "Print a completion script for SHELL on stdout. Load it with: source <(cpcreds completion bash) "
            "(bash or zsh, zsh after compinit), or cpcreds completion fish | source.",
        )
        comp.add_argument("shell", metavar="SHELL", choices=SHELLS, help="bash, zsh or fish")
        comp.set_defaults(handler=_cmd_completion)

    if wanted("pin"):
        pin = add(
            "pin",
            "print pluginPolicy allowlist entries pinning the configured plugins' sha256",
            "Print a pluginPolicy (policyType Allowlist) whose allowlist pins, by sha256, every exec "
            "command of the provider config as it is on this machine now, and the interpreters their #! "
            "lines name. Review it and paste it into the config: from then on a plugin runs only if its "
            "bytes still hash to the pinned digest. Give COMMANDs to pin those instead.",
        )
        _add_config_option(pin)
        pin.add_argument("commands", metavar="COMMAND", nargs="*", help="pin these commands (names on PATH, or paths) instead of the config's")
        pin.add_argument("--output", "-o", choices=["yaml", "json"], default="yaml", help="output format (default: yaml, to paste into the config)")
        pin.set_defaults(handler=_cmd_pin)

    if wanted("image-credential"):
        from .images import command as image_command  # its arguments only; the work is imported when run

        img = add("image-credential", image_command.HELP, image_command.DESCRIPTION)
        image_command.add_arguments(img)
        img.set_defaults(handler=_cmd_image_credential)

    parser.subparsers = subparsers  # type: ignore[attr-defined]  # for errors and completion
    return parser


# -- serve -----------------------------------------------------------------------------------

#: serve's flags: (setting, metavar or None for a switch, help). The flag is --<setting in
#: kebab-case>, the variable CPCREDS_<SETTING>, the file field serve.<settingInCamelCase>.
_SERVE_FLAGS: tuple[tuple[str, str | None, str], ...] = (
    ("profiles_dir", "DIR", "ClusterProfile files to watch (default: clusterprofiles/ next to the config)"),
    ("hub_kubeconfig", "FILE", "watch the ClusterProfiles of the hub this kubeconfig reaches"),
    ("hub_context", "NAME", "context of --hub-kubeconfig (default: its current context)"),
    ("in_cluster", None, "watch the ClusterProfiles of the hub this pod runs in (its service account)"),
    ("namespaces", "NS[,NS...]", "hub namespaces to watch (default: all)"),
    ("label_selector", "SELECTOR", "only the hub's ClusterProfiles with these labels"),
    ("listen", "HOST:PORT", "address of the status page and metrics (default: 127.0.0.1:9733)"),
    ("kubeconfig_dir", "DIR", "write a kubeconfig per profile and a merged one here"),
    ("concurrency", "N", "most credential fetches at once (default: 32)"),
    ("scan_interval", "DURATION", "how often --profiles-dir is rescanned (default: 1s)"),
    ("refresh_jitter", "FRACTION", "refreshes come up to this fraction early, spread at random (default: 0.1)"),
    ("probe_path", "PATH", "probe each cluster: GET PATH (/version or /readyz) with its credential (default: no probes)"),
    ("probe_interval", "DURATION", "time between probes of a cluster (default: 1m)"),
    ("probe_timeout", "DURATION", "how long a probe may take (default: 5s)"),
    ("watch_config", None, "re-read the config file when it changes (default: on; SIGHUP always reloads)"),
    ("shutdown_timeout", "DURATION", "how long SIGTERM may take before plugins are killed (default: 5s)"),
    ("hub_timeout", "DURATION", "bound on one hub request and on the hub kubeconfig's exec plugin (default: 30s)"),
    ("http_idle_timeout", "DURATION", "close an HTTP connection idle this long (default: 1m)"),
    ("http_header_timeout", "DURATION", "a request's line and headers must arrive within this (default: 10s)"),
    ("http_max_connections", "N", "most HTTP connections at once, at most half the descriptor limit (default: 512)"),
    ("per_profile_metrics", "true|false|auto", "per-profile series on /metrics (default: auto, on up to 5,000 profiles)"),
    ("dedupe", None, "act on one ClusterProfile per KEP-4322 inventory member, the oldest (default: on)"),
    ("shard", None, "split the inventory with other replicas on hub Leases (needs the hub; docs/sharding.md)"),
    ("shard_namespace", "NS", "namespace of the replicas' Leases (default: cpcreds-system)"),
    ("shard_group", "NAME", "the replicas that split one inventory (default: cpcreds)"),
    ("shard_identity", "NAME", "this replica's member name (default: pod name plus a random suffix)"),
    ("shard_lease_duration", "DURATION", "a replica not renewing for this long is dead (default: 15s)"),
    ("shard_renew_deadline", "DURATION", "a replica whose renewal is this old stops serving (default: 10s)"),
    ("shard_retry_interval", "DURATION", "how often a replica renews its Lease (default: 2s)"),
    ("shard_status_url", "URL", "where peers redirect requests for this replica's profiles (default: from --listen)"),
    ("log_level", "LEVEL", "debug, info, warning or error (default: info)"),
    ("log_format", "FORMAT", "console or json (default: console)"),
)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _add_serve_options(parser: argparse.ArgumentParser) -> None:
    _add_config_option(parser)
    group = parser.add_argument_group("serve settings")
    for name, metavar, text in _SERVE_FLAGS:
        flag = "--" + name.replace("_", "-")
        where = f" [CPCREDS_{name.upper()}, serve.{_camel(name)}]"
        if metavar is None:
            group.add_argument(flag, dest=f"serve_{name}", action=argparse.BooleanOptionalAction, default=None, help=text + where)
        else:
            group.add_argument(flag, dest=f"serve_{name}", metavar=metavar, default=None, help=text + where)


def _cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    import asyncio

    from .logs import configure_logging
    from .serve.service import Service
    from .serve.settings import ServeSettings, UnusableFolder

    if args.access_providers:
        raise ConfigError("serve reads its providers from --config only (it reloads that file)", source="--clusterprofile-access-provider")
    path = _config_path(args, settings)
    if not path:
        raise ConfigError("serve needs a provider config: --config FILE or CPCREDS_CONFIG")
    config = load_config(path)
    flags = {name: getattr(args, f"serve_{name}") for name, _, _ in _SERVE_FLAGS}
    serve_settings = ServeSettings.load({**flags, "config": path}, config.serve)
    configure_logging(serve_settings.log_level, serve_settings.log_format or settings.log_format)
    try:
        return asyncio.run(Service(serve_settings, config).run())
    except UnusableFolder as exc:  # a folder flag naming the wrong thing: a usage error
        sys.stderr.write(f"cpcreds: usage error: {exc} (see cpcreds serve --help)\n")
        return 2


# -- helpers ---------------------------------------------------------------------------------


def _config_path(args: argparse.Namespace, settings: Settings) -> str | None:
    return args.config or (os.fspath(settings.config) if settings.config else None)


def _flag_config(args: argparse.Namespace, settings: Settings) -> ProviderConfig | None:
    if not args.access_providers:
        return None
    entries = [
        parse_access_provider_flag(spec, api_version=settings.default_api_version, timeout=settings.default_timeout_seconds)
        for spec in args.access_providers
    ]
    return ProviderConfig.from_entries(entries, source=FLAG_SOURCE)


def _load_provider_config(args: argparse.Namespace, settings: Settings) -> ProviderConfig:
    path = _config_path(args, settings)
    config: ProviderConfig | None = load_config(path) if path else None  # its errors name the file
    flags = _flag_config(args, settings)
    if flags is not None:
        config = flags if config is None else config.merged_with(flags)
    if config is None:
        raise ConfigError("no provider config: give --config FILE, set CPCREDS_CONFIG, or use --clusterprofile-access-provider")
    return config


def _profiles(args: argparse.Namespace) -> list[dict[str, Any]]:
    from .config.profiles import load_profiles, select_profile

    profiles = load_profiles(args.profile)
    if args.name is not None or args.command == "get-credential":
        return [select_profile(profiles, args.name, "<stdin>" if args.profile == "-" else args.profile)]
    return profiles


def _engine(config: ProviderConfig) -> Any:
    from .engine import CredentialEngine

    return CredentialEngine(config)


def _render(value: Any, output: str, *, compact: bool = False) -> str:
    if output == "yaml":
        import yaml

        return yaml.safe_dump(value, sort_keys=False)
    if compact:
        return json.dumps(value) + "\n"
    return json.dumps(value, indent=2) + "\n"


def _print(value: Any, output: str, *, compact: bool = False) -> None:
    sys.stdout.write(_render(value, output, compact=compact))


def _warn(message: str) -> None:
    sys.stderr.write(f"cpcreds: warning: {redact_text(message)}\n")


# -- commands --------------------------------------------------------------------------------


def _disk_cache_key(args: argparse.Namespace, settings: Settings) -> Any:
    """The disk cache key of this get-credential run (see cpcreds.diskcache), or None when the
    answer is not to be cached: the cache is off, or the key would not describe this run."""
    from . import diskcache

    setting = diskcache.cache_setting(os.environ)
    if setting is None:
        value = os.environ.get("CPCREDS_CACHE", "")
        shown = repr(value) if len(value) <= 32 and value.isprintable() else "an unprintable value"
        raise ConfigError(f"must be 'on' or 'off' (got {shown})", source="CPCREDS_CACHE")
    argv = getattr(args, "argv", None)
    if not setting or args.no_cache or not argv or argv[0] != "get-credential":
        return None
    key = diskcache.cache_key(argv[1:], os.environ)
    if key is None:
        return None
    # The key hashed the files its own reading of the arguments found; cache only if argparse and
    # the settings chose the same ones, or a change to the file really used would go unseen.
    config_path = _config_path(args, settings)
    if key.config != (os.path.realpath(config_path) if config_path else None) or key.profile != os.path.realpath(args.profile):
        return None
    return key


#: The requests kubectl sends are small; a longer one is left to the full reader.
_PLAIN_REQUEST_BYTES = 4096


def _plain_request_api_version(raw: str) -> str | None:
    """The apiVersion of a request of the usual shape (``apiVersion``, ``kind``, at most
    ``spec.interactive``: nothing else the CLI would read), or None for anything else, which
    :func:`cpcreds.plugin.read_request` reads or refuses in its words (it loads pydantic)."""
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
    from .plugin import PluginRequestError, read_request

    problem = ""
    try:
        request = read_request(default_api_version=args.api_version or API_VERSION_V1)
    except PluginRequestError as exc:
        problem = str(exc)
    if problem:
        raise ConfigError(problem)
    return args.api_version or request.api_version


def _cmd_get_credential(args: argparse.Namespace, settings: Settings) -> int:
    api_version = _requested_api_version(args)
    cache_key = _disk_cache_key(args, settings)  # before the files are read: see diskcache.store
    config = _load_provider_config(args, settings)
    (profile,) = _profiles(args)
    with _engine(config) as engine:
        credential = engine.get_credential(profile)
    text = _render(credential.to_exec_credential(api_version), args.output, compact=True)
    sys.stdout.write(text)
    sys.stdout.flush()
    if cache_key is not None and credential.expiration_timestamp is not None:  # never one without expiry
        import time

        from . import diskcache
        from .policies import RefreshPolicy

        now = time.time()
        # Served until a running engine would refresh it: e.g. 55 min of a 1 h token.
        serve_until = RefreshPolicy().refresh_at(now, credential.expiration_timestamp.timestamp())
        diskcache.store(cache_key, text.encode("utf-8"), serve_until, os.environ, now=now)
    return 0


def _cmd_cache(args: argparse.Namespace, settings: Settings) -> int:
    from . import diskcache

    try:
        directory, removed = diskcache.clear(os.environ, args.profile)
    except diskcache.UntrustedCacheDir as exc:
        raise CredentialError(str(exc)) from None
    except OSError as exc:
        where = exc.filename or "the cache directory"
        raise CredentialError(f"{where}: cannot clear: {exc.strerror or type(exc).__name__}") from None
    what = f"{removed} cached credential{'' if removed == 1 else 's'}"
    if args.profile is not None:
        what += f" of {args.profile}"
    print(f"removed {what} from {directory}")
    return 0


def _cmd_resolve(args: argparse.Namespace, settings: Settings) -> int:
    from .access import AccessPlan, resolve_chain

    from .providers.exec import find_executable

    def shown(plan: AccessPlan) -> dict[str, Any]:
        data = plan.to_dict(show_values=args.show_values)
        if plan.exec is not None:  # what would really run: found on our PATH, never the plugin's
            data["exec"]["executable"] = find_executable(plan.exec.command)
        return data

    config = _load_provider_config(args, settings)
    plans = []
    for profile in _profiles(args):
        first, *later = resolve_chain(config, profile)
        assert first.plan is not None  # resolve_chain raises when the preferred plan cannot be built
        data = shown(first.plan)
        if later:  # failover: what would be tried next, in order, had this provider failed
            data["failover"] = [
                shown(c.plan) if c.plan is not None else {"provider": c.provider, "error": str(c.error)} for c in later
            ]
        plans.append(data)
    _print(plans[0] if len(plans) == 1 else plans, args.output)
    return 0


def _flag_spec_for_kubeconfig(spec: str, config: ProviderConfig, name: str) -> str:
    """The ``--clusterprofile-access-provider`` value to record, unless it would put a secret in
    the kubeconfig: then a ConfigError telling the user to use a config file."""
    from .access import mask_args

    entry = config.get(name)
    assert entry is not None and entry.exec_config is not None  # flags always define exec providers
    argv = [entry.exec_config.command, *entry.exec_config.args]
    # mask_args knows flag names; redact_text also sees NAME_TOKEN=x, user:password@ URLs, JWTs, ...
    shown = redact_text(" ".join(redact_text(arg) for arg in mask_args(argv)))
    if shown != " ".join(argv):
        raise ConfigError(
            f'its command line "{shown}" looks like it holds a secret, which kubeconfig would copy into the file; '
            "put this provider in a provider config file and use --config FILE",
            source=FLAG_SOURCE,
            entry=f'"{name}"',
        )
    command = entry.exec_config.command
    if "/" in command and not os.path.isabs(command):
        # kubectl runs cpcreds from any folder: "./plugin" means the one next to us now.
        import shlex  # only here: a get-credential run never loads it

        line = shlex.join([os.path.abspath(command), *entry.exec_config.args])
        return f"{name}='{line}'"  # the flag parser takes off the outer quotes, then splits the rest
    return spec


def _write_private(path: str, text: str) -> None:
    try:
        # O_NONBLOCK: a FIFO at the path with no reader fails at once (ENXIO) instead of blocking.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NONBLOCK", 0), 0o600)
        os.fchmod(fd, 0o600)  # the mode of os.open applies only to a file it creates
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise CredentialError(f"{path}: cannot write: {exc.strerror or type(exc).__name__}") from None


def _cmd_kubeconfig(args: argparse.Namespace, settings: Settings) -> int:
    import yaml

    from .access import resolve
    from .kubeconfig import KubeconfigContext, build_kubeconfig, context_name
    from .config.profiles import profile_ref

    if args.profile == "-":
        raise ConfigError("kubeconfig needs --profile FILE: the kubeconfig refers to the file when kubectl runs cpcreds")
    config = _load_provider_config(args, settings)
    flags = _flag_config(args, settings)
    flag_specs = dict(zip([e.name for e in flags.providers], args.access_providers)) if flags else {}
    profiles = _profiles(args)
    profile_path = str(Path(args.profile).resolve())
    base = ["-m", "cpcreds", "get-credential"]
    config_path = _config_path(args, settings)
    if config_path:
        base += ["--config", str(Path(config_path).resolve())]
    refs = [profile_ref(p) for p in profiles]
    repeated = sorted({ref for ref in refs if refs.count(ref) > 1})
    if repeated:
        raise ConfigError(f"{args.profile}: ClusterProfile {', '.join(repeated)} appears more than once; kubectl could not pick one")
    kept: list[tuple[dict[str, Any], AccessPlan]] = []
    for profile in profiles:
        try:
            plan: AccessPlan = resolve(config, profile)  # fail now, not when kubectl runs it
        except NoMatchingProvider as exc:
            if not args.skip_unmatched:
                raise
            _warn(f"skipped {exc}")
            continue
        kept.append((profile, plan))
    if not kept:
        raise CredentialError(f"{args.profile}: no ClusterProfile matches a configured provider; nothing to write")
    contexts = []
    for profile, plan in kept:
        exec_args = list(base)
        if plan.provider in flag_specs:  # only the provider this profile uses, and only if harmless
            exec_args += ["--clusterprofile-access-provider", _flag_spec_for_kubeconfig(flag_specs[plan.provider], config, plan.provider)]
        exec_args += ["--profile", profile_path, "--name", profile_ref(profile)]
        contexts.append(KubeconfigContext(name=context_name(profile), plan=plan, command=sys.executable, args=tuple(exec_args)))
    text = yaml.safe_dump(build_kubeconfig(contexts), sort_keys=False)
    if args.output:
        _write_private(args.output, text)
    else:
        sys.stdout.write(text)
    return 0


def _cmd_validate(args: argparse.Namespace, settings: Settings) -> int:
    from .registry import ProviderRegistry

    config = _load_provider_config(args, settings)
    ProviderRegistry().create_all(config)
    lines = []
    for entry in config.providers:
        line = f"  {entry.name}: {entry.kind}"
        if entry.exec_config is not None:
            command = entry.exec_config.command
            line += f" {command} ({entry.exec_config.api_version})"
            import shutil  # only here: a get-credential run never loads it

            if shutil.which(command) is None:
                line += " -- warning: executable not found here"
            else:
                line += _policy_note(config, entry.name, command, entry.exec_config.args)
        lines.append(line)
    if config.plugin_policy.policy_type != "AllowAll":
        lines.append(_policy_summary(config))
    if args.profile is not None:
        from .config.profiles import load_profiles

        profiles = load_profiles(args.profile)  # read and checked before anything is printed
        report = [_profile_report(config, profile) for profile in profiles]
    print(f"{config.source}: {len(config.providers)} provider(s), valid")
    if lines:
        print("\n".join(lines))
    if args.profile is not None:
        print(f"{'<stdin>' if args.profile == '-' else args.profile}: {len(report)} ClusterProfile(s), valid")
        print("\n".join(line for block in report for line in block))
    return 0


def _policy_summary(config: ProviderConfig) -> str:
    policy = config.plugin_policy
    if policy.policy_type != "Allowlist":
        return f"  pluginPolicy: {policy.policy_type}"
    entries = policy.allowlist or ()
    pinned = sum(1 for entry in entries if entry.sha256)
    return f"  pluginPolicy: Allowlist of {len(entries)} command(s), {pinned} pinned by sha256"


def _policy_note(config: ProviderConfig, name: str, command: str, args: Sequence[str]) -> str:
    """What the config's pluginPolicy would decide for this plugin now (its files are read and
    pinned ones hashed; nothing runs). Empty under AllowAll."""
    from .errors import PluginNotAllowed
    from .pluginpolicy import PluginGate
    from .providers.exec import find_executable

    gate = PluginGate(config.plugin_policy)
    executable = find_executable(command)
    if gate.allows_all or executable is None:
        return ""
    refusal = None
    try:
        admission = gate.admit(name, command, executable, [command, *args])
    except PluginNotAllowed as exc:
        refusal = exc.reason
    if refusal is not None:
        return f" -- warning: pluginPolicy refuses it: {refusal}"
    admission.release()
    return " (allowed by pluginPolicy, pinned)" if admission.sha256 else " (allowed by pluginPolicy)"


#: How ``validate --profile`` names the two forms of the additional-args extension.
_ARGS_FORMS = {
    "list": "list form (KEP-5339; not storable under the published ClusterProfile CRD, whose extension is an object)",
    "object": "object form {args: [...]} (storable under the published ClusterProfile CRD)",
}


def _profile_report(config: ProviderConfig, profile: dict[str, Any]) -> list[str]:
    """``validate --profile``'s lines for one profile: the provider it uses (and those failover
    would try), and for each provider whose cluster carries additional-args, the form, the count
    and whether the config's policy appends them. A malformed extension raises its ProfileError
    whatever the policy: validate is where a hub's mistakes should show."""
    from .access import additional_args_form, parse_additional_args, parse_profile, resolve_chain
    from .api import ADDITIONAL_ARGS_EXTENSION

    chain = resolve_chain(config, profile)
    model = parse_profile(profile)
    used = f"uses {chain[0].provider}"
    if len(chain) > 1:
        used += f" (failover: then {', '.join(candidate.provider for candidate in chain[1:])})"
    lines = [f"  {model.ref}: {used}"]
    offered = {p.name: p for p in (*model.status.credential_providers, *model.status.access_providers)}
    for name, provider in offered.items():
        extensions = {e.name: e.extension for e in provider.cluster.extensions} if provider.cluster is not None else {}
        if ADDITIONAL_ARGS_EXTENSION not in extensions:
            continue
        raw = extensions[ADDITIONAL_ARGS_EXTENSION]
        where = f"status.accessProviders[name={name}].cluster.extensions[{ADDITIONAL_ARGS_EXTENSION}]"
        count = len(parse_additional_args(raw, where, model.ref))
        form = _ARGS_FORMS.get(str(additional_args_form(raw)), "null (no arguments)")
        entry = config.get(name)
        if entry is None:
            use = "not used: no configured provider has this name"
        elif entry.exec_config is None:
            use = "not used: an in-process provider"
        elif entry.profile_sourced_cli_args_policy == "Append":
            use = "appended (profileSourcedCLIArgsPolicy: Append)"
        else:
            use = "ignored (profileSourcedCLIArgsPolicy: Ignore)"
        lines.append(f"    {name}: additional-args: {form}; {count} arg(s), {use}")
    return lines


def _cmd_pin(args: argparse.Namespace, settings: Settings) -> int:
    from .pluginpolicy import pin_entries

    if args.commands:
        commands = [(command, "given") for command in args.commands]
    else:
        config = _load_provider_config(args, settings)
        commands = [(e.exec_config.command, f"provider {e.name}") for e in config.providers if e.exec_config is not None]
        if not commands:
            raise ConfigError("has no exec providers (in-process providers are not subject to pluginPolicy)", source=config.source)
    problem = None
    try:
        entries = pin_entries(commands)
    except LookupError as exc:
        problem = str(exc.args[0])
    except OSError as exc:
        problem = f"{exc.filename}: cannot read: {exc.strerror}"
    if problem is not None:
        raise CredentialError(problem)
    if args.output == "json":
        allowlist = [{"command": e.command, **({"sha256": e.sha256} if e.sha256 else {})} for e in entries]
        _print({"pluginPolicy": {"policyType": "Allowlist", "allowlist": allowlist}}, "json")
        return 0
    lines = ["pluginPolicy:", "  policyType: Allowlist", "  allowlist:"]
    for e in entries:
        # JSON strings are YAML strings: any path prints as a valid, unambiguous scalar.
        lines.append(f"  - command: {json.dumps(e.command)}  # {' '.join(e.needed_by.split())}")
        if e.sha256:
            lines.append(f"    sha256: {e.sha256}")
    print("\n".join(lines))
    return 0


def _cmd_plugins(args: argparse.Namespace, settings: Settings) -> int:
    from .registry import ProviderRegistry

    registry = ProviderRegistry()
    registry.warn_load_errors()
    types = [
        {"type": t.name, "plugin": t.plugin, "distribution": t.distribution, "version": t.version}
        for t in sorted(registry.types.values(), key=lambda t: t.name)
    ]
    errors = [{"plugin": e.plugin, "distribution": e.distribution, "error": e.error} for e in registry.load_errors]
    if args.output == "json":
        _print(({"providers": types, "loadErrors": errors}), "json")
        return 1 if errors else 0
    for item in types:
        origin = item["plugin"] if item["distribution"] is None else f"{item['distribution']} {item['version']}"
        print(f"{item['type']:<16} {origin}")
    for item in errors:
        print(f"failed: {item['plugin']} ({item['distribution']}): {item['error']}")
    return 1 if errors else 0  # a plugin that did not load is something to fix, also in scripts


def _cmd_image_credential(args: argparse.Namespace, settings: Settings) -> int:
    from .images.command import run

    return run(args)


def _cmd_completion(args: argparse.Namespace, settings: Settings) -> int:
    sys.stdout.write(completion_script(args.shell, build_parser()))
    return 0


# -- shell completion, written from the parser ---------------------------------------------------


class _Option:
    def __init__(self, action: argparse.Action) -> None:
        self.names = [o for o in action.option_strings]
        self.long = next((o for o in self.names if o.startswith("--")), self.names[0] if self.names else "")
        self.short = next((o for o in self.names if not o.startswith("--")), None)
        self.takes_value = action.nargs != 0
        self.choices = [str(c) for c in action.choices] if action.choices else []
        self.files = action.metavar == "FILE"
        self.help = " ".join((action.help or "").split()).replace("%(default)s", str(action.default))


def _completion_model(parser: argparse.ArgumentParser) -> dict[str, tuple[str, list[_Option], list[str]]]:
    """For "" (no command yet) and each command: its help, its options, and its positional choices."""
    model: dict[str, tuple[str, list[_Option], list[str]]] = {}
    subs: dict[str, argparse.ArgumentParser] = parser.subparsers  # type: ignore[attr-defined]
    helps = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
    top = [_Option(a) for a in parser._actions if a.option_strings]
    model[""] = (parser.description or "", top, list(subs))
    for name, sub in subs.items():
        options = [_Option(a) for a in sub._actions if a.option_strings]
        positional = [str(c) for a in sub._actions if not a.option_strings and a.choices for c in a.choices]
        model[name] = (helps.get(name, ""), options, positional)
    return model


def _bash_script(parser: argparse.ArgumentParser, *, for_zsh: bool = False) -> str:
    model = _completion_model(parser)
    value_cases, word_cases = [], []
    for command, (_, options, positional) in model.items():
        words = [n for o in options for n in o.names] + positional
        word_cases.append(f'        "{command}") words="{" ".join(words)}" ;;')
        for option in options:
            if not option.takes_value:
                continue
            pattern = "|".join(f'"{command}:{n}"' for n in option.names)
            if option.choices:
                action = f'COMPREPLY=($(compgen -W "{" ".join(option.choices)}" -- "$cur")); return 0'
            elif option.files:
                action = 'compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur")); return 0'
            else:
                action = "COMPREPLY=(); return 0"
            value_cases.append(f"        {pattern}) {action} ;;")
    commands = "|".join(model[""][2])
    body = f"""_cpcreds() {{
    local cur prev cmd words i
    cur="${{COMP_WORDS[COMP_CWORD]}}"
    prev=""
    if (( COMP_CWORD > 0 )); then prev="${{COMP_WORDS[COMP_CWORD-1]}}"; fi
    # --option=value: bash splits it at "=" (COMP_WORDBREAKS)
    if [[ "$cur" == "=" ]]; then
        cur=""
    elif [[ "$prev" == "=" ]] && (( COMP_CWORD > 1 )); then
        prev="${{COMP_WORDS[COMP_CWORD-2]}}"
    fi
    cmd=""
    for (( i = 1; i < COMP_CWORD; i++ )); do
        case "${{COMP_WORDS[i]}}" in
            {commands}) cmd="${{COMP_WORDS[i]}}"; break ;;
        esac
    done
    case "$cmd:$prev" in
{chr(10).join(value_cases)}
    esac
    case "$cmd" in
{chr(10).join(word_cases)}
    esac
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
    return 0
}}
"""
    if for_zsh:
        return (
            "#compdef cpcreds\n"
            "# zsh completion for cpcreds, written by `cpcreds completion zsh`. Load it after compinit:\n"
            "#   source <(cpcreds completion zsh)\n"
            "autoload -U +X bashcompinit && bashcompinit\n"
            + body
            + "complete -F _cpcreds cpcreds\n"
        )
    return (
        "# bash completion for cpcreds, written by `cpcreds completion bash`. Load it with\n"
        "#   source <(cpcreds completion bash)\n"
        "# or install it: cpcreds completion bash > ~/.local/share/bash-completion/completions/cpcreds\n"
        + body
        + "complete -F _cpcreds cpcreds\n"
    )


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _fish_script(parser: argparse.ArgumentParser) -> str:
    model = _completion_model(parser)
    commands = model[""][2]
    lines = [
        "# fish completion for cpcreds, written by `cpcreds completion fish`. Load it with",
        "#   cpcreds completion fish | source",
        "# or install it: cpcreds completion fish > ~/.config/fish/completions/cpcreds.fish",
        "complete -c cpcreds -f",
    ]
    for name in commands:
        lines.append(f"complete -c cpcreds -n __fish_use_subcommand -a {name} -d {_fish_quote(model[name][0])}")
    for command, (_, options, positional) in model.items():
        condition = "__fish_use_subcommand" if not command else f"'__fish_seen_subcommand_from {command}'"
        for option in options:
            parts = [f"complete -c cpcreds -n {condition}"]
            for name in option.names:
                parts.append(f"-l {name[2:]}" if name.startswith("--") else f"-s {name[1:]}")
            if option.takes_value:
                parts.append("-r")
                if option.choices:
                    parts.append(f"-x -a {_fish_quote(' '.join(option.choices))}")
                elif option.files:
                    parts.append("-F")
            if option.help:
                parts.append(f"-d {_fish_quote(option.help.split('; ')[0][:80])}")
            lines.append(" ".join(parts))
        if command and positional:
            lines.append(f"complete -c cpcreds -n {condition} -a {_fish_quote(' '.join(positional))}")
    return "\n".join(lines) + "\n"


def completion_script(shell: str, parser: argparse.ArgumentParser | None = None) -> str:
    """The completion script of ``cpcreds`` for ``shell`` (bash, zsh or fish)."""
    parser = parser or build_parser()
    if shell == "fish":
        return _fish_script(parser)
    return _bash_script(parser, for_zsh=shell == "zsh")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``cpcreds`` command; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
    first = argv[0].partition("=")[0] if argv else ""
    subparsers: dict[str, _Parser] = parser.subparsers  # type: ignore[attr-defined]
    if first.startswith("-") and first not in ("-h", "--help", "--version"):
        takes = [name for name, sub in subparsers.items() if any(first in a.option_strings for a in sub._actions)]
        if takes:  # "cpcreds --config x get-credential": argparse would call x.yaml an unknown command
            parser.error(f"{first} is an option of {', '.join(takes)}; put it after the command: cpcreds {takes[0]} {first} ...")
    args, extras = parser.parse_known_args(argv)
    if extras:
        subparsers.get(args.command, parser).unrecognized(extras)
    if args.command is None:  # like kubectl: the help, on stdout, and success
        parser.print_help()
        return 0
    args.argv = tuple(argv)  # get-credential's disk cache key is computed from the words as given
    try:
        settings = Settings()
    except CredentialError as exc:  # names the variable: "CPCREDS_LOG_LEVEL: must be ..."
        sys.stderr.write(f"cpcreds: error: {redact_text(' '.join(str(exc).split()))}\n")
        return 1
    except Exception as exc:
        sys.stderr.write(f"cpcreds: error: invalid CPCREDS_* setting: {redact_text(' '.join(str(exc).split()))}\n")
        return 1
    # A stdlib handler (structlog waits for an event); get-credential, which kubectl runs on every
    # command and which usually logs nothing, imports logging only when something logs.
    configure_logging(settings.log_level, settings.log_format, on_first_use=args.command == "get-credential")
    from ._signals import exit_on_termination  # the exec provider's: commands that run no plugin do not need it

    # kubectl (or a shell, or systemd) may stop us with SIGTERM/SIGHUP mid-run: the plugin, in
    # its own session, would not get the signal; kill it and exit 143/129 through SystemExit.
    exit_on_termination()
    try:
        return int(args.handler(args, settings))
    except CredentialError as exc:  # the library's messages carry no secret; they are shown as they are
        sys.stderr.write(f"cpcreds: error: {' '.join(str(exc).split())}\n")
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:  # a cpcreds bug: say so, show a traceback only when asked
        if settings.log_level == "debug":
            raise
        detail = redact_text(" ".join(f"{type(exc).__name__}: {exc}".split()))
        sys.stderr.write(f"cpcreds: internal error: {detail} (rerun with CPCREDS_LOG_LEVEL=debug for details)\n")
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
