"""ClusterProfile + provider config -> AccessPlan (KEP-5339), pure and deterministic.

:func:`resolve` picks the provider, builds the KEP-541 ``Cluster`` the plugin will see, and applies
the reserved extensions under the entry's policies. It never mutates its inputs: the Go library
appends profile-sourced args to its shared config on every call, so they pile up; here the same
inputs always give an equal plan.

The :class:`AccessPlan` is also the cache key of the engine: two profiles that resolve to equal
plans share one credential, as client-go shares one authenticator per exec config and cluster.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from .documents import plain_copy
from ..errors import NoMatchingProvider, ProfileError
from ..kep import ADDITIONAL_ARGS_EXTENSION, ADDITIONAL_ENVS_EXTENSION, EXEC_EXTENSION, ExecCluster, exec_cluster_of_validated
from ..logs import get_logger
from ..plan import MASK, AccessPlan, ExecSpec, IdentityCache, cluster_json, cluster_to_wire, compact_json, json_value, mask_args, mask_env, plan_of_resolved  # noqa: F401 (re-exported: they lived here)
from .profileargs import (  # noqa: F401 (re-exported: they lived here)
    PROFILE_ENV_DENIED_PREFIXES,
    PROFILE_ENV_DENYLIST,
    additional_args_form,
    additional_envs,
    is_denied_env_name,
    merged_env,
    parse_additional_args,
)
from .profiles import profile_ref

if TYPE_CHECKING:  # the models are imported only when a profile needs validating (see resolve)
    from .wire import AccessProvider, ClusterProfile, KubeconfigCluster
    from . import ProviderConfig, ProviderEntry

__all__ = [
    "ExecSpec",
    "AccessPlan",
    "Candidate",
    "resolve",
    "resolve_chain",
    "additional_args_form",
    "parse_additional_args",
    "parse_profile",
    "cluster_to_wire",
    "cluster_json",
    "compact_json",
    "json_value",
    "PROFILE_ENV_DENYLIST",
    "PROFILE_ENV_DENIED_PREFIXES",
    "is_denied_env_name",
    "mask_args",
    "mask_env",
    "MASK",
    "is_profile_model",
]

_log = get_logger(__name__)


def is_profile_model(value: Any) -> bool:
    """Whether ``value`` is a :class:`cpcreds.config.wire.ClusterProfile` model, answered without
    importing the models (no model exists before that module is imported)."""
    wire = sys.modules.get(f"{__package__}.wire")
    return wire is not None and isinstance(value, wire.ClusterProfile)


def parse_profile(profile: ClusterProfile | Mapping[str, Any]) -> ClusterProfile:
    """Accept a ClusterProfile model or a plain dict (as the ``kubernetes`` client returns it).

    Raises :class:`~cpcreds.errors.ProfileError` naming the profile and the field; the message
    names the type of a wrong value, never the value.
    """
    if type(profile) is not dict:  # a plain dict is the usual case: no other check for it
        if is_profile_model(profile):
            return profile  # type: ignore[return-value]
        if not isinstance(profile, Mapping):
            raise ProfileError(f"expected a ClusterProfile mapping, got {type(profile).__name__}")
        profile = dict(profile)
    model, validate, validation_error = _MODELS or _profile_models()
    problems: list[tuple[str, str]] = []
    try:
        return validate(profile)  # type: ignore[no-any-return]
    except validation_error as exc:
        from . import describe_validation_error

        problems = describe_validation_error(exc, model)
    except (TypeError, ValueError, OverflowError, RecursionError):  # a value pydantic cannot even look at
        problems = [("", "holds a value that cannot be read")]
    # Raised outside the except block: pydantic's error quotes the input.
    where, message = problems[0] if problems else ("", "is not valid")
    raise ProfileError(f"field {where}: {message}" if where else message, profile=profile_ref(profile))


#: (ClusterProfile, its validation, pydantic's ValidationError) once the first profile was
#: validated: the models are imported then, not with this module, and not looked up again on
#: every resolve.
_MODELS: tuple[Any, Any, Any] | None = None


def _profile_models() -> tuple[Any, Any, Any]:
    global _MODELS
    from pydantic import ValidationError

    from .wire import ClusterProfile

    # The model's own validator (a documented attribute of every pydantic model), called as
    # model_validate calls it with no options: model_validate adds only checks of options that
    # are never given here, run again for every new profile, right after a plugin ran.
    _MODELS = (ClusterProfile, ClusterProfile.__pydantic_validator__.validate_python, ValidationError)
    return _MODELS


def _offered_providers(profile: ClusterProfile, *, warn: bool = True) -> dict[str, AccessProvider]:
    offered: dict[str, AccessProvider] = {}
    for provider in profile.status.credential_providers:
        offered[provider.name] = provider
    if profile.status.credential_providers and warn:
        _log.warning(
            "clusterprofile uses deprecated status.credentialProviders; migrate to status.accessProviders",
            profile=profile.ref,
            providers=[p.name for p in profile.status.credential_providers],
        )
    for provider in profile.status.access_providers:  # wins over the deprecated field on a clash
        offered[provider.name] = provider
    return offered


_PROVIDER_LISTS = ("accessProviders", "credentialProviders")


def _missing_providers_hint(raw: Any) -> str:
    """Where a profile without status.accessProviders may have put them, for the message."""
    if not isinstance(raw, Mapping):
        return ""
    for place in ("spec", None):
        holder = raw.get(place) if place else raw
        if isinstance(holder, Mapping):
            for key in _PROVIDER_LISTS:
                if key in holder:
                    where = f"{place}.{key}" if place else f"{key} at the top level"
                    return f" (found {where}; it belongs under status)"
    status = raw.get("status")
    if not isinstance(status, Mapping) or not status:
        return " (the profile has no status; the cluster manager fills it in)"
    import difflib  # only to word a profile that matched no provider

    keys = [key for key in status if isinstance(key, str)]
    for key in keys:
        close = difflib.get_close_matches(key.lower(), [k.lower() for k in _PROVIDER_LISTS], n=1, cutoff=0.75)
        if close:
            right = next(k for k in _PROVIDER_LISTS if k.lower() == close[0])
            shown = key if len(key) <= 40 and key.isprintable() else "a key"
            return f" (found status.{shown}; did you mean status.{right}?)"
    return ""


def _has_provider_lists(raw: Any) -> bool:
    status = raw.get("status") if isinstance(raw, Mapping) else None
    return isinstance(status, Mapping) and any(status.get(key) is not None for key in _PROVIDER_LISTS)


def resolve(config: ProviderConfig, profile: ClusterProfile | Mapping[str, Any], *, owned: bool = False) -> AccessPlan:
    """Pick the first provider *in config order* that the profile offers and build its plan.

    Raises :class:`~cpcreds.errors.NoMatchingProvider` (naming the profile, what it offers and what
    the config has) or :class:`~cpcreds.errors.ProfileError` for a malformed profile (one without
    ``status.accessProviders`` included). The plan shares nothing mutable with ``profile``, unless
    ``owned``: the caller hands over a profile ``dict`` of plain JSON data (as a JSON parser gives
    it) and promises that neither the profile nor anything in it changes after this call (as
    ``cpcreds serve`` does with the profiles it parsed itself); the plan then shares the profile's
    exec extension, when that is one flat object, instead of a deep read-only copy of it.
    """
    return _resolve_validated(config, profile, owned)


def _resolve_validated(config: ProviderConfig, profile: ClusterProfile | Mapping[str, Any], owned: bool = False) -> AccessPlan:
    model = parse_profile(profile)
    offered = _offered_providers(model)
    if not offered:
        if is_profile_model(profile):
            given = {"access_providers", "credential_providers"} & profile.status.model_fields_set
            raw: Any = {"spec": profile.spec, "status": {"accessProviders": []} if given else {}}
        else:
            raw = profile
        if not _has_provider_lists(raw):
            raise ProfileError(f"the profile has no status.accessProviders{_missing_providers_hint(raw)}", profile=model.ref)
    for entry in config.providers:
        access = offered.get(entry.name)
        if access is not None:
            return _plan(entry, access.name, None if access.cluster is None else _source_of(access.cluster), model, owned)
    raise NoMatchingProvider(model.ref, list(offered), config.names)


class Candidate(NamedTuple):
    """One provider that failover may try for a profile: its plan, or why none can be built."""

    provider: str
    plan: AccessPlan | None
    error: ProfileError | None = None


def resolve_chain(config: ProviderConfig, profile: ClusterProfile | Mapping[str, Any]) -> tuple[Candidate, ...]:
    """The providers failover tries for ``profile``, in the order it tries them.

    The first is :func:`resolve`'s plan (and its errors are raised as :func:`resolve` raises
    them). While the last provider of the chain fails over (``config.fails_over``), the next
    provider that the config lists *and* the profile offers follows it; so the chain ends at the
    first provider that does not fail over, or at the last one offered. A later provider whose
    plan cannot be built (a missing cluster, a malformed extension) is in the chain with its
    :class:`~cpcreds.errors.ProfileError` and no plan: failover counts it as a failure and moves
    past it, so one broken entry of a profile does not take the others down with it.

    Pure, as :func:`resolve` is; without failover configured it returns one candidate.
    """
    first = resolve(config, profile)
    chain = [Candidate(first.provider, first)]
    if not config.fails_over(first.provider):
        return tuple(chain)
    model = parse_profile(profile)
    offered = _offered_providers(model, warn=False)  # resolve has warned already
    names = config.names
    for entry in config.providers[names.index(first.provider) + 1 :]:
        access = offered.get(entry.name)
        if access is None:
            continue
        problem: ProfileError | None = None
        try:
            plan = _plan(entry, access.name, None if access.cluster is None else _source_of(access.cluster), model)
        except ProfileError as exc:
            problem = exc.with_traceback(None)
        chain.append(Candidate(entry.name, None, problem) if problem is not None else Candidate(entry.name, plan))
        if not config.fails_over(entry.name):
            break
    return tuple(chain)


#: What a plan is built from: (server, tls_server_name, insecure_skip_tls_verify,
#: certificate_authority_data, proxy_url, disable_compression, {extension name: value}).
_Source = tuple[str, str, bool, bytes, str, bool, dict[str, Any]]


def _source_of(cluster: KubeconfigCluster) -> _Source:
    return (
        cluster.server,
        cluster.tls_server_name,
        cluster.insecure_skip_tls_verify,
        cluster.certificate_authority_data,
        cluster.proxy_url,
        cluster.disable_compression,
        {extension.name: extension.extension for extension in cluster.extensions},
    )


# -- building the plan ---------------------------------------------------------------------------


#: Values an owned profile's exec extension may hold and still be shared as it is (see resolve).
_FLAT_VALUES = (str, int, bool, type(None))


def _shareable(value: Any) -> bool:
    """Whether an owned profile's exec extension can be shared: one object of scalars only (no
    float, whose NaN a copy would refuse; nested data is copied and checked as ever)."""
    return type(value) is dict and all(type(key) is str and type(item) in _FLAT_VALUES for key, item in value.items())


def _frozen(value: Any, where: str, ref: str) -> Any:
    problem: str | None = None
    try:
        return plain_copy(value)
    except ValueError as exc:
        problem = str(exc)
    raise ProfileError(f"{where}: {problem}", profile=ref)


_NO_OPTIONS: Mapping[str, Any] = MappingProxyType({})  # read-only: every exec plan can share it

#: entry -> its ExecSpec before profile-sourced args and env. Entries are frozen, so the spec
#: never goes stale; an entry's spec goes with the entry (a reloaded config's with that config).
_CONFIGURED_SPECS = IdentityCache()


def _configured_spec(entry: ProviderEntry) -> ExecSpec:
    """The entry's ExecSpec as configured, one per entry: every plan of the entry shares it (and
    so the cached end of its key, see :func:`_key_tail`) unless its profile adds args or env."""
    cached = _CONFIGURED_SPECS.get(entry)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    base = entry.exec_config
    assert base is not None
    spec = ExecSpec(
        api_version=str(base.api_version),
        command=base.command,
        args=tuple(base.args),
        env=tuple((var.name, var.value) for var in base.env),
        provide_cluster_info=base.provide_cluster_info,
        interactive_mode=str(base.interactive_mode or "Never"),
        install_hint=base.install_hint,
        stdin_unavailable=base.stdin_unavailable,
    )
    _CONFIGURED_SPECS.put(entry, spec)
    return spec


#: entry -> its options as a read-only copy: every in-process plan of an entry shares one
#: (read-only, so no plan can change another's); as for _CONFIGURED_SPECS.
_CONFIGURED_OPTIONS = IdentityCache()


def _configured_options(entry: ProviderEntry) -> Mapping[str, Any]:
    cached = _CONFIGURED_OPTIONS.get(entry)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    options: Mapping[str, Any] = MappingProxyType(plain_copy(dict(entry.options)))
    _CONFIGURED_OPTIONS.put(entry, options)
    return options


def _plan(entry: ProviderEntry, name: str, source: _Source | None, model: ClusterProfile, owned: bool = False) -> AccessPlan:
    # The profile's ref (namespace/name, for errors) is worded only where an error may need it.
    if source is None:
        raise ProfileError(f"{_cluster_at(name)} is missing", profile=model.ref)
    server, tls_server_name, insecure_skip_tls_verify, ca_data, proxy_url, disable_compression, extensions = source
    if not server:
        raise ProfileError(f"{_cluster_at(name)}.server is empty", profile=model.ref)
    # A deep, read-only copy: neither the caller (changing its profile dict after resolve) nor a
    # provider (changing plan.cluster.config) can change the plan or its key. An owner who
    # promised not to change its profile (resolve's ``owned``) shares a flat extension instead.
    config = extensions.get(EXEC_EXTENSION)
    if config is not None and not (owned and _shareable(config)):
        config = _frozen(config, f"{_cluster_at(name)}.extensions[{EXEC_EXTENSION}]", model.ref)
    # The values were checked as the profile was read (by the models or the direct reading).
    cluster = exec_cluster_of_validated(server, tls_server_name, insecure_skip_tls_verify, ca_data, proxy_url, disable_compression, config)
    if entry.exec_config is None:
        # Everything but the cluster is the entry's: its key tail is encoded once per entry.
        return plan_of_resolved(entry.name, entry.kind, cluster, None, _configured_options(entry), entry.timeout, tail_owner=entry)
    spec = _configured_spec(entry)
    args, env, changed = spec.args, spec.env, False
    if entry.profile_sourced_cli_args_policy == "Append" and ADDITIONAL_ARGS_EXTENSION in extensions:
        where = f"{_cluster_at(name)}.extensions[{ADDITIONAL_ARGS_EXTENSION}]"
        args, changed = args + parse_additional_args(extensions[ADDITIONAL_ARGS_EXTENSION], where, model.ref), True
    policy = entry.profile_sourced_env_vars_policy
    if policy != "Ignore" and ADDITIONAL_ENVS_EXTENSION in extensions:
        where = f"{_cluster_at(name)}.extensions[{ADDITIONAL_ENVS_EXTENSION}]"
        extra = additional_envs(extensions[ADDITIONAL_ENVS_EXTENSION], where, model.ref)
        env, changed = merged_env(env, extra, profile_wins=policy == "Replace"), True
    if changed:
        spec = dataclasses.replace(spec, args=args, env=env)
    return plan_of_resolved(entry.name, "exec", cluster, spec, _NO_OPTIONS, entry.timeout)


def _cluster_at(name: str) -> str:
    return f"status.accessProviders[name={name}].cluster"
