"""The one exception family of cpcreds.

Every failure a caller can act on is a :class:`CredentialError`. Messages are one line, name what
is wrong and where (file, provider entry, field, profile), and never contain a secret: plugin
stdout is never quoted, only its size and shape.
"""

from __future__ import annotations

# client-go's values for the `call_status` label of rest_client_exec_plugin_call_total.
NO_ERROR = "no_error"
PLUGIN_EXECUTION_ERROR = "plugin_execution_error"
PLUGIN_NOT_FOUND_ERROR = "plugin_not_found_error"
CLIENT_INTERNAL_ERROR = "client_internal_error"


class CredentialError(Exception):
    """Base class: anything cpcreds reports to a caller."""


class EngineClosed(CredentialError):
    """The :class:`~cpcreds.CredentialEngine` was closed: waiting callers are released with this,
    and later calls fail with it."""


class ConfigError(CredentialError, ValueError):
    """The provider config (file, flag or settings) is invalid.

    ``source`` is the file (or ``--clusterprofile-access-provider``), ``entry`` the provider name or
    index, ``field`` the dotted field path; each may be ``None`` when it does not apply.
    """

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        entry: str | None = None,
        field: str | None = None,
    ) -> None:
        self.source, self.entry, self.field, self.reason = source, entry, field, message
        where = []
        if source:
            where.append(source)
        if entry:
            where.append(f"provider {entry}")
        if field:
            where.append(f"field {field}")
        super().__init__(f"{': '.join(where)}: {message}" if where else message)


class ProfileError(CredentialError, ValueError):
    """A ClusterProfile is malformed (missing cluster, bad extension, wrong types)."""

    def __init__(self, message: str, *, profile: str | None = None) -> None:
        self.profile = profile
        super().__init__(f"ClusterProfile {profile}: {message}" if profile else message)


class NoMatchingProvider(CredentialError, LookupError):
    """No provider of the config is offered by the ClusterProfile."""

    def __init__(self, profile: str, offered: list[str], configured: list[str]) -> None:
        self.profile, self.offered, self.configured = profile, offered, configured
        offered_text = ", ".join(offered) if offered else "none"
        configured_text = ", ".join(configured) if configured else "none"
        super().__init__(
            f"ClusterProfile {profile}: no configured provider matches; "
            f"the profile offers [{offered_text}], the config has [{configured_text}]"
        )


class ProviderError(CredentialError):
    """A provider failed to produce a credential.

    ``call_status`` is client-go's classification (``plugin_execution_error``,
    ``plugin_not_found_error``, ``client_internal_error``); ``exit_code`` is the plugin's exit code
    when one ran (-1 when it was killed), else ``None``.
    """

    call_status: str = PLUGIN_EXECUTION_ERROR

    def __init__(self, message: str, *, provider: str | None = None, exit_code: int | None = None) -> None:
        self.provider, self.exit_code = provider, exit_code
        super().__init__(f"provider {provider}: {message}" if provider else message)


class ProviderTimeout(ProviderError):
    """The provider did not answer within its ``timeout``."""


class PluginError(ProviderError):
    """An exec plugin (KEP-541) failed."""


class PluginNotFound(PluginError):
    """The plugin's executable does not exist or cannot be executed."""

    call_status = PLUGIN_NOT_FOUND_ERROR


class PluginExecutionError(PluginError):
    """The plugin ran and failed: non-zero exit, killed by a signal, or too much output."""


class PluginTimeout(PluginExecutionError, ProviderTimeout):
    """The plugin did not answer within the provider's timeout; its process group was killed."""


class PluginOutputError(PluginExecutionError):
    """The plugin exited 0 but its answer is not a valid ExecCredential for this request."""


class InteractiveModeError(PluginError):
    """interactiveMode is Always but no terminal is available; the plugin was not run."""

    call_status = CLIENT_INTERNAL_ERROR


class PluginNotAllowed(PluginError):
    """The provider config's ``pluginPolicy`` refused to run the plugin (``DenyAll``, a command
    not on the allowlist, a script whose ``#!`` interpreter is not on it, or a pinned command
    whose bytes do not hash to the pinned ``sha256``). Nothing was run. Failover never moves past
    a refusal: a refused plugin is a configuration decision, not an outage.

    ``command`` is the command as configured; ``reason`` the policy's reason, in words."""

    call_status = CLIENT_INTERNAL_ERROR

    def __init__(
        self, message: str, *, provider: str | None = None, command: str = "", reason: str = "", decision: str = "denied"
    ) -> None:
        #: ``decision`` is the metric label: denied, not_allowlisted, interpreter, digest_mismatch, unreadable.
        self.command, self.reason, self.decision = command, reason, decision
        super().__init__(message, provider=provider)


class ImageCredentialError(CredentialError):
    """Registry credentials for an image (KEP-2133, :class:`~cpcreds.ImageCredentials`) cannot
    be had for a reason that is neither the config (:class:`ConfigError`) nor a plugin's failure
    (:class:`PluginError`): a service-account token a provider requires is not given, or the
    :class:`~cpcreds.ImageCredentials` was closed."""


class InvalidImageError(ImageCredentialError, ValueError):
    """The image is not a valid image reference (``[registry[:port]/]path[:tag][@digest]``)."""


class AllProvidersFailed(ProviderError):
    """Failover (``failover: true``) tried every provider it could for a ClusterProfile and each
    failed. The one-line message names the profile, then every provider tried, in order, with why
    it failed (each reason as that provider's own error words it, redacted).

    ``profile`` is the profile's ``namespace/name``; ``attempts`` the ``(provider, error)`` pairs
    in the order they were tried, for programs (``isinstance(error, PluginTimeout)``, ...).
    ``provider`` is None: no single provider failed."""

    def __init__(self, profile: str, attempts: tuple[tuple[str, CredentialError], ...]) -> None:
        self.profile, self.attempts = profile, tuple(attempts)
        tried = "; ".join(f"{name} ({_reason(name, error)})" for name, error in self.attempts)
        super().__init__(f"ClusterProfile {profile}: every provider tried failed: {tried}")

    def __reduce__(self) -> tuple[object, ...]:
        # copy and pickle rebuild it from what it was made of, not from its message.
        return (type(self), (self.profile, self.attempts), self.__dict__)


def _reason(provider: str, error: BaseException) -> str:
    """``error``'s message on one line, without the ``provider NAME: `` its own message starts with."""
    text = " ".join(str(error).split())
    prefix = f"provider {provider}: "
    return text[len(prefix):] if text.startswith(prefix) else text


def result_label(exc: BaseException) -> str:
    """The class of a provider failure, as the ``result`` label of
    ``cpcreds_credential_requests_total`` (and ``reason`` of ``cpcreds_failover_total``) names it:
    plugin_not_found, plugin_timeout, provider_timeout, plugin_output_error,
    plugin_execution_error, provider_error or client_internal_error. Never error text."""
    if isinstance(exc, PluginNotFound):
        return "plugin_not_found"
    if isinstance(exc, PluginTimeout):
        return "plugin_timeout"
    if isinstance(exc, ProviderTimeout):
        return "provider_timeout"
    if isinstance(exc, PluginOutputError):
        return "plugin_output_error"
    if isinstance(exc, InteractiveModeError):
        return CLIENT_INTERNAL_ERROR
    if isinstance(exc, ProviderError):
        return "plugin_execution_error" if exc.call_status == "plugin_execution_error" and exc.exit_code is not None else "provider_error"
    return CLIENT_INTERNAL_ERROR


#: Every error class above (each is also a public name of :mod:`cpcreds`), and result_label.
__all__ = [
    "result_label",
    *(name for name, value in list(globals().items()) if isinstance(value, type) and issubclass(value, CredentialError)),
]
