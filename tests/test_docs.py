"""Every page of docs/ and every README runs as shown, from any clone.

Sybil finds the pages' fenced blocks; this module says how each kind runs:

- ``console``: each ``$ command`` (a trailing backslash continues it; ``<<EOF`` takes the lines up
  to ``EOF``) runs with bash from the root of a temporary copy of the repository, the venv's
  ``bin`` first on ``PATH``, ``HOME`` a temporary folder; what it prints (stdout and stderr, as a
  terminal shows them) is compared with the lines below it. ``cd``, exported variables and ``$?``
  carry from one command of a page to the next.
- ``sh``: the block runs the same way and must exit 0; its output is not compared.
- ``python``: the block runs as a script (``python -``, its text as for a command) from the same folder and must exit 0; a
  plain block (no language) right after it is what it prints, compared as for ``console``. A
  block whose first line is ``# NAME.py`` is a file the page writes: it is saved as NAME.py.
- ``yaml``: a block whose first line is ``# NAME.yaml`` is a file the page writes: it is saved as
  NAME.yaml in the current folder (Secrets among them are what the ``hub`` setup serves).

Values that differ per run are matched loosely (both sides are normalised): RFC 3339 times,
loopback ports, sha256 digests, durations with a fraction or in ms, the demo plugin's random token
part, pids. ``...`` in an expected line matches any text; a line that is only ``...`` matches any
number of lines. The copy's root prints as ``/path/to/cpcreds`` and ``HOME`` as ``~``.

Comments on the line before a block:

- ``<!-- not run: REASON -->``: the block cannot run here; it is not collected.
- ``<!-- shipped: PATH -->``: the block is the content of the repository's file PATH (a page that
  shows a file the reader would write); it is compared with that file, not run.
- ``<!-- run with: SETUP, ... -->``: the block runs with these setups (see ``SETUPS``): plugin
  packages visible to cpcreds without installing them, a fresh disk cache, the shared fakes of
  tests/fakes/ (the hub, a SPIRE agent, Google) where the page shows the real thing.

Pages run side by side, each in one of a few copies of the repository made once per session and
put back as they were after each page; each fake starts once per session.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from queue import Queue
from typing import Any

import pytest
import yaml

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
NOT_COPIED = shutil.ignore_patterns(".git", ".venv", ".venv-3.*", "__pycache__", "*.egg-info", ".pytest_cache", ".hypothesis", "build", "dist", "bench", "tests")

VOLATILE = [
    (re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?"), "<time>"),
    (re.compile(r"\b(127\.0\.0\.1|localhost|\[::1\]):\d+"), r"\1:<port>"),
    (re.compile(r"\b[0-9a-f]{64}\b"), "<sha256>"),
    (re.compile(r"\b\d+\.\d+ ?(?:ms|s)\b|\b\d+ ?ms\b"), "<duration>"),
    (re.compile(r"\b(demo\.[\w-]+\.[\w-]+)\.[A-Za-z0-9_-]{32}"), r"\1.<random>"),
    (re.compile(r"\bpid \d+"), "pid <pid>"),
    # A Python interpreter's path, quoted (``cpcreds pin``'s entries): this machine's Python.
    (re.compile(r'"/[^"\s]*/python3?(?:\.\d+)?"'), '"<python>"'),
    # A Google access token (the pages shorten real ones with ``...``).
    (re.compile(r"\bya29\.[\w.-]+"), "ya29.<token>"),
    # ``ls -l``'s links, owner, group, size and time; a disk-cache file's name (from the key).
    (re.compile(r"^([-dl][rwxst-]{9}) +\d+ +\S+ +\S+ +\d+ +\w{3} +\d+ +[\d:]+ ", re.M), r"\1 <ls -l> "),
    (re.compile(r"\b[0-9a-f]{16}-<sha256>\.cred\b"), "<key>.cred"),
    (re.compile(r"^total \d+$", re.M), "total <blocks>"),
    # An HMAC or digest cut to 32 hex digits (writing-an-exec-plugin.md's team tokens).
    (re.compile(r"(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])"), "<hex32>"),
]


class Workspace:
    """A copy of the repository, made once per session and put back as it was after each page:
    a page's blocks write files and folders into it (``# NAME.yaml`` blocks, ``mkdir``, caches)."""

    def __init__(self, base: Path) -> None:
        self.root = base / "cpcreds"
        shutil.copytree(ROOT, self.root, ignore=NOT_COPIED, symlinks=True)
        # ``.venv/bin/python`` works in the copy as in the clone.
        (self.root / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
        self.files = {path: self._stamp(path) for path in self._walk()}

    def _walk(self) -> Iterator[Path]:
        for folder, folders, files in os.walk(self.root):
            folders[:] = [name for name in folders if not (folder == str(self.root) and name == ".venv")]
            for name in [*files, *(d for d in folders if os.path.islink(os.path.join(folder, d)))]:
                yield Path(folder, name)

    @staticmethod
    def _stamp(path: Path) -> tuple[int, int, int]:
        stat = path.lstat()
        return stat.st_size, stat.st_mtime_ns, stat.st_mode

    def reset(self) -> None:
        """Removes what a page added, restores what it changed or removed: only those files."""
        seen = set()
        for path in list(self._walk()):
            seen.add(path)
            if path not in self.files:
                path.unlink()
            elif self._stamp(path) != self.files[path]:
                path.unlink()
                shutil.copy2(ROOT / path.relative_to(self.root), path, follow_symlinks=False)
        for path in self.files.keys() - seen:
            path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / path.relative_to(self.root), path, follow_symlinks=False)
        for folder, folders, _files in os.walk(self.root, topdown=False):
            for name in folders:
                path = Path(folder, name)
                if not path.is_symlink() and path != self.root / ".venv" and not any(path.iterdir()) and not (ROOT / path.relative_to(self.root)).is_dir():
                    path.rmdir()


class Page:
    """The state one page's blocks share: a workspace, HOME, the shell's state, the setups."""

    def __init__(self, workspace: Workspace, base: Path) -> None:
        self.root = workspace.root
        self.home = base / "home"
        self.state = base / "shell"
        self.home.mkdir()
        self.state.mkdir()
        (self.state / "cwd").write_text(str(self.root))
        (self.state / "env").write_text("")
        self.last_status = 0
        #: (shown, actual) pairs: a setup's fake where the page shows the real thing. Commands and
        #: the files a page writes get the actual value, output shows the shown one.
        self.replacements: list[tuple[str, str]] = []
        #: The Kubernetes objects of the page's ``# NAME.yaml`` blocks, in order.
        self.objects: list[dict[str, Any]] = []
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("CPCREDS_", "XDG_", "KUBE", "PYTEST", "COV_", "GOOGLE_", "GCE_", "SPIFFE_", "CLOUDSDK_"))}
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

    def actual(self, text: str) -> str:
        """``text`` of the page (a command, a file) as it runs here."""
        text = text.replace(SHOWN_ROOT, str(self.root))
        for shown, actual in self.replacements:
            text = text.replace(shown, actual)
        return text

    def shown(self, text: str) -> str:
        """``text`` as the page shows it: the copy's root and HOME by their placeholders."""
        for shown, actual in self.replacements:
            text = text.replace(actual, shown)
        text = text.replace(sys.prefix, f"{SHOWN_ROOT}/.venv")
        return text.replace(str(self.root), SHOWN_ROOT).replace(str(self.home), SHOWN_HOME)

    @property
    def cwd(self) -> Path:
        return Path((self.state / "cwd").read_text().strip())

    def run(self, command: str, stdin: str | None = None, env: dict[str, str] | None = None) -> tuple[int, str]:
        """Runs ``command`` with bash where the previous command left off (``env`` added to its
        environment); its status and output."""
        # The venv is shared with the clone: a page's install command would replace its packages.
        assert not re.search(r"\bpip\b.*\binstall\b", command), f"{command!r} installs packages: mark it <!-- not run: ... -->"
        command = self.actual(command)
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


def checked(example: Example, printed: str) -> str:
    """``printed``, after the block's setups have checked it (their own assertions)."""
    for check in example.namespace.get("checks", ()):
        check(printed)
    return printed


def run_console(example: Example) -> None:
    page: Page = example.namespace["page"]
    env = example.namespace.get("env")
    for command, expected in session(example.parsed):
        status, printed = page.run(command, env=env)
        actual = checked(example, printed).splitlines()
        if not matches(expected, actual):
            raise AssertionError(f"$ {command}\nexit status {status}, printed:\n{printed}\nthe page shows:\n" + "\n".join(expected))


def run_sh(example: Example) -> None:
    page: Page = example.namespace["page"]
    status, printed = page.run(example.parsed, env=example.namespace.get("env"))
    assert status == 0, f"{example.parsed}\nexit status {status}:\n{printed}"
    checked(example, printed)


def written_file(example: Example, pattern: str) -> Path | None:
    """Saves a block whose first line is ``# NAME`` (``NAME`` matching ``pattern``) as NAME in the
    current folder, as the page's reader would; its path, or None for another block."""
    page: Page = example.namespace["page"]
    source: str = example.parsed
    first = source.splitlines()[0] if source.strip() else ""
    written = re.fullmatch(rf"# ({pattern})", first)
    if not written:
        return None
    path = page.cwd / written.group(1)
    path.write_text(page.actual(source), encoding="utf-8")
    return path


def run_python(example: Example) -> None:
    if written_file(example, r"[\w./-]+\.py"):
        return
    page: Page = example.namespace["page"]
    status, printed = page.run("python -", stdin=page.actual(example.parsed), env=example.namespace.get("env"))
    assert status == 0, f"python block exited {status}:\n{printed}"
    checked(example, printed)
    # A plain block right after it is what it prints.
    shown = re.match(r"\s*\n```\n(.*?)\n?```\n", example.document.text[example.region.end:], flags=re.DOTALL)
    if shown and not matches(shown.group(1).splitlines(), printed.splitlines()):
        raise AssertionError(f"the python block printed:\n{printed}\nthe page shows:\n{shown.group(1)}")


def write_yaml(example: Example) -> None:
    """A ``# NAME.yaml`` block is a file the page's reader saves; other YAML blocks are shown only."""
    path = written_file(example, r"[\w./-]+\.ya?ml")
    if path:
        page: Page = example.namespace["page"]
        page.objects += [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if isinstance(doc, dict) and "kind" in doc]


PARSERS = [
    CodeBlockParser("console", run_console), CodeBlockParser("sh", run_sh), CodeBlockParser("python", run_python), CodeBlockParser("yaml", write_yaml),
]


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


#: The hub's address as the pages show it (the in-cluster service address of a hub).
SHOWN_HUB = "https://10.96.0.1:443"
#: The SPIRE agent's socket as the pages show it (where the SPIFFE CSI driver mounts it).
SHOWN_SOCKET = "/spiffe-workload-api/spire-agent.sock"
#: The identities the SPIRE agent fake holds for the pages' controller; the pages pick the second.
SPIFFE_IDS = ["spiffe://example.org/ns/fleet-system/sa/other", "spiffe://example.org/ns/fleet-system/sa/fleet-controller"]
#: The hub token the pages' hub kubeconfig holds, and the Role it is granted: providers-secretreader.md's
#: rbac.yaml (get on secrets) in the namespaces of the pages' Secrets.
HUB_DOCS_TOKEN = "docs-controller-token"
#: The hub kubeconfig's path as the pages' kubelet config names it (a node's).
SHOWN_HUB_KUBECONFIG = "/etc/kubernetes/hub.kubeconfig"
#: The private registry as the pages show it, and the robot account its pull Secret holds.
SHOWN_REGISTRY = "registry.example.com"
REGISTRY_USER, REGISTRY_PASSWORD = "robot", "r0b0t-pa55"
#: The service account providers-gcp.md's providers.yaml impersonates.
GCP_READER = "fleet-reader@my-project.iam.gserviceaccount.com"


class Fakes:
    """The shared fakes of tests/fakes/, each started once per session when a page first needs it."""

    def __init__(self) -> None:
        # Reentrant: a fake's start takes the shared PKI under the same lock.
        self._lock = threading.RLock()
        self._started: dict[str, Any] = {}
        self._pki: Any = None

    @property
    def pki(self) -> Any:
        """One CA for the fakes that serve HTTPS (key generation is the slow part)."""
        with self._lock:
            if self._pki is None:
                from tests.fakes.pki import PKI

                self._pki = PKI()
            return self._pki

    def _get(self, name: str, start: Callable[[], Any]) -> Any:
        with self._lock:
            if name not in self._started:
                self._started[name] = start()
            return self._started[name]

    def close(self) -> None:
        for fake in self._started.values():
            fake.stop()

    @property
    def hub(self) -> Any:
        def start() -> Any:
            from tests.fakes.hub import HubServer

            hub = HubServer(self.pki).start()
            hub.grant(HUB_DOCS_TOKEN, user="system:serviceaccount:fleet-system:fleet-controller",
                      namespaces=["fleet-system", "image-pull"], resources=["secrets"], verbs=["get"])
            return hub

        return self._get("hub", start)

    @property
    def spire_agent(self) -> Any:
        from tests.fakes.spire import SpireAgent

        return self._get("spire-agent", lambda: SpireAgent(identities=SPIFFE_IDS).start())

    @property
    def google(self) -> tuple[Any, Any, Path]:
        """The GCE metadata server, Google's APIs (its HTTPS proxy) and the file of their CA."""

        def start() -> Any:
            from tests.fakes.google import FakeGoogle, FakeMetadataServer

            metadata, google = FakeMetadataServer().start(), FakeGoogle().start()
            google.trust(metadata)
            # providers-gcp.md's providers.yaml: the node's service account impersonates fleet-reader.
            google.allow_impersonation(metadata.email, GCP_READER)
            ca = google.write_ca(Path(tempfile.mkdtemp()) / "google-ca.pem")
            return _Started([metadata, google], (metadata, google, ca))

        return self._get("google", start).value

    @property
    def registry(self) -> tuple[Any, Path]:
        """The registry (accepting robot's password) and the file of its CA."""

        def start() -> Any:
            from tests.fakes.registry import FakeRegistry

            registry = FakeRegistry(self.pki, users={REGISTRY_USER: REGISTRY_PASSWORD}).start()
            ca = Path(tempfile.mkdtemp()) / "registry-ca.pem"
            ca.write_bytes(self.pki.ca_pem)
            return _Started([registry], (registry, ca))

        return self._get("registry", start).value


@dataclass
class _Started:
    """Fakes started together, stopped together."""

    fakes: list[Any]
    value: Any

    def stop(self) -> None:
        for fake in self.fakes:
            fake.stop()


@dataclass
class Setup:
    """What a setup gives the blocks that name it."""

    env: dict[str, str] = field(default_factory=dict)
    #: (shown, actual) pairs for the whole page (see Page.replacements).
    replacements: list[tuple[str, str]] = field(default_factory=list)
    #: Called before each block that names the setup.
    before: Callable[[], None] | None = None
    #: Called with each output of those blocks: the setup's own assertions.
    checks: list[Callable[[str], None]] = field(default_factory=list)
    #: Files of the workspace (relative to its root) the page's blocks read as shipped, rewritten
    #: with the page's actual values before its first block (the workspace puts them back).
    rewrites: list[str] = field(default_factory=list)


def _fresh_cache(page: Page, context: Context) -> Setup:
    return Setup(before=lambda: shutil.rmtree(page.home / ".cache" / "cpcreds", ignore_errors=True))


def _package(name: str) -> Callable[[Page, Context], Setup]:
    return lambda page, context: Setup(env=context.plugins.env({name}, page))


def _hub(page: Page, context: Context) -> Setup:
    hub = context.fakes.hub
    kubeconfig = page.home / ".kube" / "hub.kubeconfig"
    kubeconfig.parent.mkdir(exist_ok=True)
    hub.write_kubeconfig(kubeconfig, HUB_DOCS_TOKEN, namespace="fleet-system")
    # The same hub where a node's kubelet config names its kubeconfig.
    node = hub.write_kubeconfig(page.home / ".kube" / "node-hub.kubeconfig", HUB_DOCS_TOKEN, namespace="fleet-system")

    def before() -> None:
        for obj in page.objects:
            if obj["kind"] == "Secret":
                hub.put(obj)

    return Setup(env={"KUBECONFIG": str(kubeconfig)}, replacements=[(SHOWN_HUB, hub.url), (SHOWN_HUB_KUBECONFIG, str(node))], before=before)


def _spire_agent(page: Page, context: Context) -> Setup:
    agent = context.fakes.spire_agent

    def tokens_are_the_agents(printed: str) -> None:
        # Each JWT-SVID printed is one the agent signed, for the audience it names and one of its identities.
        for token in re.findall(r"eyJ[\w-]+\.[\w-]+\.[\w-]+", printed):
            payload = token.split(".")[1]
            audience = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["aud"]
            claims = agent.verify(token, audience[0] if isinstance(audience, list) else audience)
            assert claims is not None and claims["sub"] in SPIFFE_IDS, f"the agent did not issue {token[:20]}..."

    return Setup(replacements=[(f"unix://{SHOWN_SOCKET}", agent.address), (SHOWN_SOCKET, str(agent.socket_path))], checks=[tokens_are_the_agents])


def _google(page: Page, context: Context) -> Setup:
    metadata, google, ca = context.fakes.google

    def tokens_are_googles(printed: str) -> None:
        # Each access token printed whole is one the metadata server or Google's IAM issued.
        issued = {token.token for token in [*metadata.issued, *google.issued]}
        for token in re.findall(r"\bya29\.[\w.-]+", printed):
            assert token.endswith("...") or token in issued, f"Google did not issue {token[:12]}..."

    return Setup(env={"GCE_METADATA_HOST": metadata.host, "HTTPS_PROXY": google.url, "REQUESTS_CA_BUNDLE": str(ca)}, checks=[tokens_are_googles])


def _registry(page: Page, context: Context) -> Setup:
    registry, ca = context.fakes.registry
    # Loopback is reached directly, not through the google setup's proxy; Python (and curl) trust its CA.
    return Setup(
        env={"NO_PROXY": "127.0.0.1,localhost", "SSL_CERT_FILE": str(ca), "CURL_CA_BUNDLE": str(ca)},
        replacements=[(SHOWN_REGISTRY, registry.host)],
        rewrites=["docs/examples/kubelet-credential-provider-config.yaml"],
    )


@dataclass
class Context:
    plugins: Plugins
    fakes: Fakes


#: What ``<!-- run with: ... -->`` may name: what it gives the block, and how.
SETUPS: dict[str, tuple[str, Callable[[Page, Context], Setup]]] = {
    "envtoken": ("the example provider of examples/cpcreds-envtoken, as if installed", _package("envtoken")),
    "broken": ("a plugin package that fails to load (its module imports a package not installed)", _package("broken")),
    "fresh-cache": ("an empty disk cache (~/.cache/cpcreds removed before the block)", _fresh_cache),
    "hub": (
        f"the hub fake (tests/fakes/hub.py) as {SHOWN_HUB}, holding the Secrets of the page's # NAME.yaml blocks; KUBECONFIG "
        "is ~/.kube/hub.kubeconfig, the service account fleet-system/fleet-controller allowed what rbac.yaml grants",
        _hub,
    ),
    "spire-agent": (
        f"the SPIRE agent fake (tests/fakes/spire.py) at {SHOWN_SOCKET}, holding two identities of fleet-system; every JWT "
        "printed must be one it issued",
        _spire_agent,
    ),
    "registry": (
        f"the registry fake (tests/fakes/registry.py) as {SHOWN_REGISTRY}, accepting {REGISTRY_USER}'s password (its CA trusted "
        "through SSL_CERT_FILE and CURL_CA_BUNDLE); the sample kubelet config (docs/examples/) names it and the hub's kubeconfig",
        _registry,
    ),
    "google": (
        "the GCE metadata server fake (tests/fakes/google.py) as the machine's (application default credentials), Google's "
        f"APIs faked behind HTTPS_PROXY; the machine's service account may impersonate {GCP_READER}; every access token printed "
        "whole must be one they issued",
        _google,
    ),
}


def block_setups(document: Document, example: Example) -> set[str]:
    marked = comment_before(document, example.region.start, RUN_WITH)
    names = {n.strip() for n in marked.group("setups").split(",")} if marked else set()
    unknown = names - set(SETUPS)
    assert not unknown, f"line {example.line}: run with: unknown setups {sorted(unknown)}; known: {sorted(SETUPS)}"
    return names


def run_page(path: Path, workspace: Workspace, base: Path, context: Context) -> list[str]:
    """Runs the blocks of the page at ``path`` in ``workspace``; what failed."""
    examples = runnable(path)
    if not examples:
        return []
    document = examples[0].document
    page = Page(workspace, base)
    names = [block_setups(document, example) for example in examples]
    setups = {name: SETUPS[name][1](page, context) for name in set().union(*names)}
    page.replacements = [pair for setup in setups.values() for pair in setup.replacements]
    for rewritten in {name for setup in setups.values() for name in setup.rewrites}:
        shipped = page.root / rewritten
        shipped.write_text(page.actual(shipped.read_text(encoding="utf-8")), encoding="utf-8")
    failures = []
    for example, used in zip(examples, names, strict=True):
        example.namespace["page"] = page
        env = {name: value for setup in used for name, value in setups[setup].env.items()}
        # Plugin packages are seen together: one PYTHONPATH holding them all.
        packages = used & set(context.plugins.paths)
        example.namespace["env"] = {**env, **(context.plugins.env(packages, page) if packages else {})}
        example.namespace["checks"] = [check for setup in used for check in setups[setup].checks]
        try:
            for setup in used:
                if setups[setup].before:
                    setups[setup].before()
            example.evaluate()
        except AssertionError as failure:
            failures.append(f"{path.relative_to(ROOT)} line {example.line}:\n{failure}")
    return failures


#: Pages run side by side, each in a workspace of its own (their commands mostly wait on Python
#: starting up, so a few at once use two cores well).
WORKERS = 3


@pytest.fixture(scope="session")
def page_failures(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, plugins: Plugins) -> Iterator[dict[Path, list[str]]]:
    """The failures of every page the session runs: the pages run together, once."""
    selected = [item.callspec.params["path"] for item in request.session.items if getattr(item, "originalname", "") == "test_the_page_runs_as_shown"]
    base = tmp_path_factory.mktemp("docs")
    workspaces: Queue[Workspace] = Queue()
    for number in range(min(WORKERS, len(selected)) or 1):
        workspaces.put(Workspace(base / f"workspace{number}"))
    fakes = Fakes()
    context = Context(plugins, fakes)

    def run(path: Path) -> list[str]:
        workspace = workspaces.get()
        try:
            return run_page(path, workspace, Path(tempfile.mkdtemp(dir=base)), context)
        finally:
            workspace.reset()
            workspaces.put(workspace)

    # The longest pages first, so that no page is left to run alone at the end.
    ordered = sorted(selected, key=lambda path: -path.read_text(encoding="utf-8").count("\n$ "))
    try:
        with ThreadPoolExecutor(WORKERS) as pool:
            yield dict(zip(ordered, pool.map(run, ordered), strict=True))
    finally:
        fakes.close()


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_page_runs_as_shown(path: Path, page_failures: dict[Path, list[str]]) -> None:
    failures = page_failures[path]
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


def test_the_gcp_pages_document_every_option() -> None:
    gcp = pytest.importorskip("cpcreds_gcp", reason="install plugins-contrib/gcp")
    options = {spec.shown[0] for spec in gcp.GcpOptions.declared()}
    for page in (ROOT / "docs" / "providers-gcp.md", ROOT / "plugins-contrib" / "gcp" / "README.md"):
        table = page.read_text(encoding="utf-8").split("## Options", 1)[1].split("\n## ", 1)[0]
        assert set(re.findall(r"^\| `(\w+)` \|", table, flags=re.MULTILINE)) == options, page.name


def test_the_gcp_readme_shows_the_guides_example() -> None:
    def block(page: Path, marker: str) -> str:
        [found] = [b for b in re.findall(r"```yaml\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.DOTALL) if b.startswith(marker)]
        return found

    for marker in ("# providers.yaml", "# gke-1.yaml", "# kubeconfig"):
        assert block(ROOT / "docs" / "providers-gcp.md", marker) == block(ROOT / "plugins-contrib" / "gcp" / "README.md", marker)


def test_no_page_shows_a_path_of_one_machine() -> None:
    machine = re.compile(r"(^|[^A-Za-z0-9_.])/(work|root|home/\w+|tmp/)")
    for path in [*PAGES, *(ROOT / "examples").rglob("*"), *(ROOT / "docs" / "examples").rglob("*")]:
        if path.is_file() and "__pycache__" not in path.parts:
            for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                assert not machine.search(line), f"{path.relative_to(ROOT)}:{number}: {line}"


def yaml_block(page: Path, name: str) -> Any:
    """The YAML of ``page``'s block whose first line is ``# NAME`` (``name`` then anything)."""
    [found] = [b for b in re.findall(r"```yaml\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.DOTALL) if re.match(rf"# {re.escape(name)}\b", b)]
    return yaml.safe_load(found)


def test_the_gcp_kubeconfigs_exec_args_are_options_the_console_script_takes() -> None:
    gcp = pytest.importorskip("cpcreds_gcp", reason="install plugins-contrib/gcp")
    from cpcreds.exec.plugin import parse_option_flags
    from cpcreds_gcp.plugin import ADC_FLAGS

    for page in (ROOT / "docs" / "providers-gcp.md", ROOT / "plugins-contrib" / "gcp" / "README.md"):
        [user] = yaml_block(page, "kubeconfig")["users"]
        assert user["user"]["exec"]["command"] == "cpcreds-gcp"
        # gke-gcloud-auth-plugin's flag is accepted and changes nothing: the defaults.
        flags = parse_option_flags([arg for arg in user["user"]["exec"]["args"] if arg not in ADC_FLAGS])
        assert gcp.GcpOptions.read(flags) == gcp.GcpOptions.read({}), page.name


def test_the_spire_token_is_fleet_controllers_for_the_api_servers_audience() -> None:
    """providers-spire.md's providers.yaml picks fleet-controller among the agent's identities (the
    agent offers another first), for the profile's audience, which the spoke's API server accepts."""
    pytest.importorskip("cpcreds_spire", reason="install plugins-contrib/spire")
    from cpcreds import CredentialEngine, ProviderConfig
    from tests.fakes.spire import SpireAgent

    page = ROOT / "docs" / "providers-spire.md"
    profile = yaml_block(page, "spoke-1.yaml")
    audience = profile["status"]["accessProviders"][0]["cluster"]["extensions"][0]["extension"]["audience"]
    assert yaml_block(page, "authentication-config.yaml")["jwt"][0]["issuer"]["audiences"] == [audience]
    with SpireAgent(identities=SPIFFE_IDS) as agent:
        providers = yaml.safe_dump(yaml_block(page, "providers.yaml")).replace(f"unix://{SHOWN_SOCKET}", agent.address)
        with CredentialEngine(ProviderConfig.from_dict(yaml.safe_load(providers), source="providers.yaml")) as engine:
            token = engine.get_credential(profile).token
        claims = agent.verify(token, audience)
    assert claims is not None and claims["sub"] == SPIFFE_IDS[1]


def test_the_secretreader_example_runs_in_a_pod_with_the_pages_role_and_not_without(hub: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """providers-secretreader.md's providers.yaml in the pod it assumes: the hub from in-cluster
    config (the service account's token, CA and namespace), allowed what the page's rbac.yaml grants;
    with a Role that does not grant it, the hub's 403."""
    pytest.importorskip("cpcreds_secretreader", reason="install plugins-contrib/secretreader")
    import functools

    from cpcreds import CredentialEngine, ProviderConfig, ProviderError, ProviderRegistry, hookimpl
    from cpcreds_secretreader.provider import SecretReaderProvider

    page = ROOT / "docs" / "providers-secretreader.md"
    pod = tmp_path / "serviceaccount"
    pod.mkdir()

    class InPod:
        """The secretreader type, its service account directory this test's 'pod' (the provider's
        constructor parameter for it)."""

        @hookimpl
        def cpcreds_register_providers(self, register: Any) -> None:
            register("secretreader", functools.partial(SecretReaderProvider, service_account_dir=str(pod)))

    text = page.read_text(encoding="utf-8")
    [rbac] = [b for b in re.findall(r"```yaml\n(# rbac.yaml\n.*?)```", text, flags=re.DOTALL)]
    role = next(d for d in yaml.safe_load_all(rbac) if d and d["kind"] == "Role")
    rule = role["rules"][0]
    user = "system:serviceaccount:fleet-system:fleet-controller"
    hub.grant("pod-token", user=user, namespaces=[role["metadata"]["namespace"]], resources=rule["resources"], verbs=rule["verbs"])
    (pod / "token").write_text("pod-token")
    (pod / "ca.crt").write_bytes(hub.ca_pem)
    (pod / "namespace").write_text(role["metadata"]["namespace"])
    for name in ("KUBECONFIG", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(hub.port))
    hub.put(yaml_block(page, "secret-spoke-1.yaml"))
    config = ProviderConfig.from_dict(yaml_block(page, "providers.yaml"), source="providers.yaml")
    registry = ProviderRegistry(entry_points=False, plugins=(InPod(),))
    shown = re.search(r"\$ cpcreds get-credential --config providers.yaml --profile spoke-1.yaml\n(.*)\n", text)
    assert shown is not None
    with CredentialEngine(config, registry=registry) as engine:
        credential = engine.get_credential(yaml_block(page, "spoke-1.yaml"))
    assert credential.to_exec_credential("client.authentication.k8s.io/v1") == json.loads(shown.group(1))

    hub.grant("pod-token", user=user, namespaces=[role["metadata"]["namespace"]], resources=rule["resources"], verbs=["list"])
    with CredentialEngine(config, registry=registry) as engine, pytest.raises(ProviderError) as denied:
        engine.get_credential(yaml_block(page, "spoke-1.yaml"))
    assert "403" in str(denied.value)
