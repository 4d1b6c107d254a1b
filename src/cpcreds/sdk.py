"""The one module a provider author imports: everything a cpcreds provider package needs.

A provider (an in-process credential source that cpcreds' engine, ``cpcreds get-credential``,
``serve`` and the kubelet mode call) and the console scripts that run it as a KEP-541 exec plugin
or a KEP-2133 kubelet plugin are written against this module and :mod:`cpcreds` only::

    from cpcreds.sdk import AccessPlan, Credential, ProviderError, hookimpl, parse_duration, provider_main

    class VaultProvider:
        def __init__(self, options):                  # the config entry's `options:` mapping
            self.ttl = parse_duration(options.get("ttl", "10m"))

        def get_credential(self, plan: AccessPlan) -> Credential:
            ...

    @hookimpl
    def cpcreds_register_providers(register):
        register("vault", VaultProvider)

    main = provider_main("vault", VaultProvider)      # [project.scripts] cpcreds-vault = "...:main"

**The promise.** Every name in :data:`__all__` keeps its meaning and its signature within a major
version: a name is added in a minor release and removed or changed incompatibly only in a major
one, after a release that warns. ``tests/test_sdk_api.py`` holds the list with each signature, so
any change is a visible, deliberate diff. Other ``cpcreds.*`` modules are internal: they may
change in any release.

**Light.** Importing this module loads nothing (each name is imported from its module on first
use, PEP 562): a console script pays only for what its run uses. None of the names loads
pydantic, pydantic-settings, structlog, prometheus-client or the kubernetes client.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # what type checkers and IDEs see; at run time, __getattr__ below
    from .providers.body import BodyProblem, read_within
    from .config.documents import DocumentError, load_document, open_regular, read_bounded
    from .credential import Credential
    from .errors import (
        ConfigError,
        CredentialError,
        ImageCredentialError,
        ProviderError,
        ProviderTimeout,
    )
    from .providers.hookspecs import ImageCredentialProvider, Provider, ProviderFactory, Register, hookimpl
    from .images.protocol import (
        CACHE_KEY_GLOBAL,
        CACHE_KEY_IMAGE,
        CACHE_KEY_REGISTRY,
        AuthConfig,
        CredentialProviderRequest,
        CredentialProviderResponse,
        ProtocolError,
        encode_request,
        encode_response,
        parse_request,
        parse_response,
    )
    from .config.durations import format_duration, parse_duration
    from .config.options import Duration, OptionError, Options, option
    from ._show import shown, type_name
    from .providers.jwt import jwt_expiry
    from .kep import EXEC_EXTENSION, ExecCluster
    from .images.kubelet_plugin import kubelet_plugin_main, run_image_provider, run_kubelet_plugin
    from .logs import get_logger, redact_text
    from .plan import AccessPlan, ExecSpec
    from .exec.plugin import (
        OptionFlagError,
        PluginRequest,
        PluginRequestError,
        parse_option_flags,
        plan_for_request,
        provider_main,
        run_plugin,
        run_provider,
    )
    from .engine.policies import RefreshPolicy
    from .providers.credfile import read_credential_file
    from .providers.deadline import DEADLINE_MARGIN, Deadline, deadline, remaining
    from .providers.http import (
        Abort,
        Cutoff,
        Exchange,
        connection_problem,
        error_detail,
        read_answer,
        safe_summary,
        shown_endpoint,
        watch,
        watch_pool_manager,
    )
    from ._show import shown_url

#: The module that defines each public name, grouped as docs/sdk.md lists them; :data:`__all__`
#: is this table's names in order (tests/sdk_api.txt holds the surface with each signature).
_EXPORTS = {
    # the contract: hooks and protocols
    "providers.hookspecs": ("hookimpl", "Provider", "ImageCredentialProvider", "ProviderFactory", "Register"),
    # what a provider receives and answers
    "plan": ("AccessPlan", "ExecSpec"),
    "kep": ("ExecCluster", "EXEC_EXTENSION"),
    "credential": ("Credential",),
    "engine.policies": ("RefreshPolicy",),
    # a provider's options: read without pydantic, --help and "did you mean" from one declaration
    "config.options": ("Options", "option", "Duration", "OptionError"),
    # errors
    "errors": ("CredentialError", "ProviderError", "ProviderTimeout", "ConfigError", "ImageCredentialError"),
    # KEP-2133 wire types
    "images.protocol": (
        "AuthConfig",
        "CredentialProviderRequest",
        "CredentialProviderResponse",
        "CACHE_KEY_IMAGE",
        "CACHE_KEY_REGISTRY",
        "CACHE_KEY_GLOBAL",
        "ProtocolError",
        "encode_request",
        "parse_request",
        "encode_response",
        "parse_response",
    ),
    # running a provider as a plugin
    "exec.plugin": (
        "provider_main",
        "run_provider",
        "run_plugin",
        "PluginRequest",
        "PluginRequestError",
        "OptionFlagError",
        "parse_option_flags",
        "plan_for_request",
    ),
    "images.kubelet_plugin": ("kubelet_plugin_main", "run_image_provider", "run_kubelet_plugin"),
    # helpers
    "config.documents": ("load_document", "DocumentError", "read_bounded", "open_regular"),
    "providers.body": ("read_within", "BodyProblem"),
    "config.durations": ("parse_duration", "format_duration"),
    "providers.jwt": ("jwt_expiry",),
    "providers.credfile": ("read_credential_file",),
    "logs": ("redact_text", "get_logger"),
    "_show": ("shown", "type_name", "shown_url"),
    # a fetch's remaining time, and HTTP bounded by it (docs/sdk.md)
    "providers.deadline": ("deadline", "remaining", "Deadline", "DEADLINE_MARGIN"),
    "providers.http": (
        "Exchange",
        "Abort",
        "shown_endpoint",
        "read_answer",
        "Cutoff",
        "watch",
        "watch_pool_manager",
        "error_detail",
        "safe_summary",
        "connection_problem",
    ),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = [*_MODULE_OF]


def __getattr__(name: str) -> object:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"cpcreds.{module}"), name)
    globals()[name] = value  # the next use is a plain attribute lookup
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
