#!/usr/bin/env bash
# Run the test suite on every Python the package claims (pyproject's classifiers: 3.11, 3.12,
# 3.13) that this machine has, other than the one .venv was made with (the README's command
# already ran the suite there). Each gets a venv of its own, .venv-3.X, with the newest releases
# pyproject.toml allows, as a fresh clone's .venv does. An interpreter is a `python3.X` that runs,
# or pyenv's installed 3.X. A claimed version the machine lacks is named and skipped. Arguments go
# to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_pip.sh

find_python() {  # the first python3.X that runs, or nothing
  local minor=$1 candidate
  for candidate in "$(command -v "python3.$minor" 2>/dev/null || true)" \
      "$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3."$minor".*/bin/python3."$minor" 2>/dev/null | sort -V | tail -n 1)"; do
    if [ -n "$candidate" ] && "$candidate" -c 'import sys' >/dev/null 2>&1; then
      echo "$candidate"
      return
    fi
  done
}

done_with=$(.venv/bin/python -c 'import sys; print(sys.version_info.minor)' 2>/dev/null || echo none)
plugins=()
for plugin in plugins-contrib/*/; do
  [ -f "$plugin/pyproject.toml" ] && plugins+=(-e "$plugin")
done
export XDG_CACHE_HOME="${TMPDIR:-/tmp}/cpcreds-tests-$$"
unset PYTHONDONTWRITEBYTECODE  # as scripts/test.sh does
trap 'rm -rf "$XDG_CACHE_HOME"' EXIT
for minor in 11 12 13; do
  if [ "$minor" = "$done_with" ]; then
    continue
  fi
  python=$(find_python "$minor")
  if [ -z "$python" ]; then
    step "Python 3.$minor: not on this machine, skipped"
    continue
  fi
  export VENV=".venv-3.$minor"
  step "Python 3.$minor ($python): creating $VENV"
  make_venv "$python" "$VENV"
  step "Python 3.$minor: installing cpcreds, its test dependencies and $((${#plugins[@]} / 2)) contrib plugins (newest releases)"
  uv_install -e '.[test]' "${plugins[@]}"
  step "Python 3.$minor: running the tests"
  "$VENV/bin/python" -m pytest -p no:cacheprovider -n 4 --dist loadfile "$@"  # as scripts/test.sh does
done
