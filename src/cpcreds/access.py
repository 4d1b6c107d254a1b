"""ClusterProfile + provider config -> AccessPlan (KEP-5339), pure and deterministic.

:func:`resolve` picks the provider, builds the KEP-541 ``Cluster`` the plugin will see, and applies
the reserved extensions under the entry's policies. It never mutates its inputs: the Go library
appends profile-sourced args to its shared config on every call, so they pile up; here the same
inputs always give an equal plan.

The :class:`AccessPlan` is also the cache key of the engine: two profiles that resolve to equal
plans share one credential, as client-go shares one authenticator per exec config and cluster.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from pydantic import ValidationError

from .api import (
    ADDITIONAL_ARGS_EXTENSION,
    ADDITIONAL_ENVS_EXTENSION,
    EXEC_EXTENSION,
    AccessProvider,
    ClusterProfile,
    ExecCluster,
)
from .config import ProviderConfig, ProviderEntry
from .errors import NoMatchingProvider, ProfileError
from .logs import get_logger

__all__ = ["ExecSpec", "AccessPlan", "resolve", "parse_profile", "cluster_to_wire"]

_log = get_logger(__name__)


@dataclass(frozen=True)
class ExecSpec:
    """The exec plugin invocation for one plan: the entry's ExecConfig after the policies."""

    api_version: str
    command: str
    args: tuple[str, ...]
    #: (name, value) pairs, in a fixed order: configured entries first, then profile-sourced ones
    #: sorted by name.
    env: tuple[tuple[str, str], ...]
    provide_cluster_info: bool
    interactive_mode: str
    install_hint: str = ""
    stdin_unavailable: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "apiVersion": self.api_version,
            "command": self.command,
            "args": list(self.args),
            "env": [{"name": n, "value": v} for n, v in self.env],
            "provideClusterInfo": self.provide_cluster_info,
            "interactiveMode": self.interactive_mode,
        }


def cluster_to_wire(cluster: ExecCluster) -> dict[str, Any]:
    """The KEP-541 Cluster as client-go serialises it in KUBERNETES_EXEC_INFO (kebab-case,
    empty fields omitted, CA data base64, ``config`` verbatim)."""
    wire: dict[str, Any] = {"server": cluster.server}
    if cluster.tls_server_name:
        wire["tls-server-name"] = cluster.tls_server_name
    if cluster.insecure_skip_tls_verify:
        wire["insecure-skip-tls-verify"] = True
    if cluster.certificate_authority_data:
        wire["certificate-authority-data"] = base64.b64encode(cluster.certificate_authority_data).decode("ascii")
    if cluster.proxy_url:
        wire["proxy-url"] = cluster.proxy_url
    if cluster.disable_compression:
        wire["disable-compression"] = True
    if cluster.config is not None:
        wire["config"] = cluster.config
    return wire


@dataclass(frozen=True, eq=False)
class AccessPlan:
    """Everything needed to get one credential, frozen; equal plans share a cached credential.

    ``provider`` is the access-provider name, ``kind`` ``"exec"`` or an in-process provider type.
    ``exec`` is set for exec plugins, ``options`` for in-process providers. ``cluster`` is always
    the profile's cluster (adapters need its server); it is part of the identity only when the
    provider can see it (in-process providers, or ``provideClusterInfo: true``), so a plugin that
    cannot tell clusters apart runs once for all of them.
    """

    provider: str
    kind: str
    cluster: ExecCluster
    exec: ExecSpec | None = None
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    timeout: float = 60.0
    key: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        sees_cluster = self.exec is None or self.exec.provide_cluster_info
        identity = {
            "provider": self.provider,
            "kind": self.kind,
            "timeout": self.timeout,
            "exec": None if self.exec is None else {**self.exec.to_dict(), "installHint": self.exec.install_hint},
            "options": dict(self.options),
            "cluster": cluster_to_wire(self.cluster) if sees_cluster else None,
        }
        object.__setattr__(self, "key", json.dumps(identity, sort_keys=True, separators=(",", ":"), default=str))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AccessPlan) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def to_dict(self) -> dict[str, Any]:
        """The plan as ``cpcreds resolve`` prints it."""
        out: dict[str, Any] = {"provider": self.provider, "cluster": cluster_to_wire(self.cluster)}
        if self.exec is not None:
            out["exec"] = self.exec.to_dict()
        else:
            out["type"] = self.kind
            out["options"] = json.loads(json.dumps(dict(self.options), default=str))
        return out


def parse_profile(profile: ClusterProfile | Mapping[str, Any]) -> ClusterProfile:
    """Accept a ClusterProfile model or a plain dict (as the ``kubernetes`` client returns it)."""
    if isinstance(profile, ClusterProfile):
        return profile
    if not isinstance(profile, Mapping):
        raise ProfileError(f"expected a ClusterProfile mapping, got {type(profile).__name__}")
    try:
        return ClusterProfile.model_validate(profile)
    except ValidationError as exc:
        meta = profile.get("metadata") if isinstance(profile.get("metadata"), Mapping) else {}
        ref = "/".join(str(p) for p in (meta.get("namespace"), meta.get("name")) if p) or "<unnamed>"
        err = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(part) for part in err["loc"])
        raise ProfileError(f"field {where}: {err['msg'].removeprefix('Value error, ')}", profile=ref) from None


def _offered_providers(profile: ClusterProfile) -> dict[str, AccessProvider]:
    offered: dict[str, AccessProvider] = {}
    for provider in profile.status.credential_providers:
        offered[provider.name] = provider
    if profile.status.credential_providers:
        _log.warning(
            "clusterprofile uses deprecated status.credentialProviders; migrate to status.accessProviders",
            profile=profile.ref,
            providers=[p.name for p in profile.status.credential_providers],
        )
    for provider in profile.status.access_providers:  # wins over the deprecated field on a clash
        offered[provider.name] = provider
    return offered


def resolve(config: ProviderConfig, profile: ClusterProfile | Mapping[str, Any]) -> AccessPlan:
    """Pick the first provider *in config order* that the profile offers and build its plan.

    Raises :class:`~cpcreds.errors.NoMatchingProvider` (naming the profile, what it offers and what
    the config has) or :class:`~cpcreds.errors.ProfileError` for a malformed profile.
    """
    model = parse_profile(profile)
    offered = _offered_providers(model)
    for entry in config.providers:
        access = offered.get(entry.name)
        if access is not None:
            return _plan(entry, access, model.ref)
    raise NoMatchingProvider(model.ref, list(offered), config.names)


def _plan(entry: ProviderEntry, access: AccessProvider, ref: str) -> AccessPlan:
    where = f"status.accessProviders[name={access.name}].cluster"
    if access.cluster is None:
        raise ProfileError(f"{where} is missing", profile=ref)
    source = access.cluster
    if not source.server:
        raise ProfileError(f"{where}.server is empty", profile=ref)
    extensions = {ext.name: ext.extension for ext in source.extensions}
    cluster = ExecCluster(
        server=source.server,
        tls_server_name=source.tls_server_name,
        insecure_skip_tls_verify=source.insecure_skip_tls_verify,
        certificate_authority_data=source.certificate_authority_data,
        proxy_url=source.proxy_url,
        disable_compression=source.disable_compression,
        config=extensions.get(EXEC_EXTENSION),
    )
    if entry.exec_config is None:
        return AccessPlan(
            provider=entry.name,
            kind=entry.kind,
            cluster=cluster,
            options=MappingProxyType(dict(entry.options)),
            timeout=entry.timeout,
        )
    base = entry.exec_config
    args = tuple(base.args)
    if entry.profile_sourced_cli_args_policy == "Append" and ADDITIONAL_ARGS_EXTENSION in extensions:
        args += _additional_args(extensions[ADDITIONAL_ARGS_EXTENSION], f"{where}.extensions[{ADDITIONAL_ARGS_EXTENSION}]", ref)
    env = tuple((var.name, var.value) for var in base.env)
    policy = entry.profile_sourced_env_vars_policy
    if policy != "Ignore" and ADDITIONAL_ENVS_EXTENSION in extensions:
        extra = _additional_envs(extensions[ADDITIONAL_ENVS_EXTENSION], f"{where}.extensions[{ADDITIONAL_ENVS_EXTENSION}]", ref)
        env = _merge_env(env, extra, profile_wins=policy == "Replace")
    spec = ExecSpec(
        api_version=str(base.api_version),
        command=base.command,
        args=args,
        env=env,
        provide_cluster_info=base.provide_cluster_info,
        interactive_mode=str(base.interactive_mode or "Never"),
        install_hint=base.install_hint,
        stdin_unavailable=base.stdin_unavailable,
    )
    return AccessPlan(provider=entry.name, kind="exec", cluster=cluster, exec=spec, timeout=entry.timeout)


def _scalar_text(value: Any) -> str | None:
    # YAML/JSON scalars become strings as Go's yaml.v3 decodes them into a []string / map[string]string.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    return None


def _additional_args(raw: Any, where: str, ref: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ProfileError(f"{where} must be a list of strings", profile=ref)
    args = []
    for index, item in enumerate(raw):
        text = _scalar_text(item)
        if text is None:
            raise ProfileError(f"{where}[{index}] must be a string", profile=ref)
        args.append(text)
    return tuple(args)


def _additional_envs(raw: Any, where: str, ref: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ProfileError(f"{where} must be a map of strings", profile=ref)
    envs = {}
    for name, value in raw.items():
        text = _scalar_text(value)
        if not isinstance(name, str) or not name or "=" in name or text is None:
            raise ProfileError(f"{where}: entry {name!r} must map a variable name to a string", profile=ref)
        envs[name] = text
    return envs


def _merge_env(configured: tuple[tuple[str, str], ...], extra: dict[str, str], *, profile_wins: bool) -> tuple[tuple[str, str], ...]:
    merged: dict[str, str] = {}
    for name, value in configured:  # a name repeated in the config: the last one counts, as in Go
        merged[name] = value
    for name, value in extra.items():
        if profile_wins or name not in merged:
            merged[name] = value
    ordered = [name for name, _ in configured if name in merged]
    ordered = list(dict.fromkeys(ordered))
    ordered += sorted(name for name in extra if name not in dict(configured))
    return tuple((name, merged[name]) for name in ordered)
