"""The parser of ``cpcreds``: every command's options, and for settings the flags and help made
from their declaration (:func:`cpcreds.config.settings.describe`).

Usage errors print one line naming the ``--help`` to read and exit 2. Each parser keeps the
options it was given (:attr:`Parser.options`) and its commands (:attr:`Parser.commands`), which
the completion scripts and the error hints read; argparse keeps its own lists private.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from typing import Any, NamedTuple

from .._patterns import LazyPattern
from ..kep import SUPPORTED_API_VERSIONS
from ..logs import redact_text

__all__ = ["COMMANDS", "SHELLS", "Parser", "Command", "build_parser", "did_you_mean"]

#: The subcommands, in the order ``--help`` lists them.
COMMANDS = ("get-credential", "resolve", "kubeconfig", "validate", "plugins", "serve", "cache", "completion", "pin", "image-credential")
SHELLS = ("bash", "zsh", "fish")

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
  cpcreds cache list
  cpcreds cache clear --profile fleet.yaml
  source <(cpcreds completion bash)
"""

_INVALID_CHOICE = LazyPattern(r"^argument (?P<arg>[^:]+): invalid choice: '(?P<value>.*)' \(choose from (?P<choices>.*)\)$")


def did_you_mean(value: str, candidates: Sequence[str]) -> str:
    import difflib  # only for a mistyped argument: a get-credential run never loads it

    close = difflib.get_close_matches(value, list(candidates), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


class Command(NamedTuple):
    """One subcommand: its one-line help and its parser."""

    help: str
    parser: Parser


class _Group:
    """An argument group that also records its options on its parser."""

    def __init__(self, parser: Parser, group: Any) -> None:
        self._parser, self._group = parser, group

    def add_argument(self, *names: str, **kwargs: Any) -> argparse.Action:
        action: argparse.Action = self._group.add_argument(*names, **kwargs)
        self._parser.options.append(action)
        return action


class Parser(argparse.ArgumentParser):
    """argparse's parser, with one-line usage errors and a record of what it was given."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        #: Every argument added, in order (``-h`` first), as argparse returned it.
        self.options: list[argparse.Action] = []
        #: The subcommands, by name, in the order added.
        self.commands: dict[str, Command] = {}
        self._recording = False  # argparse makes its own two groups while it starts
        super().__init__(*args, **kwargs)
        self._recording = True

    def add_argument(self, *names: Any, **kwargs: Any) -> argparse.Action:  # type: ignore[override]
        action = super().add_argument(*names, **kwargs)
        self.options.append(action)
        return action

    def add_argument_group(self, *args: Any, **kwargs: Any) -> Any:
        group = super().add_argument_group(*args, **kwargs)
        return _Group(self, group) if self._recording else group

    def error(self, message: str) -> Any:  # one line, exit 2, as argparse does but without usage spam
        match = _INVALID_CHOICE.match(message)
        if match:
            value = match["value"]
            # Python quotes the choices ('a', 'b'); newer versions may not (a, b).
            choices = re.findall(r"'([^']*)'", match["choices"]) or [c.strip() for c in match["choices"].split(",")]
            if match["arg"] == "COMMAND":
                hint = did_you_mean(value, choices) or f"; commands: {', '.join(choices)}"
                message = f"unknown command {value!r}{hint}"
            else:
                message += did_you_mean(value, choices)
        self.exit(2, f"cpcreds: usage error: {redact_text(message)} (see {self.prog} --help)\n")

    def long_options(self) -> list[str]:
        return [name for action in self.options for name in action.option_strings if name.startswith("--")]

    def unrecognized(self, extras: Sequence[str]) -> Any:
        """The usage error for arguments this (sub)command does not know, with a suggestion."""
        message = f"unrecognized arguments: {' '.join(extras)}"
        for extra in extras:
            if extra.startswith("--"):
                hint = did_you_mean(extra.partition("=")[0], self.long_options())
                if hint:
                    message += hint
                    break
        self.error(message)


class _Version(argparse.Action):
    """``--version``: the installed version, looked up only when asked for (importlib.metadata
    would otherwise cost every run of the command, get-credential's cache misses included)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0, help="show program's version number and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        from .. import __version__

        sys.stdout.write(f"cpcreds {__version__}\n")
        parser.exit()


def add_config_option(parser: Parser) -> None:
    group = parser.add_argument_group("provider config")
    group.add_argument(
        "--config",
        "--clusterprofile-provider-file",
        dest="config",
        metavar="FILE",
        help="provider config file, YAML or JSON (default: $CPCREDS_CONFIG); "
        "--clusterprofile-provider-file is KEP-4322's and the Go library's name for it",
    )
    group.add_argument(
        "--clusterprofile-access-provider",
        dest="access_providers",
        metavar="SPEC",
        action="append",
        default=[],
        help="NAME='COMMAND [ARG...]' (KEP-5339's flag, replaced by the provider file in KEP-4322); repeatable; added after the file's providers",
    )


def _add_provider_options(parser: Parser) -> None:
    add_config_option(parser)
    profile = parser.add_argument_group("cluster profile")
    profile.add_argument("--profile", metavar="FILE", required=True, help="ClusterProfile file (YAML/JSON, a List too); - for stdin")
    profile.add_argument("--name", metavar="NAME", help="which ClusterProfile of the file (name or namespace/name)")


def _add_format_option(parser: Parser, default_help: str) -> None:
    parser.add_argument("--output", "-o", choices=["json", "yaml"], default="json", help=f"output format (default: json, {default_help})")


def _environment_help() -> str:
    from ..config.settings import Settings, describe

    lines = ["environment (each read when its command needs it):"]
    for info in describe(Settings):
        default = f" (default: {info.default})" if info.default else ""
        lines.append(f"  {info.variable:<27} {info.description}{default}")
    lines.append(f"  {'XDG_CACHE_HOME':<27} the disk cache is $XDG_CACHE_HOME/cpcreds (default: ~/.cache/cpcreds)")
    return "\n".join(lines) + "\n"


#: Where each command's work is: its module (imported only when it runs) and function.
HANDLERS = {
    "get-credential": "credential:get_credential",
    "cache": "cachelist:cache",
    "resolve": "providers:resolve",
    "validate": "providers:validate",
    "plugins": "providers:plugins",
    "pin": "providers:pin",
    "kubeconfig": "kubeconfig:kubeconfig",
    "serve": "serve:serve",
    "completion": "completion:completion",
    "image-credential": "images:image_credential",
}


def build_parser(only: str | None = None) -> Parser:
    """The ``cpcreds`` parser; with ``only``, one of :data:`COMMANDS`, the parser of that command
    alone (what :func:`cpcreds.cli.main.main` parses a command's arguments with: its help, errors
    and results are the same, and kubectl's ``get-credential`` runs do not build the other nine,
    nor read the settings' declaration for the help)."""
    parser = Parser(
        prog="cpcreds",
        description="Kubernetes credentials for every cluster of a fleet (KEP-5339 ClusterProfile credential plugins).",
        epilog=EXAMPLES + ("\n" + _environment_help() if only is None else ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_Version)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    def add(name: str, help: str, description: str) -> Parser | None:
        if only is not None and name != only:
            return None
        sub: Parser = subparsers.add_parser(name, help=help, description=description)
        sub.set_defaults(handler=HANDLERS[name])
        parser.commands[name] = Command(help, sub)
        return sub

    get = add(
        "get-credential",
        "print the ExecCredential for a ClusterProfile",
        "Print the ExecCredential for a ClusterProfile: pick its provider, run the exec plugin or "
        "in-process provider, print the answer. Run by a client as an exec plugin "
        "(KUBERNETES_EXEC_INFO set), it answers in the apiVersion the client asks for. An answer "
        "with an expiry is kept in $XDG_CACHE_HOME/cpcreds (else ~/.cache/cpcreds) and printed "
        "again, without running the provider, until shortly before it expires.",
    )
    if get is not None:
        _add_provider_options(get)
        get.add_argument(
            "--api-version",
            choices=SUPPORTED_API_VERSIONS,
            help="apiVersion of the answer (default: KUBERNETES_EXEC_INFO's, else client.authentication.k8s.io/v1)",
        )
        _add_format_option(get, "on one line, as exec clients read it")
        get.add_argument("--no-cache", action="store_true", help="neither read nor write the disk cache (CPCREDS_CACHE=off does the same)")

    res = add(
        "resolve",
        "print the plan for a ClusterProfile (provider, cluster, exec) without running it",
        "Print what get-credential would do, without running anything: the chosen provider, the "
        "cluster from the profile, and the exec invocation or in-process provider. Env values and "
        "secret-looking args are shown as *** unless --show-values is given.",
    )
    if res is not None:
        _add_provider_options(res)
        _add_format_option(res, "indented")
        res.add_argument("--show-values", action="store_true", help="show env values and secret-looking args as they are")

    kcfg = add(
        "kubeconfig",
        "print a kubeconfig whose users run cpcreds as their exec plugin",
        "Print a kubeconfig with one context per ClusterProfile of the file. Its users run "
        "`cpcreds get-credential`, referring to the config file; no credential, env value or "
        "secret-looking argument is written.",
    )
    if kcfg is not None:
        _add_provider_options(kcfg)
        kcfg.add_argument("--output", "-o", metavar="FILE", help="write to FILE (mode 0600) instead of stdout")
        kcfg.add_argument(
            "--skip-unmatched",
            action="store_true",
            help="leave out profiles that no configured provider matches (one warning each on stderr) instead of failing",
        )

    val = add(
        "validate",
        "check a provider config: fields, provider types, plugin options",
        "Load the provider config, check every field, and build every provider (is each type "
        "installed, are its options valid). With --profile, also resolve each ClusterProfile of "
        "the file and say which provider it uses and which form its additional-args take. "
        "Runs no plugin and reads no credential.",
    )
    if val is not None:
        add_config_option(val)
        val.add_argument(
            "--profile", metavar="FILE", help="also check the ClusterProfiles of FILE (YAML/JSON, a List too; - for stdin) against the config"
        )

    plug = add(
        "plugins",
        "list provider types, the packages that ship them, and load errors",
        "List every provider type this installation knows and where it comes from, and every "
        "plugin that failed to load (exit 1 if one did). Honours CPCREDS_DISABLE_PLUGINS and CPCREDS_PLUGINS.",
    )
    if plug is not None:
        plug.add_argument("--output", "-o", choices=["text", "json"], default="text")

    srv = add(
        "serve",
        "keep every ClusterProfile's credential warm: status page, metrics, kubeconfigs",
        "Watch ClusterProfiles (a folder of files, or a hub), fetch each one's credential and refresh it "
        "ahead of expiry, probe the clusters, and serve a status page, /v1/clusters, /metrics, /healthz "
        "and /readyz. Every setting is also a CPCREDS_* environment variable and a field of the config "
        "file's serve: section (shown in brackets); flags win over the environment, which wins over the file.",
    )
    if srv is not None:
        from .serve import add_serve_options  # its declaration (pydantic-settings) only when serve is parsed

        add_config_option(srv)
        add_serve_options(srv)

    cache = add(
        "cache",
        "list or clear the credentials get-credential keeps on disk",
        "Manage the disk cache of get-credential ($XDG_CACHE_HOME/cpcreds, else ~/.cache/cpcreds). "
        "`cache list` shows each cached entry: the cluster, the provider, the kind of credential and "
        "its expiry, never the credential (-o json for a program). `cache clear` removes every cached "
        "credential. With --profile FILE, only those of that ClusterProfile file. Run clear after "
        "revoking a token: the next get-credential runs the provider.",
    )
    if cache is not None:
        cache.add_argument(
            "action", metavar="ACTION", choices=("list", "clear"), help="list: show cached credentials; clear: remove them"
        )
        cache.add_argument("--profile", metavar="FILE", help="only the credentials of this ClusterProfile file")
        cache.add_argument(
            "--output", "-o", choices=["table", "json"], default=None, help="cache list's output format (default: table)"
        )

    comp = add(
        "completion",
        "print a shell completion script (bash, zsh, fish)",
        "Print a completion script for SHELL on stdout. Load it with: source <(cpcreds completion bash) "
        "(bash or zsh, zsh after compinit), or cpcreds completion fish | source.",
    )
    if comp is not None:
        comp.add_argument("shell", metavar="SHELL", choices=SHELLS, help="bash, zsh or fish")

    pin = add(
        "pin",
        "print pluginPolicy allowlist entries pinning the configured plugins' sha256",
        "Print a pluginPolicy (policyType Allowlist) whose allowlist pins, by sha256, every exec "
        "command of the provider config as it is on this machine now, and the interpreters their #! "
        "lines name. Review it and paste it into the config: from then on a plugin runs only if its "
        "bytes still hash to the pinned digest. Give COMMANDs to pin those instead.",
    )
    if pin is not None:
        add_config_option(pin)
        pin.add_argument("commands", metavar="COMMAND", nargs="*", help="pin these commands (names on PATH, or paths) instead of the config's")
        pin.add_argument("--output", "-o", choices=["yaml", "json"], default="yaml", help="output format (default: yaml, to paste into the config)")

    if only is None or only == "image-credential":
        from ..images import command as image_command  # its arguments only; the work is imported when run

        img = add("image-credential", image_command.HELP, image_command.DESCRIPTION)
        assert img is not None
        image_command.add_arguments(img)

    return parser
