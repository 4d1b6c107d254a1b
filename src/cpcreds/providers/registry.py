"""Finding providers: every provider type comes from a pluggy plugin, the built-ins included.

The built-in plugins (``exec``, ``file``) and any plugin object handed to the registry are
registered with a :class:`pluggy.PluginManager` when the registry is made; the ``cpcreds``
entry-point group is loaded into the same manager by pluggy, lazily: the first time a provider
type that is not built in is asked for (or :attr:`~ProviderRegistry.types` /
:attr:`~ProviderRegistry.load_errors` is read). So a config of exec plugins, which kubectl runs on
every command through ``cpcreds get-credential``, imports no third-party package and hears nothing
about a broken one. ``CPCREDS_DISABLE_PLUGINS`` (comma-separated entry-point names, or ``*``) and
``CPCREDS_PLUGINS`` (an allow-list) restrict which entry points load; the built-ins always load.

Types are collected by one call, ``pm.hook.cpcreds_register_providers(register=...)``, over
every plugin, so ``tryfirst``/``trylast`` and ``wrapper=True`` work for third parties as they do in
pytest (see :mod:`cpcreds.providers.hookspecs`). The built-ins are ``tryfirst`` and their names
are reserved.

A plugin that fails to import, whose hook raises, or that registers a name already taken is
recorded in :attr:`ProviderRegistry.load_errors` and left out, and the others are called again
without it (``pm.subset_hook_caller``): one broken package must not take every cluster down. A
broken plugin is named in the error of a config that asks for a type nobody registered, and
:meth:`~ProviderRegistry.warn_load_errors` logs each failure once per process (``cpcreds plugins``
calls it).
"""

from __future__ import annotations

import inspect
import os
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from types import FrameType, MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

import pluggy

from ..errors import ConfigError
from ..logs import get_logger, redact_text
from . import hookspecs
from .hookspecs import Provider, ProviderFactory

if TYPE_CHECKING:
    from ..config import ProviderConfig, ProviderEntry

__all__ = ["ProviderRegistry", "ProviderType", "PluginLoadError", "BUILTIN_PLUGIN", "BUILTIN_TYPES"]

_log = get_logger(__name__)

#: How built-in provider types report their origin.
BUILTIN_PLUGIN = "cpcreds (built-in)"
#: The names the built-in plugins own: no other plugin may register them.
BUILTIN_TYPES = frozenset(("exec", "file"))
_HOOK = "cpcreds_register_providers"


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


def _one_line(exc: BaseException) -> str:
    """``Type: message`` on one line (not redacted yet). pluggy's refusal of a hook spreads its
    reason over several lines, which are joined; of anything else the first line is kept."""
    lines = str(exc).splitlines()
    if not lines:
        return type(exc).__name__
    text = "; ".join(lines) if isinstance(exc, pluggy.PluginValidationError) else lines[0]
    return f"{type(exc).__name__}: {text}"


class _Registration:
    """The ``register`` of one hook call.

    pluggy hands every implementation the same arguments, so the plugin a type belongs to is
    the one whose hook implementation is running when ``register`` is called: the nearest frame
    of the call stack that runs one of them (a method shared by two instances of one class is
    told apart by its ``self``)."""

    def __init__(self, impls: list[pluggy.HookImpl], builtins: tuple[object, ...], name_of: Callable[[object], str]) -> None:
        # By identity: code objects compare equal across modules when their text is the same.
        self._impls: dict[int, list[pluggy.HookImpl]] = {}
        for impl in impls:
            code = getattr(impl.function, "__code__", None)
            if code is not None:
                self._impls.setdefault(id(code), []).append(impl)
        self._builtins = builtins
        self._name_of = name_of
        self._factories: dict[str, ProviderFactory] = {}
        #: The plugin of each registered type.
        self.owners: dict[str, object] = {}
        #: Plugins a registration was refused to (even if their hook went on), with the reason.
        self.refused: dict[int, tuple[object, str]] = {}
        #: What hooks see as ``register.types``.
        self.types: Mapping[str, ProviderFactory] = MappingProxyType(self._factories)
        self.open = True

    def __call__(self, type_name: str, factory: ProviderFactory) -> None:
        plugin = self.calling_plugin()
        if plugin is None or not self.open:
            raise ValueError("register() may only be called by a cpcreds_register_providers hook while it runs")
        if not isinstance(type_name, str) or not type_name:
            problem = f"provider type name must be a non-empty string, got {type_name!r}"
        elif type_name in BUILTIN_TYPES and not any(plugin is builtin for builtin in self._builtins):
            problem = f"provider type {type_name!r} is already registered by {BUILTIN_PLUGIN}"
        elif type_name in self._factories:
            problem = f"provider type {type_name!r} is already registered by {self._name_of(self.owners[type_name])}"
        else:
            self._factories[type_name] = factory
            self.owners[type_name] = plugin
            return
        self.refused.setdefault(id(plugin), (plugin, f"ValueError: {problem}"))
        raise ValueError(problem)

    def calling_plugin(self) -> object | None:
        """The plugin whose hook implementation is running, from the call stack."""
        frame = inspect.currentframe()
        try:
            return self._plugin_of(_frames_up(frame))
        finally:
            del frame  # a frame held in a local keeps every frame above it alive

    def failed_plugin(self, exc: BaseException) -> object | None:
        """The plugin an exception of the hook call came out of: the innermost hook
        implementation in its traceback (a wrapper the error passed through is further out)."""
        frames = []
        tb = exc.__traceback__
        while tb is not None:
            frames.append(tb.tb_frame)
            tb = tb.tb_next
        return self._plugin_of(reversed(frames))

    def _plugin_of(self, frames: Iterator[FrameType]) -> object | None:
        for frame in frames:
            impls = self._impls.get(id(frame.f_code))
            if not impls:
                continue
            if len(impls) == 1:
                return impls[0].plugin
            owner = frame.f_locals.get("self")
            for impl in impls:
                if impl.plugin is owner:
                    return impl.plugin
        return None


def _frames_up(frame: FrameType | None) -> Iterator[FrameType]:
    while frame is not None:
        yield frame
        frame = frame.f_back


class ProviderRegistry:
    """The provider types available to this process.

    ``entry_points=False`` loads only the built-ins (tests and embedders that want no surprises).
    ``plugins`` are extra plugin objects to register directly (each with a ``hookimpl``); among
    plugins with the same marks (``tryfirst``, ``trylast``), they are called in the order given,
    and after the entry points, which are called in the order they were found.
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
        from ..exec.provider import ExecPlugin
        from .file import FilePlugin

        self._pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self._pm.add_hookspecs(hookspecs)
        self._types: dict[str, ProviderType] = {}
        self._load_errors: list[PluginLoadError] = []
        self._left_out: list[object] = []  # plugins whose hook failed: not called again
        self._lock = threading.Lock()
        self._builtins: tuple[object, ...] = (ExecPlugin(), FilePlugin())
        for builtin in self._builtins:
            self._pm.register(builtin, name=f"cpcreds:{type(builtin).__name__}")
        # pluggy calls the plugin registered last first: in reverse, the first given is called first.
        for index, plugin in reversed(list(enumerate(plugins))):
            name = getattr(plugin, "__name__", f"plugin[{index}]")
            try:
                self._pm.register(plugin, name=name)
            except Exception as exc:  # pluggy refuses it: a hook with arguments the spec lacks, a name in use
                self._fail(name, None, exc)
        self._collect()
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

    def _load_entry_points(self) -> None:
        if self._entry_points is None:
            return
        with self._lock:
            if self._entry_points is None:
                return
            disable, allow = self._entry_points
            from importlib import metadata  # only when a type that is not built in is asked for

            from ..logs import stdlib_logging

            stdlib_logging()  # the CLI's log handler, if put off, is in place before a plugin can log

            found: dict[str, str | None] = {}  # entry-point name -> its distribution, first found
            for ep in metadata.entry_points(group=hookspecs.PROJECT_NAME):
                found.setdefault(ep.name, ep.dist.name if ep.dist is not None else None)
            for name in disable - {"*"}:
                if not self._pm.has_plugin(name):  # a plugin handed over directly is not an entry point
                    self._pm.set_blocked(name)
            # pluggy calls the plugin registered last first; loading in reverse makes the first
            # found the first called, so of two plugins registering one name the first found keeps it.
            for name, dist in reversed(found.items()):
                if "*" in disable or (allow is not None and name not in allow) or self._pm.is_blocked(name):
                    continue
                if self._pm.has_plugin(name):
                    self._fail(name, dist, ValueError(f"the plugin name {name!r} is already in use"))
                    continue
                try:
                    # One at a time: pluggy's loop stops at the first entry point that raises.
                    self._pm.load_setuptools_entrypoints(hookspecs.PROJECT_NAME, name=name)
                except Exception as exc:  # any import-time failure of a third-party package
                    self._fail(name, dist, exc)
            self._collect()
            self._entry_points = None

    def _fail(self, plugin: str, dist: str | None, error: BaseException | str) -> None:
        text = error if isinstance(error, str) else _one_line(error)
        self._load_errors.append(PluginLoadError(plugin, dist, redact_text(text)))

    def _name_of(self, plugin: object) -> str:
        if any(plugin is builtin for builtin in self._builtins):
            return BUILTIN_PLUGIN
        return self._pm.get_name(plugin) or repr(plugin)

    def _collect(self) -> None:
        """Call the hook of every plugin not left out, in one pluggy call; a plugin that breaks
        the call is left out with a load error, and the others are called again without it."""
        while True:
            caller = self._pm.subset_hook_caller(_HOOK, self._left_out)
            registration = _Registration(caller.get_hookimpls(), self._builtins, self._name_of)
            failure: BaseException | None = None
            try:
                caller(register=registration)
            except Exception as exc:
                failure = exc
            finally:
                registration.open = False
            culprits = dict(registration.refused)
            if failure is not None:
                culprit = registration.failed_plugin(failure)
                if culprit is None:  # raised by pluggy itself (a wrapper that did not yield, ...)
                    culprits.update(self._isolate(caller.get_hookimpls(), failure))
                else:
                    culprits[id(culprit)] = (culprit, _one_line(failure))
            if not culprits:
                break
            for plugin, error in culprits.values():
                self._left_out.append(plugin)
                self._fail(self._name_of(plugin), self._distribution(plugin)[0], error)
        owners = registration.owners
        self._types = {
            name: ProviderType(name, factory, self._name_of(owners[name]), *self._distribution(owners[name]))
            for name, factory in registration.types.items()
        }

    def _isolate(self, impls: list[pluggy.HookImpl], failure: BaseException) -> dict[int, tuple[object, str]]:
        """The plugins that fail when called alone; every third-party plugin of the call if none
        does (the failure then came from several together), so that collecting ends."""
        plugins = list({id(impl.plugin): impl.plugin for impl in impls}.values())
        failed: dict[int, tuple[object, str]] = {}
        for plugin in plugins:
            others = [*self._left_out, *(other for other in plugins if other is not plugin)]
            alone = self._pm.subset_hook_caller(_HOOK, others)
            registration = _Registration(alone.get_hookimpls(), self._builtins, self._name_of)
            try:
                alone(register=registration)
            except Exception as exc:
                failed[id(plugin)] = (plugin, _one_line(exc))
        if not failed:
            failed = {id(p): (p, _one_line(failure)) for p in plugins if not any(p is b for b in self._builtins)}
        return failed

    def _distribution(self, plugin: object) -> tuple[str | None, str | None]:
        """The distribution and version an entry-point plugin came from, as pluggy recorded them."""
        for loaded, dist in self._pm.list_plugin_distinfo():
            if loaded is plugin:
                return dist.project_name, dist.version
        return None, None

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
    from ..config.options import OptionError  # standard library only

    if isinstance(exc, OptionError):  # a cpcreds.sdk.Options declaration worded it
        return (f"options.{exc.option}" if exc.option else "options", exc.problem)
    pydantic_core = sys.modules.get("pydantic_core")
    if pydantic_core is not None and isinstance(exc, pydantic_core.ValidationError):
        from ..config import describe_validation_error

        where, what = describe_validation_error(exc)[0]  # type: ignore[arg-type]
        return (f"options.{where}" if where else "options", what)
    return ("options", redact_text(" ".join(str(exc).split())) or type(exc).__name__)
