"""Every page of docs/ and every README runs as shown, from any clone.

Sybil finds the pages' fenced blocks; this module says how each kind runs:

- ``console``: each ``$ command`` (a trailing backslash continues it; ``<<EOF`` takes the lines up
  to ``EOF``) runs with bash from the root of a temporary copy of the repository, the venv's
  ``bin`` first on ``PATH``, ``HOME`` a temporary folder; what it prints (stdout and stderr, as a
  terminal shows them) is compared with the lines below it. ``cd``, exported variables and ``$?``
  carry from one command of a page to the next.
- ``sh``: the block runs the same way and must exit 0; its output is not compared.
- ``python``: the block runs as a script (``python -``) from the same folder and must exit 0. A
  block whose first line is ``# NAME.py`` is a file the page writes: it is saved as NAME.py.

Values that differ per run are matched loosely (both sides are normalised): RFC 3339 times,
loopback ports, sha256 digests, durations with a fraction or in ms, the demo plugin's random token
part, pids. ``...`` in an expected line matches any text; a line that is only ``...`` matches any
number of lines. The copy's root prints as ``/path/to/cpcreds`` and ``HOME`` as ``~``.

A block that cannot run here is preceded by ``<!-- not run: REASON -->``; it is not collected.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sybil = pytest.importorskip("sybil", reason="pip install -e '.[test]' (sybil runs the docs' examples)")

from sybil import Document, Example  # noqa: E402
from sybil.parsers.markdown import CodeBlockParser  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(
    [*(ROOT / "docs").glob("*.md"), ROOT / "README.md", ROOT / "plugins-contrib" / "README.md", *(ROOT / "plugins-contrib").glob("*/README.md")]
)
#: What the runner prints in place of the temporary copy's root and of HOME.
SHOWN_ROOT = "/path/to/cpcreds"
SHOWN_HOME = "~"
NOT_RUN = re.compile(r"<!--\s*not run:\s*(?P<reason>[^>]*?)\s*-->\s*$")
COMMAND_TIMEOUT = 30.0
#: Left out of the copy: what a clone does not hold, or what no page reads.
NOT_COPIED = shutil.ignore_patterns(".git", ".venv", "__pycache__", "*.egg-info", ".pytest_cache", ".hypothesis", "build", "dist", "bench", "tests")

VOLATILE = [
    (re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?"), "<time>"),
    (re.compile(r"\b(127\.0\.0\.1|localhost|\[::1\]):\d+"), r"\1:<port>"),
    (re.compile(r"\b[0-9a-f]{64}\b"), "<sha256>"),
    (re.compile(r"\b\d+\.\d+ ?(?:ms|s)\b|\b\d+ ?ms\b"), "<duration>"),
    (re.compile(r"\b(demo\.[\w-]+\.[\w-]+)\.[A-Za-z0-9_-]{32}"), r"\1.<random>"),
    (re.compile(r"\bpid \d+"), "pid <pid>"),
]


class Page:
    """The state one page's blocks share: the copy of the repository, the shell's state."""

    def __init__(self, base: Path) -> None:
        self.root = base / "cpcreds"
        self.home = base / "home"
        self.state = base / "shell"
        shutil.copytree(ROOT, self.root, ignore=NOT_COPIED, symlinks=True)
        # ``.venv/bin/python`` works in the copy as in the clone.
        (self.root / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
        self.home.mkdir()
        self.state.mkdir()
        (self.state / "cwd").write_text(str(self.root))
        (self.state / "env").write_text("")
        self.last_status = 0
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("CPCREDS_", "XDG_", "KUBE", "PYTEST", "COV_"))}
        self.env.update(
            PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
            HOME=str(self.home),
            COLUMNS="100",
            LC_ALL="C.UTF-8",
            PYTHONDONTWRITEBYTECODE="1",
        )

    def shown(self, text: str) -> str:
        """``text`` as the page shows it: the copy's root and HOME by their placeholders."""
        text = text.replace(sys.prefix, f"{SHOWN_ROOT}/.venv")
        return text.replace(str(self.root), SHOWN_ROOT).replace(str(self.home), SHOWN_HOME)

    def run(self, command: str, stdin: str | None = None) -> tuple[int, str]:
        """Runs ``command`` with bash where the previous command left off; its status and output."""
        # The venv is shared with the clone: a page's install command would replace its packages.
        assert not re.search(r"\bpip\b.*\binstall\b", command), f"{command!r} installs packages: mark it <!-- not run: ... -->"
        command = command.replace(SHOWN_ROOT, str(self.root))
        script = (
            f"set +H\nsource {self.state}/env\ncd \"$(cat {self.state}/cwd)\"\n(exit {self.last_status})\n{command}\n"
            f"__status=$?\nexport -p > {self.state}/env\npwd > {self.state}/cwd\nexit $__status\n"
        )
        try:
            result = subprocess.run(
                ["bash", "-c", script], env=self.env, input=stdin or "", stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True, errors="replace", timeout=COMMAND_TIMEOUT, start_new_session=True,
            )
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{command!r} did not finish within {COMMAND_TIMEOUT:.0f}s") from None
        self.last_status = result.returncode
        return result.returncode, self.shown(result.stdout)


def normalised(text: str) -> str:
    for pattern, replacement in VOLATILE:
        text = pattern.sub(replacement, text)
    return text


def matches(expected: list[str], actual: list[str]) -> bool:
    """Whether ``actual`` lines are ``expected`` lines, ``...`` matching any text (any lines alone)."""
    parts = []
    for line in expected:
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*?".join(re.escape(piece) for piece in normalised(line).split("...")) + r"\n")
    return re.fullmatch("".join(parts), "".join(normalised(line) + "\n" for line in actual)) is not None


def session(source: str) -> Iterator[tuple[str, list[str]]]:
    """(command, expected output lines) of a console block."""
    lines = source.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        assert line.startswith("$ "), f"console output before any command: {line!r}"
        command = line[2:]
        while command.endswith("\\") and index + 1 < len(lines):
            index += 1
            command += "\n" + lines[index]
        heredoc = re.search(r"<<-?\s*'?\"?(\w+)'?\"?", command)
        if heredoc:
            while index + 1 < len(lines):
                index += 1
                command += "\n" + lines[index]
                if lines[index].strip() == heredoc.group(1):
                    break
        index += 1
        output = []
        while index < len(lines) and not lines[index].startswith("$ "):
            output.append(lines[index])
            index += 1
        yield command, output


def run_console(example: Example) -> None:
    page: Page = example.namespace["page"]
    for command, expected in session(example.parsed):
        status, printed = page.run(command)
        actual = printed.splitlines()
        if not matches(expected, actual):
            raise AssertionError(f"$ {command}\nexit status {status}, printed:\n{printed}\nthe page shows:\n" + "\n".join(expected))


def run_sh(example: Example) -> None:
    page: Page = example.namespace["page"]
    status, printed = page.run(example.parsed)
    assert status == 0, f"{example.parsed}\nexit status {status}:\n{printed}"


def run_python(example: Example) -> None:
    page: Page = example.namespace["page"]
    source: str = example.parsed
    first = source.splitlines()[0] if source.strip() else ""
    written = re.fullmatch(r"# ([\w./-]+\.py)", first)
    if written:
        cwd = Path((page.state / "cwd").read_text().strip())
        (cwd / written.group(1)).write_text(source, encoding="utf-8")
        return
    status, printed = page.run("python -", stdin=source)
    assert status == 0, f"python block exited {status}:\n{printed}"


PARSERS = [CodeBlockParser("console", run_console), CodeBlockParser("sh", run_sh), CodeBlockParser("python", run_python)]


def not_run_reason(document: Document, start: int) -> str | None:
    """The reason of the ``<!-- not run: ... -->`` comment on the line before a block, if any."""
    before = document.text[:start].rstrip("\n ").rsplit("\n", 1)[-1]
    found = NOT_RUN.search(before)
    return found.group("reason") if found else None


def runnable(page: Path) -> list[Example]:
    document = Document.parse(str(page), *PARSERS)
    return [example for example in document.examples() if not_run_reason(document, example.region.start) is None]


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_page_runs_as_shown(path: Path, tmp_path: Path) -> None:
    examples = runnable(path)
    if not examples:
        return
    page = Page(tmp_path)
    failures = []
    for example in examples:
        example.namespace["page"] = page
        try:
            example.evaluate()
        except AssertionError as failure:
            failures.append(f"{path.relative_to(ROOT)} line {example.line}:\n{failure}")
    assert not failures, "\n\n".join(failures)


def test_every_block_not_run_says_why() -> None:
    for path in PAGES:
        for line in path.read_text(encoding="utf-8").splitlines():
            if "not run" in line and line.lstrip().startswith("<!--"):
                found = NOT_RUN.search(line)
                assert found and found.group("reason"), f"{path.relative_to(ROOT)}: {line!r} gives no reason"


def test_no_page_shows_a_path_of_one_machine() -> None:
    machine = re.compile(r"(^|[^A-Za-z0-9_.])/(work|root|home/\w+|tmp/)")
    for path in [*PAGES, *(ROOT / "examples").rglob("*"), *(ROOT / "docs" / "examples").rglob("*")]:
        if path.is_file() and "__pycache__" not in path.parts:
            for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                assert not machine.search(line), f"{path.relative_to(ROOT)}:{number}: {line}"
