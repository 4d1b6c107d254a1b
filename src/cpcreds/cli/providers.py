"""Commands that look at a provider config without fetching a credential: ``resolve``,
``validate``, ``plugins`` and ``pin``."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from ..config import ProviderConfig
from ..errors import ConfigError, CredentialError
from ..config.settings import Settings
from .common import load_provider_config, print_value, profiles

__all__ = ["resolve", "validate", "plugins", "pin"]


def resolve(args: argparse.Namespace, settings: Settings) -> int:
    from ..config.access import AccessPlan, resolve_chain

    from ..exec.provider import find_executable

    def shown(plan: AccessPlan) -> dict[str, Any]:
        data = plan.to_dict(show_values=args.show_values)
        if plan.exec is not None:  # what would really run: found on our PATH, never the plugin's
            data["exec"]["executable"] = find_executable(plan.exec.command)
        return data

    config = load_provider_config(args, settings)
    plans = []
    for profile in profiles(args):
        first, *later = resolve_chain(config, profile)
        assert first.plan is not None  # resolve_chain raises when the preferred plan cannot be built
        data = shown(first.plan)
        if later:  # failover: what would be tried next, in order, had this provider failed
            data["failover"] = [
                shown(c.plan) if c.plan is not None else {"provider": c.provider, "error": str(c.error)} for c in later
            ]
        plans.append(data)
    print_value(plans[0] if len(plans) == 1 else plans, args.output)
    return 0


def validate(args: argparse.Namespace, settings: Settings) -> int:
    from ..providers.registry import ProviderRegistry

    config = load_provider_config(args, settings)
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
        from ..config.profiles import load_profiles

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
    from ..errors import PluginNotAllowed
    from ..exec.policy import PluginGate
    from ..exec.provider import find_executable

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
    from ..config.access import additional_args_form, parse_additional_args, parse_profile, resolve_chain
    from ..config.wire import ADDITIONAL_ARGS_EXTENSION

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


def pin(args: argparse.Namespace, settings: Settings) -> int:
    from ..exec.policy import pin_entries

    if args.commands:
        commands = [(command, "given") for command in args.commands]
    else:
        config = load_provider_config(args, settings)
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
        print_value({"pluginPolicy": {"policyType": "Allowlist", "allowlist": allowlist}}, "json")
        return 0
    lines = ["pluginPolicy:", "  policyType: Allowlist", "  allowlist:"]
    for e in entries:
        # JSON strings are YAML strings: any path prints as a valid, unambiguous scalar.
        lines.append(f"  - command: {json.dumps(e.command)}  # {' '.join(e.needed_by.split())}")
        if e.sha256:
            lines.append(f"    sha256: {e.sha256}")
    print("\n".join(lines))
    return 0


def plugins(args: argparse.Namespace, settings: Settings) -> int:
    from ..providers.registry import ProviderRegistry

    registry = ProviderRegistry()
    registry.warn_load_errors()
    types = [
        {"type": t.name, "plugin": t.plugin, "distribution": t.distribution, "version": t.version}
        for t in sorted(registry.types.values(), key=lambda t: t.name)
    ]
    errors = [{"plugin": e.plugin, "distribution": e.distribution, "error": e.error} for e in registry.load_errors]
    if args.output == "json":
        print_value(({"providers": types, "loadErrors": errors}), "json")
        return 1 if errors else 0
    for item in types:
        origin = item["plugin"] if item["distribution"] is None else f"{item['distribution']} {item['version']}"
        print(f"{item['type']:<16} {origin}")
    for item in errors:
        print(f"failed: {item['plugin']} ({item['distribution']}): {item['error']}")
    return 1 if errors else 0  # a plugin that did not load is something to fix, also in scripts
