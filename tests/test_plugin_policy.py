"""pluginPolicy: which exec plugins may run (client-go's spelling), and sha256 pinning.

Plugins here are real executables: a copy of the system's ``echo`` (an ELF binary that prints
its argument, the ExecCredential) and ``#!/bin/sh`` scripts.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from cpcreds import ConfigError, CredentialEngine, ExecProvider, PluginNotAllowed, ProviderConfig, resolve
from cpcreds.config import PluginPolicy
from cpcreds.exec.pinning import PinStore, sha256_file
from cpcreds.exec.policy import PluginGate, read_interpreter
from tests.fakes.builders import access_provider, cluster_profile

ECHO = shutil.which("echo", path="/bin:/usr/bin")
SH = "/bin/sh"
pytestmark = pytest.mark.skipif(ECHO is None or not os.path.exists(SH), reason="needs /bin/echo and /bin/sh")
V1 = "client.authentication.k8s.io/v1"


def answer(token: str) -> str:
    return '{"apiVersion":"%s","kind":"ExecCredential","status":{"token":"%s"}}' % (V1, token)


def echo_plugin(folder: Path, name: str = "echo-plugin") -> Path:
    """A real binary plugin: a copy of echo; its argument is the answer."""
    path = folder / name
    shutil.copyfile(ECHO, path)  # type: ignore[arg-type]
    path.chmod(0o755)
    return path


def script_plugin(folder: Path, token: str, name: str = "sh-plugin", shebang: str = "#!/bin/sh") -> Path:
    path = folder / name
    path.write_text(f"{shebang}\nprintf '%s' '{answer(token)}'\n")
    path.chmod(0o755)
    return path


def digest(path: Path | str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def config(tmp_path: Path, policy: dict[str, Any] | None, *entries: dict[str, Any]) -> ProviderConfig:
    data: dict[str, Any] = {"providers": list(entries)}
    if policy is not None:
        data["pluginPolicy"] = policy
    return ProviderConfig.from_dict(data, source=str(tmp_path / "config.yaml"), base_dir=tmp_path)


def entry(name: str, command: str, *args: str) -> dict[str, Any]:
    return {"name": name, "execConfig": {"apiVersion": V1, "command": command, "args": list(args)}}


def profile(provider: str) -> dict[str, Any]:
    return cluster_profile("spoke", access_provider(provider))


def engine_for(cfg: ProviderConfig) -> CredentialEngine:
    return CredentialEngine(cfg, prometheus_registry=CollectorRegistry())


def token_of(cfg: ProviderConfig, provider: str) -> str:
    with engine_for(cfg) as engine:
        return engine.get_credential(profile(provider)).token  # type: ignore[return-value]


def refusal_of(cfg: ProviderConfig, provider: str) -> PluginNotAllowed:
    with engine_for(cfg) as engine, pytest.raises(PluginNotAllowed) as caught:
        engine.get_credential(profile(provider))
    return caught.value


# -- policy types ------------------------------------------------------------------------------


def test_default_is_allow_all(tmp_path: Path) -> None:
    plugin = echo_plugin(tmp_path)
    cfg = config(tmp_path, None, entry("p", str(plugin), answer("t1")))
    assert cfg.plugin_policy.policy_type == "AllowAll"
    assert token_of(cfg, "p") == "t1"


def test_deny_all_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    plugin = tmp_path / "plugin"
    plugin.write_text(f"#!/bin/sh\ntouch {marker}\nprintf '%s' '{answer('x')}'\n")
    plugin.chmod(0o755)
    cfg = config(tmp_path, {"policyType": "DenyAll"}, entry("p", str(plugin)))
    error = refusal_of(cfg, "p")
    assert str(error) == f'provider p: exec: plugin "{plugin}" not allowed: policy set to "DenyAll"'
    assert error.decision == "denied" and not marker.exists()


def test_allowlist_by_absolute_relative_and_path_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    plugin = echo_plugin(bin_dir, "cloud-login")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    # The plugin named three ways; the allowlist named three ways; every pair matches.
    commands = [str(plugin), "./bin/cloud-login", "cloud-login"]
    for allowed in commands:
        for command in commands:
            cfg = config(tmp_path, {"policyType": "Allowlist", "allowlist": [{"command": allowed}]}, entry("p", command, answer("ok")))
            assert token_of(cfg, "p") == "ok", (allowed, command)


def test_allowlist_refuses_other_commands_naming_both_paths(tmp_path: Path) -> None:
    allowed = echo_plugin(tmp_path, "allowed")
    other = echo_plugin(tmp_path, "other")
    cfg = config(tmp_path, {"policyType": "Allowlist", "allowlist": [{"command": str(allowed)}]}, entry("p", "./other", answer("x")))
    error = refusal_of(cfg, "p")
    assert error.decision == "not_allowlisted"
    assert f'plugin "{other}" not allowed: {other} is not in pluginPolicy.allowlist' in str(error)


def test_same_name_elsewhere_is_not_allowed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # client-go compares resolved paths: an allowlisted bare name does not allow a file of the
    # same name in another folder.
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    echo_plugin(tmp_path / "a", "login")
    elsewhere = echo_plugin(tmp_path / "b", "login")
    monkeypatch.setenv("PATH", str(tmp_path / "a"))
    cfg = config(tmp_path, {"policyType": "Allowlist", "allowlist": [{"command": "login"}]}, entry("p", str(elsewhere), answer("x")))
    assert refusal_of(cfg, "p").decision == "not_allowlisted"


def test_missing_plugin_is_not_found_not_refused(tmp_path: Path) -> None:
    from cpcreds import PluginNotFound

    cfg = config(tmp_path, {"policyType": "Allowlist", "allowlist": [{"command": "/nonexistent/x"}]}, entry("p", "/nonexistent/x"))
    with engine_for(cfg) as engine, pytest.raises(PluginNotFound):
        engine.get_credential(profile("p"))


@pytest.mark.parametrize(
    ("policy", "field", "words"),
    [
        ({"allowlist": [{"command": "x"}]}, "pluginPolicy.policyType", "is required"),
        ({"policyType": "Allowlist"}, "pluginPolicy.allowlist", "at least one command"),
        ({"policyType": "Allowlist", "allowlist": []}, "pluginPolicy.allowlist", "at least one command"),
        ({"policyType": "AllowAll", "allowlist": [{"command": "x"}]}, "pluginPolicy.allowlist", "only with policyType Allowlist"),
        ({"policyType": "allowlist"}, "pluginPolicy.policyType", "must be one of AllowAll, DenyAll, Allowlist"),
        ({"policyType": "Allowlist", "allowlist": [{"command": "x", "sha256": "abc"}]}, "pluginPolicy.allowlist[0].sha256", "pattern"),
        ({"policyType": "Allowlist", "allowlist": [{"command": ""}]}, "pluginPolicy.allowlist[0].command", ""),
        ({"policyType": "Allowlist", "allowlist": [{"cmd": "x"}]}, "pluginPolicy.allowlist[0]", ""),
        ("Allowlist", "pluginPolicy", "must be a mapping"),
    ],
)
def test_misconfigured_policy_fails_closed_at_load(tmp_path: Path, policy: Any, field: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config(tmp_path, policy, entry("p", "x"))
    assert caught.value.field is not None and caught.value.field.startswith(field)
    assert words in str(caught.value)


def test_policy_loads_from_a_yaml_file(tmp_path: Path) -> None:
    from cpcreds import load_config

    plugin = echo_plugin(tmp_path)
    (tmp_path / "config.yaml").write_text(
        "pluginPolicy:\n  policyType: Allowlist\n  allowlist:\n  - command: ./echo-plugin\n"
        f"    sha256: {digest(plugin).upper()}\n"
        f"providers:\n- name: p\n  execConfig:\n    apiVersion: {V1}\n    command: ./echo-plugin\n    args: ['{answer('y')}']\n"
    )
    cfg = load_config(tmp_path / "config.yaml")
    assert cfg.plugin_policy.allowlist[0].command == str(plugin)  # type: ignore[index]
    assert cfg.plugin_policy.allowlist[0].sha256 == digest(plugin)  # type: ignore[index]
    assert token_of(cfg, "p") == "y"


# -- pinning -----------------------------------------------------------------------------------


def pinned(tmp_path: Path, *pins: tuple[Path | str, str | None]) -> dict[str, Any]:
    return {"policyType": "Allowlist", "allowlist": [{"command": str(c), **({"sha256": d} if d else {})} for c, d in pins]}


def test_pinned_binary_runs(tmp_path: Path) -> None:
    plugin = echo_plugin(tmp_path)
    cfg = config(tmp_path, pinned(tmp_path, (plugin, digest(plugin))), entry("p", str(plugin), answer("pinned")))
    assert token_of(cfg, "p") == "pinned"


def test_pinned_mismatch_names_command_and_both_digests(tmp_path: Path) -> None:
    plugin = echo_plugin(tmp_path)
    wrong = "0" * 64
    cfg = config(tmp_path, pinned(tmp_path, (plugin, wrong)), entry("p", str(plugin), answer("x")))
    error = refusal_of(cfg, "p")
    assert error.decision == "digest_mismatch"
    assert str(error) == (
        f'provider p: exec: plugin "{plugin}" not allowed: {plugin} has sha256 {digest(plugin)}, but pluginPolicy pins {wrong}'
    )


def test_either_of_two_pins_allows(tmp_path: Path) -> None:
    plugin = echo_plugin(tmp_path)
    cfg = config(tmp_path, pinned(tmp_path, (plugin, "1" * 64), (plugin, digest(plugin))), entry("p", str(plugin), answer("ok")))
    assert token_of(cfg, "p") == "ok"


def test_an_unpinned_entry_for_the_same_command_allows_any_bytes(tmp_path: Path) -> None:
    plugin = echo_plugin(tmp_path)
    cfg = config(tmp_path, pinned(tmp_path, (plugin, "1" * 64), (plugin, None)), entry("p", str(plugin), answer("ok")))
    assert token_of(cfg, "p") == "ok"


def test_script_interpreter_must_be_allowed(tmp_path: Path) -> None:
    plugin = script_plugin(tmp_path, "from-script")
    cfg = config(tmp_path, pinned(tmp_path, (plugin, digest(plugin))), entry("p", str(plugin)))
    error = refusal_of(cfg, "p")
    assert error.decision == "interpreter"
    assert f"its interpreter {SH} (from #!) is not in pluginPolicy.allowlist" in str(error)
    allowed = config(tmp_path, pinned(tmp_path, (plugin, digest(plugin)), (SH, None)), entry("p", str(plugin)))
    assert token_of(allowed, "p") == "from-script"


def test_env_shebang_needs_env_and_its_program(tmp_path: Path) -> None:
    env = shutil.which("env", path="/usr/bin:/bin")
    if env is None:
        pytest.skip("no env")
    plugin = script_plugin(tmp_path, "via-env", shebang=f"#!{env} sh")
    sh = shutil.which("sh")
    only_env = config(tmp_path, pinned(tmp_path, (plugin, None), (env, None)), entry("p", str(plugin)))
    assert f"its interpreter sh (from #! via {env}) is not in pluginPolicy.allowlist" in str(refusal_of(only_env, "p"))
    both = config(tmp_path, pinned(tmp_path, (plugin, None), (env, None), (sh, None)), entry("p", str(plugin)))  # type: ignore[arg-type]
    assert token_of(both, "p") == "via-env"


def test_pinned_interpreter_runs_from_its_sealed_copy(tmp_path: Path) -> None:
    plugin = script_plugin(tmp_path, "sealed")
    cfg = config(tmp_path, pinned(tmp_path, (plugin, digest(plugin)), (SH, digest(SH))), entry("p", str(plugin)))
    assert token_of(cfg, "p") == "sealed"
    bad = config(tmp_path, pinned(tmp_path, (plugin, digest(plugin)), (SH, "2" * 64)), entry("p", str(plugin)))
    error = refusal_of(bad, "p")
    assert error.decision == "digest_mismatch" and f"{SH} has sha256 {digest(SH)}" in str(error)


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b"#!/bin/sh\n", ("/bin/sh", None)),
        (b"#! /usr/bin/env  python3 -u \nrest", ("/usr/bin/env", "python3 -u")),
        (b"#!/bin/bash\t-e\n", ("/bin/bash", "-e")),
        (b"#!\n", None),
        (b"\x7fELF", None),
        (b"", None),
    ],
)
def test_read_interpreter(head: bytes, expected: Any) -> None:
    assert read_interpreter(head) == expected


def test_unchanged_binary_is_not_hashed_again_and_a_changed_one_is(tmp_path: Path) -> None:
    plugin = echo_plugin(tmp_path)
    first = digest(plugin)
    store = PinStore()
    provider = ExecProvider(gate=PluginGate(PluginPolicy.model_validate(pinned(tmp_path, (plugin, first))), pins=store))
    cfg = config(tmp_path, None, entry("p", str(plugin), answer("again")))
    plan = resolve(cfg, profile("p"))
    for _ in range(5):
        assert provider.get_credential(plan).token == "again"
    assert store.hashed == 1
    # Rewritten in place with the same bytes: ctime and mtime move, so it is hashed again.
    plugin.write_bytes(plugin.read_bytes())
    assert provider.get_credential(plan).token == "again"
    assert store.hashed == 2


def test_the_hashed_bytes_are_what_runs_while_the_path_is_swapped(tmp_path: Path) -> None:
    """A thread keeps renaming another executable over the pinned path and back while the
    plugin runs: every run either is refused (the other bytes were hashed) or runs the pinned
    bytes. The other executable (a script that answers "swapped") never runs."""
    good = echo_plugin(tmp_path, "good")
    evil = script_plugin(tmp_path, "swapped", name="evil")
    path = tmp_path / "plugin"
    shutil.copyfile(good, path)
    path.chmod(0o755)
    good_copy, evil_copy = tmp_path / "good.next", tmp_path / "evil.next"
    policy = pinned(tmp_path, (path, digest(good)), (SH, None))
    provider = ExecProvider(gate=PluginGate(PluginPolicy.model_validate(policy)))
    plan = resolve(config(tmp_path, None, entry("p", str(path), answer("genuine"))), profile("p"))
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            for source, link in ((evil, evil_copy), (good, good_copy)):
                os.link(source, link)
                os.replace(link, path)  # atomic: the path is always one whole executable

    swapper = threading.Thread(target=swap)
    swapper.start()
    outcomes: dict[str, int] = {"genuine": 0, "refused": 0}
    try:
        for _ in range(3000):
            try:
                token = provider.get_credential(plan).token
            except PluginNotAllowed as refusal:
                assert refusal.decision == "digest_mismatch"
                outcomes["refused"] += 1
            else:
                assert token == "genuine"  # never "swapped"
                outcomes["genuine"] += 1
            if outcomes["genuine"] >= 20 and outcomes["refused"] >= 20:
                break
    finally:
        stop.set()
        swapper.join()
    assert outcomes["genuine"] > 0 and outcomes["refused"] > 0, outcomes


def test_portable_private_copy_runs_the_hashed_bytes(tmp_path: Path) -> None:
    plugin = script_plugin(tmp_path, "portable")
    store = PinStore(use_memfd=False)
    gate = PluginGate(PluginPolicy.model_validate(pinned(tmp_path, (plugin, digest(plugin)), (SH, None))), pins=store)
    provider = ExecProvider(gate=gate)
    plan = resolve(config(tmp_path, None, entry("p", str(plugin))), profile("p"))
    assert provider.get_credential(plan).token == "portable"
    run = store.open_copy(str(plugin))
    try:
        mode = os.stat(run.executable).st_mode
        assert stat.S_IMODE(mode) == 0o500 and stat.S_IMODE(os.stat(os.path.dirname(run.executable)).st_mode) == 0o700
        assert sha256_file(run.executable) == digest(plugin)
    finally:
        run.release()
        store.close()


def test_refusals_are_counted_and_logged_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cpcreds.logs import configure_logging

    plugin = echo_plugin(tmp_path)
    cfg = config(tmp_path, pinned(tmp_path, (plugin, "3" * 64)), entry("p", str(plugin), answer("x")))
    decisions: list[tuple[str, str]] = []
    provider = ExecProvider()
    provider.use_plugin_policy(cfg.plugin_policy, lambda name, decision: decisions.append((name, decision)))
    plan = resolve(cfg, profile("p"))
    configure_logging("info")
    try:
        for _ in range(3):
            with pytest.raises(PluginNotAllowed):
                provider.get_credential(plan)
    finally:
        configure_logging("warning")
    logged = [line for line in capsys.readouterr().err.splitlines() if "refused by pluginPolicy" in line]
    assert len(logged) == 1 and "provider=p" in logged[0]
    assert decisions == [("p", "digest_mismatch")] * 3
    registry = CollectorRegistry()
    with CredentialEngine(cfg, prometheus_registry=registry) as engine, pytest.raises(PluginNotAllowed):
        engine.get_credential(profile("p"))
    assert registry.get_sample_value("cpcreds_plugin_policy_total", {"provider": "p", "decision": "digest_mismatch"}) == 1
    assert registry.get_sample_value("rest_client_exec_plugin_policy_call_total", {"status": "denied"}) == 1


def test_allowed_runs_are_counted(tmp_path: Path) -> None:
    plugin = echo_plugin(tmp_path)
    registry = CollectorRegistry()
    cfg = config(tmp_path, pinned(tmp_path, (plugin, digest(plugin))), entry("p", str(plugin), answer("x")))
    with CredentialEngine(cfg, prometheus_registry=registry) as engine:
        engine.get_credential(profile("p"))
    assert registry.get_sample_value("cpcreds_plugin_policy_total", {"provider": "p", "decision": "allowed_pinned"}) == 1
    assert registry.get_sample_value("rest_client_exec_plugin_policy_call_total", {"status": "allowed"}) == 1


def test_an_admitted_run_is_counted_once_whether_its_plugin_starts_or_not(tmp_path: Path) -> None:
    from cpcreds.errors import PluginNotFound

    broken = tmp_path / "not-a-program"
    broken.write_bytes(b"\x7fELF\x00garbage")  # executable, but no program the system can start
    broken.chmod(0o755)
    plugin = echo_plugin(tmp_path)
    for policy in (None, pinned(tmp_path, (plugin, digest(plugin)), (broken, digest(broken)))):
        cfg = config(tmp_path, policy, entry("ok", str(plugin), answer("x")), entry("broken", str(broken)))
        decisions: list[tuple[str, str]] = []
        provider = ExecProvider()
        provider.use_plugin_policy(cfg.plugin_policy, lambda name, decision: decisions.append((name, decision)))
        assert provider.get_credential(resolve(cfg, profile("ok"))).token == "x"
        with pytest.raises(PluginNotFound):
            provider.get_credential(resolve(cfg, profile("broken")))
        expected = "allowed" if policy is None else "allowed_pinned"
        assert decisions == [("ok", expected), ("broken", expected)]


# -- cpcreds pin -------------------------------------------------------------------------------


def test_pin_prints_a_policy_that_loads_and_pins(tmp_path: Path) -> None:
    import yaml

    from tests.test_cli import run_cli

    echo_plugin(tmp_path)
    script_plugin(tmp_path, "from-sh")
    providers = [entry("echo", "./echo-plugin", answer("from-echo")), entry("sh", "./sh-plugin")]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"providers": providers}))
    printed = run_cli("pin", "--config", "config.yaml", cwd=tmp_path)
    assert printed.returncode == 0, printed.stderr
    assert f'- command: "{tmp_path / "sh-plugin"}"  # provider sh' in printed.stdout
    assert f'- command: "{SH}"  # interpreter of {tmp_path / "sh-plugin"}' in printed.stdout
    policy = yaml.safe_load(printed.stdout)
    assert [e["sha256"] for e in policy["pluginPolicy"]["allowlist"]] == [
        digest(tmp_path / "echo-plugin"),
        digest(tmp_path / "sh-plugin"),
        digest(SH),
    ]
    (tmp_path / "pinned.yaml").write_text(printed.stdout + yaml.safe_dump({"providers": providers}))
    (tmp_path / "profile.yaml").write_text(yaml.safe_dump(profile("sh")))
    ran = run_cli("get-credential", "--no-cache", "--config", "pinned.yaml", "--profile", "profile.yaml", cwd=tmp_path)
    assert ran.returncode == 0 and "from-sh" in ran.stdout, ran.stderr
    script_plugin(tmp_path, "tampered")
    refused = run_cli("get-credential", "--no-cache", "--config", "pinned.yaml", "--profile", "profile.yaml", cwd=tmp_path)
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and "not allowed" in refused.stderr and "tampered" not in refused.stderr


def test_pin_of_named_commands_and_errors(tmp_path: Path) -> None:
    from tests.test_cli import run_cli

    plugin = echo_plugin(tmp_path)
    printed = run_cli("pin", "-o", "json", str(plugin), cwd=tmp_path)
    assert printed.returncode == 0
    import json

    assert json.loads(printed.stdout) == {"pluginPolicy": {"policyType": "Allowlist", "allowlist": [{"command": str(plugin), "sha256": digest(plugin)}]}}
    missing = run_cli("pin", "no-such-plugin-anywhere", cwd=tmp_path)
    assert missing.returncode == 1 and missing.stderr == "cpcreds: error: no-such-plugin-anywhere (given): not found on PATH\n"


def test_a_chain_of_interpreters_is_followed_and_pinned_links_run_sealed(tmp_path: Path) -> None:
    # plugin -> shim (a script, like a pyenv shim) -> /bin/sh; the shim sees its own path.
    shim = tmp_path / "shim"
    shim.write_text('#!/bin/sh\ncase "$0" in */shim) exec /bin/sh "$@";; *) exit 9;; esac\n')
    shim.chmod(0o755)
    plugin = script_plugin(tmp_path, "chained", shebang=f"#!{shim}")
    chain = pinned(tmp_path, (plugin, digest(plugin)), (shim, None), (SH, digest(SH)))
    assert token_of(config(tmp_path, chain, entry("p", str(plugin))), "p") == "chained"
    without_sh = pinned(tmp_path, (plugin, digest(plugin)), (shim, None))
    error = refusal_of(config(tmp_path, without_sh, entry("p", str(plugin))), "p")
    assert f"its interpreter {SH} (from #!) is not in pluginPolicy.allowlist" in str(error)


def test_a_chain_deeper_than_the_kernel_follows_is_refused(tmp_path: Path) -> None:
    links = [Path(SH)]
    for depth in range(6):
        link = tmp_path / f"link{depth}"
        link.write_text(f"#!{links[-1]}\n")
        link.chmod(0o755)
        links.append(link)
    policy = pinned(tmp_path, *((link, digest(link)) for link in links))
    error = refusal_of(config(tmp_path, policy, entry("p", str(links[-1]))), "p")
    assert "deeper than 4 interpreters" in str(error)


# -- hostile input -----------------------------------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)
_policy_like = st.fixed_dictionaries(
    {},
    optional={
        "policyType": st.sampled_from(["AllowAll", "DenyAll", "Allowlist", "", "allowlist"]) | _json,
        "allowlist": st.lists(
            st.fixed_dictionaries({}, optional={"command": st.text(max_size=30) | _json, "sha256": st.text("0123456789abcdefX", max_size=70) | _json}),
            max_size=3,
        )
        | _json,
    },
)


@settings(max_examples=300, deadline=None)
@given(policy=_policy_like | _json)
def test_any_policy_document_loads_or_names_a_pluginpolicy_field(policy: Any) -> None:
    try:
        cfg = ProviderConfig.from_dict({"pluginPolicy": policy, "providers": [entry("p", "x")]}, source="c.yaml")
    except ConfigError as error:
        assert error.field is not None and error.field.startswith("pluginPolicy")
        assert "\n" not in str(error)
    else:
        assert cfg.plugin_policy.policy_type in ("AllowAll", "DenyAll", "Allowlist")
        if cfg.plugin_policy.policy_type == "Allowlist":
            assert cfg.plugin_policy.allowlist


@settings(max_examples=300, deadline=None)
@given(head=st.binary(max_size=300))
def test_read_interpreter_takes_any_bytes(head: bytes) -> None:
    found = read_interpreter(head)
    if found is not None:
        assert head.startswith(b"#!") and found[0] and "\n" not in found[0]


def test_a_forked_child_runs_pinned_plugins_while_the_parent_holds_the_store_lock(tmp_path: Path) -> None:
    plugin = echo_plugin(tmp_path)
    store = PinStore()
    provider = ExecProvider(gate=PluginGate(PluginPolicy.model_validate(pinned(tmp_path, (plugin, digest(plugin)))), pins=store))
    plan = resolve(config(tmp_path, None, entry("p", str(plugin), answer("forked"))), profile("p"))
    assert provider.get_credential(plan).token == "forked"
    with store._lock:  # as if another thread were inside the store when a worker forks
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            ok = False
            try:
                ok = provider.get_credential(plan).token == "forked" and store.hashed == 1
            finally:
                os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_fifo_at_the_plugin_path_is_refused_without_blocking(tmp_path: Path) -> None:
    from cpcreds import PluginNotFound

    fifo = tmp_path / "plugin"
    os.mkfifo(fifo)
    fifo.chmod(0o755)
    error = refusal_of(config(tmp_path, pinned(tmp_path, (fifo, "4" * 64)), entry("p", str(fifo))), "p")
    assert error.decision == "unreadable" and "is not a regular file" in str(error)
    with engine_for(config(tmp_path, pinned(tmp_path, (fifo, None)), entry("p", str(fifo)))) as engine, pytest.raises(PluginNotFound):
        engine.get_credential(profile("p"))


def test_validate_says_what_the_policy_decides_for_each_plugin(tmp_path: Path) -> None:
    import yaml

    from tests.test_cli import run_cli

    good = echo_plugin(tmp_path, "good")
    echo_plugin(tmp_path, "other")
    policy = pinned(tmp_path, (good, digest(good)))
    providers = [entry("good", "./good", answer("x")), entry("other", "./other", answer("y"))]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"pluginPolicy": policy, "providers": providers}))
    checked = run_cli("validate", "--config", "config.yaml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    lines = checked.stdout.splitlines()
    assert lines[1].endswith("(allowed by pluginPolicy, pinned)")
    assert lines[2].endswith(f"-- warning: pluginPolicy refuses it: {tmp_path / 'other'} is not in pluginPolicy.allowlist")
    assert lines[3] == "  pluginPolicy: Allowlist of 1 command(s), 1 pinned by sha256"


@settings(max_examples=150, deadline=None)
@given(head=st.binary(max_size=200), pin=st.booleans())
def test_any_first_line_is_admitted_or_refused_never_crashes(tmp_path_factory: pytest.TempPathFactory, head: bytes, pin: bool) -> None:
    folder = tmp_path_factory.mktemp("shebang")
    plugin = folder / "plugin"
    plugin.write_bytes(head + b"\nexit 0\n")
    plugin.chmod(0o755)
    gate = PluginGate(PluginPolicy.model_validate(pinned(folder, (plugin, digest(plugin) if pin else None), (SH, None))), pins=PinStore())
    try:
        admission = gate.admit("p", str(plugin), str(plugin), [str(plugin)])
    except PluginNotAllowed as refusal:
        assert str(refusal).isprintable()
    else:
        admission.release()


# -- allowlist[].name: client-go 1.35's spelling of command ---------------------------------------


def test_allowlist_name_is_read_as_command_with_one_warning(tmp_path: Path) -> None:
    import yaml

    from tests.test_cli import run_cli

    plugin = echo_plugin(tmp_path)
    policy = {"policyType": "Allowlist", "allowlist": [{"name": str(plugin)}, {"name": SH, "sha256": digest(SH)}]}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"pluginPolicy": policy, "providers": [entry("p", str(plugin), answer("by-name"))]}))
    (tmp_path / "profile.yaml").write_text(yaml.safe_dump(profile("p")))
    checked = run_cli("validate", "--config", "config.yaml", cwd=tmp_path)
    assert checked.returncode == 0 and "(allowed by pluginPolicy)" in checked.stdout
    assert checked.stderr.count("pluginPolicy.allowlist[].name is deprecated") == 1  # once, for two entries
    ran = run_cli("get-credential", "--no-cache", "--config", "config.yaml", "--profile", "profile.yaml", cwd=tmp_path)
    assert ran.returncode == 0 and "by-name" in ran.stdout
    assert PluginPolicy.model_validate(policy).allowlist[0].command == str(plugin)  # type: ignore[index]


def test_allowlist_entry_with_both_name_and_command_is_refused_naming_the_field(tmp_path: Path) -> None:
    policy = {"policyType": "Allowlist", "allowlist": [{"command": SH}, {"command": SH, "name": "/other"}]}
    with pytest.raises(ConfigError) as caught:
        config(tmp_path, policy, entry("p", SH))
    assert "field pluginPolicy.allowlist[1]: has both command and name" in str(caught.value)


# -- paths as the kernel walks them (issue 28, item 1) -------------------------------------------


def symlink_maze(tmp_path: Path) -> tuple[Path, Path]:
    """``allowed/x`` (allowlisted) and ``other/x`` (not), with ``allowed/lnk`` a symlink to
    ``other/sub``: ``allowed/lnk/../x`` reads as ``allowed/x`` but the kernel opens ``other/x``."""
    (tmp_path / "other" / "sub").mkdir(parents=True)
    (tmp_path / "allowed").mkdir()
    (tmp_path / "allowed" / "lnk").symlink_to(tmp_path / "other" / "sub")
    allowed = script_plugin(tmp_path / "allowed", "allowed", name="x")
    other = script_plugin(tmp_path / "other", "other", name="x")
    return allowed, other


def test_a_dotdot_after_a_symlink_is_checked_where_the_kernel_goes(tmp_path: Path) -> None:
    from tests.test_cli import run_cli

    allowed, other = symlink_maze(tmp_path)
    sneaky = f"{tmp_path}/allowed/lnk/../x"
    policy = {"policyType": "Allowlist", "allowlist": [{"command": str(allowed)}, {"command": SH}, {"command": os.path.realpath(SH)}]}
    cfg = config(tmp_path, policy, entry("p", sneaky))
    error = refusal_of(cfg, "p")
    assert error.decision == "not_allowlisted" and f"{other} is not in pluginPolicy.allowlist" in str(error)
    # The same through the command line a user runs, which prints what the plugin printed.
    import yaml

    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"pluginPolicy": policy, "providers": [entry("p", sneaky)]}))
    (tmp_path / "profile.yaml").write_text(yaml.safe_dump(profile("p")))
    ran = run_cli("get-credential", "--no-cache", "--config", "config.yaml", "--profile", "profile.yaml", cwd=tmp_path)
    assert ran.returncode == 1 and ran.stdout == "" and "not allowed" in ran.stderr
    # A dotdot that does lead back to the allowlisted file is still the allowlisted file.
    fine = config(tmp_path, policy, entry("p", f"{tmp_path}/other/../allowed/x"))
    assert token_of(fine, "p") == "allowed"


_STEPS = st.lists(st.sampled_from(["allowed", "other", "sub", "lnk", "..", "."]), max_size=5)


@settings(max_examples=60, deadline=None)
@given(steps=_STEPS)
@example(steps=["allowed", "lnk", ".."])
@example(steps=["other", "..", "allowed"])
def test_an_admitted_path_is_the_allowlisted_file_whatever_its_spelling(tmp_path_factory: pytest.TempPathFactory, steps: list[str]) -> None:
    tmp_path = tmp_path_factory.mktemp("maze")
    allowed, _ = symlink_maze(tmp_path)
    command = "/".join([str(tmp_path), *steps, "x"])
    policy = {"policyType": "Allowlist", "allowlist": [{"command": str(allowed)}, {"command": SH}, {"command": os.path.realpath(SH)}]}
    cfg = config(tmp_path, policy, entry("p", command))
    with engine_for(cfg) as engine:
        try:
            token = engine.get_credential(profile("p")).token
        except PluginNotAllowed:
            return
        except Exception:  # noqa: BLE001 - not admitted or not found: nothing ran
            assert not os.path.exists(command) or not os.path.samefile(command, allowed)
            return
    # Whatever was admitted and ran is the allowlisted file (a spelling the kernel could not
    # walk, such as a missing folder before a `..`, runs the checked path or nothing).
    assert token == "allowed"
    assert not os.path.exists(command) or os.path.samefile(command, allowed)
