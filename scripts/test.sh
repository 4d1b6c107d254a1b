#!/usr/bin/env bash
# Install cpcreds with its test dependencies into .venv and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
for plugin in plugins-contrib/*/; do
  [ -f "$plugin/pyproject.toml" ] && .venv/bin/python -m pip install -q --disable-pip-version-check -e "$plugin"
done
# get-credential's disk cache goes to a folder of this run, never the user's ~/.cache/cpcreds
# (tests/conftest.py does the same for the core tests; the contrib tests run cpcreds too).
export XDG_CACHE_HOME="${TMPDIR:-/tmp}/cpcreds-tests-$$"
trap 'rm -rf "$XDG_CACHE_HOME"' EXIT
.venv/bin/python -m pytest -p no:cacheprovider "$@"
