"""ProviderRegistry: built-ins, real entry-point plugins, failure isolation, and create()."""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cpcreds.config.access import AccessPlan, resolve
from cpcreds.config import ProviderConfig, ProviderEntry
from cpcreds.credential import Credential
from cpcreds.engine import call_provider
from cpcreds.errors import ConfigError, ProviderError
from cpcreds.sdk import hookimpl
from cpcreds.exec.provider import ExecProvider
from cpcreds.providers.file import FileProvider
from cpcreds.providers.registry import BUILTIN_PLUGIN, BUILTIN_TYPES, PluginLoadError, ProviderRegistry
from tests.fakes.distributions import installed_distribution

# -- a fake installed distribution ---------------------------------------------------------------

VAULT_MODULE = """\
from cpcreds.sdk import Credential, hookimpl


class VaultProvider:
    def __init__(self, options):
        unknown = sorted(set(options) - {"mount"})
        if unknown:
            raise ValueError(f"unknown vault option(s): {', '.join(unknown)}")
        self.mount = options.get("mount", "kubernetes")

    def get_credential(self, plan):
        cluster_name = (plan.cluster.config or {}).get("clusterName")
        return Credential(token=f"vault/{self.mount}/{cluster_name}")


@hookimpl
def cpcreds_register_providers(register):
    register("vault", VaultProvider)
"""

Install = Callable[..., Path]

BROKEN_ON_IMPORT = "raise ImportError('needs libvault 2.x')\n"


#: Entry-point names the tests install; the allow-list keeps every other installed plugin out.
_INSTALLED: list[str] = []


@pytest.fixture(autouse=True)
def _only_test_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # The registry reads these itself. Whatever else is installed in this environment (the contrib
    # plugins, the provider tutorial's package) must not decide the tests, so the allow-list names
    # only the plugins a test installs (entry-point names starting with "test-").
    _INSTALLED[:] = ["test-none"]
    monkeypatch.delenv("CPCREDS_DISABLE_PLUGINS", raising=False)
    monkeypatch.setenv("CPCREDS_PLUGINS", "test-none")
    yield
    _INSTALLED.clear()


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Install]:
    """Install a minimal distribution (a module plus a dist-info with ``[cpcreds]`` entry points)
    into a folder on ``sys.path``, so ``importlib.metadata`` finds it as it would a pip install.

    Folders are prepended in call order, so a later ``site=`` folder comes *before* earlier ones.
    """
    modules: list[str] = []
    roots: set[Path] = set()

    def _install(
        dist: str,
        module: str,
        source: str,
        entry_points: dict[str, str],
        *,
        version: str = "1.0.0",
        site: str = "site",
    ) -> Path:
        root = installed_distribution(
            tmp_path / site, dist=dist, module=module, body=textwrap.dedent(source), entry_points=entry_points, version=version
        )
        _INSTALLED.extend(entry_points)
        monkeypatch.setenv("CPCREDS_PLUGINS", ",".join(_INSTALLED))
        if root not in roots:
            monkeypatch.syspath_prepend(str(root))
            roots.add(root)
        importlib.invalidate_caches()  # metadata and import finders cache directory listings
        modules.append(module)
        return root

    yield _install
    for name in modules:
        sys.modules.pop(name, None)
    importlib.invalidate_caches()


@pytest.fixture
def vault(install: Install) -> Path:
    return install("cpcreds-fake-vault", "cpcreds_fake_vault", VAULT_MODULE, {"test-vault": "cpcreds_fake_vault"}, version="1.2.3")


def entry(data: dict[str, Any]) -> ProviderEntry:
    return ProviderConfig.from_dict({"providers": [data]}).providers[0]


def profile(provider: str, *, cluster_name: str = "spoke-1") -> dict[str, Any]:
    return {
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": cluster_name, "namespace": "fleet"},
        "status": {
            "accessProviders": [
                {
                    "name": provider,
                    "cluster": {
                        "server": f"https://{cluster_name}.example:6443",
                        "extensions": [
                            {"name": "client.authentication.k8s.io/exec", "extension": {"clusterName": cluster_name}}
                        ],
                    },
                }
            ]
        },
    }


def plan_for(data: dict[str, Any], *, cluster_name: str = "spoke-1") -> AccessPlan:
    config = ProviderConfig.from_dict({"providers": [data]})
    return resolve(config, profile(data["name"], cluster_name=cluster_name))


def error_for(plugin: str, registry: ProviderRegistry) -> PluginLoadError:
    matches = [e for e in registry.load_errors if e.plugin == plugin]
    assert len(matches) == 1, registry.load_errors
    return matches[0]


# -- built-ins -----------------------------------------------------------------------------------


def test_builtin_exec_and_file_types_are_registered_as_builtin() -> None:
    registry = ProviderRegistry(entry_points=False)
    for name in ("exec", "file"):
        registered = registry.types[name]
        assert registered.name == name
        assert registered.plugin == BUILTIN_PLUGIN
        assert registered.distribution is None and registered.version is None
    assert registry.load_errors == []


def test_builtin_types_build_their_providers() -> None:
    registry = ProviderRegistry(entry_points=False)
    assert isinstance(registry.types["exec"].factory({}), ExecProvider)
    assert isinstance(registry.types["file"].factory({"tokenFile": "/t"}), FileProvider)


def test_entry_points_false_loads_only_builtins(vault: Path) -> None:
    registry = ProviderRegistry(entry_points=False)
    assert set(registry.types) == {"exec", "file"}
    assert registry.load_errors == []


# -- real entry points ---------------------------------------------------------------------------


def test_entry_point_plugin_registers_its_type_with_distribution_and_version(vault: Path) -> None:
    registry = ProviderRegistry()
    registered = registry.types["vault"]
    assert registered.plugin == "test-vault"
    assert registered.distribution == "cpcreds-fake-vault"
    assert registered.version == "1.2.3"
    assert registry.load_errors == []
    assert registry.types["file"].plugin == BUILTIN_PLUGIN


def test_entry_point_provider_builds_from_config_and_returns_a_credential(vault: Path) -> None:
    data = {"name": "vault-hub", "type": "vault", "options": {"mount": "fleet"}}
    provider = ProviderRegistry().create(entry(data))
    plan = plan_for(data, cluster_name="spoke-7")
    assert plan.kind == "vault" and dict(plan.options) == {"mount": "fleet"}
    credential = call_provider(provider, plan)
    assert isinstance(credential, Credential)
    assert credential.token == "vault/fleet/spoke-7"


def test_create_all_builds_every_entry_of_a_config(vault: Path, tmp_path: Path) -> None:
    config = ProviderConfig.from_dict(
        {
            "providers": [
                {"name": "vault-hub", "type": "vault"},
                {"name": "files", "type": "file", "options": {"tokenFile": str(tmp_path / "t")}},
                {"name": "plugin", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "x"}},
            ]
        }
    )
    providers = ProviderRegistry().create_all(config)
    assert list(providers) == ["vault-hub", "files", "plugin"]
    assert isinstance(providers["files"], FileProvider)
    assert isinstance(providers["plugin"], ExecProvider)


def test_third_party_factory_value_error_becomes_config_error_naming_options(vault: Path) -> None:
    with pytest.raises(ConfigError) as info:
        ProviderRegistry().create(entry({"name": "vault-hub", "type": "vault", "options": {"mountt": "x"}}), source="p.yaml")
    assert info.value.field == "options"
    assert info.value.entry == '"vault-hub"'
    assert "unknown vault option(s): mountt" in str(info.value)
    assert str(info.value).startswith("p.yaml: ")


# -- failure isolation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('raise RuntimeError("vault agent socket missing\\nsecond line of detail")', "RuntimeError: vault agent socket missing"),
        ("import cpcreds_dependency_that_is_not_installed", "ModuleNotFoundError: No module named"),
        ("def broken(:\n    pass", "SyntaxError"),
    ],
    ids=["raises", "missing-dependency", "syntax-error"],
)
def test_plugin_failing_on_import_is_reported_and_others_still_load(
    vault: Path, install: Install, body: str, expected: str
) -> None:
    install("cpcreds-fake-broken", "cpcreds_fake_broken", body + "\n", {"test-broken": "cpcreds_fake_broken"}, version="0.0.1")
    registry = ProviderRegistry()
    error = error_for("test-broken", registry)
    assert error.distribution == "cpcreds-fake-broken"
    assert error.error.startswith(expected)
    assert "\n" not in error.error
    assert "vault" in registry.types and "file" in registry.types


def test_plugin_whose_hook_raises_is_reported_and_skipped(vault: Path, install: Install) -> None:
    source = """\
        from cpcreds.sdk import hookimpl

        @hookimpl
        def cpcreds_register_providers(register):
            raise KeyError("consul token not configured")
    """
    install("cpcreds-fake-consul", "cpcreds_fake_consul", source, {"test-consul": "cpcreds_fake_consul"})
    registry = ProviderRegistry()
    error = error_for("test-consul", registry)
    assert error.distribution == "cpcreds-fake-consul"
    assert error.error.startswith("KeyError:") and "consul token not configured" in error.error
    assert "consul" not in registry.types
    assert registry.types["vault"].distribution == "cpcreds-fake-vault"


def test_plugin_whose_hook_raises_after_registering_leaves_no_type_behind(install: Install) -> None:
    # "reported and skipped" means skipped: a half-run hook must not leave a usable type.
    source = """\
        from cpcreds.sdk import hookimpl
        from cpcreds.providers.file import FileProvider

        @hookimpl
        def cpcreds_register_providers(register):
            register("halfway", FileProvider)
            raise RuntimeError("second half of setup failed")
    """
    install("cpcreds-fake-halfway", "cpcreds_fake_halfway", source, {"test-halfway": "cpcreds_fake_halfway"})
    registry = ProviderRegistry()
    assert error_for("test-halfway", registry).error == "RuntimeError: second half of setup failed"
    assert "halfway" not in registry.types


def test_plugin_whose_hook_has_the_wrong_signature_is_reported(install: Install) -> None:
    source = """\
        from cpcreds.sdk import hookimpl

        @hookimpl
        def cpcreds_register_providers(registrar, extra):
            registrar("odd", dict)
    """
    install("cpcreds-fake-odd", "cpcreds_fake_odd", source, {"test-odd": "cpcreds_fake_odd"})
    registry = ProviderRegistry()
    assert error_for("test-odd", registry).distribution == "cpcreds-fake-odd"
    assert "odd" not in registry.types


def test_entry_point_naming_a_missing_attribute_is_reported(install: Install) -> None:
    install("cpcreds-fake-attr", "cpcreds_fake_attr", "x = 1\n", {"test-attr": "cpcreds_fake_attr:plugin"})
    registry = ProviderRegistry()
    assert error_for("test-attr", registry).error.startswith("AttributeError")


def test_duplicate_type_from_a_second_plugin_is_reported_and_the_first_wins(vault: Path, install: Install) -> None:
    # A folder prepended later comes earlier on sys.path; so install the "second" plugin in a folder
    # that ends up *after* the vault's: re-prepend the vault's folder last.
    second = VAULT_MODULE.replace('f"vault/', 'f"impostor/')
    install("cpcreds-impostor", "cpcreds_impostor", second, {"test-impostor": "cpcreds_impostor"}, site="later")
    sys.path.remove(str(vault))
    sys.path.insert(0, str(vault))
    importlib.invalidate_caches()

    registry = ProviderRegistry()
    assert registry.types["vault"].plugin == "test-vault"
    assert registry.types["vault"].distribution == "cpcreds-fake-vault"
    error = error_for("test-impostor", registry)
    assert error.distribution == "cpcreds-impostor"
    assert "'vault' is already registered by test-vault" in error.error
    data = {"name": "v", "type": "vault"}
    assert call_provider(registry.create(entry(data)), plan_for(data)).token.startswith("vault/")


def test_plugin_claiming_a_builtin_type_is_reported_and_the_builtin_wins(install: Install) -> None:
    source = """\
        from cpcreds.sdk import hookimpl

        @hookimpl
        def cpcreds_register_providers(register):
            register("file", dict)
    """
    install("cpcreds-fake-hijack", "cpcreds_fake_hijack", source, {"test-hijack": "cpcreds_fake_hijack"})
    registry = ProviderRegistry()
    assert registry.types["file"].plugin == BUILTIN_PLUGIN
    assert registry.types["file"].factory is FileProvider
    assert f"already registered by {BUILTIN_PLUGIN}" in error_for("test-hijack", registry).error


def test_plugin_registering_an_empty_type_name_is_reported(install: Install) -> None:
    source = """\
        from cpcreds.sdk import hookimpl

        @hookimpl
        def cpcreds_register_providers(register):
            register("", dict)
    """
    install("cpcreds-fake-empty", "cpcreds_fake_empty", source, {"test-empty": "cpcreds_fake_empty"})
    registry = ProviderRegistry()
    assert "non-empty string" in error_for("test-empty", registry).error
    assert "" not in registry.types


# -- restricting which plugins load --------------------------------------------------------------


@pytest.mark.parametrize("value", ["test-vault", "*", " other , test-vault "], ids=["by-name", "star", "list"])
def test_disable_plugins_env_skips_the_plugin(vault: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CPCREDS_DISABLE_PLUGINS", value)
    registry = ProviderRegistry()
    assert "vault" not in registry.types
    assert {"exec", "file"} <= set(registry.types)
    assert registry.load_errors == []


def test_plugins_allow_list_env_skips_plugins_not_listed(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CPCREDS_PLUGINS", "other")
    registry = ProviderRegistry()
    assert set(registry.types) == {"exec", "file"}


def test_plugins_allow_list_env_loads_plugins_listed(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CPCREDS_PLUGINS", "other,test-vault")
    assert "vault" in ProviderRegistry().types


def test_disable_argument_overrides_the_environment(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CPCREDS_DISABLE_PLUGINS", "test-vault")
    assert "vault" in ProviderRegistry(disable=set()).types
    assert "vault" not in ProviderRegistry(disable={"test-vault"}, allow={"test-vault"}).types


def test_plugin_objects_passed_directly_are_registered() -> None:
    class LocalPlugin:
        @hookimpl
        def cpcreds_register_providers(self, register: Any) -> None:
            register("local", FileProvider)

    registry = ProviderRegistry(entry_points=False, plugins=(LocalPlugin(),))
    assert registry.types["local"].plugin == "plugin[0]"
    assert registry.types["local"].factory is FileProvider


# -- pluggy: ordering, wrappers, reserved names ---------------------------------------------------


def test_a_tryfirst_plugin_found_second_takes_the_name_before_the_first(vault: Path, install: Install) -> None:
    # Found after the vault (its folder is later on sys.path), but called before it.
    eager = """\
        from cpcreds.sdk import Credential, hookimpl

        class Eager:
            def __init__(self, options):
                pass

            def get_credential(self, plan):
                return Credential(token="eager")

        @hookimpl(tryfirst=True)
        def cpcreds_register_providers(register):
            register("vault", Eager)
    """
    install("cpcreds-eager", "cpcreds_fake_eager", eager, {"test-eager": "cpcreds_fake_eager"}, site="later")
    sys.path.remove(str(vault))
    sys.path.insert(0, str(vault))
    importlib.invalidate_caches()

    registry = ProviderRegistry()
    assert registry.types["vault"].plugin == "test-eager"
    assert registry.types["vault"].distribution == "cpcreds-eager"
    assert "'vault' is already registered by test-eager" in error_for("test-vault", registry).error
    data = {"name": "v", "type": "vault"}
    assert call_provider(registry.create(entry(data)), plan_for(data)).token == "eager"


FALLBACK_WRAPPER = """\
    from cpcreds.sdk import Credential, hookimpl

    SEEN = []

    class Fallback:
        def __init__(self, options):
            pass

        def get_credential(self, plan):
            return Credential(token="fallback")

    @hookimpl(wrapper=True)
    def cpcreds_register_providers(register):
        SEEN.append(sorted(register.types))  # before the others
        yield
        SEEN.append(sorted(register.types))  # after every other plugin registered
        if "vault" not in register.types:
            register("vault", Fallback)
"""


def test_a_wrapper_sees_what_the_other_plugins_registered(vault: Path, install: Install) -> None:
    install("cpcreds-fallback", "cpcreds_fake_fallback", FALLBACK_WRAPPER, {"test-fallback": "cpcreds_fake_fallback"})
    registry = ProviderRegistry()
    assert registry.types["vault"].plugin == "test-vault"  # taken by the vault plugin: no fallback
    assert registry.load_errors == []
    seen = sys.modules["cpcreds_fake_fallback"].SEEN
    assert seen[-2:] == [[], ["exec", "file", "vault"]]


def test_a_wrapper_registers_a_type_nobody_else_did_and_it_is_credited_to_it(install: Install) -> None:
    install("cpcreds-fallback", "cpcreds_fake_fallback", FALLBACK_WRAPPER, {"test-fallback": "cpcreds_fake_fallback"}, version="2.0")
    registry = ProviderRegistry()
    registered = registry.types["vault"]
    assert (registered.plugin, registered.distribution, registered.version) == ("test-fallback", "cpcreds-fallback", "2.0")
    assert registry.types["exec"].plugin == BUILTIN_PLUGIN
    data = {"name": "v", "type": "vault"}
    assert call_provider(registry.create(entry(data)), plan_for(data)).token == "fallback"


def test_a_wrapper_that_raises_is_a_load_error_and_the_others_still_register(vault: Path, install: Install) -> None:
    source = """\
        from cpcreds.sdk import hookimpl

        @hookimpl(wrapper=True)
        def cpcreds_register_providers(register):
            yield
            raise RuntimeError("audit log unreachable")
    """
    install("cpcreds-fake-audit", "cpcreds_fake_audit", source, {"test-audit": "cpcreds_fake_audit"})
    registry = ProviderRegistry()
    assert error_for("test-audit", registry).error == "RuntimeError: audit log unreachable"
    assert registry.types["vault"].plugin == "test-vault"
    assert {"exec", "file"} <= set(registry.types)


def test_a_wrapper_that_never_yields_is_a_load_error_and_the_others_still_register(vault: Path, install: Install) -> None:
    source = """\
        from cpcreds.sdk import hookimpl

        @hookimpl(wrapper=True)
        def cpcreds_register_providers(register):
            if False:
                yield
    """
    install("cpcreds-fake-noyield", "cpcreds_fake_noyield", source, {"test-noyield": "cpcreds_fake_noyield"})
    registry = ProviderRegistry()
    assert error_for("test-noyield", registry).distribution == "cpcreds-fake-noyield"
    assert registry.types["vault"].plugin == "test-vault"


def test_a_plugin_whose_hook_raises_beside_good_ones_is_left_out_and_each_type_credited() -> None:
    class Good:
        @hookimpl
        def cpcreds_register_providers(self, register: Any) -> None:
            register("good", FileProvider)

    class Bad:
        @hookimpl(tryfirst=True)
        def cpcreds_register_providers(self, register: Any) -> None:
            register("bad", FileProvider)
            raise RuntimeError("bad plugin")

    class Late:
        @hookimpl(trylast=True)
        def cpcreds_register_providers(self, register: Any) -> None:
            register("late", FileProvider)

    registry = ProviderRegistry(entry_points=False, plugins=(Good(), Bad(), Late()))
    assert {name: t.plugin for name, t in registry.types.items()} == {
        "exec": BUILTIN_PLUGIN, "file": BUILTIN_PLUGIN, "good": "plugin[0]", "late": "plugin[2]"
    }  # fmt: skip
    assert registry.load_errors == [PluginLoadError("plugin[1]", None, "RuntimeError: bad plugin")]


def test_plugins_handed_over_are_called_in_the_order_given() -> None:
    class Claims:
        @hookimpl
        def cpcreds_register_providers(self, register: Any) -> None:
            register("shared", FileProvider)

    registry = ProviderRegistry(entry_points=False, plugins=(Claims(), Claims()))
    assert registry.types["shared"].plugin == "plugin[0]"
    assert "'shared' is already registered by plugin[0]" in error_for("plugin[1]", registry).error


def test_two_instances_of_one_plugin_class_are_credited_apart() -> None:
    class Named:
        def __init__(self, type_name: str) -> None:
            self.type_name = type_name

        @hookimpl
        def cpcreds_register_providers(self, register: Any) -> None:
            register(self.type_name, FileProvider)

    registry = ProviderRegistry(entry_points=False, plugins=(Named("one"), Named("two")))
    assert (registry.types["one"].plugin, registry.types["two"].plugin) == ("plugin[0]", "plugin[1]")


@pytest.mark.parametrize("name", sorted(BUILTIN_TYPES))
def test_no_plugin_can_take_a_builtin_name_even_tryfirst(install: Install, name: str) -> None:
    source = f"""\
        from cpcreds.sdk import hookimpl

        @hookimpl(tryfirst=True)
        def cpcreds_register_providers(register):
            register({name!r}, dict)
    """
    install("cpcreds-fake-usurper", "cpcreds_fake_usurper", source, {"test-usurper": "cpcreds_fake_usurper"})
    registry = ProviderRegistry()
    assert registry.types[name].plugin == BUILTIN_PLUGIN
    assert registry.types[name].factory is not dict
    assert f"'{name}' is already registered by {BUILTIN_PLUGIN}" in error_for("test-usurper", registry).error


def test_a_plugin_that_swallows_a_refused_registration_still_fails_as_a_whole() -> None:
    class Stubborn:
        @hookimpl
        def cpcreds_register_providers(self, register: Any) -> None:
            register("mine", FileProvider)
            try:
                register("exec", FileProvider)
            except ValueError:
                pass

    registry = ProviderRegistry(entry_points=False, plugins=(Stubborn(),))
    assert "mine" not in registry.types
    assert "'exec' is already registered" in error_for("plugin[0]", registry).error


def test_register_called_after_the_hook_returned_is_refused() -> None:
    kept: list[Any] = []

    class Keeper:
        @hookimpl
        def cpcreds_register_providers(self, register: Any) -> None:
            kept.append(register)

    registry = ProviderRegistry(entry_points=False, plugins=(Keeper(),))
    with pytest.raises(ValueError, match="while it runs"):
        kept[0]("late", FileProvider)
    assert "late" not in registry.types


def test_a_disabled_entry_point_is_never_imported(install: Install, monkeypatch: pytest.MonkeyPatch) -> None:
    install("cpcreds-fake-off", "cpcreds_fake_off", BROKEN_ON_IMPORT, {"test-off": "cpcreds_fake_off"})
    monkeypatch.setenv("CPCREDS_DISABLE_PLUGINS", "test-off")
    registry = ProviderRegistry()
    assert registry.load_errors == [] and "cpcreds_fake_off" not in sys.modules


# -- create() ------------------------------------------------------------------------------------


def test_create_unknown_type_raises_config_error_naming_entry_field_and_installed_types(vault: Path) -> None:
    with pytest.raises(ConfigError) as info:
        ProviderRegistry().create(entry({"name": "hub", "type": "aws-iam"}), source="providers.yaml")
    error = info.value
    assert error.source == "providers.yaml"
    assert error.entry == '"hub"'
    assert error.field == "type"
    assert "unknown provider type 'aws-iam'" in str(error)
    assert "installed types: file, vault" in str(error)


def test_create_unknown_type_hints_at_plugins_that_failed_to_load(install: Install) -> None:
    install("cpcreds-fake-broken", "cpcreds_fake_broken", "raise ImportError('no hvac')\n", {"test-broken": "cpcreds_fake_broken"})
    with pytest.raises(ConfigError, match="plugins that failed to load: test-broken"):
        ProviderRegistry().create(entry({"name": "hub", "type": "vault"}))


def test_create_file_with_an_unknown_option_raises_config_error_naming_options(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        ProviderRegistry(entry_points=False).create(
            entry({"name": "files", "type": "file", "options": {"tokenFile": str(tmp_path / "t"), "bogus": 1}})
        )
    assert info.value.field == "options.bogus"
    assert "field options.bogus" in str(info.value)


def test_create_file_with_certificate_but_no_key_raises_config_error_naming_options(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        ProviderRegistry(entry_points=False).create(
            entry({"name": "files", "type": "file", "options": {"clientCertificateFile": str(tmp_path / "c")}})
        )
    assert info.value.field == "options"
    assert "field options" in str(info.value)
    assert "clientCertificateFile and clientKeyFile go together" in str(info.value)


def test_create_config_error_message_has_no_pydantic_prefix(tmp_path: Path) -> None:
    # config.py strips pydantic's "Value error, " from its messages; create() should too.
    with pytest.raises(ConfigError) as info:
        ProviderRegistry(entry_points=False).create(entry({"name": "files", "type": "file", "options": {}}))
    assert "Value error" not in str(info.value)


def test_create_exec_type_with_options_raises_config_error() -> None:
    with pytest.raises(ConfigError, match="exec plugins take no options") as info:
        ProviderRegistry(entry_points=False).create(entry({"name": "x", "type": "exec", "options": {"a": 1}}))
    assert info.value.field == "options"


def test_create_rejects_a_factory_that_builds_no_provider() -> None:
    class NoGetCredential:
        @hookimpl
        def cpcreds_register_providers(self, register: Any) -> None:
            register("hollow", lambda options: object())

    registry = ProviderRegistry(entry_points=False, plugins=(NoGetCredential(),))
    with pytest.raises(ConfigError, match="without get_credential"):
        registry.create(entry({"name": "h", "type": "hollow"}))


# -- call_provider -------------------------------------------------------------------------------


class _Raising:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def get_credential(self, plan: AccessPlan) -> Credential:
        raise self.exc


class _Returning:
    def __init__(self, value: Any) -> None:
        self.value = value

    def get_credential(self, plan: AccessPlan) -> Any:
        return self.value


def test_provider_raising_any_exception_is_wrapped_in_provider_error_with_its_name() -> None:
    original = ZeroDivisionError("division by zero in vault client")
    plan = plan_for({"name": "flaky-vault", "type": "vault"})
    with pytest.raises(ProviderError) as info:
        call_provider(_Raising(original), plan)
    assert info.value.provider == "flaky-vault"
    assert str(info.value) == "provider flaky-vault: ZeroDivisionError: division by zero in vault client"
    # Not chained: the provider's exception may carry what it was handling (a token, a response).
    assert info.value.__cause__ is None and info.value.__context__ is None


def test_provider_raising_provider_error_passes_through_unchanged() -> None:
    original = ProviderError("vault sealed", provider="flaky-vault")
    with pytest.raises(ProviderError) as info:
        call_provider(_Raising(original), plan_for({"name": "flaky-vault", "type": "vault"}))
    assert info.value is original


@pytest.mark.parametrize("value", [None, {"token": "t"}, "token"], ids=["none", "dict", "str"])
def test_provider_returning_a_non_credential_is_a_provider_error(value: Any) -> None:
    with pytest.raises(ProviderError, match=f"returned {type(value).__name__}, not a Credential") as info:
        call_provider(_Returning(value), plan_for({"name": "odd", "type": "vault"}))
    assert info.value.provider == "odd"
    assert "'t'" not in str(info.value)  # the returned object (maybe a secret) is not quoted


# -- lazy loading, and warnings only when needed ---------------------------------------------------


def test_exec_and_file_entries_import_no_third_party_plugin(install: Install, tmp_path: Path) -> None:
    install("cpcreds-fake-lazy", "cpcreds_fake_lazy", BROKEN_ON_IMPORT, {"test-lazy": "cpcreds_fake_lazy"})
    registry = ProviderRegistry()
    config = ProviderConfig.from_dict(
        {
            "providers": [
                {"name": "plugin", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "x"}},
                {"name": "files", "type": "file", "options": {"tokenFile": str(tmp_path / "t")}},
            ]
        }
    )
    registry.create_all(config)
    assert "cpcreds_fake_lazy" not in sys.modules  # kubectl's every get-credential stays fast and quiet
    assert error_for("test-lazy", registry).error == "ImportError: needs libvault 2.x"  # reading it loads


def test_unknown_type_error_names_the_broken_plugin_and_why(install: Install) -> None:
    install("cpcreds-fake-why", "cpcreds_fake_why", BROKEN_ON_IMPORT, {"test-why": "cpcreds_fake_why"})
    with pytest.raises(ConfigError) as info:
        ProviderRegistry().create(entry({"name": "hub", "type": "vault"}), source="p.yaml")
    assert "plugins that failed to load: test-why (ImportError: needs libvault 2.x)" in str(info.value)
    assert "\n" not in str(info.value)


def test_load_error_message_is_redacted(install: Install) -> None:
    install("cpcreds-fake-leak", "cpcreds_fake_leak", "raise RuntimeError('VAULT_TOKEN=hvs.s3cr3t rejected')\n", {"test-leak": "cpcreds_fake_leak"})
    error = error_for("test-leak", ProviderRegistry())
    assert "hvs.s3cr3t" not in error.error
    assert error.error.startswith("RuntimeError: VAULT_TOKEN=")


def test_broken_plugin_is_not_logged_when_loading(install: Install, caplog: pytest.LogCaptureFixture) -> None:
    install("cpcreds-fake-quiet", "cpcreds_fake_quiet", BROKEN_ON_IMPORT, {"test-quiet": "cpcreds_fake_quiet"})
    with caplog.at_level("DEBUG", logger="cpcreds.providers.registry"):
        registry = ProviderRegistry()
        assert registry.load_errors
    assert caplog.records == []


def test_warn_load_errors_logs_each_failure_once_per_process(install: Install, caplog: pytest.LogCaptureFixture) -> None:
    install("cpcreds-fake-once", "cpcreds_fake_once", BROKEN_ON_IMPORT, {"test-once": "cpcreds_fake_once"})
    with caplog.at_level("WARNING", logger="cpcreds.providers.registry"):
        ProviderRegistry().warn_load_errors()
        ProviderRegistry().warn_load_errors()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1, messages
    assert "plugin failed to load" in messages[0] and "test-once" in messages[0]


def test_invalid_provider_options_are_reported_in_our_words_with_nothing_chained() -> None:
    from cpcreds import ConfigError, ProviderConfig, ProviderRegistry

    config = ProviderConfig.from_dict({"providers": [{"name": "f", "type": "file", "options": {"tokenFile": ["SECRET-X"]}}]})
    with pytest.raises(ConfigError) as failure:
        ProviderRegistry(entry_points=False).create_all(config)
    message = str(failure.value)
    assert "SECRET-X" not in message and "Input should" not in message and "options.tokenFile" in message
    assert failure.value.__context__ is None and failure.value.__cause__ is None
