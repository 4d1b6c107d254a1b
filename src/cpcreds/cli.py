"""The ``cpcreds`` command line.

Errors a user can cause (bad config, bad profile, failing plugin) print one line on stderr and exit
1; usage errors exit 2. A traceback is shown only for cpcreds' own bugs, and only with
``CPCREDS_LOG_LEVEL=debug``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import __version__
from .access import AccessPlan
from .api import API_VERSION_V1, SUPPORTED_API_VERSIONS
from .config import FLAG_SOURCE, ProviderConfig, Settings, load_config, parse_access_provider_flag
from .errors import ConfigError, CredentialError
from .logs import configure_logging, redact_secrets

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

environment:
  CPCREDS_CONFIG            provider config used when --config is not given
  CPCREDS_LOG_LEVEL         debug | info | warning (default) | error
  CPCREDS_LOG_FORMAT        console (default) | json
  CPCREDS_DEFAULT_TIMEOUT   timeout of flag-defined providers (default 60s)
  CPCREDS_DEFAULT_API_VERSION  apiVersion of flag-defined providers (default client.authentication.k8s.io/v1)
  CPCREDS_DISABLE_PLUGINS   entry-point names not to load, comma-separated, or *
  CPCREDS_PLUGINS           allow-list of entry-point names to load
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit 2, as argparse does but without usage spam
        self.exit(2, f"cpcreds: usage error: {message} (see {self.prog} --help)\n")


def _add_provider_options(parser: argparse.ArgumentParser, *, required_profile: bool = True) -> None:
    group = parser.add_argument_group("provider config")
    group.add_argument("--config", metavar="FILE", help="provider config file, YAML or JSON (default: $CPCREDS_CONFIG)")
    group.add_argument(
        "--clusterprofile-access-provider",
        dest="access_providers",
        metavar="SPEC",
        action="append",
        default=[],
        help="NAME='COMMAND [ARG...]' (KEP-5339); repeatable; added after the file's providers",
    )
    profile = parser.add_argument_group("cluster profile")
    profile.add_argument("--profile", metavar="FILE", required=required_profile, help="ClusterProfile file (YAML/JSON, a List too); - for stdin")
    profile.add_argument("--name", metavar="NAME", help="which ClusterProfile of the file (name or namespace/name)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="cpcreds",
        description="Kubernetes credentials for every cluster of a fleet (KEP-5339 ClusterProfile credential plugins).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"cpcreds {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    get = commands.add_parser(
        "get-credential",
        help="print the ExecCredential for a ClusterProfile",
        description="Print the ExecCredential (JSON) for a ClusterProfile. Run by a client as an exec "
        "plugin (KUBERNETES_EXEC_INFO set), it answers in the apiVersion the client asks for.",
    )
    _add_provider_options(get)
    get.add_argument(
        "--api-version",
        choices=SUPPORTED_API_VERSIONS,
        help="apiVersion of the answer (default: KUBERNETES_EXEC_INFO's, else client.authentication.k8s.io/v1)",
    )
    get.set_defaults(handler=_cmd_get_credential)

    res = commands.add_parser("resolve", help="print the AccessPlan (provider, cluster, exec) as JSON")
    _add_provider_options(res)
    res.set_defaults(handler=_cmd_resolve)

    kcfg = commands.add_parser(
        "kubeconfig",
        help="print a kubeconfig whose users run cpcreds as their exec plugin",
        description="Print a kubeconfig with one context per ClusterProfile of the file. Its users run "
        "`cpcreds get-credential`; no credential is written anywhere.",
    )
    _add_provider_options(kcfg)
    kcfg.add_argument("--output", "-o", metavar="FILE", help="write to FILE (mode 0600) instead of stdout")
    kcfg.set_defaults(handler=_cmd_kubeconfig)

    val = commands.add_parser("validate", help="check a provider config: fields, provider types, plugin options")
    val.add_argument("--config", metavar="FILE", help="provider config file (default: $CPCREDS_CONFIG)")
    val.add_argument(
        "--clusterprofile-access-provider", dest="access_providers", metavar="SPEC", action="append", default=[]
    )
    val.set_defaults(handler=_cmd_validate)

    plug = commands.add_parser("plugins", help="list provider types, the packages that ship them, and load errors")
    plug.add_argument("--output", "-o", choices=["text", "json"], default="text")
    plug.set_defaults(handler=_cmd_plugins)
    return parser


# -- helpers ---------------------------------------------------------------------------------


def _load_provider_config(args: argparse.Namespace, settings: Settings) -> ProviderConfig:
    path = args.config or (os.fspath(settings.config) if settings.config else None)
    config: ProviderConfig | None = load_config(path) if path else None
    if args.access_providers:
        entries = [
            parse_access_provider_flag(
                spec, api_version=settings.default_api_version, timeout=settings.default_timeout_seconds
            )
            for spec in args.access_providers
        ]
        flags = ProviderConfig.from_entries(entries, source=FLAG_SOURCE)
        config = flags if config is None else config.merged_with(flags)
    if config is None:
        raise ConfigError("no provider config: give --config FILE, set CPCREDS_CONFIG, or use --clusterprofile-access-provider")
    return config


def _profiles(args: argparse.Namespace) -> list[dict[str, Any]]:
    from .profiles import load_profiles, select_profile

    profiles = load_profiles(args.profile)
    if args.name is not None or args.command == "get-credential":
        return [select_profile(profiles, args.name, "<stdin>" if args.profile == "-" else args.profile)]
    return profiles


def _engine(config: ProviderConfig) -> Any:
    from .engine import CredentialEngine

    return CredentialEngine(config)


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2) + "\n")


# -- commands --------------------------------------------------------------------------------


def _cmd_get_credential(args: argparse.Namespace, settings: Settings) -> int:
    from .plugin import PluginRequestError, read_request

    try:
        request = read_request(default_api_version=args.api_version or API_VERSION_V1)
    except PluginRequestError as exc:
        raise ConfigError(str(exc)) from None
    api_version = args.api_version or request.api_version
    config = _load_provider_config(args, settings)
    (profile,) = _profiles(args)
    engine = _engine(config)
    credential = engine.get_credential(profile)
    sys.stdout.write(json.dumps(credential.to_exec_credential(api_version)) + "\n")
    return 0


def _cmd_resolve(args: argparse.Namespace, settings: Settings) -> int:
    from .access import resolve

    config = _load_provider_config(args, settings)
    plans = [resolve(config, profile).to_dict() for profile in _profiles(args)]
    _print_json(plans[0] if len(plans) == 1 else plans)
    return 0


def _context_names(profiles: list[dict[str, Any]]) -> list[str]:
    from .profiles import profile_ref

    plain = [str((p.get("metadata") or {}).get("name") or "cluster") for p in profiles]
    if len(set(plain)) == len(plain):
        return plain
    return [profile_ref(p) for p in profiles]  # the same name in two namespaces


def _cmd_kubeconfig(args: argparse.Namespace, settings: Settings) -> int:
    import yaml

    from .access import resolve
    from .kubeconfig import KubeconfigContext, build_kubeconfig
    from .profiles import profile_ref

    if args.profile == "-":
        raise ConfigError("kubeconfig needs --profile FILE: the kubeconfig refers to the file when kubectl runs cpcreds")
    config = _load_provider_config(args, settings)
    profiles = _profiles(args)
    profile_path = str(Path(args.profile).resolve())
    base = ["-m", "cpcreds", "get-credential"]
    if args.config or settings.config:
        base += ["--config", str(Path(args.config or settings.config).resolve())]
    for spec in args.access_providers:
        base += ["--clusterprofile-access-provider", spec]
    refs = [profile_ref(p) for p in profiles]
    repeated = sorted({ref for ref in refs if refs.count(ref) > 1})
    if repeated:
        raise ConfigError(f"{args.profile}: ClusterProfile {', '.join(repeated)} appears more than once; kubectl could not pick one")
    contexts = []
    for name, profile in zip(_context_names(profiles), profiles):
        plan: AccessPlan = resolve(config, profile)  # fail now, not when kubectl runs it
        exec_args = (*base, "--profile", profile_path, "--name", profile_ref(profile))
        contexts.append(KubeconfigContext(name=name, plan=plan, command=sys.executable, args=exec_args))
    text = yaml.safe_dump(build_kubeconfig(contexts), sort_keys=False)
    if args.output:
        fd = os.open(args.output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)  # the mode of os.open applies only to a file it creates
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
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
            if shutil.which(command) is None:
                line += " -- warning: executable not found here"
        lines.append(line)
    print(f"{config.source}: {len(config.providers)} provider(s), valid")
    print("\n".join(lines)) if lines else None
    return 0


def _cmd_plugins(args: argparse.Namespace, settings: Settings) -> int:
    from .registry import ProviderRegistry

    registry = ProviderRegistry()
    types = [
        {"type": t.name, "plugin": t.plugin, "distribution": t.distribution, "version": t.version}
        for t in sorted(registry.types.values(), key=lambda t: t.name)
    ]
    errors = [{"plugin": e.plugin, "distribution": e.distribution, "error": e.error} for e in registry.load_errors]
    if args.output == "json":
        _print_json({"providers": types, "loadErrors": errors})
        return 1 if errors else 0
    for item in types:
        origin = item["plugin"] if item["distribution"] is None else f"{item['distribution']} {item['version']}"
        print(f"{item['type']:<16} {origin}")
    for item in errors:
        print(f"failed: {item['plugin']} ({item['distribution']}): {item['error']}")
    return 1 if errors else 0  # a plugin that did not load is something to fix, also in scripts


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``cpcreds`` command; returns the exit code."""
    try:
        settings = Settings()
    except Exception as exc:  # pydantic's message names the variable
        sys.stderr.write(f"cpcreds: error: invalid CPCREDS_* setting: {' '.join(str(exc).split())}\n")
        return 1
    configure_logging(settings.log_level, settings.log_format)
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args, settings))
    except CredentialError as exc:
        sys.stderr.write(f"cpcreds: error: {exc}\n")
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:  # a cpcreds bug: say so, show a traceback only when asked
        if settings.log_level == "debug":
            raise
        event = redact_secrets(None, "", {"error": f"{type(exc).__name__}: {exc}"})
        sys.stderr.write(f"cpcreds: internal error: {event['error']} (rerun with CPCREDS_LOG_LEVEL=debug for details)\n")
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
