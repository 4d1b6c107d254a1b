# Sourced by scripts/*.sh: a progress line per step, and pip installs into .venv whose output is
# shown compactly (the packages as pip collects them, then what it installed) instead of pip's
# hundred lines or -q's minute of silence. pip's warnings and errors go to stderr unchanged.

step() { printf '==> %s\n' "$*"; }

pip_install() {
  "${VENV:-.venv}/bin/python" -m pip install --disable-pip-version-check --progress-bar off "$@" | awk '
    function flush_line() { if (width > 0) { printf "\n"; width = 0 } }
    /^Collecting / {
      name = $2; sub(/[<>=!~;\[@].*/, "", name)
      if (width == 0) { printf "    collecting:"; width = 15 }
      else if (width + length(name) > 95) { printf "\n               "; width = 15 }
      printf " %s", name; width += length(name) + 1; fflush(); next
    }
    /^Installing collected packages:/ {
      flush_line(); count = split(substr($0, 32), names, ",")
      printf "    installing %d packages\n", count; fflush(); next
    }
    /^Successfully installed/ { flush_line(); printf "    installed %d packages\n", NF - 2; fflush(); next }
    END { flush_line() }
  '
}

# The test runs' installs (scripts/test.sh, test-interpreters.sh, .ci/run) go through uv, into the
# same venv and with the same newest releases pip would pick, in a fraction of pip's time: the
# install is a large share of a fresh clone's test run. Byte code is not compiled here: the test
# scripts let Python write it as a module is first imported (only what the tests use, not every
# module of every library). uv itself comes from PyPI into the venv (make_venv).
uv_install() {
  local venv="${VENV:-.venv}"
  if [ ! -x "$venv/bin/uv" ]; then
    "$venv/bin/python" -m pip install --disable-pip-version-check --progress-bar off -q uv
  fi
  "$venv/bin/uv" pip install --python "$venv/bin/python" "$@" 2>&1 | awk '
    /^Resolved / { printf "    resolved %s packages\n", $2; fflush(); next }
    /^Installed / { printf "    installed %s packages\n", $2; fflush(); next }
    /^ [+~-] / || /^ *(Using|Prepared|Uninstalled|Audited|Bytecode compiled|Building|Built|Checked|Downloading|Downloaded)/ { next }
    { print; fflush() }
  '
  return "${PIPESTATUS[0]}"
}

# make_venv PYTHON DIR: a venv for uv_install, with uv in it. Made without pip when PYTHON has
# pip of its own, which installs uv into it (`pip --python`): ensurepip's copy of pip is most of
# the time `python -m venv` takes. uv_install then brings pip with the `test` extra (a test uses
# it). Otherwise a plain venv, whose pip installs uv. An existing venv keeps what it has.
make_venv() {
  local python=$1 venv=$2
  if [ -x "$venv/bin/python" ]; then
    return
  elif "$python" -m pip --version >/dev/null 2>&1; then
    "$python" -m venv --without-pip "$venv"
    "$python" -m pip --python "$venv/bin/python" install --disable-pip-version-check --progress-bar off -q uv
  else
    "$python" -m venv "$venv"
  fi
}
