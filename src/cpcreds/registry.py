"""Finding providers: built-ins and the ``cpcreds`` entry-point group, through pluggy.

A plugin that fails to import, or whose hook raises, is recorded in :attr:`ProviderRegistry.load_errors`
and skipped: one broken package must not take every cluster down. ``CPCREDS_DISABLE_PLUGINS``
(comma-separated entry-point names, or ``*``) and ``CPCREDS_PLUGINS`` (an allow-list) restrict
which third-party plugins load; the built-ins always load.

Entry points are loaded lazily, the first time a provider type that is not built in is asked for
(or :attr:`~ProviderRegistry.types` / :attr:`~ProviderRegistry.load_errors` is read): a config of
exec plugins, which kubectl runs on every command through ``cpcreds get-credential``, imports no
third-party package and hears nothing about a broken one. A broken plugin is named in the error of
a config that asks for a type nobody registered, and :meth:`~ProviderRegistry.warn_load_errors`
logs each failure once per process (``cpcreds plugins`` calls it).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import pluggy

from . import hookspecs
from .errors import ConfigError
from .hookspecs import Provider, ProviderFactory
from .logs import get_logger, redact_text

if TYPE_CHECKING:
    from .config import ProviderConfig, ProviderEntry

__all__ = ["ProviderRegistry", "ProviderType", "PluginLoadError", "BUILTIN_PLUGIN"]

_log = get_logger(__name__)

#: How built-in provider types report their origin.
BUILTIN_PLUGIN = "cpcreds (built-in)"


# Named tuples, not dataclasses: defining a dataclass costs ~0.5 ms of every command's start.
class ProviderType(NamedTuple):
    """A registered provider type and where it came from."""

    name: str
    factory: ProviderFactory
    plugin: str
    distribution: str | None = None
    version: str | None = None


class PluginLoadError(NamedTuple):
    """A plugin that could not be loaded, and why (one line)."""

    plugin: str
    distribution: str | None
    error: str


#: Load errors already logged by this process (see ProviderRegistry.warn_load_errors).
_warned: set[PluginLoadError] = set()
_warned_lock = threading.Lock()


def _split(value: str | None) -> set[str] | None:
    if value is None or not value.strip():
        return None  # unset and empty both mean "no restriction"
    return {part.strip() for part in value.split(",") if part.strip()}


class ProviderRegistry:
    """The provider types available to this process.

    ``entry_points=False`` loads only the built-ins (tests and embedders that want no surprises).
    ``plugins`` are extra plugin objects to register directly (each with a ``hookimpl``).
    ``disable`` / ``allow`` default to ``CPCREDS_DISABLE_PLUGINS`` / ``CPCREDS_PLUGINS``.
    """

    def __init__(
        self,
        *,
        entry_points: bool = True,
        plugins: tuple[Any, ...] = (),
        disable: set[str] | None = None,
        allow: set[str] | None = None,
    ) -> None:
        self._pm: pluggy.PluginManager | None = None
        self._types: dict[str, ProviderType] = {}
        self._load_errors: list[PluginLoadError] = []
        self._origin: dict[int, tuple[str, str | None, str | None]] = {}
        self._collected: set[int] = set()
        self._lock = threading.Lock()

        from .providers.exec import ExecPlugin
        from .providers.file import FilePlugin

        # The built-ins' hooks are called directly, first, so they own their names; pluggy's
        # manager (~1 ms to build and register into) is made only for other plugins.
        for builtin in (ExecPlugin(), FilePlugin()):
            self._register_types(builtin.cpcreds_register_providers, BUILTIN_PLUGIN, None, None)
        for index, plugin in enumerate(plugins):
            self._add(plugin, getattr(plugin, "__name__", f"plugin[{index}]"), None, None)
        self._collect_types()
        # The environment is read now, so a registry means the same whenever it loads.
        self._entry_points: tuple[set[str], set[str] | None] | None = None
        if entry_points:
            disable = _split(os.environ.get("CPCREDS_DISABLE_PLUGINS")) if disable is None else disable
            allow = _split(os.environ.get("CPCREDS_PLUGINS")) if allow is None else allow
            self._entry_points = (disable or set(), allow)

    @property
    def types(self) -> Mapping[str, ProviderType]:
        """Every registered provider type by name (loads the entry points first)."""
        self._load_entry_points()
        return self._types

    @property
    def load_errors(self) -> list[PluginLoadError]:
        """Plugins that could not be loaded (loads the entry points first)."""
        self._load_entry_points()
        return self._load_errors

    def warn_load_errors(self) -> None:
        """Log a warning for each plugin that failed to load, once per process for each failure."""
        for error in self.load_errors:
            with _warned_lock:
                if error in _warned:
                    continue
                _warned.add(error)
            _log.warning("plugin failed to load; skipped", plugin=error.plugin, distribution=error.distribution, error=error.error)

    # -- loading ---------------------------------------------------------------------------

    def _add(self, plugin: Any, name: str, dist: str | None, version: str | None) -> None:
        if self._pm is None:
            self._pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
            self._pm.add_hookspecs(hookspecs)
        self._pm.register(plugin, name=f"{name}#{len(self._origin)}")
        self._origin[id(plugin)] = (name, dist, version)

    def _load_entry_points(self) -> None:
        if self._entry_points is None:
            return
        with self._lock:
            if self._entry_points is None:
                return
            disable, allow = self._entry_points
            from importlib import metadata  # ~15 ms: only when a type that is not built in is asked for

            from .logs import stdlib_logging

            stdlib_logging()  # the CLI's log handler, if put off, is in place before a plugin can log

            for ep in metadata.entry_points(group=hookspecs.PROJECT_NAME):
                if "*" in disable or ep.name in disable or (allow is not None and ep.name not in allow):
                    continue
                dist = ep.dist.name if ep.dist is not None else None
                version = ep.dist.version if ep.dist is not None else None
                try:
                    plugin = ep.load()
                    self._add(plugin, ep.name, dist, version)
                except Exception as exc:  # any import-time failure of a third-party package
                    self._fail(ep.name, dist, exc)
            self._collect_types()
            self._entry_points = None

    def _fail(self, plugin: str, dist: str | None, exc: BaseException) -> None:
        error = redact_text(f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__)
        self._load_errors.append(PluginLoadError(plugin, dist, error))

    def _collect_types(self) -> None:
        if self._pm is None:
            return
        # Each hook implementation is called on its own so one raising cannot hide the others.
        for impl in self._pm.hook.cpcreds_register_providers.get_hookimpls():
            if id(impl.plugin) in self._collected:
                continue
            self._collected.add(id(impl.plugin))
            self._register_types(impl.function, *self._origin.get(id(impl.plugin), (impl.plugin_name, None, None)))

    def _register_types(self, hook: Callable[..., Any], name: str, dist: str | None, version: str | None) -> None:
        """Call one plugin's ``cpcreds_register_providers``: all its types, or none and a load error."""
        registered: dict[str, ProviderType] = {}

        def register(type_name: str, factory: ProviderFactory) -> None:
            if not isinstance(type_name, str) or not type_name:
                raise ValueError(f"provider type name must be a non-empty string, got {type_name!r}")
            if type_name in self._types or type_name in registered:
                owner = self._types[type_name].plugin if type_name in self._types else name
                raise ValueError(f"provider type {type_name!r} is already registered by {owner}")
            registered[type_name] = ProviderType(type_name, factory, name, dist, version)

        try:
            hook(register=register)
        except Exception as exc:
            self._fail(name, dist, exc)  # all or nothing: a half-registered plugin is skipped
        else:
            self._types.update(registered)

    # -- using -----------------------------------------------------------------------------

    def create(self, entry: ProviderEntry, *, source: str = "<dict>") -> Provider:
        """Build the provider for one config entry; a :class:`ConfigError` names what is wrong."""
        kind = entry.kind
        registered = self._types.get(kind) or self.types.get(kind)  # built-ins need no entry point
        if registered is None:
            known = ", ".join(sorted(t for t in self.types if t != "exec")) or "none"
            hint = ""
            failed = [f"{e.plugin} ({e.error})" for e in self.load_errors]
            if failed:
                hint = f"; plugins that failed to load: {', '.join(failed)}"
            raise ConfigError(
                f"unknown provider type {kind!r}; installed types: {known}{hint}",
                source=source,
                entry=f'"{entry.name}"',
                field="type",
            )
        # The error is raised after the except blocks: the provider's exception (a pydantic error
        # holds the options given, secrets included) must not ride along as __context__.
        problem: tuple[str, str] | None = None
        try:
            provider = registered.factory(dict(entry.options))
        except (ValueError, TypeError, KeyError) as exc:
            problem = _options_problem(exc)
        if problem is not None:
            raise ConfigError(problem[1], source=source, entry=f'"{entry.name}"', field=problem[0])
        if not callable(getattr(provider, "get_credential", None)):
            raise ConfigError(
                f"provider type {kind!r} from {registered.plugin} built an object without get_credential()",
                source=source,
                entry=f'"{entry.name}"',
            )
        return provider

    def create_all(
        self, config: ProviderConfig, *, policy_observer: Callable[[str, str], None] | None = None
    ) -> Mapping[str, Provider]:
        """Build every provider of a config (this is what ``cpcreds validate`` checks).

        Providers that run executables (those with a ``use_plugin_policy`` method, such as the
        exec provider) get the config's ``pluginPolicy``, and report each decision to
        ``policy_observer(provider, decision)``."""
        providers = {entry.name: self.create(entry, source=config.source) for entry in config.providers}
        for provider in providers.values():
            use_policy = getattr(provider, "use_plugin_policy", None)
            if callable(use_policy):
                use_policy(config.plugin_policy, policy_observer)
        return providers


def _options_problem(exc: BaseException) -> tuple[str, str]:
    """(field, problem) of a provider factory's error. An options declaration's
    :class:`~cpcreds.sdk.OptionError` names the option; a pydantic ``ValidationError`` (a
    ``ValueError``) is worded by cpcreds; pydantic is looked at only if its module is loaded,
    which it is whenever such an error exists."""
    from .config.options import OptionError  # standard library only

    if isinstance(exc, OptionError):  # a cpcreds.sdk.Options declaration worded it
        return (f"options.{exc.option}" if exc.option else "options", exc.problem)
    pydantic_core = sys.modules.get("pydantic_core")
    if pydantic_core is not None and isinstance(exc, pydantic_core.ValidationError):
        from .config import describe_validation_error

        where, what = describe_validation_error(exc)[0]  # type: ignore[arg-type]
        return (f"options.{where}" if where else "options", what)
    return ("options", redact_text(" ".join(str(exc).split())) or type(exc).__name__)
