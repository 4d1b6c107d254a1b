"""The kubelet's ``CredentialProviderConfig`` (``--image-credential-provider-config``), read and
validated as the kubelet reads and validates it.

The file (YAML or JSON) or a directory of them (``*.json``, ``*.yaml``, ``*.yml`` in lexicographic
order, their providers concatenated, as kubelets since 1.33 accept)::

    apiVersion: kubelet.config.k8s.io/v1          # or v1beta1, v1alpha1
    kind: CredentialProviderConfig
    providers:
    - name: ecr-credential-provider               # an executable in the bin dir
      matchImages: ["*.dkr.ecr.*.amazonaws.com"]
      defaultCacheDuration: 12h
      apiVersion: credentialprovider.kubelet.k8s.io/v1
      args: [get-credentials]
      env: [{name: AWS_PROFILE, value: nodes}]
      tokenAttributes:                            # config v1 and credentialprovider v1 only
        serviceAccountTokenAudience: sts.amazonaws.com
        requireServiceAccount: true
        requiredServiceAccountAnnotationKeys: [eks.amazonaws.com/role-arn]
        optionalServiceAccountAnnotationKeys: []
        cacheType: ServiceAccount                 # or Token

The rules are ``validateCredentialProviderConfig`` (pkg/credentialprovider/plugin/config.go) and
the kubelet's strict decoding (unknown fields are errors), plus what the kubelet only finds out
later: every matchImages glob must be well formed, env names and args must be passable to a
process. ``<bin dir>/<name>`` must be an executable file, checked at load time as the kubelet
checks it at start-up. Every error is a :class:`~cpcreds.ConfigError` naming the file, the
provider and the field (``providers[1].matchImages[0]``).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..config.documents import Limits, load_or_raise, read_or_raise
from .._show import shown
from ..config import json_type_name
from ..errors import ConfigError
from .match import Pattern, PatternError, compile_pattern
from ..config.durations import parse_duration
from .protocol import API_VERSION_V1, SUPPORTED_API_VERSIONS

__all__ = [
    "CONFIG_API_VERSIONS",
    "CONFIG_KIND",
    "TOKEN_CACHE_TYPES",
    "MAX_CONFIG_BYTES",
    "TokenAttributes",
    "CredentialProvider",
    "CredentialProviderConfig",
    "load_credential_provider_config",
    "parse_credential_provider_config",
]

#: The apiVersions of the config file itself (the kubelet's config API group).
CONFIG_API_VERSIONS: Final = ("kubelet.config.k8s.io/v1", "kubelet.config.k8s.io/v1beta1", "kubelet.config.k8s.io/v1alpha1")
_CONFIG_API_VERSION_V1 = CONFIG_API_VERSIONS[0]
CONFIG_KIND: Final = "CredentialProviderConfig"
#: tokenAttributes.cacheType: cache per service account, or per token.
TOKEN_CACHE_TYPES: Final = ("ServiceAccount", "Token")
#: The bounds on a node's config (a few KiB): at most 1 MiB, nesting 32 deep, 100 YAML aliases
#: and 100,000 values once they are expanded.
CONFIG_LIMITS: Final = Limits(max_bytes=1024 * 1024, max_depth=32, max_aliases=100, max_nodes=100_000)
MAX_CONFIG_BYTES: Final = CONFIG_LIMITS.max_bytes
_CONFIG_SUFFIXES = (".json", ".yaml", ".yml")

_TOP_FIELDS = frozenset({"apiVersion", "kind", "providers"})
_PROVIDER_FIELDS = ("name", "matchImages", "defaultCacheDuration", "apiVersion", "args", "env", "tokenAttributes")
_TOKEN_FIELDS = (
    "serviceAccountTokenAudience",
    "requireServiceAccount",
    "requiredServiceAccountAnnotationKeys",
    "optionalServiceAccountAnnotationKeys",
    "cacheType",
)
# Kubernetes' IsQualifiedName: [prefix/]name, prefix a DNS-1123 subdomain, name at most 63.
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_SHOWABLE = re.compile(r"[A-Za-z0-9_.:/*@\[\]\-]{1,100}")


@dataclass(frozen=True)
class TokenAttributes:
    """``tokenAttributes``: the plugin wants the pod's service-account token in its request."""

    service_account_token_audience: str
    require_service_account: bool
    required_service_account_annotation_keys: tuple[str, ...] = ()
    optional_service_account_annotation_keys: tuple[str, ...] = ()
    cache_type: str = "ServiceAccount"


@dataclass(frozen=True)
class CredentialProvider:
    """One ``providers[]`` entry, validated. ``executable`` is ``<bin dir>/<name>``;
    ``default_cache_duration`` is in seconds; ``env`` keeps the configured order."""

    name: str
    match_images: tuple[str, ...]
    default_cache_duration: float
    api_version: str
    executable: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    token_attributes: TokenAttributes | None = None
    #: The file this entry came from (a directory config has several).
    source: str = ""
    #: Its position in ``providers`` of that file, for messages.
    index: int = field(default=0, compare=False)
    patterns: tuple[Pattern, ...] = field(default=(), compare=False, repr=False)

    def matches(self, target: Any) -> bool:
        """Does any matchImages pattern match ``target`` (a :class:`~.match.ParsedURL`)?"""
        return any(pattern.matches(target) for pattern in self.patterns)


@dataclass(frozen=True)
class CredentialProviderConfig:
    """A validated CredentialProviderConfig: providers in config order (an earlier provider wins
    a registry key both answer)."""

    providers: tuple[CredentialProvider, ...]
    source: str
    bin_dir: str


def _shown(value: Any) -> str:
    return shown(value, limit=100, shape=_SHOWABLE)


class _Reader:
    """Validates one file's document; ``fail`` builds the ConfigError naming where."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, message: str, *, entry: str | None = None, where: str | None = None) -> ConfigError:
        return ConfigError(message, source=self.source, entry=entry, field=where)

    def string(self, value: Any, entry: str | None, where: str, *, required: bool = True) -> str:
        if value is None and not required:
            return ""
        if not isinstance(value, str):
            raise self.fail(f"must be a string, not {json_type_name(value)}", entry=entry, where=where)
        if "\x00" in value:
            raise self.fail("must not contain a NUL character", entry=entry, where=where)
        return value

    def strings(self, value: Any, entry: str | None, where: str) -> tuple[str, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            raise self.fail(f"must be a list of strings, not {json_type_name(value)}", entry=entry, where=where)
        return tuple(self.string(item, entry, f"{where}[{index}]") for index, item in enumerate(value))

    def mapping(self, value: Any, known: Sequence[str] | frozenset[str], entry: str | None, where: str | None) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(f"must be a mapping, not {json_type_name(value)}", entry=entry, where=where)
        for key in value:
            if key not in known:
                prefix = f"{where}." if where else ""
                raise self.fail(
                    f"unknown field (the kubelet decodes strictly; known: {', '.join(sorted(known))})",
                    entry=entry,
                    where=prefix + (key if _SHOWABLE.fullmatch(key) else "<unprintable>"),
                )
        return value

    def duration(self, value: Any, entry: str | None, where: str) -> float:
        if not isinstance(value, str):
            raise self.fail(
                f"must be a duration string such as 12h, 30m or 0s, not {json_type_name(value)} (a bare number has no unit)",
                entry=entry,
                where=where,
            )
        problem = None
        try:
            return parse_duration(value)
        except ValueError as exc:
            problem = str(exc)
        raise self.fail(problem, entry=entry, where=where)


def _provider_name(reader: _Reader, raw: Any, where: str) -> str:
    name = reader.string(raw, None, where)
    if not name:
        raise reader.fail("is required (the name of the plugin's executable in the bin dir)", where=where)
    shown = _shown(name)
    if "/" in name:
        raise reader.fail(f"provider name {shown} cannot contain '/'", where=where)
    if " " in name:
        raise reader.fail(f"provider name {shown} cannot contain spaces", where=where)
    if name in (".", ".."):
        raise reader.fail(f"provider name cannot be {name!r}", where=where)
    return name


def _annotation_keys(reader: _Reader, raw: Any, entry: str, where: str) -> tuple[str, ...]:
    keys = reader.strings(raw, entry, where)
    seen: set[str] = set()
    for index, key in enumerate(keys):
        # IsQualifiedName, case-insensitive as annotation keys are.
        prefix, slash, name = key.lower().rpartition("/")
        valid = bool(name) and len(name) <= 63 and _QUALIFIED_NAME.fullmatch(name) is not None
        if slash:
            valid = valid and bool(prefix) and len(prefix) <= 253 and _DNS_SUBDOMAIN.fullmatch(prefix) is not None
        if not valid or key.count("/") > 1:
            raise reader.fail(f"{_shown(key)} is not a valid annotation key ([prefix/]name)", entry=entry, where=f"{where}[{index}]")
        if key in seen:
            raise reader.fail(f"duplicate annotation key {_shown(key)}", entry=entry, where=f"{where}[{index}]")
        seen.add(key)
    return keys


def _token_attributes(reader: _Reader, raw: Any, entry: str, where: str, api_version: str) -> TokenAttributes:
    data = reader.mapping(raw, _TOKEN_FIELDS, entry, where)
    if api_version != API_VERSION_V1:
        raise reader.fail(f"tokenAttributes is only supported for {API_VERSION_V1} API version", entry=entry, where=where)
    audience = reader.string(data.get("serviceAccountTokenAudience"), entry, f"{where}.serviceAccountTokenAudience", required=False)
    if not audience:
        raise reader.fail("is required", entry=entry, where=f"{where}.serviceAccountTokenAudience")
    require = data.get("requireServiceAccount")
    if require is None:
        raise reader.fail("is required (true or false)", entry=entry, where=f"{where}.requireServiceAccount")
    if not isinstance(require, bool):
        raise reader.fail(f"must be true or false, not {json_type_name(require)}", entry=entry, where=f"{where}.requireServiceAccount")
    required = _annotation_keys(reader, data.get("requiredServiceAccountAnnotationKeys"), entry, f"{where}.requiredServiceAccountAnnotationKeys")
    optional = _annotation_keys(reader, data.get("optionalServiceAccountAnnotationKeys"), entry, f"{where}.optionalServiceAccountAnnotationKeys")
    if required and not require:
        raise reader.fail(
            "requireServiceAccount cannot be false when requiredServiceAccountAnnotationKeys is set",
            entry=entry,
            where=f"{where}.requiredServiceAccountAnnotationKeys",
        )
    both = sorted(set(required) & set(optional))
    if both:
        raise reader.fail(f"annotation keys cannot be both required and optional: {', '.join(_shown(k) for k in both)}", entry=entry, where=where)
    cache_type = data.get("cacheType")
    if cache_type is None or cache_type == "":
        raise reader.fail(f"is required when tokenAttributes is set; one of {', '.join(TOKEN_CACHE_TYPES)}", entry=entry, where=f"{where}.cacheType")
    if cache_type not in TOKEN_CACHE_TYPES:
        raise reader.fail(f"{_shown(cache_type)} is not supported; one of {', '.join(TOKEN_CACHE_TYPES)}", entry=entry, where=f"{where}.cacheType")
    return TokenAttributes(audience, require, required, optional, cache_type)


def _env(reader: _Reader, raw: Any, entry: str, where: str) -> tuple[tuple[str, str], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise reader.fail(f"must be a list of {{name, value}}, not {json_type_name(raw)}", entry=entry, where=where)
    env: list[tuple[str, str]] = []
    for index, item in enumerate(raw):
        here = f"{where}[{index}]"
        data = reader.mapping(item, ("name", "value"), entry, here)
        name = reader.string(data.get("name"), entry, f"{here}.name", required=False)
        if not name or "=" in name:
            raise reader.fail("must be a non-empty variable name without '='", entry=entry, where=f"{here}.name")
        value = reader.string(data.get("value"), entry, f"{here}.value", required=False)
        env.append((name, value))
    return tuple(env)


def _provider(reader: _Reader, raw: Any, index: int, bin_dir: str, config_api_version: str) -> CredentialProvider:
    where = f"providers[{index}]"
    if not isinstance(raw, dict):
        raise reader.fail(f"must be a mapping, not {json_type_name(raw)}", where=where)
    name = _provider_name(reader, raw.get("name"), f"{where}.name")
    if "tokenAttributes" in raw and config_api_version != _CONFIG_API_VERSION_V1:
        # v1alpha1 and v1beta1 have no such field, and the kubelet decodes strictly.
        raise reader.fail(
            f"is not a field of {config_api_version} (the kubelet decodes strictly; tokenAttributes exists only in {_CONFIG_API_VERSION_V1})",
            entry=name,
            where=f"{where}.tokenAttributes",
        )
    data = reader.mapping(raw, _PROVIDER_FIELDS, name, where)
    api_version = data.get("apiVersion")
    if api_version is None or api_version == "":
        raise reader.fail(f"is required; one of {', '.join(SUPPORTED_API_VERSIONS)}", entry=name, where=f"{where}.apiVersion")
    if api_version not in SUPPORTED_API_VERSIONS:
        raise reader.fail(f"{_shown(api_version)} is not supported; one of {', '.join(SUPPORTED_API_VERSIONS)}", entry=name, where=f"{where}.apiVersion")
    match_images = reader.strings(data.get("matchImages"), name, f"{where}.matchImages")
    if not match_images:
        raise reader.fail("at least 1 item in matchImages is required", entry=name, where=f"{where}.matchImages")
    patterns = []
    for position, text in enumerate(match_images):
        here = f"{where}.matchImages[{position}]"
        if not text:
            raise reader.fail("match image is empty", entry=name, where=here)
        problem = None
        try:
            patterns.append(compile_pattern(text))
        except PatternError as exc:
            problem = f"match image {_shown(text)} is invalid: {exc}"
        if problem is not None:
            raise reader.fail(problem, entry=name, where=here)
    if data.get("defaultCacheDuration") is None:
        raise reader.fail("is required (e.g. 12h, or 0s not to cache)", entry=name, where=f"{where}.defaultCacheDuration")
    default_cache_duration = reader.duration(data["defaultCacheDuration"], name, f"{where}.defaultCacheDuration")
    if default_cache_duration < 0:
        raise reader.fail("defaultCacheDuration must be greater than or equal to 0", entry=name, where=f"{where}.defaultCacheDuration")
    args = reader.strings(data.get("args"), name, f"{where}.args")
    env = _env(reader, data.get("env"), name, f"{where}.env")
    token_attributes = None
    if data.get("tokenAttributes") is not None:
        token_attributes = _token_attributes(reader, data["tokenAttributes"], name, f"{where}.tokenAttributes", api_version)
    return CredentialProvider(
        name=name,
        match_images=match_images,
        default_cache_duration=default_cache_duration,
        api_version=api_version,
        executable=os.path.join(bin_dir, name),
        args=args,
        env=env,
        token_attributes=token_attributes,
        source=reader.source,
        index=index,
        patterns=tuple(patterns),
    )


def parse_credential_provider_config(document: Any, *, source: str, bin_dir: str) -> list[CredentialProvider]:
    """Validate one decoded document (a mapping) and return its providers; does not look at the
    bin dir (see :func:`load_credential_provider_config`)."""
    reader = _Reader(source)
    if document is None:
        raise reader.fail("is empty; expected a CredentialProviderConfig")
    data = reader.mapping(document, _TOP_FIELDS, None, None)
    kind = data.get("kind")
    if kind != CONFIG_KIND:
        raise reader.fail(f"kind is {_shown(kind) if kind is not None else 'missing'}, expected {CONFIG_KIND}", where="kind")
    api_version = data.get("apiVersion")
    if api_version not in CONFIG_API_VERSIONS:
        shown = _shown(api_version) if api_version is not None else "missing"
        raise reader.fail(f"apiVersion is {shown}, expected one of {', '.join(CONFIG_API_VERSIONS)}", where="apiVersion")
    raw_providers = data.get("providers")
    if raw_providers is None or raw_providers == []:
        raise reader.fail("at least 1 item in providers is required", where="providers")
    if not isinstance(raw_providers, list):
        raise reader.fail(f"must be a list, not {json_type_name(raw_providers)}", where="providers")
    providers: list[CredentialProvider] = []
    seen: set[str] = set()
    for index, raw in enumerate(raw_providers):
        provider = _provider(reader, raw, index, bin_dir, api_version)
        if provider.name in seen:
            raise reader.fail("duplicate provider name", entry=provider.name, where=f"providers[{index}].name")
        seen.add(provider.name)
        providers.append(provider)
    return providers


def _read_document(path: str) -> Any:
    def error(problem: str) -> ConfigError:
        return ConfigError(problem, source=path)

    data = read_or_raise(path, error, max_bytes=MAX_CONFIG_BYTES)
    return load_or_raise(data, error, source=path, syntax="json" if path.endswith(".json") else "auto", limits=CONFIG_LIMITS)


def _mode(path: str, missing: str, unreadable: str, fail: Callable[[str], ConfigError]) -> int:
    """``os.stat(path).st_mode``, or ``fail`` worded ``missing`` (it does not exist) or
    ``unreadable: <why>``."""
    problem: str | None = None
    try:
        return os.stat(path).st_mode
    except FileNotFoundError:
        problem = missing
    except OSError as exc:
        problem = f"{unreadable}: {exc.strerror or type(exc).__name__}"
    raise fail(problem)


def _at(source: str) -> Callable[[str], ConfigError]:
    return lambda problem: ConfigError(problem, source=source)


def _config_files(path: str) -> list[str]:
    if not stat.S_ISDIR(_mode(path, "file not found", "cannot read", _at(path))):
        return [path]
    problem = None
    try:
        names = sorted(os.listdir(path))
    except OSError as exc:
        problem = f"cannot read: {exc.strerror or type(exc).__name__}"
    if problem is not None:
        raise ConfigError(problem, source=path)
    files = [os.path.join(path, name) for name in names if name.endswith(_CONFIG_SUFFIXES) and not os.path.isdir(os.path.join(path, name))]
    if not files:
        raise ConfigError("no configuration files (*.json, *.yaml, *.yml) in this directory", source=path)
    return files


def _check_bin_dir(bin_dir: str) -> None:
    mode = _mode(bin_dir, "plugin binary directory did not exist", "cannot inspect the plugin binary directory", _at(bin_dir))
    if not stat.S_ISDIR(mode):
        raise ConfigError("is not a directory", source=bin_dir)


def _check_executable(provider: CredentialProvider) -> None:
    executable = provider.executable

    def fail(problem: str) -> ConfigError:
        return ConfigError(problem, source=provider.source, entry=provider.name, field=f"providers[{provider.index}].name")

    mode = _mode(executable, f"plugin binary executable {executable} did not exist", f"cannot inspect plugin binary {executable}", fail)
    if not stat.S_ISREG(mode):
        raise fail(f"plugin binary {executable} is not a file")
    if not os.access(executable, os.X_OK):
        raise fail(f"plugin binary {executable} is not executable")


def load_credential_provider_config(path: str | os.PathLike[str], bin_dir: str | os.PathLike[str]) -> CredentialProviderConfig:
    """Read, validate and check ``path`` (a file, or a directory of ``*.json``/``*.yaml``/``*.yml``
    files) against ``bin_dir``, as the kubelet does at start-up with its
    ``--image-credential-provider-config`` and ``--image-credential-provider-bin-dir``.

    Raises :class:`~cpcreds.ConfigError` naming the file, provider and field: a bad document or
    field (the kubelet's rules, strict about unknown fields), a provider name used twice (also
    across the files of a directory), a bin dir that does not exist, or a provider whose
    ``<bin_dir>/<name>`` is not an executable file.
    """
    source, bin_path = os.fspath(path), os.fspath(bin_dir)
    _check_bin_dir(bin_path)
    providers: list[CredentialProvider] = []
    first_seen: dict[str, str] = {}
    for file in _config_files(source):
        for provider in parse_credential_provider_config(_read_document(file), source=file, bin_dir=bin_path):
            if provider.name in first_seen:
                raise ConfigError(f"duplicate provider name (also in {first_seen[provider.name]})", source=file, entry=provider.name, field=f"providers[{provider.index}].name")
            first_seen[provider.name] = file
            providers.append(provider)
    for provider in providers:
        _check_executable(provider)
    return CredentialProviderConfig(tuple(providers), source, bin_path)

