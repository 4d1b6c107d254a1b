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
import dataclasses
import difflib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

from pydantic import ValidationError

from ._parse import plain_copy
from .api import (
    ADDITIONAL_ARGS_EXTENSION,
    ADDITIONAL_ENVS_EXTENSION,
    EXEC_EXTENSION,
    AccessProvider,
    ClusterProfile,
    ClusterProfileStatus,
    ExecCluster,
    KubeconfigCluster,
    NamedExtension,
    ObjectMeta,
    unpassable_text,
)
from .config import ProviderConfig, ProviderEntry, describe_validation_error
from .errors import NoMatchingProvider, ProfileError
from .logs import get_logger, redact_text
from .profiles import profile_ref

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
]

_log = get_logger(__name__)

#: Environment variables a ClusterProfile may never set for a plugin, whatever the policy: they
#: change which code the dynamic loader, an interpreter or a shell runs (or where it reads its
#: start-up files from: ``HOME`` holds Python's ``usercustomize``, ``.npmrc``, ``.gemrc``, ...),
#: whom the plugin's TLS trusts, or where TLS keys are written. Compared in upper case.
PROFILE_ENV_DENYLIST = frozenset(
    {
        # the command's own lookup, and the exec request itself
        "PATH", "KUBERNETES_EXEC_INFO", "HOME",
        # shells
        "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "IFS", "CDPATH", "GLOBIGNORE",
        # interpreters
        "PERL5LIB", "PERL5OPT", "PERLLIB", "PERL5DB", "RUBYOPT", "RUBYLIB", "NODE_OPTIONS", "NODE_PATH",
        "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "GODEBUG",
        # the C library and the resolver
        "GCONV_PATH", "GLIBC_TUNABLES", "LOCPATH", "NLSPATH", "HOSTALIASES", "LOCALDOMAIN", "RES_OPTIONS",
        # TLS trust and secrets
        "OPENSSL_CONF", "OPENSSL_MODULES", "OPENSSL_ENGINES", "SSLKEYLOGFILE", "SSL_CERT_FILE", "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
    }
)  # fmt: skip
#: Name prefixes refused the same way: ``LD_PRELOAD`` and friends, ``DYLD_*``, every ``PYTHON*``
#: variable, exported bash functions, glibc's ``MALLOC_*`` tunables.
PROFILE_ENV_DENIED_PREFIXES = ("LD_", "DYLD_", "PYTHON", "BASH_FUNC_", "MALLOC_")

#: A portable environment variable name (POSIX): letters, digits and ``_``, not starting with a digit.
_PORTABLE_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# One encoder for every plan key: json.dumps with options builds a new encoder on each call.
_KEY_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str)

#: What masked values are replaced with.
MASK = "***"
_SECRET_FLAG = re.compile(
    r"--?(?:[A-Za-z0-9_.-]*(?:password|passwd|secret|token|api[-_]?key|access[-_]?key|private[-_]?key|credential)[A-Za-z0-9_.-]*"
    r"|[A-Za-z0-9_.-]*key)",
    re.IGNORECASE,
)


def is_denied_env_name(name: str) -> bool:
    """Whether a ClusterProfile may not set the variable ``name`` (see :data:`PROFILE_ENV_DENYLIST`)."""
    upper = name.upper()
    return upper in PROFILE_ENV_DENYLIST or upper.startswith(PROFILE_ENV_DENIED_PREFIXES)


def mask_args(args: Iterable[str]) -> list[str]:
    """``args`` with the values of secret-looking flags replaced by ``***``.

    ``--password=x`` becomes ``--password=***``; in the two-word form ``--token x`` the word after
    the flag becomes ``***`` (unless it is itself a flag). A flag is secret-looking when its name
    contains password, passwd, secret, token, api-key, access-key, private-key or credential, or
    ends in ``key``. Any other argument that log redaction would alter (``VAULT_TOKEN=...``, a URL
    with ``user:password@``, a JWT) is replaced whole.
    """
    masked: list[str] = []
    hide_next = False
    for arg in args:
        text = str(arg)
        if hide_next and not text.startswith("-"):
            masked.append(MASK)
            hide_next = False
            continue
        hide_next = False
        flag, sep, _ = text.partition("=")
        if _SECRET_FLAG.fullmatch(flag):
            if sep:
                masked.append(f"{flag}={MASK}")
                continue
            hide_next = True
        elif redact_text(text) != text:
            # Anything else the log redaction would hide (VAULT_TOKEN=..., user:pw@ URLs, a JWT).
            masked.append(MASK)
            continue
        masked.append(text)
    return masked


def mask_env(env: Iterable[tuple[str, str]]) -> list[str]:
    """``NAME=***`` for every variable: env values are where plugins take secrets."""
    return [f"{name}={MASK}" for name, _ in env]


@dataclass(frozen=True, repr=False)
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

    def to_dict(self, show_values: bool = False) -> dict[str, Any]:
        """As kubeconfig spells it; env values and secret-looking args are ``***`` unless
        ``show_values``."""
        return {
            "apiVersion": self.api_version,
            "command": self.command,
            "args": list(self.args) if show_values else mask_args(self.args),
            "env": [{"name": n, "value": v if show_values else MASK} for n, v in self.env],
            "provideClusterInfo": self.provide_cluster_info,
            "interactiveMode": self.interactive_mode,
        }

    def __repr__(self) -> str:
        return (
            f"ExecSpec(api_version={self.api_version!r}, command={self.command!r}, args={mask_args(self.args)!r}, "
            f"env={mask_env(self.env)!r}, provide_cluster_info={self.provide_cluster_info!r}, "
            f"interactive_mode={self.interactive_mode!r}, install_hint={self.install_hint!r}, "
            f"stdin_unavailable={self.stdin_unavailable!r})"
        )


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


def compact_json(mapping: Mapping[str, Any], encoder: json.JSONEncoder) -> str:
    """``encoder.encode(mapping)`` for a flat mapping with string keys, keys in ``encoder``'s
    order, for an encoder with ``ensure_ascii`` and ``(",", ":")`` separators.

    Strings, booleans and None are written here, anything else by ``encoder``: starting the JSON
    encoder is among the costliest steps of a fetch when the CPU's caches are cold (right after a
    plugin ran), and a cluster is almost always a server URL and a few strings.
    """
    items = sorted(mapping.items()) if encoder.sort_keys else mapping.items()
    return "{" + ",".join([encode_basestring_ascii(name) + ":" + json_value(value, encoder) for name, value in items]) + "}"


def json_value(value: Any, encoder: json.JSONEncoder) -> str:
    """``encoder.encode(value)``; a string, a boolean or None written here (see compact_json)."""
    if type(value) is str:
        return encode_basestring_ascii(value)
    if value is True or value is False or value is None:
        return "true" if value else "false" if value is False else "null"
    return encoder.encode(value)


def cluster_json(cluster: ExecCluster, encoder: json.JSONEncoder) -> str:
    """``compact_json(cluster_to_wire(cluster), encoder)``: for the usual cluster, a server URL
    and nothing else, written without building the mapping."""
    server = cluster.server
    if (
        type(server) is str
        and not cluster.tls_server_name
        and not cluster.insecure_skip_tls_verify
        and not cluster.certificate_authority_data
        and not cluster.proxy_url
        and not cluster.disable_compression
        and cluster.config is None
    ):
        return '{"server":' + encode_basestring_ascii(server) + "}"
    return compact_json(cluster_to_wire(cluster), encoder)


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
        object.__setattr__(self, "key", _plan_key(self))

    @classmethod
    def _of_resolved(
        cls, provider: str, kind: str, cluster: ExecCluster, exec: ExecSpec | None, options: Mapping[str, Any], timeout: float
    ) -> AccessPlan:
        """``AccessPlan(...)`` with every field given, filled in one step rather than field by
        field through the frozen dataclass's ``__init__``: resolve builds one for every new
        profile, right after a plugin ran, when every step costs several times its usual."""
        plan = object.__new__(cls)
        fields = plan.__dict__
        fields.update(provider=provider, kind=kind, cluster=cluster, exec=exec, options=options, timeout=timeout)
        fields["key"] = _plan_key(plan)
        return plan

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AccessPlan) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def to_dict(self, show_values: bool = False) -> dict[str, Any]:
        """The plan as ``cpcreds resolve`` prints it: env values and secret-looking args are
        ``***`` (see :func:`mask_args`) unless ``show_values``. A new, mutable structure."""
        out: dict[str, Any] = {"provider": self.provider, "cluster": json.loads(json.dumps(cluster_to_wire(self.cluster)))}
        if self.exec is not None:
            out["exec"] = self.exec.to_dict(show_values=show_values)
        else:
            out["type"] = self.kind
            out["options"] = json.loads(json.dumps(dict(self.options), default=str))
        return out


def _plan_key(plan: AccessPlan) -> str:
    """The JSON of {cluster, exec, kind, options, provider, timeout} with sorted keys (the
    cluster only where the provider sees it); all but the cluster is the same for every plan of
    a config entry, so it is encoded once (see :func:`_key_tail`)."""
    sees_cluster = plan.exec is None or plan.exec.provide_cluster_info
    cluster = cluster_json(plan.cluster, _KEY_ENCODER) if sees_cluster else "null"
    return '{"cluster":' + cluster + "," + _key_tail(plan)


#: (id(exec), provider, kind, timeout) -> (exec, key tail). Holding the ExecSpec keeps its id
#: from being reused while the entry exists.
_KEY_TAILS: dict[tuple[int, str, str, float], tuple[ExecSpec | None, str]] = {}
_MAX_KEY_TAILS = 1024


def _key_tail(plan: AccessPlan) -> str:
    """Everything of ``plan.key`` after the cluster: ``"exec":...,"timeout":...}``."""
    spec = plan.exec
    cacheable = not plan.options and type(plan.provider) is str and type(plan.kind) is str and type(plan.timeout) is float
    if cacheable:
        cache_key = (id(spec), plan.provider, plan.kind, plan.timeout)
        cached = _KEY_TAILS.get(cache_key)
        if cached is not None and cached[0] is spec:
            return cached[1]
    identity = {
        "exec": None if spec is None else {**spec.to_dict(show_values=True), "installHint": spec.install_hint},
        "kind": plan.kind,
        "options": dict(plan.options),
        "provider": plan.provider,
        "timeout": plan.timeout,
    }
    tail = _KEY_ENCODER.encode(identity)[1:]
    if cacheable:
        if len(_KEY_TAILS) >= _MAX_KEY_TAILS:  # plans whose profiles add args or env each have a spec
            _KEY_TAILS.clear()
        _KEY_TAILS[cache_key] = (spec, tail)
    return tail


def parse_profile(profile: ClusterProfile | Mapping[str, Any]) -> ClusterProfile:
    """Accept a ClusterProfile model or a plain dict (as the ``kubernetes`` client returns it).

    Raises :class:`~cpcreds.errors.ProfileError` naming the profile and the field; the message
    names the type of a wrong value, never the value.
    """
    if isinstance(profile, ClusterProfile):
        return profile
    if not isinstance(profile, Mapping):
        raise ProfileError(f"expected a ClusterProfile mapping, got {type(profile).__name__}")
    problems: list[tuple[str, str]] = []
    try:
        return ClusterProfile.model_validate(dict(profile))
    except ValidationError as exc:
        problems = describe_validation_error(exc, ClusterProfile)
    except (TypeError, ValueError, OverflowError, RecursionError):  # a value pydantic cannot even look at
        problems = [("", "holds a value that cannot be read")]
    # Raised outside the except block: pydantic's error quotes the input.
    where, message = problems[0] if problems else ("", "is not valid")
    raise ProfileError(f"field {where}: {message}" if where else message, profile=profile_ref(dict(profile)))


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


def resolve(config: ProviderConfig, profile: ClusterProfile | Mapping[str, Any]) -> AccessPlan:
    """Pick the first provider *in config order* that the profile offers and build its plan.

    Raises :class:`~cpcreds.errors.NoMatchingProvider` (naming the profile, what it offers and what
    the config has) or :class:`~cpcreds.errors.ProfileError` for a malformed profile (one without
    ``status.accessProviders`` included). The plan shares nothing mutable with ``profile``.
    """
    if type(profile) is dict:
        try:
            plan = _resolve_plain(config, profile)
        except Exception:  # anything unusual: the validating path decides, and words the error
            plan = None
        if plan is not None:
            return plan
    return _resolve_validated(config, profile)


def _resolve_validated(config: ProviderConfig, profile: ClusterProfile | Mapping[str, Any]) -> AccessPlan:
    model = parse_profile(profile)
    offered = _offered_providers(model)
    if not offered:
        if isinstance(profile, ClusterProfile):
            given = {"access_providers", "credential_providers"} & profile.status.model_fields_set
            raw: Any = {"spec": profile.spec, "status": {"accessProviders": []} if given else {}}
        else:
            raw = profile
        if not _has_provider_lists(raw):
            raise ProfileError(f"the profile has no status.accessProviders{_missing_providers_hint(raw)}", profile=model.ref)
    for entry in config.providers:
        access = offered.get(entry.name)
        if access is not None:
            return _plan(entry, access.name, None if access.cluster is None else _source_of(access.cluster), model.ref)
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
            plan = _plan(entry, access.name, None if access.cluster is None else _source_of(access.cluster), model.ref)
        except ProfileError as exc:
            problem = exc.with_traceback(None)
        chain.append(Candidate(entry.name, None, problem) if problem is not None else Candidate(entry.name, plan))
        if not config.fails_over(entry.name):
            break
    return tuple(chain)


# -- profiles as plain dicts ---------------------------------------------------------------------
#
# Most profiles arrive as the dicts the kubernetes client returns, every value of exactly the type
# its field expects. Validating those through the pydantic models costs more than the rest of
# resolve, and a controller meeting a new cluster pays it just before running a plugin, with
# nothing in the CPU's caches. So such a dict is read directly, checking what the models would
# check. Anything else goes down the validating path, which alone words errors: a value of another
# type (even one pydantic would convert), a field spelled by its Python name, the deprecated
# credentialProviders (which log a warning), a profile offering nothing the config has, or any
# error while building the plan. tests/test_access.py compares both paths on generated profiles.

#: Fields the models also accept under their Python names (``populate_by_name``); which spelling
#: wins when a dict has both is pydantic's business.
_PYTHON_SPELLINGS = frozenset(
    name
    for model in (ClusterProfile, ObjectMeta, ClusterProfileStatus, AccessProvider, KubeconfigCluster, NamedExtension)
    for name, info in model.model_fields.items()
    if info.alias is not None and info.alias != name
)
_META_TEXT = ("name", "namespace", "uid", "resourceVersion")
_CLUSTER_TEXT = ("server", "tls-server-name", "certificate-authority", "proxy-url")
_CLUSTER_FLAGS = ("insecure-skip-tls-verify", "disable-compression")

#: What a plan is built from: (server, tls_server_name, insecure_skip_tls_verify,
#: certificate_authority_data, proxy_url, disable_compression, {extension name: value}).
_Source = tuple[str, str, bool, bytes, str, bool, dict[str, Any]]


class _NotPlain(Exception):
    """The profile dict is not one the direct reading handles."""


def _resolve_plain(config: ProviderConfig, profile: dict[str, Any]) -> AccessPlan | None:
    """The plan for a well-formed profile dict, or None (or any exception) for the validating path."""
    offered = _read_plain(profile)
    for entry in config.providers:
        if entry.name in offered:
            # The ref is only for errors, and errors here are the validating path's to raise.
            return _plan(entry, entry.name, offered[entry.name], "")
    return None


def _read_plain(profile: dict[str, Any]) -> dict[str, _Source | None]:
    """Access-provider name -> its cluster, for a profile dict the models would accept unchanged."""
    if not _PYTHON_SPELLINGS.isdisjoint(profile):
        raise _NotPlain
    if type(profile.get("apiVersion", "")) is not str or type(profile.get("kind", "")) is not str:
        raise _NotPlain
    meta = profile.get("metadata")
    if meta is not None:
        if type(meta) is not dict or not _PYTHON_SPELLINGS.isdisjoint(meta):
            raise _NotPlain
        for key in _META_TEXT:
            if type(meta.get(key, "")) is not str:
                raise _NotPlain
        generation = meta.get("generation")
        if generation is not None and type(generation) is not int:
            raise _NotPlain
    spec = profile.get("spec")
    if spec is not None and (type(spec) is not dict or not all(type(key) is str for key in spec)):
        raise _NotPlain
    status = profile.get("status")
    if type(status) is not dict or not _PYTHON_SPELLINGS.isdisjoint(status):
        raise _NotPlain
    deprecated = status.get("credentialProviders")
    if deprecated is not None and not (type(deprecated) in (list, tuple) and not deprecated):
        raise _NotPlain
    providers = status.get("accessProviders")
    if type(providers) is not list and type(providers) is not tuple:
        raise _NotPlain
    offered: dict[str, _Source | None] = {}
    for provider in providers:
        if type(provider) is not dict or not _PYTHON_SPELLINGS.isdisjoint(provider):
            raise _NotPlain
        name = provider.get("name")
        if type(name) is not str:
            raise _NotPlain
        cluster = provider.get("cluster")
        offered[name] = None if cluster is None else _read_plain_cluster(cluster)
    return offered


def _read_plain_cluster(cluster: Any) -> _Source:
    if type(cluster) is not dict or not _PYTHON_SPELLINGS.isdisjoint(cluster):
        raise _NotPlain
    for key in _CLUSTER_TEXT:
        if type(cluster.get(key, "")) is not str:
            raise _NotPlain
    for key in _CLUSTER_FLAGS:
        if type(cluster.get(key, False)) is not bool:
            raise _NotPlain
    ca_text = cluster.get("certificate-authority-data", "")
    if type(ca_text) is not str:
        raise _NotPlain
    ca_data = base64.b64decode(ca_text, validate=True) if ca_text else b""  # binascii.Error: not plain
    extensions: dict[str, Any] = {}
    listed = cluster.get("extensions")
    if listed is not None:
        if type(listed) is not list and type(listed) is not tuple:
            raise _NotPlain
        for extension in listed:
            if type(extension) is not dict or type(extension.get("name")) is not str:
                raise _NotPlain
            extensions[extension["name"]] = extension.get("extension")
    return (
        cluster.get("server", ""),
        cluster.get("tls-server-name", ""),
        cluster.get("insecure-skip-tls-verify", False),
        ca_data,
        cluster.get("proxy-url", ""),
        cluster.get("disable-compression", False),
        extensions,
    )


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


def _frozen(value: Any, where: str, ref: str) -> Any:
    problem: str | None = None
    try:
        return plain_copy(value)
    except ValueError as exc:
        problem = str(exc)
    raise ProfileError(f"{where}: {problem}", profile=ref)


_NO_OPTIONS: Mapping[str, Any] = MappingProxyType({})  # read-only: every exec plan can share it

#: id(entry) -> (entry, its ExecSpec before profile-sourced args and env). Entries are frozen,
#: so the spec never goes stale; holding the entry keeps its id from being reused.
_CONFIGURED_SPECS: dict[int, tuple[ProviderEntry, ExecSpec]] = {}
_MAX_CONFIGURED_SPECS = 1024


def _configured_spec(entry: ProviderEntry) -> ExecSpec:
    """The entry's ExecSpec as configured, one per entry: every plan of the entry shares it (and
    so the cached end of its key, see :func:`_key_tail`) unless its profile adds args or env."""
    cached = _CONFIGURED_SPECS.get(id(entry))
    if cached is not None and cached[0] is entry:
        return cached[1]
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
    if len(_CONFIGURED_SPECS) >= _MAX_CONFIGURED_SPECS:  # configs reloaded many times over
        _CONFIGURED_SPECS.clear()
    _CONFIGURED_SPECS[id(entry)] = (entry, spec)
    return spec


def _plan(entry: ProviderEntry, name: str, source: _Source | None, ref: str) -> AccessPlan:
    if source is None:
        raise ProfileError(f"{_cluster_at(name)} is missing", profile=ref)
    server, tls_server_name, insecure_skip_tls_verify, ca_data, proxy_url, disable_compression, extensions = source
    if not server:
        raise ProfileError(f"{_cluster_at(name)}.server is empty", profile=ref)
    # A deep, read-only copy: neither the caller (changing its profile dict after resolve) nor a
    # provider (changing plan.cluster.config) can change the plan or its key.
    config = extensions.get(EXEC_EXTENSION)
    if config is not None:
        config = _frozen(config, f"{_cluster_at(name)}.extensions[{EXEC_EXTENSION}]", ref)
    # The values were checked as the profile was read (by the models or the direct reading).
    cluster = ExecCluster._of_validated(server, tls_server_name, insecure_skip_tls_verify, ca_data, proxy_url, disable_compression, config)
    if entry.exec_config is None:
        return AccessPlan(
            provider=entry.name,
            kind=entry.kind,
            cluster=cluster,
            options=MappingProxyType(plain_copy(dict(entry.options))),
            timeout=entry.timeout,
        )
    spec = _configured_spec(entry)
    args, env, changed = spec.args, spec.env, False
    if entry.profile_sourced_cli_args_policy == "Append" and ADDITIONAL_ARGS_EXTENSION in extensions:
        where = f"{_cluster_at(name)}.extensions[{ADDITIONAL_ARGS_EXTENSION}]"
        args, changed = args + parse_additional_args(extensions[ADDITIONAL_ARGS_EXTENSION], where, ref), True
    policy = entry.profile_sourced_env_vars_policy
    if policy != "Ignore" and ADDITIONAL_ENVS_EXTENSION in extensions:
        where = f"{_cluster_at(name)}.extensions[{ADDITIONAL_ENVS_EXTENSION}]"
        extra = _additional_envs(extensions[ADDITIONAL_ENVS_EXTENSION], where, ref)
        env, changed = _merge_env(env, extra, profile_wins=policy == "Replace"), True
    if changed:
        spec = dataclasses.replace(spec, args=args, env=env)
    return AccessPlan._of_resolved(entry.name, "exec", cluster, spec, _NO_OPTIONS, entry.timeout)


def _cluster_at(name: str) -> str:
    return f"status.accessProviders[name={name}].cluster"


#: Longest profile-sourced argument or variable value, and most of them (a plugin's argv and
#: environment share the kernel's ARG_MAX, typically 2 MiB).
MAX_PROFILE_VALUE_CHARS = 64 * 1024
MAX_PROFILE_ITEMS = 256


def _scalar_text(value: Any) -> str | None:
    # YAML/JSON scalars become strings as Go's yaml.v3 decodes them into a []string / map[string]string.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if value.bit_length() <= 64 else None
    if isinstance(value, float):
        return repr(value) if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, str):
        return value
    return None


def _check_text(text: str, what: str, ref: str) -> None:
    problem = unpassable_text(text)
    if problem is None and len(text) > MAX_PROFILE_VALUE_CHARS:
        problem = f"is longer than {MAX_PROFILE_VALUE_CHARS} characters"
    if problem is not None:
        raise ProfileError(f"{what} {problem}", profile=ref)


#: The key of additional-args' object form: ``{args: [...]}``.
ADDITIONAL_ARGS_KEY = "args"


def additional_args_form(raw: Any) -> Literal["list", "object"] | None:
    """Which form an additional-args extension value is written in: ``"list"`` (KEP-5339's
    string array, which the published ClusterProfile CRD cannot store: its ``extension`` is
    ``type: object``), ``"object"`` (``{args: [...]}``, the storable form), or None (absent or
    null, or neither form: :func:`parse_additional_args` says what is wrong with it)."""
    if isinstance(raw, (list, tuple)):
        return "list"
    if isinstance(raw, Mapping):
        return "object"
    return None


def parse_additional_args(raw: Any, where: str, ref: str) -> tuple[str, ...]:
    """The arguments of an additional-args extension value, in either form (see
    :func:`additional_args_form`); None and ``{}`` hold none. Anything else raises
    :class:`~cpcreds.errors.ProfileError` naming ``ref`` (the profile) and ``where`` (the
    extension), and what is wrong in it, never the value."""
    if raw is None:
        return ()
    if isinstance(raw, Mapping):
        for key in raw:
            if key != ADDITIONAL_ARGS_KEY:
                raise ProfileError(
                    f"{where}: key {_show_name(key)} is not allowed (the object form holds only {ADDITIONAL_ARGS_KEY}: a list of strings)",
                    profile=ref,
                )
        raw, where = raw.get(ADDITIONAL_ARGS_KEY), f"{where}.{ADDITIONAL_ARGS_KEY}"
        if raw is None:
            return ()
    elif not isinstance(raw, (list, tuple)):
        raise ProfileError(f"{where} must be a list of strings, or an object {{{ADDITIONAL_ARGS_KEY}: [...]}}", profile=ref)
    if not isinstance(raw, (list, tuple)):
        raise ProfileError(f"{where} must be a list of strings", profile=ref)
    if len(raw) > MAX_PROFILE_ITEMS:
        raise ProfileError(f"{where} has more than {MAX_PROFILE_ITEMS} items", profile=ref)
    args = []
    for index, item in enumerate(raw):
        text = _scalar_text(item)
        if text is None:
            raise ProfileError(f"{where}[{index}] must be a string", profile=ref)
        _check_text(text, f"{where}[{index}]", ref)
        args.append(text)
    return tuple(args)


def _show_name(name: Any) -> str:
    if isinstance(name, str) and len(name) <= 64 and name.isprintable():
        return repr(name)
    return "(a name that is not shown)"


def _additional_envs(raw: Any, where: str, ref: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ProfileError(f"{where} must be a map of strings", profile=ref)
    if len(raw) > MAX_PROFILE_ITEMS:
        raise ProfileError(f"{where} has more than {MAX_PROFILE_ITEMS} entries", profile=ref)
    envs = {}
    for name, value in raw.items():
        text = _scalar_text(value)
        if not isinstance(name, str) or text is None:
            raise ProfileError(f"{where}: entry {_show_name(name)} must map a variable name to a string", profile=ref)
        if not name:
            raise ProfileError(f"{where}: a variable name is empty", profile=ref)
        if not _PORTABLE_ENV_NAME.fullmatch(name):
            reason = "is not a portable variable name (letters, digits and _, not starting with a digit)"
            raise ProfileError(f"{where}: variable {_show_name(name)} {reason}", profile=ref)
        if is_denied_env_name(name):
            raise ProfileError(
                f"{where}: variable {name} may not be set by a ClusterProfile "
                "(it changes what the plugin's loader, interpreter or shell runs, or whom it trusts)",
                profile=ref,
            )
        _check_text(text, f"{where}: the value of {name}", ref)
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
