"""``cpcreds get-credential`` as kubectl runs it: a disk-cache hit against a bare start of the same
interpreter, and a miss (issue 12).

    .venv/bin/python bench/bench_cli_cache.py [--rounds 20] [--baseline SRC]

Each round runs, in a rotating order, as separate processes:

- ``bare``:        ``python -c pass`` (the interpreter of the venv that holds cpcreds);
- ``hit script``:  the installed ``cpcreds`` script (a cache hit);
- ``hit -m``:      ``python -m cpcreds`` (what ``cpcreds kubeconfig`` writes; a cache hit);
- ``miss``:        the ``cpcreds`` script with the cache file removed first (full path, plugin run,
                   cache written);
- ``baseline``:    with ``--baseline SRC``: ``python -m cpcreds`` from another source tree (e.g. the
                   commit before the cache: ``git archive HEAD~1 src | tar -x -C /tmp/base``), the
                   path every run took before.

and prints each one's median and its ratio to ``bare`` (target for a hit: <= 1.2, issue 29), the median of
the per-round ratios miss / baseline (target: <= 1), then the
``-X importtime`` profile of a hit: every module imported after the interpreter's own start-up.

The plugin is a ``/bin/sh`` script answering a token that expires in 2099. Byte code is written to
a private ``PYTHONPYCACHEPREFIX`` (a first, untimed run compiles it), as an installed wheel has it;
``PYTHONDONTWRITEBYTECODE`` would otherwise make every run compile cpcreds' modules again.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import PROFILE, tmpdir, write_plugin

BIN = Path(sys.executable).parent


def run(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    result = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    took = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{argv[0]} exited {result.returncode}: {result.stderr.strip()}")
    return took, result.stdout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--baseline", metavar="SRC", help="also time python -m cpcreds from this source tree")
    opts = parser.parse_args()

    work = tmpdir()
    try:
        measure(opts, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure(opts: argparse.Namespace, work: Path) -> None:
    count_file = work / "runs"
    plugin = write_plugin(work, count_file=count_file)
    config = work / "providers.json"
    config.write_text(json.dumps({"providers": [{"name": "bench", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin)}}]}))
    profile = work / "profile.json"
    profile.write_text(json.dumps(PROFILE))
    cache = work / "cache"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CPCREDS_") and k not in ("KUBERNETES_EXEC_INFO", "PYTHONDONTWRITEBYTECODE")}
    env.update(XDG_CACHE_HOME=str(cache), PYTHONPYCACHEPREFIX=str(work / "pycache"), CPCREDS_DISABLE_PLUGINS="*")
    # What kubectl sets for a kubeconfig user with apiVersion v1 and interactiveMode Never.
    env["KUBERNETES_EXEC_INFO"] = json.dumps({"kind": "ExecCredential", "apiVersion": "client.authentication.k8s.io/v1", "spec": {"interactive": False}})

    args = ["get-credential", "--config", str(config), "--profile", str(profile)]
    python = str(BIN / "python3")
    script = str(BIN / "cpcreds")
    sides: dict[str, tuple[list[str], dict[str, str]]] = {
        "bare": ([python, "-c", "pass"], env),
        "hit script": ([script, *args], env),
        "hit -m": ([python, "-m", "cpcreds", *args], env),
        "miss": ([script, *args], env),
    }
    if opts.baseline:
        old = dict(env, PYTHONPATH=str(Path(opts.baseline).resolve()), XDG_CACHE_HOME=str(work / "baseline-cache"))
        sides["baseline"] = ([python, "-m", "cpcreds", *args], old)

    # Warm-up, untimed: compile byte code, fill the cache; every later hit must print this answer.
    _, answer = run(sides["miss"][0], env)
    for argv, side_env in sides.values():
        run(argv, side_env)
    runs_before = len(count_file.read_text().splitlines())

    def clear() -> None:
        for entry in cache.glob("cpcreds/*.cred"):
            entry.unlink()

    names = list(sides)
    took: dict[str, list[float]] = {name: [] for name in names}
    misses = 0
    for number in range(opts.rounds):
        order = names[number % len(names) :] + names[: number % len(names)]
        for name in order:
            argv, side_env = sides[name]
            if name == "miss":
                clear()
                misses += 1
            seconds, out = run(argv, side_env)
            took[name].append(seconds)
            if name.startswith("hit") and out != answer:
                raise SystemExit(f"{name}: answered {out!r}, not the cached {answer!r}")
    plugin_runs = len(count_file.read_text().splitlines()) - runs_before
    baseline_runs = opts.rounds if opts.baseline else 0

    bare = statistics.median(took["bare"])
    print(f"cpcreds get-credential, {opts.rounds} rounds, order rotating each round; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    for name in names:
        median = statistics.median(took[name])
        print(f"  {name:<11} median {median * 1e3:7.2f} ms  ({median / bare:5.2f}x bare)  min {min(took[name]) * 1e3:7.2f} ms")
    if opts.baseline:
        ratios = [mine / theirs for mine, theirs in zip(took["miss"], took["baseline"])]
        print(f"miss / baseline: median of per-round ratios {statistics.median(ratios):.2f} (target: <= 1, no slower than before)")
    print(f"plugin runs while timing: {plugin_runs} (expected {misses + baseline_runs}: one per miss and per baseline run)")

    # The import profile of a hit: what is imported after the interpreter's own start-up (site).
    result = subprocess.run([python, "-X", "importtime", script, *args], env=env, capture_output=True, text=True)
    lines = result.stderr.splitlines()
    start = max(index for index, line in enumerate(lines) if line.rstrip().endswith("| site")) + 1
    print("imports of a hit after start-up (-X importtime: self us | cumulative us | module):")
    for line in lines[start:]:
        print("  " + line.removeprefix("import time:").strip())


if __name__ == "__main__":
    main()
