#!/usr/bin/env bash
# Install cpcreds into .venv and run `cpcreds serve` on the bundled example (config.example.yaml
# + the ClusterProfile in examples/; no cluster needed): it fetches the example cluster's
# credential, keeps it fresh, and prints where to look. Stop it with Ctrl-C.
# Extra arguments go to `cpcreds serve` (for example --listen 127.0.0.1:0 for a free port).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e .
exec .venv/bin/cpcreds serve --config config.example.yaml --profiles-dir examples --kubeconfig-dir .cpcreds/kubeconfigs "$@"
