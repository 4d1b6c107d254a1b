"""A KEP-541 exec plugin for tests: one real executable whose behaviour the arguments choose.

Run as ``python exec_plugin.py [options] [extra args...]`` (standard library only, so it starts
fast and depends on nothing under test). Unknown trailing arguments are accepted and recorded, as
profile-sourced args are appended after the configured ones.

Answers (default: a token, in the apiVersion KUBERNETES_EXEC_INFO asks for):
  --token T              token value (default "fake-token")
  --token-per-run        append "-N" to the token, N = this run's number in --count-file
  --expires-in SECONDS   add expirationTimestamp = now + SECONDS
  --expiration TEXT      add expirationTimestamp = TEXT verbatim
  --cert FILE --key FILE answer clientCertificateData / clientKeyData from these files
  --no-token             answer no token (with --cert/--key: a certificate-only credential)
  --api-version V        answer in V instead of the requested apiVersion
  --kind K               answer kind K
  --no-status            answer without status
  --format yaml          answer YAML instead of JSON
  --raw TEXT             print TEXT instead of an answer (with --exit-code: then fail)
  --read-stdin           read one line from stdin and use it as the token
Misbehaviour:
  --exit-code N          exit with N after writing --stderr
  --stderr TEXT          write TEXT to stderr
  --spam-bytes N         write N bytes of junk to stdout first
  --stderr-spam-bytes N  write N bytes of junk to stderr first
  --hang                 never answer (sleeps until killed)
  --hang-after N         with --count-file: answer normally on runs 1..N, hang on later ones
  --wait-for FILE        before answering, wait until FILE exists (a gate a test opens)
  --child-pidfile FILE   start a child that sleeps forever; write its pid to FILE first
  --linger-child         with --child-pidfile: answer normally, leaving the child holding stdout
  --setsid-child         with --child-pidfile: the child leaves our process group (setsid)
Observation:
  --record FILE          write what the plugin saw (argv, env subset, exec info, stdin) as JSON
  --count-file FILE      append one line per run (counts runs across processes)
  --clock-offset-file F  seconds (a float in F, if it exists) added to "now" for --expires-in,
                         so the plugin shares a test's simulated clock
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone


def _count(path: str) -> int:
    with open(path, "a+", encoding="utf-8") as handle:
        handle.write("run\n")
        handle.flush()
        handle.seek(0)
        return sum(1 for _ in handle)


def _opens_terminal() -> bool:
    """Whether this process can open a controlling terminal (``/dev/tty``)."""
    try:
        os.close(os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK))
    except OSError:
        return False
    return True


def main() -> int:
    parser = argparse.ArgumentParser(add_help=False)
    for flag in ("--token", "--expires-in", "--expiration", "--cert", "--key", "--api-version", "--kind",
                 "--format", "--raw", "--exit-code", "--stderr", "--spam-bytes", "--stderr-spam-bytes",
                 "--child-pidfile", "--record", "--count-file", "--clock-offset-file", "--hang-after", "--wait-for"):
        parser.add_argument(flag)
    for flag in ("--no-token", "--no-status", "--read-stdin", "--hang", "--linger-child", "--token-per-run", "--setsid-child"):
        parser.add_argument(flag, action="store_true")
    opts, extra = parser.parse_known_args()

    info_raw = os.environ.get("KUBERNETES_EXEC_INFO", "")
    info = json.loads(info_raw) if info_raw else None
    run = _count(opts.count_file) if opts.count_file else 0

    stdin_line = None
    if opts.read_stdin:
        stdin_line = sys.stdin.readline().strip()

    if opts.record:
        seen = {
            "argv": sys.argv[1:],
            "extra_args": extra,
            "exec_info": info,
            "exec_info_raw": info_raw,
            "env": {k: v for k, v in os.environ.items() if k.startswith(("CPCREDS_TEST_", "FAKE_"))},
            "stdin_isatty": os.isatty(0) if not sys.stdin.closed else False,
            "stdin_line": stdin_line,
            "pgid_is_own": os.getpgid(0) == os.getpid(),
            "opens_terminal": _opens_terminal(),
        }
        tmp = opts.record + ".tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(seen, handle)
        os.replace(tmp, opts.record)

    if opts.child_pidfile:
        child = subprocess.Popen(
            [sys.executable, "-c", "import time\nwhile True: time.sleep(3600)"], start_new_session=opts.setsid_child
        )
        with open(opts.child_pidfile + ".tmp", "w", encoding="utf-8") as handle:
            handle.write(str(child.pid))
        os.replace(opts.child_pidfile + ".tmp", opts.child_pidfile)

    if opts.stderr_spam_bytes:
        sys.stderr.write("e" * int(opts.stderr_spam_bytes))
        sys.stderr.flush()
    if opts.spam_bytes:
        chunk = "x" * 65536
        left = int(opts.spam_bytes)
        while left > 0:
            sys.stdout.write(chunk[: min(left, len(chunk))])
            left -= len(chunk)
        sys.stdout.flush()
    if opts.stderr:
        sys.stderr.write(opts.stderr + "\n")
        sys.stderr.flush()
    if opts.hang or (opts.hang_after is not None and run > int(opts.hang_after)):
        while True:
            time.sleep(3600)
    if opts.wait_for:
        while not os.path.exists(opts.wait_for):
            time.sleep(0.002)  # the test opens the gate; we are killed at our timeout otherwise
    if opts.raw is not None:
        sys.stdout.write(opts.raw)
        sys.stdout.flush()
    if opts.exit_code is not None:
        return int(opts.exit_code)
    if opts.raw is not None:
        return 0

    api_version = opts.api_version or (info or {}).get("apiVersion") or "client.authentication.k8s.io/v1"
    answer: dict = {"apiVersion": api_version, "kind": opts.kind or "ExecCredential"}
    if not opts.no_status:
        status: dict = {}
        if not opts.no_token:
            token = stdin_line if opts.read_stdin else (opts.token or "fake-token")
            status["token"] = f"{token}-{run}" if opts.token_per_run else token
        if opts.cert:
            with open(opts.cert, encoding="utf-8") as handle:
                status["clientCertificateData"] = handle.read()
        if opts.key:
            with open(opts.key, encoding="utf-8") as handle:
                status["clientKeyData"] = handle.read()
        if opts.expires_in is not None:
            offset = 0.0
            if opts.clock_offset_file and os.path.exists(opts.clock_offset_file):
                with open(opts.clock_offset_file, encoding="utf-8") as handle:
                    offset = float(handle.read() or 0)
            moment = datetime.now(timezone.utc) + timedelta(seconds=float(opts.expires_in) + offset)
            status["expirationTimestamp"] = moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        if opts.expiration is not None:
            status["expirationTimestamp"] = opts.expiration
        answer["status"] = status
    if opts.format == "yaml":
        lines = [f"apiVersion: {answer['apiVersion']}", f"kind: {answer['kind']}"]
        if "status" in answer:
            lines.append("status:")
            lines += [f"  {k}: {json.dumps(v)}" for k, v in answer["status"].items()]
        sys.stdout.write("\n".join(lines) + "\n")
    else:
        sys.stdout.write(json.dumps(answer))
    sys.stdout.flush()
    if opts.linger_child:
        os.close(1)  # our stdout is closed; the child's inherited copy keeps the pipe open
    return 0


if __name__ == "__main__":
    sys.exit(main())
