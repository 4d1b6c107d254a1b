"""The files ``cpcreds serve`` (and the CLI) reads and writes, through the real commands: paths
from outside are opened without blocking (a FIFO is refused, never waited on), the profiles folder and the
kubeconfig folder are checked at start and watched after, a kubeconfig that cannot be written is
a per-profile problem, and kubeconfig file names never collide."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from cpcreds.fleet.inventory import profile_key
from cpcreds.serve.kubeconfigs import MERGED_NAME, file_stem
from tests.fakes.builders import access_provider, cluster_profile
from tests.test_serve_process import CPCREDS, Serve

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs and signals")


@pytest.fixture
def serve() -> Any:
    started: list[Serve] = []

    def start(*args: str) -> Serve:
        process = Serve(list(args))
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()


def _setup(tmp_path: Path, *names: tuple[str, str]) -> tuple[Path, Path]:
    """A config with the in-process ``file`` provider (no plugin process per fetch) and a folder
    with one profile per (namespace, name); returns (config, profiles folder)."""
    token = tmp_path / "token"
    token.write_text("file-token\n")
    config = tmp_path / "providers.yaml"
    config.write_text(yaml.safe_dump({"providers": [{"name": "f", "type": "file", "options": {"tokenFile": str(token)}}]}))
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    for index, (namespace, name) in enumerate(names or (("fleet-system", "one"),)):
        profile = cluster_profile(name, access_provider("f", f"https://{index}.spoke.test:6443"), namespace=namespace)
        if not namespace:
            del profile["metadata"]["namespace"]
        (profiles / f"p{index}.yaml").write_text(yaml.safe_dump(profile))
    return config, profiles


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _until(condition: Any, what: str, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        pause.wait(0.02)


def _stops_promptly(process: Serve) -> None:
    code, took = process.stop(signal.SIGTERM, timeout=10)
    assert code == 0 and took < 5


# -- paths from outside are opened without blocking (issue 18.6, 18.7) -----------------------------


def test_a_config_file_replaced_by_a_fifo_is_a_failed_reload_and_serve_still_stops(serve: Any, tmp_path: Path) -> None:
    config, profiles = _setup(tmp_path)
    process = serve("--config", str(config), "--profiles-dir", str(profiles))
    process.wait_for(r"ready: 1 ready")
    config.unlink()
    os.mkfifo(config)  # nobody ever writes: opening it for reading the blocking way waits for ever
    process.wait_for(r"config reload failed.*is not a regular file", timeout=10)
    assert _get(process.url + "/healthz")[0] == 200
    _stops_promptly(process)


def test_a_profile_file_swapped_for_a_fifo_while_scanning_is_a_file_problem_not_a_hang(serve: Any, tmp_path: Path) -> None:
    config, profiles = _setup(tmp_path)
    process = serve("--config", str(config), "--profiles-dir", str(profiles), "--scan-interval", "10ms")
    process.wait_for(r"ready: 1 ready")
    url, target, text = process.url, profiles / "p0.yaml", (profiles / "p0.yaml").read_text()
    stop = threading.Event()

    def swap() -> None:
        # Regular file and FIFO in turn under one name, each renamed into place: a scan lists
        # a regular file and may find the FIFO when it opens it.
        while not stop.is_set():
            os.mkfifo(profiles / ".fifo")
            os.replace(profiles / ".fifo", target)
            (profiles / ".regular").write_text(text)
            os.replace(profiles / ".regular", target)

    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    try:
        _until(lambda: "is not a regular file" in json.dumps(json.loads(_get(url + "/v1/clusters")[1])["problems"]), "the FIFO reported", timeout=30)
    finally:
        stop.set()
        swapper.join(5)
    _until(lambda: not json.loads(_get(url + "/v1/clusters")[1])["problems"], "the problem cleared")
    _until(lambda: json.loads(_get(url + "/v1/clusters")[1])["counts"]["ready"] == 1, "the profile ready again")
    _stops_promptly(process)


@pytest.mark.parametrize("flag", ["--profile", "--config"])
def test_the_cli_refuses_a_fifo_named_as_a_file_at_once(tmp_path: Path, flag: str) -> None:
    config, profiles = _setup(tmp_path)
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    paths = {"--config": str(config), "--profile": str(profiles / "p0.yaml"), flag: str(fifo)}
    result = subprocess.run(
        [str(CPCREDS), "get-credential", "--config", paths["--config"], "--profile", paths["--profile"]],
        capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
        env={k: v for k, v in os.environ.items() if not k.startswith("CPCREDS_")},
    )
    assert result.returncode != 0
    assert result.stderr.strip().endswith(f"{fifo}: is not a regular file"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


# -- the profiles folder (issue 17.5) --------------------------------------------------------------


def _serve_exit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CPCREDS), "serve", "--listen", "127.0.0.1:0", *args],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        env={k: v for k, v in os.environ.items() if not k.startswith("CPCREDS_")},
    )


@pytest.mark.parametrize(
    ("make", "reason"),
    [(lambda p: None, "no such folder"), (lambda p: p.write_text("not a folder\n"), "is not a folder")],
    ids=["missing", "a-file"],
)
def test_a_profiles_dir_that_cannot_be_listed_at_start_is_a_usage_error(tmp_path: Path, make: Any, reason: str) -> None:
    config, _ = _setup(tmp_path)
    folder = tmp_path / "elsewhere"
    make(folder)
    result = _serve_exit("--config", str(config), "--profiles-dir", str(folder))
    assert result.returncode == 2
    assert result.stderr == f"cpcreds: usage error: --profiles-dir {folder}: {reason} (see cpcreds serve --help)\n"


def test_a_profiles_folder_that_goes_away_makes_serve_not_ready_until_it_is_back(serve: Any, tmp_path: Path) -> None:
    config, profiles = _setup(tmp_path)
    process = serve("--config", str(config), "--profiles-dir", str(profiles), "--scan-interval", "50ms")
    url = process.url
    process.wait_for(r"ready: 1 ready")
    assert _get(url + "/readyz")[0] == 200
    moved = tmp_path / "moved"
    profiles.rename(moved)
    process.wait_for(rf"not ready: the profiles folder {profiles}: no such folder")
    status, body = _get(url + "/readyz")
    assert status == 503 and body == f"the profiles folder {profiles}: no such folder\n"
    clusters = json.loads(_get(url + "/v1/clusters")[1])
    assert clusters["ready"] is False and clusters["notReady"] == f"the profiles folder {profiles}: no such folder"
    assert clusters["counts"]["ready"] == 1  # the profiles already read keep their credentials
    assert f"Not ready (the profiles folder {profiles}: no such folder)" in _get(url + "/")[1]
    moved.rename(profiles)
    process.wait_for(r"ready again: the profiles folder")
    assert _get(url + "/readyz") == (200, "ok\n")
    assert json.loads(_get(url + "/v1/clusters")[1])["notReady"] is None
    _stops_promptly(process)


# -- kubeconfig files (issue 18.5, 18.2) ----------------------------------------------------------


def test_a_kubeconfig_dir_that_is_a_file_is_a_usage_error(tmp_path: Path) -> None:
    config, profiles = _setup(tmp_path)
    (tmp_path / "kc").write_text("a file\n")
    result = _serve_exit("--config", str(config), "--profiles-dir", str(profiles), "--kubeconfig-dir", str(tmp_path / "kc"))
    assert result.returncode == 2
    assert result.stderr == f"cpcreds: usage error: --kubeconfig-dir {tmp_path / 'kc'}: is not a folder (see cpcreds serve --help)\n"


def test_a_kubeconfig_that_cannot_be_written_is_a_per_profile_problem_retried_and_credentials_go_on(serve: Any, tmp_path: Path) -> None:
    config, profiles = _setup(tmp_path)
    kubeconfigs = tmp_path / "kubeconfigs"
    process = serve("--config", str(config), "--profiles-dir", str(profiles), "--kubeconfig-dir", str(kubeconfigs), "--scan-interval", "50ms")
    url = process.url
    process.wait_for(r"ready: 1 ready")
    _until(lambda: (kubeconfigs / "kubeconfig").exists(), "the merged kubeconfig")
    # The folder replaced by a file: no write can succeed, whoever runs serve (root too).
    for path in [*(kubeconfigs / "profiles").iterdir(), *kubeconfigs.glob("*.yaml"), kubeconfigs / "kubeconfig"]:
        path.unlink()
    (kubeconfigs / "profiles").rmdir()
    kubeconfigs.rmdir()
    kubeconfigs.write_text("in the way\n")
    (profiles / "p1.yaml").write_text(yaml.safe_dump(cluster_profile("two", access_provider("f", "https://two.spoke.test:6443"))))

    def added() -> dict[str, Any] | None:
        clusters = {c["key"]: c for c in json.loads(_get(url + "/v1/clusters")[1])["clusters"]}
        cluster = clusters.get("fleet-system/two", {})
        # Its credential does not wait for its kubeconfig: it comes while the files cannot be written.
        return cluster if cluster.get("kubeconfigError") and cluster["state"] == "ready" else None

    cluster = _until(added, "the new profile's credential, with its kubeconfig error")
    assert cluster["kubeconfigError"].startswith(f"cannot write {kubeconfigs}/fleet-system.two.yaml: ")
    assert "kubeconfig not written: cannot write" in _get(url + "/")[1]
    problems = _until(lambda: json.loads(_get(url + "/v1/clusters")[1])["problems"], "the folder's problem")
    assert problems == {f"kubeconfig folder {kubeconfigs}": f"cannot write {kubeconfigs}: File exists"}
    assert process.process.poll() is None  # serve lives on
    kubeconfigs.unlink()  # the way is clear: the next retry makes the folder and writes the files
    _until(lambda: (kubeconfigs / "fleet-system.two.yaml").exists() and (kubeconfigs / "kubeconfig").exists(), "the files written again")
    _until(lambda: all(c["kubeconfigError"] is None for c in json.loads(_get(url + "/v1/clusters")[1])["clusters"]), "the errors cleared")
    assert json.loads(_get(url + "/v1/clusters")[1])["problems"] == {}
    assert "fleet-system/two" in (kubeconfigs / "kubeconfig").read_text()
    _stops_promptly(process)


# Names as a folder may hold them: Kubernetes-style ones, and anything else a file can say.
_part = st.one_of(
    st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,20}[a-z0-9])?", fullmatch=True),
    st.text(alphabet="ab.-_/ Z\u00e9\u0000", max_size=12),
    st.text(min_size=190, max_size=300, alphabet="ab.-"),
)
_keys = st.builds(lambda ns, name: profile_key({"metadata": {"namespace": ns, "name": name}}), st.one_of(st.just(""), _part), _part).filter(
    lambda key: key is not None
)


@given(st.lists(_keys, min_size=2, max_size=6, unique=True))
def test_kubeconfig_file_names_are_injective_stable_and_safe(keys: list[str]) -> None:
    stems = [file_stem(key) for key in keys]
    assert len(set(stems)) == len(stems)  # two profiles never share a file
    assert stems == [file_stem(key) for key in keys]  # the same profile, the same file
    for stem in stems:
        assert stem.replace(".", "").replace("-", "").replace("_", "").isalnum() and stem.isascii() and stem == stem.lower()
        assert not stem.startswith((".", "-")) and len(stem) <= 200 and stem != MERGED_NAME


def test_a_dotted_name_without_namespace_and_a_namespaced_profile_keep_apart(start_serve: Any, tmp_path: Path) -> None:
    def mint(name: str, namespace: str, server: str) -> dict[str, Any]:
        profile = cluster_profile(name, access_provider("mint", server, exec_extension={"clusterName": name}), namespace=namespace)
        if not namespace:
            del profile["metadata"]["namespace"]
        return profile

    kubeconfigs = tmp_path / "kubeconfigs"
    files = {"dotted.yaml": mint("a.b", "", "https://dotted.test:6443"), "namespaced.yaml": mint("b", "a", "https://namespaced.test:6443")}
    running = start_serve([{"name": "mint", "type": "mint", "options": {"lifetime": 3600}}], files, kubeconfig_dir=str(kubeconfigs))
    running.wait_ready()
    running.until(lambda: (kubeconfigs / MERGED_NAME).exists(), what="the merged kubeconfig")

    def server_of(key: str) -> str:
        document = yaml.safe_load((kubeconfigs / f"{file_stem(key)}.yaml").read_text())
        snapshot = document["users"][0]["user"]["exec"]["args"][-1]  # --profile <snapshot>: what kubectl's fetch reads
        assert json.loads(Path(snapshot).read_text())["status"]["accessProviders"][0]["cluster"]["server"] == document["clusters"][0]["cluster"]["server"]
        return str(document["clusters"][0]["cluster"]["server"])

    assert server_of("a.b") == "https://dotted.test:6443"
    assert server_of("a/b") == "https://namespaced.test:6443"
    (tmp_path / "profiles" / "dotted.yaml").unlink()
    running.until(lambda: not (kubeconfigs / f"{file_stem('a.b')}.yaml").exists(), what="the removed profile's files to go")
    assert server_of("a/b") == "https://namespaced.test:6443"  # the other profile's files stay


def test_a_hub_kubeconfig_that_is_a_fifo_is_an_inventory_problem_not_a_hang(serve: Any, tmp_path: Path) -> None:
    config, _ = _setup(tmp_path)
    fifo = tmp_path / "hub.kubeconfig"
    os.mkfifo(fifo)
    process = serve("--config", str(config), "--hub-kubeconfig", str(fifo))
    url = process.url
    _until(lambda: "is not a regular file" in json.dumps(json.loads(_get(url + "/v1/clusters")[1])["problems"]), "the hub kubeconfig's problem")
    _stops_promptly(process)


def test_cpcreds_kubeconfig_output_to_a_fifo_without_reader_fails_at_once(tmp_path: Path) -> None:
    config, profiles = _setup(tmp_path)
    fifo = tmp_path / "out.kubeconfig"
    os.mkfifo(fifo)
    result = subprocess.run(
        [str(CPCREDS), "kubeconfig", "--config", str(config), "--profile", str(profiles / "p0.yaml"), "-o", str(fifo)],
        capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
        env={k: v for k, v in os.environ.items() if not k.startswith("CPCREDS_")},
    )
    assert result.returncode == 1
    assert result.stderr.startswith(f"cpcreds: error: {fifo}: cannot write: ") and len(result.stderr.splitlines()) == 1


@pytest.fixture
def small_disk(tmp_path: Path) -> Any:
    """A 256 KiB tmpfs, where a real "No space left on device" can happen (skipped where this
    process may not mount)."""
    mountpoint = tmp_path / "small-disk"
    mountpoint.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs", str(mountpoint)], capture_output=True, timeout=30)
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    yield mountpoint
    subprocess.run(["umount", "-l", str(mountpoint)], capture_output=True, timeout=30)


def test_a_full_disk_is_a_kubeconfig_error_until_there_is_room_again(serve: Any, tmp_path: Path, small_disk: Path) -> None:
    config, profiles = _setup(tmp_path)
    kubeconfigs = small_disk / "kubeconfigs"
    process = serve("--config", str(config), "--profiles-dir", str(profiles), "--kubeconfig-dir", str(kubeconfigs), "--scan-interval", "50ms")
    url = process.url
    process.wait_for(r"ready: 1 ready")
    filler = small_disk / "filler"
    with open(filler, "wb", buffering=0) as stream:
        try:
            while True:
                stream.write(b"\0" * 4096)
        except OSError:
            pass  # the disk is full
    (profiles / "p1.yaml").write_text(yaml.safe_dump(cluster_profile("two", access_provider("f", "https://two.spoke.test:6443"))))

    def error_of_two() -> str | None:
        clusters = {c["key"]: c for c in json.loads(_get(url + "/v1/clusters")[1])["clusters"]}
        return clusters.get("fleet-system/two", {}).get("kubeconfigError")

    assert _until(error_of_two, "the full disk reported") == f"cannot write {kubeconfigs}/fleet-system.two.yaml: No space left on device"
    assert process.process.poll() is None
    filler.unlink()
    _until(lambda: error_of_two() is None and (kubeconfigs / "fleet-system.two.yaml").exists(), "the file written once there is room")
    _stops_promptly(process)


# -- the kubeconfig folder is never written through a symlink, nor used when others may write it (issue 28.3)


def _victim(tmp_path: Path) -> Path:
    """A folder outside the kubeconfig folder, with a file named as serve's snapshot of a profile."""
    victim = tmp_path / "victim"
    victim.mkdir()
    victim.chmod(0o755)
    (victim / "fleet-system.one.json").write_text("not serve's\n")
    (victim / "fleet-system.two.json").write_text("not serve's either\n")
    return victim


def _untouched(victim: Path) -> None:
    assert victim.stat().st_mode & 0o777 == 0o755
    assert sorted(p.name for p in victim.iterdir()) == ["fleet-system.one.json", "fleet-system.two.json"]
    assert (victim / "fleet-system.one.json").read_text() == "not serve's\n"
    assert (victim / "fleet-system.two.json").read_text() == "not serve's either\n"


def test_a_profiles_symlink_planted_in_the_kubeconfig_dir_is_refused_at_start(tmp_path: Path) -> None:
    config, profiles = _setup(tmp_path)
    victim = _victim(tmp_path)
    kubeconfigs = tmp_path / "kubeconfigs"
    kubeconfigs.mkdir(mode=0o700)
    (kubeconfigs / "profiles").symlink_to(victim)
    result = _serve_exit("--config", str(config), "--profiles-dir", str(profiles), "--kubeconfig-dir", str(kubeconfigs))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(f"cpcreds: usage error: --kubeconfig-dir {kubeconfigs}: ")
    assert "symbolic link" in result.stderr
    _untouched(victim)


@pytest.mark.parametrize(("where", "mode"), [("", 0o777), ("", 0o770), ("", 0o702), ("profiles", 0o777), ("profiles", 0o720)])
def test_a_kubeconfig_folder_others_may_write_is_refused_at_start(tmp_path: Path, where: str, mode: int) -> None:
    config, profiles = _setup(tmp_path)
    kubeconfigs = tmp_path / "kubeconfigs"
    (kubeconfigs / "profiles").mkdir(parents=True)
    kubeconfigs.chmod(0o700)
    (kubeconfigs / where).chmod(mode)
    result = _serve_exit("--config", str(config), "--profiles-dir", str(profiles), "--kubeconfig-dir", str(kubeconfigs))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(f"cpcreds: usage error: --kubeconfig-dir {kubeconfigs}: ")
    assert "writable" in result.stderr
    assert (kubeconfigs / where).stat().st_mode & 0o777 == mode  # not "fixed" behind the operator's back
    assert list((kubeconfigs / "profiles").iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_a_kubeconfig_folder_owned_by_another_user_is_refused_at_start(tmp_path: Path) -> None:
    config, profiles = _setup(tmp_path)
    kubeconfigs = tmp_path / "kubeconfigs"
    kubeconfigs.mkdir(mode=0o700)
    os.chown(kubeconfigs, 65534, 65534)
    result = _serve_exit("--config", str(config), "--profiles-dir", str(profiles), "--kubeconfig-dir", str(kubeconfigs))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "owned by another user" in result.stderr
    assert list(kubeconfigs.iterdir()) == []


def test_a_profiles_symlink_planted_while_serving_is_never_followed(serve: Any, tmp_path: Path) -> None:
    config, profiles = _setup(tmp_path)
    victim = _victim(tmp_path)
    kubeconfigs = tmp_path / "kubeconfigs"
    process = serve("--config", str(config), "--profiles-dir", str(profiles), "--kubeconfig-dir", str(kubeconfigs), "--scan-interval", "50ms")
    url = process.url
    process.wait_for(r"ready: 1 ready")
    _until(lambda: (kubeconfigs / "kubeconfig").exists(), "the merged kubeconfig")
    for path in (kubeconfigs / "profiles").iterdir():
        path.unlink()
    (kubeconfigs / "profiles").rmdir()
    (kubeconfigs / "profiles").symlink_to(victim)
    # A profile added (its snapshot would be written through the link) and one removed (its
    # snapshot would be unlinked through it); retries would chmod the link's target.
    (profiles / "p1.yaml").write_text(yaml.safe_dump(cluster_profile("two", access_provider("f", "https://two.spoke.test:6443"))))
    (profiles / "p0.yaml").unlink()

    def two_refused() -> dict[str, Any] | None:
        clusters = {c["key"]: c for c in json.loads(_get(url + "/v1/clusters")[1])["clusters"]}
        cluster = clusters.get("fleet-system/two", {})
        return cluster if cluster.get("kubeconfigError") and "fleet-system/one" not in clusters else None

    cluster = _until(two_refused, "the new profile's kubeconfig error")
    assert "symbolic link" in cluster["kubeconfigError"]
    _until(lambda: not (kubeconfigs / "fleet-system.one.yaml").exists(), "the removed profile's kubeconfig")
    problems = _until(lambda: json.loads(_get(url + "/v1/clusters")[1])["problems"], "the folder's problem")
    assert "symbolic link" in problems[f"kubeconfig folder {kubeconfigs}"]
    _untouched(victim)
    assert process.process.poll() is None  # serve lives on
    (kubeconfigs / "profiles").unlink()  # the link gone: the next retry makes the folder and writes the files
    _until(lambda: (kubeconfigs / "profiles" / "fleet-system.two.json").exists(), "the snapshot written again")
    _until(lambda: all(c["kubeconfigError"] is None for c in json.loads(_get(url + "/v1/clusters")[1])["clusters"]), "the errors cleared")
    assert (kubeconfigs / "profiles").stat().st_mode & 0o777 == 0o700
    _untouched(victim)
    _stops_promptly(process)
