"""The plan: everything needed to get one credential, frozen, and the cache key of the engine.

:class:`AccessPlan` (with its :class:`ExecSpec` and :class:`~cpcreds.kep.ExecCluster`) is what
:func:`cpcreds.config.access.resolve` builds and every provider receives. Two profiles that resolve to
equal plans share one credential, as client-go shares one authenticator per exec config and
cluster. This module is part of the base: it imports no pydantic, settings, metrics, logging
library or kubernetes (tests/test_imports.py checks it).
"""

from __future__ import annotations

import base64
import json
import re
import weakref
from collections.abc import Iterable, Mapping
from json.encoder import encode_basestring_ascii
from types import MappingProxyType
from typing import Any

from dataclasses import dataclass, field
from .kep import ExecCluster
from ._patterns import LazyPattern
from .logs import redact_text

#: Fills a slotted record's fields past its frozen ``__setattr__`` (as its ``__init__`` does).
_set = object.__setattr__

__all__ = [
    "IdentityCache",
    "ExecSpec",
    "AccessPlan",
    "ExecCluster",
    "cluster_to_wire",
    "cluster_json",
    "compact_json",
    "json_value",
    "mask_args",
    "mask_env",
    "MASK",
]

# One encoder for every plan key: json.dumps with options builds a new encoder on each call.
KEY_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str)

#: What masked values are replaced with.
MASK = "***"
_SECRET_FLAG = LazyPattern(  # compiled by the first plan shown (mask_args): a credential's run needs none
    r"--?(?:[A-Za-z0-9_.-]*(?:password|passwd|secret|token|api[-_]?key|access[-_]?key|private[-_]?key|credential)[A-Za-z0-9_.-]*"
    r"|[A-Za-z0-9_.-]*key)",
    re.IGNORECASE,
)




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


@dataclass(frozen=True, slots=True, weakref_slot=True, repr=False)  # weakref: key tails are cached per spec
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
    """``encoder.encode(value)``; a string, a boolean, None or a dict of strings (an exec
    extension's ``clusterName``, say) written here (see compact_json)."""
    if type(value) is str:
        return encode_basestring_ascii(value)
    if value is True or value is False or value is None:
        return "true" if value else "false" if value is False else "null"
    if type(value) is dict and all(type(name) is str and type(item) is str for name, item in value.items()):
        return compact_json(value, encoder)
    return encoder.encode(value)


def cluster_json(cluster: ExecCluster, encoder: json.JSONEncoder) -> str:
    """``compact_json(cluster_to_wire(cluster), encoder)``: for the usual cluster, a server URL
    and perhaps the exec extension's config, written without building the mapping (a config of
    strings, such as KEP-5339's ``clusterName``, without starting the JSON encoder either)."""
    server = cluster.server
    if (
        type(server) is str
        and not cluster.tls_server_name
        and not cluster.insecure_skip_tls_verify
        and not cluster.certificate_authority_data
        and not cluster.proxy_url
        and not cluster.disable_compression
    ):
        config = cluster.config
        if config is None:
            return '{"server":' + encode_basestring_ascii(server) + "}"
        written = json_value(config, encoder)
        if encoder.sort_keys:  # "config" sorts before "server"
            return '{"config":' + written + ',"server":' + encode_basestring_ascii(server) + "}"
        return '{"server":' + encode_basestring_ascii(server) + ',"config":' + written + "}"
    return compact_json(cluster_to_wire(cluster), encoder)


@dataclass(frozen=True, eq=False, slots=True)
class AccessPlan:
    """Everything needed to get one credential, frozen; equal plans share a cached credential.

    ``provider`` is the access-provider name, ``kind`` ``"exec"`` or an in-process provider type.
    ``exec`` is set for exec plugins, ``options`` for in-process providers. ``cluster`` is always
    the profile's cluster (adapters need its server); it is part of the identity only when the
    provider can see it (in-process providers, or ``provideClusterInfo: true``), so a plugin that
    cannot tell clusters apart runs once for all of them. Slotted: a fleet holds one per profile,
    and an instance without a ``__dict__`` is smaller (a field read is no slower).
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


    def __eq__(self, other: object) -> bool:
        return isinstance(other, AccessPlan) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def to_dict(self, show_values: bool = False) -> dict[str, Any]:
        """The plan as ``cpcreds resolve`` prints it: env values and secret-looking args are
        ``***`` (see :func:`mask_args`) unless ``show_values``. A new, mutable structure."""
        cluster = json.loads(json.dumps(cluster_to_wire(self.cluster)))
        if not show_values:  # a password or token inside a URL, as every URL cpcreds shows
            from ._show import shown_url

            for name in ("server", "proxy-url"):
                if name in cluster:
                    cluster[name] = shown_url(cluster[name])
        out: dict[str, Any] = {"provider": self.provider, "cluster": cluster}
        if self.exec is not None:
            out["exec"] = self.exec.to_dict(show_values=show_values)
        else:
            out["type"] = self.kind
            out["options"] = json.loads(json.dumps(dict(self.options), default=str))
        return out


def _plan_key(plan: AccessPlan, tail_owner: object | None = None) -> str:
    """The JSON of {cluster, exec, kind, options, provider, timeout} with sorted keys (the
    cluster only where the provider sees it); all but the cluster is the same for every plan of
    a config entry, so it is encoded once (see :func:`_key_tail`)."""
    sees_cluster = plan.exec is None or plan.exec.provide_cluster_info
    cluster = cluster_json(plan.cluster, KEY_ENCODER) if sees_cluster else "null"
    return '{"cluster":' + cluster + "," + _key_tail(plan, tail_owner)


class IdentityCache:
    """Values derived from objects, found by the object's identity and forgotten when the object
    is collected: a reloaded config's entries (and their specs) leave no trace behind, however
    often it is reloaded. The objects must be weakly referenceable (or None, never collected);
    ``extra`` parts of a key tell apart values derived from one object in several ways."""

    __slots__ = ("_values",)

    def __init__(self) -> None:
        #: (id(object), *extra) -> (a weak reference to the object, or None, the value)
        self._values: dict[tuple[Any, ...], tuple[Any, Any]] = {}

    def get(self, obj: object, *extra: Any) -> Any:
        """The value remembered for ``obj`` (and ``extra``), or None."""
        found = self._values.get((id(obj), *extra))
        if found is None:
            return None
        held = found[0]
        return found[1] if (obj if held is None else held()) is obj else None

    def put(self, obj: object, value: Any, *extra: Any) -> None:
        key = (id(obj), *extra)
        if obj is None:
            self._values[key] = (None, value)
            return
        if key not in self._values:
            # Dropped when obj is collected, before its id can be another object's.
            weakref.finalize(obj, self._values.pop, key, None)
        self._values[key] = (weakref.ref(obj), value)

    def __len__(self) -> int:
        return len(self._values)


#: What a key tail stands for -> key tail: plan_of_resolved's ``tail_owner`` (a config entry), else
#: the exec spec with the provider, kind and timeout.
_KEY_TAILS = IdentityCache()


def _key_tail(plan: AccessPlan, owner: object | None = None) -> str:
    """Everything of ``plan.key`` after the cluster: ``"exec":...,"timeout":...}``. Remembered
    per ``owner`` when one is given, else per exec spec for plans without options."""
    spec = plan.exec
    held: object | None = None
    extra: tuple[Any, ...] = ()
    if owner is not None:
        cached, held = True, owner
    elif not plan.options and type(plan.provider) is str and type(plan.kind) is str and type(plan.timeout) is float:
        cached, held, extra = True, spec, (plan.provider, plan.kind, plan.timeout)
    else:
        cached = False
    if cached:
        tail = _KEY_TAILS.get(held, *extra)
        if tail is not None:
            return tail  # type: ignore[no-any-return]
    identity = {
        "exec": None if spec is None else {**spec.to_dict(show_values=True), "installHint": spec.install_hint},
        "kind": plan.kind,
        "options": dict(plan.options),
        "provider": plan.provider,
        "timeout": plan.timeout,
    }
    tail = KEY_ENCODER.encode(identity)[1:]
    if cached:
        _KEY_TAILS.put(held, tail, *extra)
    return tail


def plan_of_resolved(
    provider: str,
    kind: str,
    cluster: ExecCluster,
    exec: ExecSpec | None,
    options: Mapping[str, Any],
    timeout: float,
    *,
    tail_owner: object | None = None,
) -> AccessPlan:
    """``AccessPlan(...)`` with every field given, filled in one step rather than field by
    field through the frozen dataclass's ``__init__``: resolve builds one for every new
    profile, right after a plugin ran, when every step costs several times its usual.
    ``tail_owner``: an object (a config entry) that stands for everything but the cluster
    (``exec``, ``kind``, ``options``, ``provider``, ``timeout``: the caller promises every plan it
    builds with that owner has the same), so the key's part after the cluster is encoded once
    per owner, options or not."""
    plan = object.__new__(AccessPlan)
    _set(plan, "provider", provider)
    _set(plan, "kind", kind)
    _set(plan, "cluster", cluster)
    _set(plan, "exec", exec)
    _set(plan, "options", options)
    _set(plan, "timeout", timeout)
    _set(plan, "key", _plan_key(plan, tail_owner))
    return plan
