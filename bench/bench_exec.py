"""One credential through cpcreds' exec provider vs a bare subprocess.run of the same plugin.

    .venv/bin/python bench/bench_exec.py [--rounds 300]

Both sides run the same /bin/sh plugin; cpcreds also builds KUBERNETES_EXEC_INFO, applies the
timeout machinery (own session, pidfd, bounded reads) and validates the answer. Rounds alternate
between the two sides so machine noise hits both alike. Target (issue 2): ratio <= 1.10.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess

from _common import alternate, plan_for, summary, tmpdir, write_plugin

from cpcreds import ExecProvider


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=300)
    rounds = parser.parse_args().rounds
    plugin = write_plugin(tmpdir())
    plan = plan_for(plugin)
    provider = ExecProvider()
    provider.get_credential(plan)  # warm caches on both sides
    subprocess.run([str(plugin)], capture_output=True, check=True)
    ours, bare, ratios = alternate(
        rounds, lambda _: provider.get_credential(plan), lambda: subprocess.run([str(plugin)], capture_output=True, check=True)
    )
    print(f"cpcreds ExecProvider.get_credential: {summary(ours)}")
    print(f"bare subprocess.run:                 {summary(bare)}")
    print(f"ratio of medians: {statistics.median(ours) / statistics.median(bare):.3f}; "
          f"median of per-round ratios: {statistics.median(ratios):.3f} (target <= 1.10)")

if __name__ == "__main__":
    main()
