"""The disk cache of ``cpcreds get-credential`` (issue 12): kubectl's next command is answered from
``$XDG_CACHE_HOME/cpcreds`` without a plugin run and without importing the library, until shortly
before the credential expires; a changed input is a different key; a file that is not exactly
what cpcreds wrote is never trusted.

Most tests run the command in process through ``cpcreds._entry.main`` (the console script's and
``python -m cpcreds``'s entry), output captured at the file descriptors; the kubectl tests and the
import checks run real processes. Every test has a cache directory of its own (``XDG_CACHE_HOME``).
"""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpcreds import _entry
from cpcreds.credential import parse_rfc3339
from cpcreds.cli import diskcache
from tests.fakes.builders import FAKE_PLUGIN, access_provider, cluster_profile, exec_entry
from tests.fakes.fixtures import SPOKE_TOKEN
from tests.fakes.spoke import DEFAULT_NAMESPACES, SpokeServer
from tests.test_cli import ERROR_LINE, USAGE_LINE, cli_env, needs_kubectl, run_cli, run_kubectl, spoke_kubeconfig, write_config, write_yaml

V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"
BIN = Path(sys.executable).parent
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh, empty cache for each test (the directory itself does not exist yet); no CPCREDS_*
    or KUBERNETES_EXEC_INFO from outside; main()'s logging handlers removed afterwards."""
    for name in list(os.environ):
        if name.startswith("CPCREDS_") or name == "KUBERNETES_EXEC_INFO":
            monkeypatch.delenv(name)
    monkeypatch.setenv("CPCREDS_DISABLE_PLUGINS", "*")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield tmp_path / "xdg-cache" / "cpcreds"
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)


class Fleet:
    """A provider config running the fake plugin (each run's token ends in its run number) and a
    profile file; ``runs`` counts plugin runs."""

    def __init__(self, directory: Path, *plugin_args: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.count = directory / "runs"
        self.config = write_config(
            directory / "providers.yaml", exec_entry("fake", "--count-file", str(self.count), "--token-per-run", *plugin_args)
        )
        self.profile = write_yaml(directory / "profile.yaml", cluster_profile("spoke-1", access_provider("fake")))

    @property
    def runs(self) -> int:
        return len(self.count.read_text().splitlines()) if self.count.exists() else 0

    def args(self, *extra: str | Path) -> list[str]:
        return ["--config", str(self.config), "--profile", str(self.profile), *map(str, extra)]


@pytest.fixture
def fleet(tmp_path: Path) -> Fleet:
    return Fleet(tmp_path / "fleet", "--expires-in", "3600")


class Answer:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    @property
    def token(self) -> str:
        assert self.code == 0 and self.err == "", (self.code, self.err)
        return json.loads(self.out)["status"]["token"]


@pytest.fixture
def cpcreds(capfd: pytest.CaptureFixture[str]) -> Any:
    """Run ``cpcreds ARGS...`` in process, as the console script does."""

    def run(*args: str | Path) -> Answer:
        try:
            code = _entry.main([os.fspath(a) for a in args])
        except SystemExit as exc:  # argparse: usage errors
            code = int(exc.code or 0)
        out, err = capfd.readouterr()
        return Answer(code, out, err)

    return run


def cache_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.cred")) if directory.is_dir() else []


def only_file(directory: Path) -> Path:
    (path,) = cache_files(directory)
    return path


# -- a hit: the same answer, no plugin run --------------------------------------------------------


def test_second_run_prints_the_same_answer_without_running_the_plugin(cpcreds: Any, fleet: Fleet) -> None:
    first = cpcreds("get-credential", *fleet.args())
    second = cpcreds("get-credential", *fleet.args())
    assert first.token == "fake-token-1"
    assert (second.code, second.out, second.err) == (first.code, first.out, first.err)
    assert fleet.runs == 1


@pytest.mark.parametrize(
    ("how", "api_version"),
    [("exec info", V1BETA1), ("exec info", V1), ("--api-version", V1BETA1), ("-o yaml", V1)],
)
def test_a_hit_prints_exactly_what_the_miss_printed(
    cpcreds: Any, fleet: Fleet, monkeypatch: pytest.MonkeyPatch, how: str, api_version: str
) -> None:
    extra: list[str] = []
    if how == "exec info":
        monkeypatch.setenv("KUBERNETES_EXEC_INFO", json.dumps({"apiVersion": api_version, "kind": "ExecCredential", "spec": {"interactive": False}}))
    elif how == "--api-version":
        extra = ["--api-version", api_version]
    else:
        extra = ["-o", "yaml"]
    miss = cpcreds("get-credential", *fleet.args(*extra))
    hit = cpcreds("get-credential", *fleet.args(*extra))
    assert miss.code == 0 and miss.err == ""
    assert hit.out == miss.out and hit.err == "" and hit.code == 0
    if how == "-o yaml":
        assert f"apiVersion: {api_version}\n" in miss.out
    else:
        assert json.loads(miss.out)["apiVersion"] == api_version
    assert fleet.runs == 1


def test_the_installed_script_and_python_m_answer_from_the_cache(tmp_path: Path, fleet: Fleet) -> None:
    env = cli_env()
    script = subprocess.run([BIN / "cpcreds", "get-credential", *fleet.args()], env=env, capture_output=True, text=True, timeout=60)
    module = run_cli("get-credential", *fleet.args(), cwd=tmp_path, env=env)
    assert script.returncode == 0 and module.returncode == 0, (script.stderr, module.stderr)
    assert script.stdout == module.stdout and script.stderr == module.stderr == ""
    assert fleet.runs == 1


# -- kubectl --------------------------------------------------------------------------------------


@needs_kubectl
def test_five_kubectl_commands_cost_one_plugin_run(tmp_path: Path, spoke: SpokeServer) -> None:
    count = tmp_path / "runs"
    kubeconfig = spoke_kubeconfig(tmp_path, spoke, "--token", SPOKE_TOKEN, "--expires-in", "3600", "--count-file", str(count))
    for _ in range(5):
        result = run_kubectl(kubeconfig, tmp_path)
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == [f"namespace/{name}" for name in DEFAULT_NAMESPACES]
    assert len(count.read_text().splitlines()) == 1
    assert sum(r.path == "/api/v1/namespaces" and r.status == 200 for r in spoke.requests) == 5


@needs_kubectl
def test_after_the_credential_nears_expiry_kubectl_runs_the_plugin_once_more(tmp_path: Path, spoke: SpokeServer, cache_dir: Path) -> None:
    # A 12 s credential is served for its first half (the engine's refresh window: half of a
    # short lifetime), about 5 s: time enough for the next kubectl even on a busy machine.
    count = tmp_path / "runs"
    kubeconfig = spoke_kubeconfig(tmp_path, spoke, "--token", SPOKE_TOKEN, "--expires-in", "12", "--count-file", str(count))
    for expected_runs in (1, 1):
        assert run_kubectl(kubeconfig, tmp_path).returncode == 0
        assert len(count.read_text().splitlines()) == expected_runs
    serve_until = int(only_file(cache_dir).read_bytes().split(b"\n", 1)[0].split(b" ")[1])
    time.sleep(max(0.0, serve_until - time.time()) + 0.2)
    for expected_runs in (2, 2):
        assert run_kubectl(kubeconfig, tmp_path).returncode == 0
        assert len(count.read_text().splitlines()) == expected_runs


# -- where, and with which permissions ------------------------------------------------------------


def test_directory_is_0700_and_files_0600_whatever_the_umask(cpcreds: Any, fleet: Fleet, cache_dir: Path) -> None:
    old = os.umask(0)
    try:
        assert cpcreds("get-credential", *fleet.args()).code == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o700
    path = only_file(cache_dir)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.stat().st_uid == os.geteuid()
    assert [p.name for p in cache_dir.iterdir()] == [path.name]  # no temporary file left


def test_an_existing_directory_open_to_others_is_not_read_then_made_0700(cpcreds: Any, fleet: Fleet, cache_dir: Path) -> None:
    assert cpcreds("get-credential", *fleet.args()).token == "fake-token-1"
    cache_dir.chmod(0o777)
    assert cpcreds("get-credential", *fleet.args()).token == "fake-token-2"  # not trusted
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o700
    assert cpcreds("get-credential", *fleet.args()).token == "fake-token-2"
    assert fleet.runs == 2


def test_cache_lives_under_home_when_xdg_cache_home_is_unset_or_relative(
    cpcreds: Any, fleet: Fleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # the XDG spec: relative values are ignored
    assert cpcreds("get-credential", *fleet.args()).code == 0
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cpcreds("get-credential", *fleet.args()).code == 0
    assert len(cache_files(tmp_path / "home" / ".cache" / "cpcreds")) == 2  # XDG_CACHE_HOME is in the key
    assert not (tmp_path / "fleet" / "relative").exists()


def test_a_cache_path_that_cannot_be_a_directory_only_costs_the_cache(cpcreds: Any, fleet: Fleet, cache_dir: Path) -> None:
    cache_dir.parent.mkdir()
    cache_dir.write_text("not a directory\n")
    answers = [cpcreds("get-credential", *fleet.args()) for _ in range(2)]
    assert [a.token for a in answers] == ["fake-token-1", "fake-token-2"]
    assert cache_dir.read_text() == "not a directory\n"


@needs_root
def test_a_directory_of_another_user_is_neither_read_nor_written(cpcreds: Any, fleet: Fleet, cache_dir: Path) -> None:
    assert cpcreds("get-credential", *fleet.args()).code == 0
    os.chown(cache_dir, 65534, 65534)
    for expected in ("fake-token-2", "fake-token-3"):
        assert cpcreds("get-credential", *fleet.args()).token == expected
    assert len(cache_files(cache_dir)) == 1
    run = cpcreds("cache", "clear")
    assert run.code == 1 and run.out == ""
    assert ERROR_LINE.match(run.err.strip()) and "owned by user 65534" in run.err


# -- never trusted: files that are not what cpcreds wrote -----------------------------------------


def _edit_answer(path: Path) -> None:
    path.write_bytes(path.read_bytes().replace(b"fake-token-1", b"fake-token-X"))


def _extend(path: Path) -> None:
    header, answer = path.read_bytes().split(b"\n", 1)
    magic, _, check = header.split(b" ")
    path.write_bytes(b"%s %d %s\n%s" % (magic, int(time.time()) + 10**6, check, answer))


def _other_users(path: Path) -> None:
    os.chown(path, 65534, 65534)


def _symlink(path: Path) -> None:
    target = path.with_name("elsewhere")
    path.rename(target)
    path.symlink_to(target.name)


def _hard_link(path: Path) -> None:
    os.link(path, path.with_name("second-name"))


def _check_digest_of_another_key(path: Path) -> None:
    # A well-formed file, but its check digest was made for another key: it is not this key's answer.
    header, answer = path.read_bytes().split(b"\n", 1)
    magic, until, _ = header.split(b" ")
    other = diskcache.CacheKey("other.cred", b"\x00" * 32, (), None, None, "/other")
    path.write_bytes(b"%s %s %s\n%s" % (magic, until, diskcache._check(other, int(until), answer), answer))


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path, 0o600)


TAMPERING = {
    "answer edited": _edit_answer,
    "serve-until extended": _extend,
    "truncated": lambda p: p.write_bytes(p.read_bytes()[:-20]),
    "empty": lambda p: p.write_bytes(b""),
    "not a cache file": lambda p: p.write_bytes(b'{"apiVersion": "client.authentication.k8s.io/v1"}\n'),
    "group-readable": lambda p: p.chmod(0o640),
    "world-readable": lambda p: p.chmod(0o644),
    "executable": lambda p: p.chmod(0o700),
    "symlink": _symlink,
    "hard link": _hard_link,
    "check digest of another key": _check_digest_of_another_key,
    "fifo": _fifo,
    "owned by another user": _other_users,
}


@pytest.mark.parametrize("tampering", list(TAMPERING))
def test_a_file_that_is_not_what_cpcreds_wrote_is_ignored_and_replaced(
    cpcreds: Any, fleet: Fleet, cache_dir: Path, tampering: str
) -> None:
    if tampering == "owned by another user" and os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    assert cpcreds("get-credential", *fleet.args()).token == "fake-token-1"
    path = only_file(cache_dir)
    TAMPERING[tampering](path)
    assert cpcreds("get-credential", *fleet.args()).token == "fake-token-2"  # the plugin ran again
    assert cpcreds("get-credential", *fleet.args()).token == "fake-token-2"  # and its answer replaced the file
    assert fleet.runs == 2
    info = os.lstat(path)
    assert stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600 and info.st_uid == os.geteuid()


def test_a_directory_in_place_of_a_file_is_a_miss_every_time(cpcreds: Any, fleet: Fleet, cache_dir: Path) -> None:
    assert cpcreds("get-credential", *fleet.args()).code == 0
    path = only_file(cache_dir)
    path.unlink()
    path.mkdir()
    answers = [cpcreds("get-credential", *fleet.args()) for _ in range(2)]
    assert [a.token for a in answers] == ["fake-token-2", "fake-token-3"] and all(a.err == "" for a in answers)


# -- writes are atomic ----------------------------------------------------------------------------


def test_a_concurrent_reader_sees_a_whole_old_file_or_a_whole_new_one(fleet: Fleet, cache_dir: Path) -> None:
    env = dict(os.environ)
    key = diskcache.cache_key(fleet.args(), env)
    assert key is not None
    until = time.time() + 3600
    answers = [b"A" * 300_000 + b"\n", b"B" * 700_000 + b"\n"]  # several writes each
    files = set()
    for answer in answers:
        assert diskcache.store(key, answer, until, env)
        files.add((cache_dir / key.name).read_bytes())
    stop = threading.Event()
    seen: list[bytes | None] = []
    partial: list[int] = []

    def read() -> None:
        while not stop.is_set():
            with open(cache_dir / key.name, "rb") as handle:
                data = handle.read()
            if data not in files:
                partial.append(len(data))
            seen.append(diskcache.lookup(key, env))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for number in range(200):
            assert diskcache.store(key, answers[number % 2], until, env)
    finally:
        stop.set()
        reader.join()
    assert partial == []
    assert seen and set(seen) <= set(answers)


# -- what the key covers --------------------------------------------------------------------------


def test_changed_config_content_is_a_new_key(cpcreds: Any, fleet: Fleet) -> None:
    assert cpcreds("get-credential", *fleet.args()).token == "fake-token-1"
    fleet.config.write_text(fleet.config.read_text() + "# a comment is a change too\n")
    assert cpcreds("get-credential", *fleet.args()).token == "fake-token-2"
    assert cpcreds("get-credential", *fleet.args()).token == "fake-token-2"


def test_changed_profile_content_is_a_new_key(cpcreds: Any, fleet: Fleet) -> None:
    assert cpcreds("get-credential", *fleet.args()).token == "fake-token-1"
    write_yaml(fleet.profile, cluster_profile("spoke-1", access_provider("fake", "https://moved.test:6443")))
    assert cpcreds("get-credential", *fleet.args()).token == "fake-token-2"


def test_each_profile_of_a_file_has_its_own_key(cpcreds: Any, fleet: Fleet) -> None:
    both = {"apiVersion": "v1", "kind": "List", "items": [cluster_profile(n, access_provider("fake")) for n in ("east", "west")]}
    write_yaml(fleet.profile, both)
    tokens = [cpcreds("get-credential", *fleet.args("--name", name)).token for name in ("east", "west", "east", "west")]
    assert tokens == ["fake-token-1", "fake-token-2", "fake-token-1", "fake-token-2"]


def test_kubernetes_exec_info_is_in_the_key(cpcreds: Any, fleet: Fleet, monkeypatch: pytest.MonkeyPatch) -> None:
    for api_version, token in ((V1, "fake-token-1"), (V1BETA1, "fake-token-2"), (V1, "fake-token-1")):
        monkeypatch.setenv("KUBERNETES_EXEC_INFO", json.dumps({"apiVersion": api_version, "kind": "ExecCredential", "spec": {"interactive": False}}))
        answer = cpcreds("get-credential", *fleet.args())
        assert answer.token == token and json.loads(answer.out)["apiVersion"] == api_version
    monkeypatch.setenv("KUBERNETES_EXEC_INFO", json.dumps({"apiVersion": V1, "kind": "ExecCredential", "spec": {"interactive": True}}))
    assert cpcreds("get-credential", *fleet.args()).token == "fake-token-3"


def test_api_version_option_is_in_the_key(cpcreds: Any, fleet: Fleet) -> None:
    first = cpcreds("get-credential", *fleet.args("--api-version", V1BETA1))
    second = cpcreds("get-credential", *fleet.args("--api-version", V1))
    assert json.loads(first.out)["apiVersion"] == V1BETA1 and json.loads(second.out)["apiVersion"] == V1
    assert fleet.runs == 2


def test_an_environment_variable_a_plugin_may_read_is_in_the_key(cpcreds: Any, fleet: Fleet, monkeypatch: pytest.MonkeyPatch) -> None:
    assert cpcreds("get-credential", *fleet.args()).token == "fake-token-1"
    monkeypatch.setenv("AWS_PROFILE", "production")
    assert cpcreds("get-credential", *fleet.args()).token == "fake-token-2"
    monkeypatch.setenv("PATH", os.environ["PATH"] + os.pathsep + "/elsewhere")
    assert cpcreds("get-credential", *fleet.args()).token == "fake-token-3"


def test_terminal_and_directory_variables_and_the_working_directory_are_not(
    cpcreds: Any, fleet: Fleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cpcreds("get-credential", *fleet.args()).token == "fake-token-1"
    monkeypatch.chdir(tmp_path)
    for name, value in (("PWD", str(tmp_path)), ("OLDPWD", "/"), ("_", "/usr/bin/kubectl"), ("SHLVL", "7"), ("TERM", "dumb")):
        monkeypatch.setenv(name, value)
    assert cpcreds("get-credential", *fleet.args()).token == "fake-token-1"
    assert fleet.runs == 1


def test_a_relative_command_given_as_a_flag_is_keyed_with_the_working_directory(
    cpcreds: Any, fleet: Fleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for folder in ("one", "two"):
        plugin = tmp_path / folder / "plugin"
        plugin.parent.mkdir()
        plugin.write_text(f"#!{sys.executable}\nimport sys; sys.argv[1:1] = ['--token', {folder!r}, '--expires-in', '3600']\nexec(open({str(FAKE_PLUGIN)!r}).read())\n")
        plugin.chmod(0o755)
    flag = ["--clusterprofile-access-provider", "fake='./plugin'", "--profile", str(fleet.profile)]
    tokens = []
    for folder in ("one", "two", "one"):
        monkeypatch.chdir(tmp_path / folder)
        tokens.append(cpcreds("get-credential", *flag).token)
    assert tokens == ["one", "two", "one"]


def test_a_file_changed_while_the_plugin_ran_is_not_cached(fleet: Fleet, cache_dir: Path) -> None:
    env = dict(os.environ)
    key = diskcache.cache_key(fleet.args(), env)
    assert key is not None
    write_yaml(fleet.profile, cluster_profile("spoke-1", access_provider("fake", "https://moved.test:6443")))
    assert not diskcache.store(key, b"answer\n", time.time() + 3600, env)
    assert cache_files(cache_dir) == []


def test_invocations_it_cannot_key_are_not_cached(cpcreds: Any, fleet: Fleet, tmp_path: Path) -> None:
    profile_text = fleet.profile.read_text()
    for _ in range(2):
        result = run_cli("get-credential", "--config", fleet.config, "--profile", "-", cwd=tmp_path, env=cli_env(), stdin_text=profile_text)
        assert result.returncode == 0, result.stderr
        assert cpcreds("get-credential", "--conf", fleet.config, "--prof", fleet.profile).code == 0  # abbreviations
    assert fleet.runs == 4
    assert diskcache.cache_key(["--config", "c.yaml", "--profile", "-"], {}) is None


# -- what is never written ------------------------------------------------------------------------


def test_a_credential_without_expiry_is_never_written(cpcreds: Any, tmp_path: Path, cache_dir: Path) -> None:
    fleet = Fleet(tmp_path / "no-expiry")
    tokens = [cpcreds("get-credential", *fleet.args()).token for _ in range(2)]
    assert tokens == ["fake-token-1", "fake-token-2"]
    assert cache_files(cache_dir) == []


def test_a_failure_is_never_written(cpcreds: Any, tmp_path: Path, cache_dir: Path) -> None:
    fleet = Fleet(tmp_path / "failing", "--exit-code", "3", "--stderr", "login required")
    for _ in range(2):
        run = cpcreds("get-credential", *fleet.args())
        assert run.code == 1 and run.out == "" and ERROR_LINE.match(run.err.strip())
    assert fleet.runs == 2
    assert not cache_dir.exists() or cache_files(cache_dir) == []


def test_expired_files_are_removed_when_the_next_answer_is_written(fleet: Fleet, cache_dir: Path, tmp_path: Path) -> None:
    env = dict(os.environ)
    old = diskcache.cache_key(fleet.args(), env)
    assert old is not None and diskcache.store(old, b"old\n", time.time() + 1, env)
    other = Fleet(tmp_path / "other", "--expires-in", "3600")
    new = diskcache.cache_key(other.args(), env)
    assert new is not None and diskcache.store(new, b"new\n", time.time() + 3600, env, now=time.time() + 2)
    assert [p.name for p in cache_files(cache_dir)] == [new.name]
    assert diskcache.lookup(new, env) == b"new\n"
    assert diskcache.lookup(new, env, now=time.time() + 3601) is None


# -- turning it off, clearing it ------------------------------------------------------------------


def test_no_cache_neither_reads_nor_writes(cpcreds: Any, fleet: Fleet, cache_dir: Path) -> None:
    assert cpcreds("get-credential", *fleet.args("--no-cache")).token == "fake-token-1"
    assert cache_files(cache_dir) == []
    assert cpcreds("get-credential", *fleet.args()).token == "fake-token-2"
    assert cpcreds("get-credential", *fleet.args("--no-cache")).token == "fake-token-3"
    assert cpcreds("get-credential", *fleet.args()).token == "fake-token-2"  # still the file written by run 2


@pytest.mark.parametrize("value", ["off", "0", "false", "No"])
def test_cpcreds_cache_off_neither_reads_nor_writes(cpcreds: Any, fleet: Fleet, cache_dir: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    assert cpcreds("get-credential", *fleet.args()).token == "fake-token-1"
    monkeypatch.setenv("CPCREDS_CACHE", value)
    assert cpcreds("get-credential", *fleet.args()).token == "fake-token-2"
    assert len(cache_files(cache_dir)) == 1


def test_cpcreds_cache_with_another_value_is_one_error_line(cpcreds: Any, fleet: Fleet, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CPCREDS_CACHE", "sometimes")
    run = cpcreds("get-credential", *fleet.args())
    assert run.code == 1 and run.out == ""
    assert run.err == "cpcreds: error: CPCREDS_CACHE: must be 'on' or 'off' (got 'sometimes')\n"
    assert fleet.runs == 0


def test_cache_clear_removes_every_cached_credential_or_one_profile_files(cpcreds: Any, fleet: Fleet, tmp_path: Path, cache_dir: Path) -> None:
    other = Fleet(tmp_path / "other", "--expires-in", "3600")
    for _ in range(2):
        assert cpcreds("get-credential", *fleet.args("--api-version", V1)).code == 0
        assert cpcreds("get-credential", *fleet.args("--api-version", V1BETA1)).code == 0
        assert cpcreds("get-credential", *other.args()).code == 0
    assert len(cache_files(cache_dir)) == 3 and fleet.runs == 2 and other.runs == 1
    run = cpcreds("cache", "clear", "--profile", fleet.profile)
    assert (run.code, run.err) == (0, "")
    assert run.out == f"removed 2 cached credentials of {fleet.profile} from {cache_dir}\n"
    assert cpcreds("get-credential", *other.args()).token == "fake-token-1"  # still cached
    assert cpcreds("get-credential", *fleet.args("--api-version", V1)).token == "fake-token-3"
    run = cpcreds("cache", "clear")
    assert run.out == f"removed 2 cached credentials from {cache_dir}\n"
    assert cache_files(cache_dir) == []
    assert cpcreds("cache", "clear").out == f"removed 0 cached credentials from {cache_dir}\n"


def test_cache_without_an_action_is_a_usage_error(cpcreds: Any) -> None:
    run = cpcreds("cache")
    assert run.code == 2 and run.out == ""
    assert USAGE_LINE.match(run.err.strip()) and "(see cpcreds cache --help)" in run.err


def test_every_public_name_is_still_importable_from_the_package() -> None:
    code = (
        "import importlib.metadata, cpcreds\n"
        "ns = {}\n"
        "exec('from cpcreds import *', ns)\n"
        "missing = [n for n in cpcreds.__all__ if n not in ns or getattr(cpcreds, n) is not ns[n]]\n"
        "assert not missing, missing\n"
        "assert cpcreds.__version__ == importlib.metadata.version('cpcreds')\n"
        "assert set(cpcreds.__all__) <= set(dir(cpcreds))\n"
        "assert set(cpcreds.__all__) == {'__version__', *cpcreds._MODULE_OF}\n"
        "import cpcreds.errors\n"
        "assert set(cpcreds.errors.__all__) - {'result_label'} <= set(cpcreds.__all__)\n"
        "from cpcreds import CredentialEngine, ExecProvider, hookimpl\n"
        "from cpcreds.engine import CredentialEngine as Same\n"
        "assert CredentialEngine is Same\n"
        "try:\n    cpcreds.NoSuchName\nexcept AttributeError as exc:\n    print(exc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "module 'cpcreds' has no attribute 'NoSuchName'\n"


# -- cache list: what the cache holds, never a secret ---------------------------------------------

ENTRY_KEYS = {
    "file", "cluster", "profileFile", "provider", "providerType", "credential", "apiVersion",
    "expirationTimestamp", "expired", "servedUntil", "served",
}  # fmt: skip


def listed(cpcreds: Any, *extra: str | Path) -> dict[str, Any]:
    run = cpcreds("cache", "list", "-o", "json", *extra)
    assert (run.code, run.err) == (0, ""), run.err
    document = json.loads(run.out)
    assert set(document) == {"directory", "entries", "skipped", "notes"}
    return document


def test_cache_list_shows_the_cluster_provider_kind_and_expiry_of_each_entry(cpcreds: Any, fleet: Fleet, tmp_path: Path, cache_dir: Path) -> None:
    other = Fleet(tmp_path / "other", "--expires-in", "7200")
    other.profile.write_text(
        yaml.safe_dump(cluster_profile("spoke-2", access_provider("fake", server="https://user:hunter2@spoke-2.example:6443/?access_token=query-secret-7f3e")))
    )
    tokens = [cpcreds("get-credential", *fleet.args()).token, cpcreds("get-credential", *other.args("--api-version", V1BETA1)).token]
    assert listed(cpcreds)["directory"] == str(cache_dir)
    document = listed(cpcreds)
    assert document["skipped"] == [] and document["notes"] == []
    first, second = document["entries"]
    assert set(first) == set(second) == ENTRY_KEYS
    assert first["cluster"] == {"namespace": "fleet-system", "name": "spoke-1", "server": "https://spoke.test:6443"}
    assert second["cluster"] == {"namespace": "fleet-system", "name": "spoke-2", "server": "https://***@spoke-2.example:6443/?access_token=***"}
    assert (first["profileFile"], second["profileFile"]) == (str(fleet.profile.resolve()), str(other.profile.resolve()))
    assert (first["provider"], first["providerType"], first["credential"]) == ("fake", "exec", ["token"])
    assert (first["apiVersion"], second["apiVersion"]) == (V1, V1BETA1)
    assert first["expired"] is second["expired"] is False and first["served"] is second["served"] is True
    lifetimes = [parse_rfc3339(e["expirationTimestamp"]).timestamp() - time.time() for e in (first, second)]
    assert 3500 < lifetimes[0] <= 3600 and 7100 < lifetimes[1] <= 7200
    assert parse_rfc3339(first["servedUntil"]) < parse_rfc3339(first["expirationTimestamp"])
    assert sorted(e["file"] for e in document["entries"]) == [p.name for p in cache_files(cache_dir)]
    # Only the first profile file's entries with --profile.
    assert [e["cluster"]["name"] for e in listed(cpcreds, "--profile", fleet.profile)["entries"]] == ["spoke-1"]
    table = cpcreds("cache", "list")
    assert (table.code, table.err) == (0, "")
    header, *rows = table.out.splitlines()
    assert header.split() == ["CLUSTER", "PROVIDER", "CREDENTIAL", "EXPIRES", "SERVER", "PROFILE"]
    assert rows[0].split()[:3] == ["fleet-system/spoke-1", "fake", "token"] and "(in 59m)" in rows[0]
    assert rows[1].split()[:3] == ["fleet-system/spoke-2", "fake", "token"] and "(in 1h59m)" in rows[1]
    everything = json.dumps(document) + table.out
    for secret in (*tokens, "hunter2", "query-secret-7f3e"):
        assert secret not in everything


def test_cache_list_names_a_client_certificate_and_never_shows_it_or_its_key(cpcreds: Any, pki: Any, tmp_path: Path) -> None:
    issued = pki.issue_client_cert("lister")
    (tmp_path / "c.pem").write_text(issued.cert_pem)
    (tmp_path / "k.pem").write_text(issued.key_pem)
    both = Fleet(tmp_path / "both", "--expires-in", "600", "--cert", str(tmp_path / "c.pem"), "--key", str(tmp_path / "k.pem"))
    only = Fleet(tmp_path / "only", "--expires-in", "600", "--no-token", "--cert", str(tmp_path / "c.pem"), "--key", str(tmp_path / "k.pem"))
    for fleet in (both, only):
        assert cpcreds("get-credential", *fleet.args()).code == 0
    kinds = sorted(e["credential"] for e in listed(cpcreds)["entries"])
    assert kinds == [["clientCertificate"], ["token", "clientCertificate"]]
    table = cpcreds("cache", "list").out
    assert "token + client certificate" in table and "   client certificate   " in table
    body = lambda pem: "".join(pem.strip().splitlines()[1:-1])  # noqa: E731
    for secret in (body(issued.key_pem)[:40], body(issued.cert_pem)[:40], "fake-token-1"):
        assert secret not in table and secret not in json.dumps(listed(cpcreds))


def test_cache_list_of_an_empty_or_missing_cache(cpcreds: Any, cache_dir: Path) -> None:
    assert listed(cpcreds) == {"directory": str(cache_dir), "entries": [], "skipped": [], "notes": []}
    run = cpcreds("cache", "list")
    assert (run.code, run.out, run.err) == (0, f"no cached credentials in {cache_dir}\n", "")
    assert not cache_dir.exists()  # listing creates nothing


def test_the_installed_script_and_python_m_list_the_cache(tmp_path: Path, fleet: Fleet) -> None:
    env = cli_env()
    assert run_cli("get-credential", *fleet.args(), cwd=tmp_path, env=env).returncode == 0
    script = subprocess.run([BIN / "cpcreds", "cache", "list"], env=env, capture_output=True, text=True, timeout=60)
    module = run_cli("cache", "list", "-o", "json", cwd=tmp_path, env=env)
    assert script.returncode == module.returncode == 0 and script.stderr == module.stderr == ""
    assert script.stdout.splitlines()[1].split()[:3] == ["fleet-system/spoke-1", "fake", "token"]
    (entry,) = json.loads(module.stdout)["entries"]
    assert entry["cluster"]["name"] == "spoke-1" and "fake-token-1" not in script.stdout + module.stdout


def test_an_entry_whose_credential_expired_says_so(cpcreds: Any, fleet: Fleet, cache_dir: Path) -> None:
    assert cpcreds("get-credential", *fleet.args()).code == 0
    path = only_file(cache_dir)
    header, about, answer = path.read_bytes().split(b"\n", 2)
    description = json.loads(about)
    description["expirationTimestamp"] = "2020-01-01T00:00:00Z"
    path.write_bytes(b"%s\n%s\n%s" % (header, json.dumps(description).encode(), answer))
    (entry,) = listed(cpcreds)["entries"]
    assert entry["expired"] is True and entry["expirationTimestamp"] == "2020-01-01T00:00:00Z"
    assert "(expired " in cpcreds("cache", "list").out


def test_cache_list_and_clear_refuse_a_directory_of_another_kind_in_one_line(cpcreds: Any, cache_dir: Path) -> None:
    cache_dir.parent.mkdir()
    cache_dir.write_text("not a directory\n")
    for action in ("list", "clear"):
        run = cpcreds("cache", action)
        assert run.code == 1 and run.out == "" and ERROR_LINE.match(run.err.strip()) and run.err.count("\n") == 1
        assert "not a directory" in run.err


@needs_root
def test_cache_list_refuses_a_directory_of_another_user(cpcreds: Any, fleet: Fleet, cache_dir: Path) -> None:
    assert cpcreds("get-credential", *fleet.args()).code == 0
    os.chown(cache_dir, 65534, 65534)
    run = cpcreds("cache", "list")
    assert run.code == 1 and run.out == "" and ERROR_LINE.match(run.err.strip()) and "owned by user 65534" in run.err


def test_cache_list_notes_a_directory_others_may_enter(cpcreds: Any, fleet: Fleet, cache_dir: Path) -> None:
    assert cpcreds("get-credential", *fleet.args()).code == 0
    cache_dir.chmod(0o755)
    document = listed(cpcreds)
    assert len(document["entries"]) == 1 and len(document["notes"]) == 1 and "0755" in document["notes"][0]
    run = cpcreds("cache", "list")
    assert run.code == 0 and run.err.startswith("cpcreds: note: ") and run.err.count("\n") == 1


def _huge(path: Path) -> None:
    with path.open("ab") as handle:
        handle.write(b"x" * (diskcache.MAX_FILE_BYTES + 1))


LISTED_AS_SKIPPED = {
    **{name: TAMPERING[name] for name in ("truncated", "empty", "not a cache file", "world-readable", "symlink", "hard link", "fifo", "owned by another user")},
    "huge": _huge,
    "directory": lambda p: (p.unlink(), p.mkdir()),
    "older layout": lambda p: p.write_bytes(p.read_bytes().replace(diskcache.MAGIC, b"cpcreds-credential-cache-1", 1)),
    "description damaged": lambda p: p.write_bytes(p.read_bytes().replace(b'"credential":["token"]', b'"credential":"token"', 1)),
    "description with escapes": lambda p: p.write_bytes(p.read_bytes().replace(b'"name":"spoke-1"', b'"name":"\\u001b[31mred"', 1)),
}


@pytest.mark.parametrize("damage", list(LISTED_AS_SKIPPED))
def test_a_file_cache_list_cannot_trust_is_skipped_with_its_reason(cpcreds: Any, fleet: Fleet, cache_dir: Path, damage: str) -> None:
    if damage == "owned by another user" and os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    assert cpcreds("get-credential", *fleet.args()).code == 0
    path = only_file(cache_dir)
    LISTED_AS_SKIPPED[damage](path)
    document = listed(cpcreds)
    assert document["entries"] == []
    assert [item["file"] for item in document["skipped"]] == [path.name] and document["skipped"][0]["reason"]
    run = cpcreds("cache", "list")
    assert run.code == 0 and run.out == f"no cached credentials in {cache_dir}\n"
    assert run.err == f"cpcreds: note: skipped {path.name}: {document['skipped'][0]['reason']}\n"
    assert "\x1b" not in run.err and "fake-token" not in run.err


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
_FIELDS = ["profileFile", "namespace", "name", "server", "provider", "providerType", "credential", "apiVersion", "expirationTimestamp", "answerBytes"]


@st.composite
def _hostile_files(draw: st.DrawFn, valid: bytes) -> bytes:
    """Bytes a cache file may hold: anything, a header with anything after it, or a valid
    file whose description has fields of any JSON type or none."""
    header, about, answer = valid.split(b"\n", 2)
    how = draw(st.sampled_from(["bytes", "after header", "description", "cut"]))
    if how == "bytes":
        return draw(st.binary(max_size=300))
    if how == "after header":
        return header + b"\n" + draw(st.binary(max_size=300))
    if how == "cut":  # drawn apart from the file's length, which changes with each run's token
        return valid[: draw(st.integers(0, 2048))]
    description = json.loads(about)
    for name in draw(st.lists(st.sampled_from(_FIELDS), max_size=4, unique=True)):
        if draw(st.booleans()):
            description.pop(name)
        else:
            description[name] = draw(_JSON)
    return b"%s\n%s\n%s" % (header, json.dumps(description).encode(), answer)


def test_hostile_cache_files_are_listed_or_skipped_never_a_crash(cpcreds: Any, tmp_path: Path, cache_dir: Path) -> None:
    # One real entry, written once by get-credential; each example replaces its file's bytes.
    fleet = Fleet(tmp_path / "hostile", "--expires-in", "3600")
    assert cpcreds("get-credential", *fleet.args()).code == 0
    path = only_file(cache_dir)
    valid = path.read_bytes()

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(data=st.data())
    def listed_or_skipped(data: st.DataObject) -> None:
        path.write_bytes(data.draw(_hostile_files(valid)))
        assert cache_files(cache_dir) == [path]
        document = listed(cpcreds)
        assert len(document["entries"]) + len(document["skipped"]) == 1
        for entry in document["entries"]:
            assert set(entry) == ENTRY_KEYS and entry["file"] == path.name
        table = cpcreds("cache", "list")
        assert table.code == 0 and "Traceback" not in table.err and "fake-token" not in table.out + table.err
        assert all(line.isprintable() for line in (table.out + table.err).splitlines())

    listed_or_skipped()
