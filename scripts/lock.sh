#!/usr/bin/env bash
# Refresh requirements.lock: the exact version and sha256 hashes of every dependency of cpcreds
# and of each contrib plugin (plugins-contrib/*), for every platform and Python >= 3.11 at once
# (uv's universal resolution). scripts/example.sh and the Dockerfile install from it with
# `pip install --require-hashes`. Run it after changing a dependency in any pyproject.toml and
# commit the result with the change. Pins already in the file are kept unless a pyproject.toml no
# longer allows them: `bash scripts/lock.sh --upgrade` takes the newest releases of everything,
# `bash scripts/lock.sh --upgrade-package PyYAML` of one. Needs network access
# to PyPI; uv comes from PyPI into .venv. Arguments go to `uv pip compile`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_pip.sh

step "installing uv into .venv"
python3 -m venv .venv
pip_install 'uv>=0.5'
sources=(.)
excluded=(--no-emit-package cpcreds)
for plugin in plugins-contrib/*/; do
  [ -f "$plugin/pyproject.toml" ] || continue
  sources+=("./${plugin%/}")
  excluded+=(--no-emit-package "$(.venv/bin/python -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["project"]["name"])' "$plugin/pyproject.toml")")
done
step "resolving the dependencies of ${sources[*]} into requirements.lock"
# The distributions themselves are installed from the clone (pip install --no-deps), never from
# the lock: --no-emit-package leaves them (and their local paths) out.
printf '%s\n' "${sources[@]}" | .venv/bin/uv pip compile - --universal --python-version 3.11 \
  --generate-hashes "${excluded[@]}" --custom-compile-command "bash scripts/lock.sh" \
  --output-file requirements.lock --quiet "$@"
step "requirements.lock: $(grep -c '^[A-Za-z0-9]' requirements.lock) packages pinned"
