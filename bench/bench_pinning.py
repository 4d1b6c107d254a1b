"""The cost of sha256 pinning (issue 10) for a 10 MB plugin binary, through the public paths.

    .venv/bin/python bench/bench_pinning.py [--rounds 40] [--size-mb 10]

The plugin is a copy of the system's ``echo`` (a real ELF binary that prints its argument, the
ExecCredential) padded with random bytes to ``--size-mb`` MB: the loader maps only its segments,
so an unpinned run does not read the padding, while a pinned run hashes and copies every byte.

- **cold**: ``cpcreds get-credential --no-cache`` as a new process each time (what kubectl runs),
  with a config that pins the plugin by sha256 vs the same config without a policy; alternating
  order each round. Target: ratio of medians <= 1.15.
- **warm**: one ``CredentialEngine`` per side, in this process; each round invalidates the
  profile and asks again, so the plugin runs every time; the pinned engine's copy is kept (the
  file is unchanged: same device, inode, size, mtime, ctime), so nothing is hashed again.
  Target: <= 1.03.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import yaml
from _common import PROFILE, alternate, summary, tmpdir
from prometheus_client import CollectorRegistry

from cpcreds import CredentialEngine, ProviderConfig

BIN = Path(sys.executable).parent
ANSWER = '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"bench-token"}}'


def padded_plugin(folder: Path, megabytes: int) -> Path:
    echo = shutil.which("echo", path="/bin:/usr/bin")
    if echo is None:
        raise SystemExit("needs /bin/echo")
    plugin = folder / "big-plugin"
    with open(echo, "rb") as source, open(plugin, "wb") as target:
        target.write(source.read())
        target.write(os.urandom(megabytes * 1024 * 1024))
    plugin.chmod(0o755)
    return plugin


def config_dict(plugin: Path, pinned: bool) -> dict:
    data: dict = {"providers": [{"name": "bench", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin), "args": [ANSWER]}}]}
    if pinned:
        digest = hashlib.sha256(plugin.read_bytes()).hexdigest()
        data["pluginPolicy"] = {"policyType": "Allowlist", "allowlist": [{"command": str(plugin), "sha256": digest}]}
    return data


def ratio_report(name: str, ours: list[float], base: list[float], ratios: list[float], target: float) -> None:
    print(f"{name}: pinned {summary(ours)}")
    print(f"{name}: unpinned {summary(base)}")
    of_medians = statistics.median(ours) / statistics.median(base)
    print(f"{name}: ratio of medians {of_medians:.3f}, median of per-round ratios {statistics.median(ratios):.3f} (target <= {target})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--warm-rounds", type=int, default=400)
    parser.add_argument("--size-mb", type=int, default=10)
    args = parser.parse_args()
    folder = tmpdir()
    plugin = padded_plugin(folder, args.size_mb)
    print(f"plugin: {plugin} ({plugin.stat().st_size / 1e6:.1f} MB)")
    (folder / "profile.yaml").write_text(yaml.safe_dump(PROFILE))
    for pinned in (True, False):
        (folder / f"{'pinned' if pinned else 'plain'}.yaml").write_text(yaml.safe_dump(config_dict(plugin, pinned)))
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(folder / "pycache"), "CPCREDS_CACHE": "off"}

    def cli(name: str) -> None:
        argv = [str(BIN / "cpcreds"), "get-credential", "--no-cache", "--config", str(folder / f"{name}.yaml"), "--profile", str(folder / "profile.yaml")]
        result = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if result.returncode != 0 or json.loads(result.stdout)["status"]["token"] != "bench-token":
            raise SystemExit(f"get-credential failed: {result.stderr.strip()}")

    cli("pinned")  # compiles byte code into the private prefix; untimed
    cli("plain")
    ratio_report("cold (new cpcreds process)", *alternate(args.rounds, lambda _: cli("pinned"), lambda: cli("plain")), target=1.15)

    engines = {
        pinned: CredentialEngine(ProviderConfig.from_dict(config_dict(plugin, pinned)), prometheus_registry=CollectorRegistry())
        for pinned in (True, False)
    }

    last = {}

    def fetch(pinned: bool) -> None:
        engine = engines[pinned]
        if pinned in last:
            engine.invalidate(PROFILE, last[pinned])  # as after a 401: the next call runs the plugin
        last[pinned] = engine.get_credential(PROFILE)
        assert last[pinned].token == "bench-token"

    fetch(True)  # the pinned engine's first fetch hashes; later ones must not
    fetch(False)
    ratio_report("warm (same engine, plugin runs each time)", *alternate(args.warm_rounds, lambda _: fetch(True), lambda: fetch(False)), target=1.03)
    for engine in engines.values():
        engine.close()

    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
