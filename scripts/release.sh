#!/usr/bin/env bash
# Make a release of every distribution at once: bash scripts/release.sh 0.2.0
# Sets VERSION in pyproject.toml and in each plugins-contrib/*/pyproject.toml (their version and
# their `cpcreds==` pin), and the image tag in deploy/serve.yaml; builds each distribution's sdist
# and wheel into dist/ (python -m build) and checks them (twine check). It does not commit, tag or
# upload: docs/releasing.md has the steps around it. Without a version, it builds and checks the
# version the files already have.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_pip.sh

version="${1:-}"
if [ -n "$version" ]; then
  if ! [[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+([ab]|rc)?[0-9]*$ ]]; then
    echo "release.sh: '$version' is not a version such as 0.2.0 or 0.2.0rc1" >&2
    exit 2
  fi
  step "setting version $version"
  python3 - "$version" <<'PY'
import pathlib, re, sys

version = sys.argv[1]

def sub(path: pathlib.Path, pattern: str, replacement: str) -> None:
    text = path.read_text()
    new, count = re.subn(pattern, replacement, text, flags=re.M)
    if count != 1:
        sys.exit(f"release.sh: {path}: expected one match of {pattern!r}, found {count}")
    path.write_text(new)
    print(f"    {path}")

sub(pathlib.Path("pyproject.toml"), r'^version = "[^"]*"$', f'version = "{version}"')
for plugin in sorted(pathlib.Path("plugins-contrib").glob("*/pyproject.toml")):
    sub(plugin, r'^version = "[^"]*"$', f'version = "{version}"')
    sub(plugin, r'"cpcreds==[^"]*"', f'"cpcreds=={version}"')
sub(pathlib.Path("deploy/serve.yaml"), r"(image: \S+/cpcreds:)\S+", rf"\g<1>{version}")
PY
fi

# The Python that builds: $PYTHON if it has build and twine (CI's), else .venv's with the
# `release` extra installed.
python="${PYTHON:-.venv/bin/python}"
if ! "$python" -c 'import build, twine' 2>/dev/null; then
  step "installing the release tools (build, twine) into .venv"
  python3 -m venv .venv
  pip_install -e '.[release]'
  python=.venv/bin/python
fi
rm -rf dist
projects=(.)
for plugin in plugins-contrib/*/; do
  [ -f "$plugin/pyproject.toml" ] && projects+=("${plugin%/}")
done
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
for project in "${projects[@]}"; do
  step "building $project (sdist, then a wheel from it)"
  if ! "$python" -m build --outdir dist "$project" >"$log" 2>&1; then
    cat "$log" >&2
    echo "release.sh: building $project failed (its output is above)" >&2
    exit 1
  fi
  grep '^Successfully built' "$log" | sed 's/^/    /'
done
step "checking dist/ (twine check --strict)"
"$python" -m twine check --strict dist/*
step "built into dist/: $(cd dist && echo *)"
