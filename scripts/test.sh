#!/usr/bin/env bash
# Install cpcreds with its test dependencies into .venv and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
for plugin in plugins-contrib/*/; do
  [ -f "$plugin/pyproject.toml" ] && .venv/bin/python -m pip install -q --disable-pip-version-check -e "$plugin"
done
exec .venv/bin/python -m pytest -p no:cacheprovider "$@"
