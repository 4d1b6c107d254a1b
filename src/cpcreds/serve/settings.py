"""The settings of ``cpcreds serve``: command-line flags, ``CPCREDS_*`` environment variables and
the ``serve:`` section of the provider config file, in that order of precedence.

Every setting has one name per place: ``--profiles-dir`` on the command line,
``CPCREDS_PROFILES_DIR`` in the environment, ``profilesDir`` in the YAML section (``profiles_dir``
is accepted there too).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, InitSettingsSource, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict

from ..config import describe_validation_error, parse_duration
from ..errors import ConfigError
from ..config.settings import DeclaredSettings, LogFormat, LogLevel, camel_case
from ..shard import STATUS_URL

__all__ = ["ServeSettings", "UnusableFolder", "DEFAULT_LISTEN", "parse_listen"]

#: Loopback only by default: the status page and metrics name every cluster of the fleet.
DEFAULT_LISTEN = "127.0.0.1:9733"

class UnusableFolder(ConfigError):
    """A folder setting names something serve cannot use at start (``--profiles-dir`` missing,
    unreadable or a file; ``--kubeconfig-dir`` a file): a usage error, exit 2, like a bad flag."""

    def __init__(self, setting: str, path: object, reason: str) -> None:
        super().__init__(f"--{setting.replace('_', '-')} {path}: {reason}")


def _snake(key: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", lambda m: "_" + m.group(1).lower(), key)


class _SectionSource(InitSettingsSource):
    """The ``serve:`` section of the config file, its camelCase keys in the fields' spelling."""

    def __init__(self, settings_cls: type[BaseSettings], section: Mapping[str, Any]) -> None:
        super().__init__(settings_cls, init_kwargs={(_snake(k) if isinstance(k, str) else k): v for k, v in section.items()})


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


class ServeSettings(DeclaredSettings):
    """Everything ``cpcreds serve`` can be told. Durations are Go durations (``30s``, ``5m``)."""

    model_config = SettingsConfigDict(env_prefix="CPCREDS_", extra="forbid", validate_default=True)

    # Each field is a flag (--profiles-dir), a variable (CPCREDS_PROFILES_DIR) and a field of the
    # config file's serve: section (profilesDir); its description and default are serve's --help.
    # Durations are declared as users write them ("1s") and read into seconds.
    config: Path | None = Field(None, description="the provider config (also read for its serve: section)", json_schema_extra={"metavar": "FILE"})
    profiles_dir: Path | None = Field(
        None,
        description="ClusterProfile files to watch, the default source",
        json_schema_extra={"metavar": "DIR", "unset": "clusterprofiles/ next to the config"},
    )
    hub_kubeconfig: Path | None = Field(None, description="watch the ClusterProfiles of the hub this kubeconfig reaches", json_schema_extra={"metavar": "FILE"})
    hub_context: str | None = Field(None, description="context of --hub-kubeconfig", json_schema_extra={"metavar": "NAME", "unset": "its current context"})
    in_cluster: bool = Field(False, description="watch the ClusterProfiles of the hub this pod runs in (its service account)")
    namespaces: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="hub namespaces to watch, comma-separated", json_schema_extra={"metavar": "NS[,NS...]", "unset": "all"}
    )
    label_selector: str = Field("", description="only the hub's ClusterProfiles with these labels", json_schema_extra={"metavar": "SELECTOR"})
    listen: str = Field(
        DEFAULT_LISTEN, description="address of the status page, /v1/clusters and metrics; port 0 picks a free one", json_schema_extra={"metavar": "HOST:PORT"}
    )
    kubeconfig_dir: Path | None = Field(None, description="write a kubeconfig per profile and a merged one here", json_schema_extra={"metavar": "DIR"})
    concurrency: int = Field(32, ge=1, le=4096, description="most credential fetches at once (1-4096)", json_schema_extra={"metavar": "N"})
    scan_interval: float = Field("1s", description="how often --profiles-dir is rescanned", json_schema_extra={"metavar": "DURATION"})
    refresh_jitter: float = Field(
        0.1, ge=0.0, le=0.5, description="refreshes come up to this fraction early, spread at random (0-0.5)", json_schema_extra={"metavar": "FRACTION"}
    )
    probe_path: str = Field(
        "", description="probe each cluster: GET PATH (/version or /readyz) with its credential", json_schema_extra={"metavar": "PATH", "unset": "no probes"}
    )
    probe_interval: float = Field("1m", description="time between probes of a cluster", json_schema_extra={"metavar": "DURATION"})
    probe_timeout: float = Field("5s", description="how long a probe may take", json_schema_extra={"metavar": "DURATION"})
    watch_config: bool = Field(True, description="re-read the config file when it changes (SIGHUP always reloads)")
    shutdown_timeout: float = Field("5s", description="how long SIGTERM may take before plugins are killed", json_schema_extra={"metavar": "DURATION"})
    hub_timeout: float = Field(
        "30s", description="bound on one hub request and on one run of the hub kubeconfig's exec plugin", json_schema_extra={"metavar": "DURATION"}
    )
    http_idle_timeout: float = Field("1m", description="close an HTTP connection idle this long between requests", json_schema_extra={"metavar": "DURATION"})
    http_header_timeout: float = Field("10s", description="a request's line and headers must arrive within this", json_schema_extra={"metavar": "DURATION"})
    http_max_connections: int = Field(
        512, ge=1, le=65536, description="most HTTP connections at once, at most half the descriptor limit", json_schema_extra={"metavar": "N"}
    )
    # None (auto): on up to PER_PROFILE_METRICS_LIMIT profiles; the counts by state and provider
    # are always there.
    per_profile_metrics: bool | None = Field(
        None, description="per-profile series on /metrics: true, false or auto", json_schema_extra={"metavar": "true|false|auto", "unset": "auto, on up to 5,000 profiles"}
    )
    # KEP-4322: act on one ClusterProfile per inventory member (the oldest; none when the oldest
    # tie) and show the others as inventory problems. Off: every profile is its own cluster.
    dedupe: bool = Field(True, description="act on one ClusterProfile per KEP-4322 inventory member, the oldest")
    # One coordination.k8s.io/v1 Lease per replica in shard_namespace on the hub (docs/sharding.md).
    shard: bool = Field(False, description="split the inventory with other replicas on hub Leases (needs the hub; docs/sharding.md)")
    shard_namespace: str = Field("cpcreds-system", description="namespace of the replicas' Leases", json_schema_extra={"metavar": "NS"})
    shard_group: str = Field("cpcreds", description="the replicas that split one inventory", json_schema_extra={"metavar": "NAME"})
    shard_identity: str | None = Field(
        None, description="this replica's member name", json_schema_extra={"metavar": "NAME", "unset": "the pod name, else the host name, plus a random suffix"}
    )
    # client-go's leader-election knobs.
    shard_lease_duration: float = Field("15s", description="a replica not renewing its Lease for this long is dead", json_schema_extra={"metavar": "DURATION"})
    shard_renew_deadline: float = Field("10s", description="a replica whose own renewal is this old stops serving", json_schema_extra={"metavar": "DURATION"})
    shard_retry_interval: float = Field("2s", description="how often a replica renews its Lease", json_schema_extra={"metavar": "DURATION"})
    shard_status_url: str = Field(
        "",
        description="where peers redirect requests for this replica's profiles",
        json_schema_extra={"metavar": "URL", "unset": "the --listen address, with POD_IP for an unspecified host"},
    )
    log_level: LogLevel = Field("info", description="debug, info, warning or error", json_schema_extra={"metavar": "LEVEL"})
    log_format: LogFormat = Field("console", description="console or json", json_schema_extra={"metavar": "FORMAT"})

    @classmethod
    def given_sources(
        cls, settings_cls: type[BaseSettings], env_settings: PydanticBaseSettingsSource, given: Mapping[str, Any] | None
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # given= is the config file's serve: section, below the environment.
        return (env_settings, _SectionSource(settings_cls, given or {}))

    @classmethod
    def describe_problems(cls, exc: ValidationError) -> list[tuple[str, str]]:
        return describe_validation_error(exc, cls)

    @classmethod
    def refusal(cls, problems: list[tuple[str, str]]) -> ConfigError:
        where, what = problems[0]
        if not where:
            return ConfigError(what, source="serve settings")
        name = where.split(".")[0]
        spelled = f"--{name.replace('_', '-')} / CPCREDS_{name.upper()} / serve.{camel_case(name)}"
        return ConfigError(f"{spelled}: {what}", source="serve settings")

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
        return cls(given=dict(section or {}), **given)
