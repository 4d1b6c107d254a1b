"""The settings of ``cpcreds serve``: command-line flags, ``CPCREDS_*`` environment variables and
the ``serve:`` section of the provider config file, in that order of precedence.

Every setting has one name per place: ``--profiles-dir`` on the command line,
``CPCREDS_PROFILES_DIR`` in the environment, ``profilesDir`` in the YAML section (``profiles_dir``
is accepted there too).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, InitSettingsSource, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict, SettingsError

from ..config import describe_validation_error, parse_duration
from ..errors import ConfigError
from ..shard import STATUS_URL

__all__ = ["ServeSettings", "UnusableFolder", "DEFAULT_LISTEN", "parse_listen"]

#: Loopback only by default: the status page and metrics name every cluster of the fleet.
DEFAULT_LISTEN = "127.0.0.1:9733"

_section: ContextVar[Mapping[str, Any]] = ContextVar("cpcreds_serve_section", default={})


class UnusableFolder(ConfigError):
    """A folder setting names something serve cannot use at start (``--profiles-dir`` missing,
    unreadable or a file; ``--kubeconfig-dir`` a file): a usage error, exit 2, like a bad flag."""

    def __init__(self, setting: str, path: object, reason: str) -> None:
        super().__init__(f"--{setting.replace('_', '-')} {path}: {reason}")


def _snake(key: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", lambda m: "_" + m.group(1).lower(), key)


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part.title() for part in rest)


class _SectionSource(InitSettingsSource):
    """The ``serve:`` section of the config file, its camelCase keys in the fields' spelling."""

    def __init__(self, settings_cls: type[BaseSettings]) -> None:
        section = {(_snake(k) if isinstance(k, str) else k): v for k, v in _section.get().items()}
        super().__init__(settings_cls, init_kwargs=section)


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as a (host, port) pair; port 0 picks a free one."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError("must be HOST:PORT, such as 127.0.0.1:9733")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return host or "127.0.0.1", int(port)


def _seconds(value: Any, what: str, *, allow_zero: bool = False) -> float:
    seconds = parse_duration(value) if isinstance(value, str) else float(value)
    if seconds < 0 or (seconds == 0 and not allow_zero) or seconds != seconds:
        raise ValueError(f"{what} must be longer than zero")
    return seconds


class ServeSettings(BaseSettings):
    """Everything ``cpcreds serve`` can be told. Durations are Go durations (``30s``, ``5m``)."""

    model_config = SettingsConfigDict(env_prefix="CPCREDS_", extra="forbid", validate_default=True)

    #: The provider config file (also read for this ``serve:`` section).
    config: Path | None = None
    #: Inventory: a folder of ClusterProfile YAML/JSON files (the default source), ...
    profiles_dir: Path | None = None
    #: ... or a hub's ClusterProfiles, with the credentials of this kubeconfig ...
    hub_kubeconfig: Path | None = None
    hub_context: str | None = None
    #: ... or of the pod's service account.
    in_cluster: bool = False
    #: Hub namespaces to watch (empty: all) and a label selector for the ClusterProfiles.
    namespaces: Annotated[list[str], NoDecode] = Field(default_factory=list)
    label_selector: str = ""
    #: How often the profiles folder is scanned for added, changed and removed files.
    scan_interval: float = 1.0
    #: Address of the HTTP endpoints (status page, /v1/clusters, /metrics, /healthz, /readyz).
    listen: str = DEFAULT_LISTEN
    #: Where to write one kubeconfig per profile and a merged one (unset: none written).
    kubeconfig_dir: Path | None = None
    #: Most credential fetches running at once.
    concurrency: int = Field(default=32, ge=1, le=4096)
    #: Refreshes are spread by up to this fraction of the time to the refresh point.
    refresh_jitter: float = Field(default=0.1, ge=0.0, le=0.5)
    #: Probe each cluster with its credential: GET this path (empty: no probes).
    probe_path: str = ""
    probe_interval: float = 60.0
    probe_timeout: float = 5.0
    #: Re-read the provider config when the file changes (and on SIGHUP, always).
    watch_config: bool = True
    #: Seconds a shutdown may take before plugin runs are killed.
    shutdown_timeout: float = 5.0
    #: Bound on one hub request (a list page, discovery, opening a watch) and on one run of the
    #: hub kubeconfig's own exec plugin.
    hub_timeout: float = 30.0
    #: HTTP: a connection idle this long between requests is closed; a request's line and
    #: headers must arrive within http_header_timeout; at most http_max_connections at once
    #: (and never more than half the descriptor limit).
    http_idle_timeout: float = 60.0
    http_header_timeout: float = 10.0
    http_max_connections: int = Field(default=512, ge=1, le=65536)
    #: The five per-profile series on /metrics: on, off, or None (auto) for on up to
    #: PER_PROFILE_METRICS_LIMIT profiles; the counts by state and provider are always there.
    per_profile_metrics: bool | None = None
    #: KEP-4322: act on one ClusterProfile per inventory member (the oldest; none when the
    #: oldest tie) and show the others as inventory problems. Off: every profile is its own cluster.
    dedupe: bool = True
    #: Split the inventory with the other replicas of ``shard_group``: one coordination.k8s.io/v1
    #: Lease per replica in ``shard_namespace`` on the hub (docs/sharding.md).
    shard: bool = False
    shard_namespace: str = "cpcreds-system"
    shard_group: str = "cpcreds"
    #: This replica's member name (unset: the pod name, else the host name, plus a random suffix).
    shard_identity: str | None = None
    #: client-go's leader-election knobs: a peer is dead when its Lease was not renewed for
    #: shard_lease_duration; a replica stops serving when its own renewal is shard_renew_deadline
    #: old; it renews every shard_retry_interval.
    shard_lease_duration: float = 15.0
    shard_renew_deadline: float = 10.0
    shard_retry_interval: float = 2.0
    #: Where peers send a request for this replica's profiles (unset: the --listen address, with
    #: POD_IP for an unspecified host).
    shard_status_url: str = ""
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["console", "json"] | None = None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _SectionSource(settings_cls))

    @field_validator("namespaces", mode="before")
    @classmethod
    def _namespace_list(cls, value: Any) -> Any:
        # CPCREDS_NAMESPACES=a,b and --namespaces a,b read as lists, as YAML does.
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator(
        "scan_interval",
        "probe_interval",
        "probe_timeout",
        "shutdown_timeout",
        "hub_timeout",
        "http_idle_timeout",
        "http_header_timeout",
        "shard_lease_duration",
        "shard_renew_deadline",
        "shard_retry_interval",
        mode="before",
    )
    @classmethod
    def _duration(cls, value: Any) -> float:
        return _seconds(value, "the duration")

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str) -> str:
        parse_listen(value)
        return value

    @field_validator("probe_path")
    @classmethod
    def _probe_path(cls, value: str) -> str:
        if value and (not value.startswith("/") or not value.isprintable() or " " in value):
            raise ValueError("must be an absolute URL path such as /version or /readyz")
        return value

    @field_validator("per_profile_metrics", mode="before")
    @classmethod
    def _auto(cls, value: Any) -> Any:
        return None if isinstance(value, str) and value.strip().lower() == "auto" else value

    @field_validator("log_level", "log_format", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _one_source(self) -> ServeSettings:
        chosen = [name for name, given in (("profilesDir", self.profiles_dir), ("hubKubeconfig", self.hub_kubeconfig), ("inCluster", self.in_cluster)) if given]
        if len(chosen) > 1:
            raise ValueError(f"choose one inventory source, not {' and '.join(chosen)}")
        if self.shard and self.source != "hub":
            raise ValueError("--shard needs the hub (--hub-kubeconfig or --in-cluster): the replicas' Leases live there")
        if self.shard and not 0 < self.shard_retry_interval < self.shard_renew_deadline < self.shard_lease_duration:
            raise ValueError("--shard-retry-interval must be shorter than --shard-renew-deadline, itself shorter than --shard-lease-duration")
        if self.shard_status_url and not STATUS_URL.fullmatch(self.shard_status_url):
            raise ValueError("--shard-status-url must be http(s)://HOST[:PORT], such as http://10.0.0.7:9733")
        return self

    @property
    def source(self) -> Literal["directory", "hub"]:
        return "hub" if self.hub_kubeconfig is not None or self.in_cluster else "directory"

    @classmethod
    def load(cls, flags: Mapping[str, Any], section: Mapping[str, Any] | None) -> ServeSettings:
        """Settings from the flags given (``None`` values are not given), the environment and the
        config's ``serve:`` section. A bad value is a :class:`~cpcreds.ConfigError` naming the
        setting in all three spellings."""
        given = {key: value for key, value in flags.items() if value is not None}
        token = _section.set(dict(section or {}))
        problems: list[tuple[str, str]] = []
        try:
            return cls(**given)
        except ValidationError as exc:
            problems = describe_validation_error(exc, cls)
        except SettingsError:  # pydantic-settings could not even decode an environment value
            problems = [("", "a CPCREDS_* environment variable cannot be read")]
        finally:
            _section.reset(token)
        where, what = problems[0] if problems else ("", "are not valid")
        if not where:
            raise ConfigError(what, source="serve settings")
        name = where.split(".")[0]
        spelled = f"--{name.replace('_', '-')} / CPCREDS_{name.upper()} / serve.{_camel(name)}"
        raise ConfigError(f"{spelled}: {what}", source="serve settings")
