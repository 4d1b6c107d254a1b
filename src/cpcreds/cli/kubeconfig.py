"""``cpcreds kubeconfig``: a kubeconfig whose users run ``cpcreds get-credential`` for each
ClusterProfile of a file; no credential, env value or secret-looking argument is written."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import FLAG_SOURCE, ProviderConfig
from ..errors import ConfigError, CredentialError, NoMatchingProvider
from ..logs import redact_text
from ..config.settings import Settings
from .common import config_path, flag_config, load_provider_config, profiles, warn

if TYPE_CHECKING:
    from ..plan import AccessPlan

__all__ = ["kubeconfig"]


def _flag_spec_for_kubeconfig(spec: str, config: ProviderConfig, name: str) -> str:
    """The ``--clusterprofile-access-provider`` value to record, unless it would put a secret in
    the kubeconfig: then a ConfigError telling the user to use a config file."""
    from ..config.access import mask_args

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


def kubeconfig(args: argparse.Namespace, settings: Settings) -> int:
    import yaml

    from ..config.access import resolve
    from ..adapters.kubeconfig import KubeconfigContext, build_kubeconfig, context_name
    from ..config.profiles import profile_ref

    if args.profile == "-":
        raise ConfigError("kubeconfig needs --profile FILE: the kubeconfig refers to the file when kubectl runs cpcreds")
    config = load_provider_config(args, settings)
    flags = flag_config(args, settings)
    flag_specs = dict(zip([e.name for e in flags.providers], args.access_providers)) if flags else {}
    loaded = profiles(args)
    profile_path = str(Path(args.profile).resolve())
    base = ["-m", "cpcreds", "get-credential"]
    path = config_path(args, settings)
    if path:
        base += ["--config", str(Path(path).resolve())]
    refs = [profile_ref(p) for p in loaded]
    repeated = sorted({ref for ref in refs if refs.count(ref) > 1})
    if repeated:
        raise ConfigError(f"{args.profile}: ClusterProfile {', '.join(repeated)} appears more than once; kubectl could not pick one")
    kept: list[tuple[dict[str, Any], AccessPlan]] = []
    for profile in loaded:
        try:
            plan: AccessPlan = resolve(config, profile)  # fail now, not when kubectl runs it
        except NoMatchingProvider as exc:
            if not args.skip_unmatched:
                raise
            warn(f"skipped {exc}")
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
