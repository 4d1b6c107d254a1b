#!/usr/bin/env bash
# Install cpcreds with its test dependencies and every contrib plugin into .venv, then run the
# whole test suite. A new .venv gets the NEWEST releases pyproject.toml allows (not the lock file
# scripts/example.sh and the image install from), so a dependency's new release breaks CI (a fresh
# clone) before it reaches a user. An existing .venv keeps what it has. Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_pip.sh

step "creating .venv"
make_venv python3 .venv
plugins=()
for plugin in plugins-contrib/*/; do
  [ -f "$plugin/pyproject.toml" ] && plugins+=(-e "$plugin")
done
# One install for everything: one resolution instead of one per distribution.
step "installing cpcreds, its test dependencies and $((${#plugins[@]} / 2)) contrib plugins (newest releases)"
uv_install -e '.[test]' "${plugins[@]}"
# get-credential's disk cache goes to a folder of this run, never the user's ~/.cache/cpcreds
# (tests/conftest.py does the same for the core tests; the contrib tests run cpcreds too).
export XDG_CACHE_HOME="${TMPDIR:-/tmp}/cpcreds-tests-$$"
trap 'rm -rf "$XDG_CACHE_HOME"' EXIT
# Four workers (pytest-xdist), each test file on one of them (--dist loadfile: a file's module
# fixtures, such as a package built into examples/, run once). Four on a 2-core machine: many
# tests wait on a plugin process, a server or a timeout; with two workers the cores stood idle a
# fifth of the run, with three about a tenth (bench/README.md, "The test suite's time"). `-n 0` in the arguments
# runs in this process instead (for --pdb).
# Programs some tests need: Chromium (the status page's browser test), zsh and fish (the shell
# completion tests). CI installs Debian's where it can; a test whose program is missing skips,
# saying why.
missing=()
for program in chromium zsh fish; do
  command -v "$program" >/dev/null || missing+=("$program")
done
if [ "${CI:-}" = true ] && [ ${#missing[@]} -gt 0 ] && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  step "installing ${missing[*]} for the tests that run them"
  apt-get install -y -qq "${missing[@]}" >/dev/null || echo "${missing[*]} could not be installed: their tests will skip"
fi
# A machine may set PYTHONDONTWRITEBYTECODE: then each of the hundreds of processes the tests
# start (cpcreds commands, plugins, serve) would compile every module it imports again, and
# pytest would rewrite the test modules' asserts in every worker. Byte code is written instead,
# the first time a module is imported.
unset PYTHONDONTWRITEBYTECODE
step "running the tests"
.venv/bin/python -m pytest -p no:cacheprovider -n 4 --dist loadfile "$@"
