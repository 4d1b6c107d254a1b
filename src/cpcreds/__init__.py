"""cpcreds: Kubernetes credentials for every cluster of a fleet.

KEP-5339 ClusterProfile credential plugins on KEP-541 exec credential providers::

    from cpcreds import CredentialEngine
    engine = CredentialEngine.from_file("providers.yaml")
    credential = engine.get_credential(cluster_profile)   # dict from the API, or a model

Importing this package configures nothing (no logging, no metrics server, no global state), and
imports nothing either: each public name is imported from its module when it is first used
(PEP 562). ``cpcreds get-credential`` answers from its disk cache through ``cpcreds._entry``,
which Python can only import after this file; an eager import here would load the whole package
on that path, which must stay close to a bare interpreter start.
"""

TYPE_CHECKING = False
if TYPE_CHECKING:  # what type checkers and IDEs see; at run time, __getattr__ below
    from .config.access import parse_profile, resolve
    from .config.wire import (
        ADDITIONAL_ARGS_EXTENSION,
        ADDITIONAL_ENVS_EXTENSION,
        API_VERSION_V1,
        API_VERSION_V1BETA1,
        EXEC_EXTENSION,
        ClusterProfile,
        ExecConfig,
        ExecCredential,
    )
    from .config import ProviderConfig, ProviderEntry, Settings, load_config, parse_access_provider_flag
    from .credential import Credential
    from .engine.binding import Binding
    from .engine import CredentialEngine
    from .engine.failover import Answer
    from .fleet.cluster import Disengaged, Engaged, FleetCluster, FleetEvent, Updated
    from .fleet.core import Fleet
    from .fleet.hub import HubOptions
    from .fleet.inventory import ProfileFeed
    from .shard.membership import Membership, Shard
    from .shard.rendezvous import Assignment
    from .errors import (
        AllProvidersFailed,
        ConfigError,
        CredentialError,
        EngineClosed,
        ImageCredentialError,
        InteractiveModeError,
        InvalidImageError,
        NoMatchingProvider,
        PluginError,
        PluginExecutionError,
        PluginNotAllowed,
        PluginNotFound,
        PluginOutputError,
        PluginTimeout,
        ProfileError,
        ProviderError,
        ProviderTimeout,
    )
    from .providers.hookspecs import Provider, hookimpl
    from .kep import ExecCluster
    from .plan import AccessPlan, ExecSpec
    from .images.credentials import ImageCredentials, RegistryCredential, RegistryCredentials
    from .adapters.kubernetes import remove_certificate_files
    from .engine.policies import BackoffPolicy, RefreshPolicy
    from .exec.provider import ExecProvider
    from .providers.registry import ProviderRegistry

    __version__: str

#: The module that defines each public name (the imports above, for the interpreter); with
#: ``__version__``, its names are :data:`__all__`.
_EXPORTS = {
    "config.access": ("parse_profile", "resolve"),
    "plan": ("AccessPlan", "ExecSpec"),
    "config.wire": (
        "ADDITIONAL_ARGS_EXTENSION",
        "ADDITIONAL_ENVS_EXTENSION",
        "API_VERSION_V1",
        "API_VERSION_V1BETA1",
        "EXEC_EXTENSION",
        "ClusterProfile",
        "ExecConfig",
        "ExecCredential",
    ),
    "kep": ("ExecCluster",),
    "config": ("ProviderConfig", "ProviderEntry", "Settings", "load_config", "parse_access_provider_flag"),
    "credential": ("Credential",),
    "engine": ("CredentialEngine",),
    "engine.binding": ("Binding",),
    "engine.failover": ("Answer",),
    "fleet.core": ("Fleet",),
    "fleet.cluster": ("FleetCluster", "FleetEvent", "Engaged", "Updated", "Disengaged"),
    "fleet.hub": ("HubOptions",),
    "fleet.inventory": ("ProfileFeed",),
    "shard.membership": ("Shard", "Membership"),
    "shard.rendezvous": ("Assignment",),
    "errors": (
        "AllProvidersFailed",
        "ConfigError",
        "CredentialError",
        "EngineClosed",
        "ImageCredentialError",
        "InteractiveModeError",
        "InvalidImageError",
        "NoMatchingProvider",
        "PluginError",
        "PluginExecutionError",
        "PluginNotAllowed",
        "PluginNotFound",
        "PluginOutputError",
        "PluginTimeout",
        "ProfileError",
        "ProviderError",
        "ProviderTimeout",
    ),
    "providers.hookspecs": ("Provider", "hookimpl"),
    "images.credentials": ("ImageCredentials", "RegistryCredential", "RegistryCredentials"),
    "adapters.kubernetes": ("remove_certificate_files",),
    "engine.policies": ("BackoffPolicy", "RefreshPolicy"),
    "exec.provider": ("ExecProvider",),
    "providers.registry": ("ProviderRegistry",),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = ["__version__", *_MODULE_OF]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("cpcreds")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "0.0.0+unknown"


def __getattr__(name: str) -> object:
    if name == "__version__":
        value: object = _version()
    elif name in _MODULE_OF:
        from importlib import import_module

        value = getattr(import_module(f"{__name__}.{_MODULE_OF[name]}"), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # the next use is a plain attribute lookup
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
