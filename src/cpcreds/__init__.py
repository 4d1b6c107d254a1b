"""cpcreds: Kubernetes credentials for every cluster of a fleet.

KEP-5339 ClusterProfile credential plugins on KEP-541 exec credential providers::

    from cpcreds import CredentialEngine
    engine = CredentialEngine.from_file("providers.yaml")
    credential = engine.get_credential(cluster_profile)   # dict from the API, or a model

Importing this package configures nothing (no logging, no metrics server, no global state).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from .access import AccessPlan, ExecSpec, parse_profile, resolve
from .api import (
    ADDITIONAL_ARGS_EXTENSION,
    ADDITIONAL_ENVS_EXTENSION,
    API_VERSION_V1,
    API_VERSION_V1BETA1,
    EXEC_EXTENSION,
    ClusterProfile,
    ExecCluster,
    ExecConfig,
    ExecCredential,
)
from .config import ProviderConfig, ProviderEntry, Settings, load_config, parse_access_provider_flag
from .credential import Credential
from .engine import CredentialEngine
from .kube import remove_certificate_files
from .policies import BackoffPolicy, RefreshPolicy
from .errors import (
    ConfigError,
    CredentialError,
    EngineClosed,
    InteractiveModeError,
    NoMatchingProvider,
    PluginError,
    PluginExecutionError,
    PluginNotFound,
    PluginOutputError,
    PluginTimeout,
    ProfileError,
    ProviderError,
    ProviderTimeout,
)
from .hookspecs import Provider, hookimpl
from .providers.exec import ExecProvider
from .registry import ProviderRegistry

try:
    __version__ = version("cpcreds")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"

__all__ = [
    "__version__",
    "CredentialEngine",
    "RefreshPolicy",
    "BackoffPolicy",
    "remove_certificate_files",
    "Credential",
    "AccessPlan",
    "ExecSpec",
    "resolve",
    "parse_profile",
    "ProviderConfig",
    "ProviderEntry",
    "Settings",
    "load_config",
    "parse_access_provider_flag",
    "ProviderRegistry",
    "Provider",
    "ExecProvider",
    "hookimpl",
    "ClusterProfile",
    "ExecCluster",
    "ExecConfig",
    "ExecCredential",
    "API_VERSION_V1",
    "API_VERSION_V1BETA1",
    "EXEC_EXTENSION",
    "ADDITIONAL_ARGS_EXTENSION",
    "ADDITIONAL_ENVS_EXTENSION",
    "CredentialError",
    "EngineClosed",
    "ConfigError",
    "ProfileError",
    "NoMatchingProvider",
    "ProviderError",
    "ProviderTimeout",
    "PluginError",
    "PluginNotFound",
    "PluginExecutionError",
    "PluginTimeout",
    "PluginOutputError",
    "InteractiveModeError",
]
