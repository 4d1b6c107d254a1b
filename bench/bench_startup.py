"""Start-up budgets: what importing and running cpcreds costs a new process, against a bare start of
the same interpreter (issue 29: these budgets replace the tests that banned modules by name).

    .venv/bin/python bench/bench_startup.py [--rounds 15] [--only NAME]

Each scenario runs as a new process, from compiled byte code as an installed wheel runs, and is
timed against ``python -c pass`` in alternating rounds (:func:`_common.alternate`). The ratio of
the medians is checked against the scenario's budget; the run prints each scenario's figures, its
heaviest imports (``-X importtime``), and exits 1 if any budget is exceeded.

- ``import-cpcreds``: ``import cpcreds`` (the package is lazy: a program pays for what it uses).
- ``import-sdk``: ``import cpcreds.sdk`` (what a provider package imports first).
- ``base-types``: building a ``Credential`` and an ``AccessPlan`` (the base types).
- ``sdk-exec-plugin``: a provider with declared options answering one KUBERNETES_EXEC_INFO request
  through ``cpcreds.sdk.provider_main``, as a contrib console script runs.
- ``sdk-kubelet-plugin``: the same provider answering one CredentialProviderRequest through
  ``kubelet_plugin_main``.

The kubectl paths have benches of their own with their own targets: ``bench_cli_cache.py`` (a
disk-cache hit of ``cpcreds get-credential``, ≤ 1.2× a bare start), ``bench_cli_miss.py`` (a
``--no-cache`` miss, ≤ 8× a bare start plus the plugin), ``bench_console_scripts.py`` (each contrib
console script against its fake, ≤ 4×).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import alternate, imports_line, tmpdir  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

PROVIDER = textwrap.dedent(
    """
    import sys
    from cpcreds.sdk import AuthConfig, Credential, CredentialProviderResponse, Duration, Options, kubelet_plugin_main, option, provider_main

    class O(Options):
        audience: str = option("a", description="who the token is for")
        ttl: Duration = option(600.0, min=1)

    class P:
        options_model = O
        def __init__(self, options):
            self.options = O.read(options)
        def get_credential(self, plan):
            return Credential(token=self.options.audience)
        def get_image_credential(self, request, *, timeout):
            return CredentialProviderResponse("Registry", {"registry.example": AuthConfig(self.options.audience, "pw")}, 60.0)

    mode = sys.argv.pop(1)
    (provider_main if mode == "exec" else kubelet_plugin_main)("bench", P)()
    """
)
REQUEST = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "spec": {"interactive": False}}
IMAGE_REQUEST = {"apiVersion": "credentialprovider.kubelet.k8s.io/v1", "kind": "CredentialProviderRequest", "image": "registry.example/app:1"}

#: name -> (budget: the largest ratio to a bare start, argv after the interpreter, stdin). The
#: budgets are the figures of 2026-12-02 (bench/README.md) with about a fifth of headroom: they
#: catch a regression, not a shortfall already known (the SDK runners read options through
#: pydantic, issue 29's one schema, which costs them most of their start).
SCENARIOS: dict[str, tuple[float, list[str], str]] = {
    "import-cpcreds": (1.3, ["-c", "import cpcreds"], ""),
    "import-sdk": (1.3, ["-c", "import cpcreds.sdk"], ""),
    "base-types": (4.5, ["-c", "from cpcreds import Credential, AccessPlan\nfrom cpcreds.kep import ExecCluster\n"
                          "Credential(token='t'); AccessPlan(provider='p', kind='k', cluster=ExecCluster(server='https://x'))"], ""),
    "sdk-exec-plugin": (16.0, ["PLUGIN", "exec", "--audience", "fleet"], ""),
    "sdk-kubelet-plugin": (16.0, ["PLUGIN", "kubelet", "--audience", "fleet"], json.dumps(IMAGE_REQUEST)),
}


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CPCREDS_") and k != "PYTHONDONTWRITEBYTECODE"}
    env["KUBERNETES_EXEC_INFO"] = json.dumps(REQUEST)
    env["CPCREDS_DISABLE_PLUGINS"] = "*"
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--only", choices=sorted(SCENARIOS))
    opts = parser.parse_args()
    work = tmpdir()
    plugin = work / "plugin.py"
    plugin.write_text(PROVIDER)
    # Byte code as a wheel's install writes it: otherwise every run would compile cpcreds again.
    compileall.compile_dir(str(ROOT / "src"), quiet=1)
    compileall.compile_file(str(plugin), quiet=1)
    env = environment()

    def run(argv: list[str], stdin: str, *, trace: bool = False) -> str:
        argv = [str(plugin) if part == "PLUGIN" else part for part in argv]
        result = subprocess.run(
            [sys.executable, *(["-X", "importtime"] if trace else []), *argv],
            input=stdin, capture_output=True, text=True, env=env, cwd=work, check=False,
        )
        if result.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed: {result.stderr.strip()[-500:]}")
        return result.stderr

    over = []
    for name, (budget, argv, stdin) in SCENARIOS.items():
        if opts.only and name != opts.only:
            continue
        mine, bare, ratios = alternate(opts.rounds, lambda _n, argv=argv, stdin=stdin: run(argv, stdin), lambda: run(["-c", "pass"], ""))
        ratio = statistics.median(mine) / statistics.median(bare)
        verdict = "ok" if ratio <= budget else "OVER BUDGET"
        if ratio > budget:
            over.append(name)
        print(
            f"{name:20} {statistics.median(mine) * 1e3:7.1f} ms vs bare {statistics.median(bare) * 1e3:5.1f} ms: "
            f"{ratio:5.2f}x (median of rounds {statistics.median(ratios):5.2f}x), budget {budget}x: {verdict}"
        )
        print(imports_line(lambda argv=argv, stdin=stdin: run(argv, stdin, trace=True), opts.rounds, depth=3, min_ms=3, top=6))
    if over:
        raise SystemExit(f"over budget: {', '.join(over)}")


if __name__ == "__main__":
    main()
