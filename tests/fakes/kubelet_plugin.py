"""A KEP-2133 kubelet credential provider plugin for tests: one real executable, its behaviour
chosen by arguments.

Installed into a bin dir with :func:`install` (a small ``#!`` script named as the provider that
runs this file with the test's interpreter), it reads a CredentialProviderRequest on stdin and
answers a CredentialProviderResponse in the request's apiVersion. Standard library only.

Answer:
  --cache-key-type T     Image | Registry (default) | Global, or anything to test refusals
  --cache-duration D     cacheDuration (a Go duration string); absent by default
  --auth KEY=USER:PASS   an auth entry (repeatable, kept in order); KEY may be the word
                         REGISTRY or IMAGE for the request's registry or repository
  --password-per-run     append "-N" to every password, N = this run's number in --count-file
  --password-from-token  use the request's serviceAccountToken as every password
  --api-version V        answer in V instead of the request's
  --kind K               answer kind K
  --raw TEXT             print TEXT instead of an answer
Misbehaviour:
  --exit-code N          exit with N (after --stderr)
  --fail-runs N          with --count-file: exit 1 on runs 1..N, answer on later ones
  --fail-for IMAGE       exit 1 (naming the image on stderr) when asked about IMAGE
  --stderr TEXT          write TEXT to stderr
  --echo-request         write the request, as read, to stderr (a plugin that leaks what it was sent)
  --spam-bytes N         write N bytes of junk to stdout first
  --hang                 never answer (sleeps until killed)
  --wait-for FILE        before answering, wait until FILE exists (a gate a test opens)
Observation:
  --count-file FILE      append one line per run: the requested image (counts runs across processes)
  --record FILE          append one JSON line per run: argv, the request, and the variables named
                         by --record-env
  --record-env NAME      an environment variable to record (repeatable)
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
import time
from pathlib import Path

_HERE = os.path.abspath(__file__)


def install(bin_dir: Path, name: str, *args: str) -> Path:
    """Write ``bin_dir/name``: an executable that runs this plugin with ``args`` (and whatever
    arguments the config's ``args`` add after them)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    quoted = " ".join("'" + a.replace("'", "'\\''") + "'" for a in (sys.executable, "-S", _HERE, *args))
    path.write_text(f'#!/bin/sh\nexec {quoted} "$@"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def provider_entry(name: str, *match_images: str, **fields: object) -> dict[str, object]:
    """One ``providers[]`` entry of a CredentialProviderConfig: credentialprovider v1 and a
    ten-minute defaultCacheDuration unless ``fields`` say otherwise (``None`` drops a field)."""
    entry: dict[str, object] = {
        "name": name,
        "matchImages": list(match_images),
        "defaultCacheDuration": "10m",
        "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
    }
    entry.update(fields)
    return {key: value for key, value in entry.items() if value is not None}


def write_config(path: Path, *providers: dict[str, object], api_version: str = "kubelet.config.k8s.io/v1") -> Path:
    """Write a CredentialProviderConfig (JSON, which the kubelet reads as YAML too)."""
    document = {"apiVersion": api_version, "kind": "CredentialProviderConfig", "providers": list(providers)}
    path.write_text(json.dumps(document, indent=2))
    return path


def runs(count_file: Path) -> list[str]:
    """The images of the runs recorded in ``count_file`` (``--count-file``), in order."""
    return count_file.read_text().splitlines() if count_file.exists() else []


def _count(path: str, image: str) -> int:
    with open(path, "a+", encoding="utf-8") as handle:
        handle.write(image + "\n")
        handle.flush()
        handle.seek(0)
        return sum(1 for _ in handle)


def main() -> int:
    parser = argparse.ArgumentParser(add_help=False)
    for flag in ("--cache-key-type", "--cache-duration", "--api-version", "--kind", "--raw", "--exit-code", "--fail-runs",
                 "--fail-for", "--stderr", "--spam-bytes", "--wait-for", "--count-file", "--record"):
        parser.add_argument(flag)
    parser.add_argument("--auth", action="append", default=[])
    parser.add_argument("--record-env", action="append", default=[])
    for flag in ("--password-per-run", "--password-from-token", "--hang", "--echo-request"):
        parser.add_argument(flag, action="store_true")
    options, extra = parser.parse_known_args()

    raw_request = sys.stdin.read()
    request = json.loads(raw_request)
    image = request.get("image", "")
    run = _count(options.count_file, image) if options.count_file else 0
    if options.record:
        seen = {"argv": sys.argv[1:], "extra": extra, "request": request,
                "env": {name: os.environ.get(name) for name in options.record_env}}
        with open(options.record, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(seen) + "\n")
    if options.wait_for:
        while not os.path.exists(options.wait_for):
            time.sleep(0.005)
    if options.hang:
        while True:
            time.sleep(60)
    if options.echo_request:
        sys.stderr.write(raw_request)
    if options.stderr:
        sys.stderr.write(options.stderr)
        sys.stderr.flush()
    if options.exit_code:
        return int(options.exit_code)
    if options.fail_runs and run <= int(options.fail_runs):
        sys.stderr.write(f"run {run} fails on purpose\n")
        return 1
    if options.fail_for and image == options.fail_for:
        sys.stderr.write(f"no credentials for {image}\n")
        return 1
    if options.spam_bytes:
        sys.stdout.write("x" * int(options.spam_bytes))
    if options.raw is not None:
        sys.stdout.write(options.raw)
        return 0

    auth = {}
    for spec in options.auth:
        key, _, userpass = spec.partition("=")
        username, _, password = userpass.partition(":")
        if key == "REGISTRY":
            key = image.split("/", 1)[0]
        elif key == "IMAGE":
            key = image
        if options.password_per_run:
            password = f"{password}-{run}"
        if options.password_from_token:
            password = request.get("serviceAccountToken", "")
        auth[key] = {"username": username, "password": password}
    response = {
        "apiVersion": options.api_version or request.get("apiVersion"),
        "kind": options.kind or "CredentialProviderResponse",
        "cacheKeyType": options.cache_key_type or "Registry",
    }
    if options.cache_duration is not None:
        response["cacheDuration"] = options.cache_duration
    if auth:
        response["auth"] = auth
    sys.stdout.write(json.dumps(response))
    return 0


if __name__ == "__main__":
    sys.exit(main())
