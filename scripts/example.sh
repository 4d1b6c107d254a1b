#!/usr/bin/env bash
# Install cpcreds into .venv and run `cpcreds serve` on the bundled example (config.example.yaml
# + the ClusterProfile in examples/; no cluster needed): it fetches the example cluster's
# credential, keeps it fresh, and prints where to look. Stop it with Ctrl-C.
# Extra arguments go to `cpcreds serve` (for example --listen 127.0.0.1:0 for a free port).
# The dependencies come from requirements.lock (exact versions, checked by hash; see
# docs/install.md), so this works the same on every machine whatever PyPI has released since.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_pip.sh

step "creating .venv"
python3 -m venv .venv
step "installing cpcreds' dependencies from requirements.lock"
pip_install --require-hashes -r requirements.lock
step "installing cpcreds"
pip_install --no-deps -e .
step "starting cpcreds serve"
exec .venv/bin/cpcreds serve --config config.example.yaml --profiles-dir examples --kubeconfig-dir .cpcreds/kubeconfigs "$@"
