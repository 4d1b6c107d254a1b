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

Comments on the line before a block:

- ``<!-- not run: REASON -->``: the block cannot run here; it is not collected.
- ``<!-- shipped: PATH -->``: the block is the content of the repository's file PATH (a page that
  shows a file the reader would write); it is compared with that file, not run.
- ``<!-- run with: SETUP, ... -->``: the block runs with these setups (see ``SETUPS``): plugin
  packages visible to cpcreds without installing them, a fresh disk cache.
"""

from __future__ import annotations

import os
import re
import shlex
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
SHIPPED = re.compile(r"<!--\s*shipped:\s*(?P<path>[^\s>]+)\s*-->\s*$")
RUN_WITH = re.compile(r"<!--\s*run with:\s*(?P<setups>[^>]*?)\s*-->\s*$")
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
    # ``ls -l``'s links, owner, group, size and time; a disk-cache file's name (from the key).
    (re.compile(r"^([-dl][rwxst-]{9}) +\d+ +\S+ +\S+ +\d+ +\w{3} +\d+ +[\d:]+ ", re.M), r"\1 <ls -l> "),
    (re.compile(r"\b[0-9a-f]{16}-<sha256>\.cred\b"), "<key>.cred"),
    (re.compile(r"^total \d+$", re.M), "total <blocks>"),
    # An HMAC or digest cut to 32 hex digits (writing-an-exec-plugin.md's team tokens).
    (re.compile(r"(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])"), "<hex32>"),
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
            # Standard output unbuffered, as on a terminal: log lines on standard error show where
            # a terminal shows them, not after everything else.
            PYTHONUNBUFFERED="1",
        )

    def shown(self, text: str) -> str:
        """``text`` as the page shows it: the copy's root and HOME by their placeholders."""
        text = text.replace(sys.prefix, f"{SHOWN_ROOT}/.venv")
        return text.replace(str(self.root), SHOWN_ROOT).replace(str(self.home), SHOWN_HOME)

    def run(self, command: str, stdin: str | None = None, env: dict[str, str] | None = None) -> tuple[int, str]:
        """Runs ``command`` with bash where the previous command left off (``env`` added to its
        environment); its status and output."""
        # The venv is shared with the clone: a page's install command would replace its packages.
        assert not re.search(r"\bpip\b.*\binstall\b", command), f"{command!r} installs packages: mark it <!-- not run: ... -->"
        command = command.replace(SHOWN_ROOT, str(self.root))
        # A block's own environment (its setups) is set after the page's shell state is restored,
        # and left out of the state kept for the next block.
        setups = "".join(f"export {name}={shlex.quote(value)}\n" for name, value in (env or {}).items())
        keep = f" | grep -v -E '^declare -x ({'|'.join(env)})='" if env else ""
        script = (
            f"set +H\nsource {self.state}/env\n{setups}cd \"$(cat {self.state}/cwd)\"\n(exit {self.last_status})\n{command}\n"
            f"__status=$?\nexport -p{keep} > {self.state}/env\npwd > {self.state}/cwd\nexit $__status\n"
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
    env = example.namespace.get("env")
    for command, expected in session(example.parsed):
        status, printed = page.run(command, env=env)
        actual = printed.splitlines()
        if not matches(expected, actual):
            raise AssertionError(f"$ {command}\nexit status {status}, printed:\n{printed}\nthe page shows:\n" + "\n".join(expected))


def run_sh(example: Example) -> None:
    page: Page = example.namespace["page"]
    status, printed = page.run(example.parsed, env=example.namespace.get("env"))
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
    status, printed = page.run("python -", stdin=source, env=example.namespace.get("env"))
    assert status == 0, f"python block exited {status}:\n{printed}"


PARSERS = [CodeBlockParser("console", run_console), CodeBlockParser("sh", run_sh), CodeBlockParser("python", run_python)]


def comment_before(document: Document, start: int, pattern: re.Pattern[str]) -> re.Match[str] | None:
    """The ``<!-- ... -->`` comment of ``pattern`` on the line before a block, if any."""
    before = document.text[:start].rstrip("\n ").rsplit("\n", 1)[-1]
    return pattern.search(before)


def runnable(page: Path) -> list[Example]:
    """The blocks of ``page`` to run: not those marked not run, nor shipped files' contents."""
    document = Document.parse(str(page), *PARSERS)
    return [
        example
        for example in document.examples()
        if not comment_before(document, example.region.start, NOT_RUN) and not comment_before(document, example.region.start, SHIPPED)
    ]


class Plugins:
    """Plugin packages made visible to cpcreds for one block, without installing them into the
    shared venv: per package a folder for ``PYTHONPATH`` holding its ``.dist-info`` (metadata and
    entry points, which is all ``importlib.metadata`` reads) and its code, and a ``bin`` folder
    for ``PATH`` with its console scripts."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.bin = base / "bin"
        self.bin.mkdir()
        self.paths: dict[str, list[Path]] = {}
        # The example provider of writing-a-provider.md, its code from the clone's examples/.
        self.add("envtoken", "cpcreds-envtoken", "0.1.0", "cpcreds_envtoken.plugin", code=ROOT / "examples" / "cpcreds-envtoken" / "src",
                 scripts={"cpcreds-envtoken": "cpcreds_envtoken.plugin:main"})
        # A package whose plugin module cannot be imported: its dependency is not installed.
        self.add("broken", "cpcreds-broken", "0.1.0", "cpcreds_broken")
        (base / "broken" / "cpcreds_broken.py").write_text("import hvac  # noqa: F401  (not installed: the plugin fails to load)\n")

    def add(self, plugin: str, distribution: str, version: str, module: str, *, code: Path | None = None, scripts: dict[str, str] | None = None) -> None:
        site = self.base / plugin
        info = site / f"{distribution.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n")
        (info / "entry_points.txt").write_text(f"[cpcreds]\n{plugin} = {module}\n")
        self.paths[plugin] = [site, *([code] if code else [])]
        for script, target in (scripts or {}).items():
            function_module, function = target.split(":")
            path = self.bin / script
            path.write_text(f"#!{sys.executable}\nimport sys\nfrom {function_module} import {function}\nsys.exit({function}())\n")
            path.chmod(0o755)

    def env(self, names: set[str], page: Page) -> dict[str, str]:
        """The environment that shows the plugin packages ``names`` to cpcreds."""
        paths = [str(path) for name in sorted(names) for path in self.paths[name]]
        paths += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        return {"PYTHONPATH": os.pathsep.join(paths), "PATH": f"{page.env['PATH']}{os.pathsep}{self.bin}"}


@pytest.fixture(scope="session")
def plugins(tmp_path_factory: pytest.TempPathFactory) -> Plugins:
    return Plugins(tmp_path_factory.mktemp("plugins"))


#: What ``<!-- run with: ... -->`` may name.
SETUPS = {
    "envtoken": "the example provider of examples/cpcreds-envtoken, as if installed",
    "broken": "a plugin package that fails to load (its module imports a package not installed)",
    "fresh-cache": "an empty disk cache (~/.cache/cpcreds removed before the block)",
}


def setup_env(page: Page, plugins: Plugins, names: set[str]) -> dict[str, str]:
    unknown = names - set(SETUPS)
    assert not unknown, f"run with: unknown setups {sorted(unknown)}; known: {sorted(SETUPS)}"
    if "fresh-cache" in names:
        shutil.rmtree(page.home / ".cache" / "cpcreds", ignore_errors=True)
    packages = names & set(plugins.paths)
    return plugins.env(packages, page) if packages else {}


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_page_runs_as_shown(path: Path, tmp_path: Path, plugins: Plugins) -> None:
    examples = runnable(path)
    if not examples:
        return
    page = Page(tmp_path)
    document = examples[0].document
    failures = []
    for example in examples:
        example.namespace["page"] = page
        marked = comment_before(document, example.region.start, RUN_WITH)
        names = {n.strip() for n in marked.group("setups").split(",")} if marked else set()
        example.namespace["env"] = setup_env(page, plugins, names)
        try:
            example.evaluate()
        except AssertionError as failure:
            failures.append(f"{path.relative_to(ROOT)} line {example.line}:\n{failure}")
    assert not failures, "\n\n".join(failures)


def shipped_blocks(path: Path) -> Iterator[tuple[str, str]]:
    """(PATH, block text) of each block of ``path`` marked ``<!-- shipped: PATH -->``."""
    text = path.read_text(encoding="utf-8")
    for found in re.finditer(r"<!--\s*shipped:\s*(\S+)\s*-->\n([ \t]*)```[\w-]*\n(.*?)\n\2```", text, flags=re.DOTALL):
        indent = found.group(2)
        yield found.group(1), "".join(line[len(indent):] + "\n" for line in found.group(3).split("\n"))


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_files_a_page_shows_are_shipped(path: Path) -> None:
    for shipped, shown in shipped_blocks(path):
        file = ROOT / shipped
        assert file.is_file(), f"{path.relative_to(ROOT)} shows {shipped}, which the repository does not hold"
        assert file.read_text(encoding="utf-8") == shown, f"{path.relative_to(ROOT)} shows {shipped} other than it is"


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
