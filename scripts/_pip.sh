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
