#!/usr/bin/env bash
# Install cpcreds into .venv and print a real ExecCredential for the bundled example
# (config.example.yaml + examples/clusterprofile.yaml; no cluster needed).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e .
exec .venv/bin/cpcreds get-credential --config config.example.yaml --profile examples/clusterprofile.yaml
