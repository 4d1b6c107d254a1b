"""The shape of the package: no import cycle, contrib and docs import only the public paths, no
module reaches into another's private names, and the base types are dataclasses.

What an entry point costs to start is a benchmark's business, not a test's: bench/bench_startup.py
(and bench_cli_cache.py, bench_cli_miss.py, bench_console_scripts.py) hold those budgets. The
cycle test reads every module of src/cpcreds with ``ast``, imports inside functions included.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpcreds.config import wire as api
from cpcreds.exec import answer as exec_answer

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "cpcreds"
EXAMPLE_CONFIG = ROOT / "config.example.yaml"
EXAMPLE_PROFILE = ROOT / "examples" / "clusterprofile.yaml"

# -- what the plain readers assume about the models ------------------------------------------------


def _python_spellings(*models: type) -> frozenset[str]:
    return frozenset(name for model in models for name, info in model.model_fields.items() if info.alias is not None and info.alias != name)


def test_the_answer_reading_knows_the_python_spellings_of_the_models() -> None:
    assert exec_answer._PYTHON_SPELLINGS == _python_spellings(api.ExecCredential, api.ExecCredentialSpec, api.ExecCredentialStatus)


def test_the_cluster_model_reads_into_the_plain_cluster_with_the_same_fields() -> None:
    import dataclasses

    plain = [f.name for f in dataclasses.fields(api.ExecCluster)]
    assert plain == list(api.ExecClusterModel.model_fields)
    wire = {"server": "https://s", "tls-server-name": "n", "certificate-authority-data": "YWJj", "config": {"a": 1}}
    read = api.ExecCredential.model_validate({"apiVersion": api.API_VERSION_V1, "spec": {"cluster": wire}}).spec.cluster
    assert type(read) is api.ExecCluster
    assert read == api.ExecCluster(server="https://s", tls_server_name="n", certificate_authority_data=b"abc", config={"a": 1})


def test_the_plugin_request_reading_knows_the_python_spellings_of_the_models() -> None:
    from cpcreds.exec import pluginrequest as plugin

    assert plugin._PYTHON_SPELLINGS == _python_spellings(api.ExecCredential, api.ExecCredentialSpec, api.ExecClusterModel)


_wire_values = st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.sampled_from(["", "x", "YWJj", "not base64!", "https://s"]))
_cluster_keys = st.sampled_from(["server", "tls-server-name", "insecure-skip-tls-verify", "certificate-authority-data", "proxy-url",
                                 "disable-compression", "config", "tls_server_name", "extensions"])  # fmt: skip
_clusters = st.one_of(_wire_values, st.dictionaries(_cluster_keys, _wire_values, max_size=5))
_specs = st.one_of(_wire_values, st.fixed_dictionaries({}, optional={"interactive": _wire_values, "cluster": _clusters, "other": _wire_values}))


@settings(max_examples=300, deadline=None)
@given(spec=_specs, status=st.sampled_from([None, {}, "x"]))
def test_the_plain_request_reading_agrees_with_the_model(spec: Any, status: Any) -> None:
    # What the exec-plugin SDK reads without pydantic is what the model reads (or it defers to it).
    from cpcreds.exec import pluginrequest as plugin

    document: dict[str, Any] = {"apiVersion": api.API_VERSION_V1, "kind": "ExecCredential", "spec": spec}
    if status is not None:
        document["status"] = status
    plain = plugin._read_plain_spec(document)
    if plain is None:
        return
    model = api.ExecCredential.model_validate(document)
    assert plain == (model.spec.interactive, model.spec.cluster)


# -- no import cycle -------------------------------------------------------------------------------

def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, name: str) -> set[str]:
    """The cpcreds modules ``name`` imports anywhere: at the top, inside functions (lazily), and
    for type checkers (a dependency all the same: imports flow one way, DESIGN.md)."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("cpcreds"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("cpcreds"):
                if node.module:  # "from . import kube" imports kube; the package is every module's parent
                    found.add(target)
                found.update(f"{target}.{alias.name}" for alias in node.names)  # from . import kube
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _graph() -> dict[str, set[str]]:
    paths = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in paths.items():
        # Importing a.b.c runs a, a.b and a.b.c; an edge to a name that is not a module (an
        # attribute of "from x import name") is dropped.
        graph[name] = {target for target in _imports(path, name) if target in paths and target != name}
    return graph


def _cycles(graph: dict[str, set[str]], skip: tuple[str, str] | None = None) -> list[list[str]]:
    """One cycle through each strongly connected part of ``graph`` (Tarjan), ``skip`` left out."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    parts: list[list[str]] = []

    def edges(node: str) -> list[str]:
        return sorted(t for t in graph[node] if (node, t) != skip)

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges(node):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            part = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                part.append(member)
                if member == node:
                    break
            if len(part) > 1:
                parts.append(sorted(part))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in sorted(graph):
        if node not in index:
            connect(node)
    return parts


def test_no_import_cycle_at_all() -> None:
    # The adapters (kube) reach the engine through engine.bind() and import only cpcreds.engine.binding.
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_a_lazy_import_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]


# -- contrib and docs use cpcreds and cpcreds.sdk only (docs/sdk.md) --------------------------------

#: The modules third-party code may import: the package (callers) and the provider SDK.
PUBLIC = {"cpcreds", "cpcreds.sdk"}
#: Other modules a page shows to an application rather than a provider author: none.
APPLICATION_ONLY: dict[str, set[str]] = {}
_FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
_IMPORT_LINE = re.compile(r"^\s*(?:from\s+(cpcreds[\w.]*)\s+import|import\s+(cpcreds[\w.]*))", re.MULTILINE)


def _third_party_sources() -> list[tuple[str, str]]:
    """(where, Python text) of every contrib package module, shipped example program, and
    ```python block of the docs and READMEs."""
    sources = []
    for path in sorted([*ROOT.glob("plugins-contrib/*/src/**/*.py"), *ROOT.glob("examples/**/*.py")]):
        if "build" not in path.relative_to(ROOT).parts:
            sources.append((str(path.relative_to(ROOT)), path.read_text()))
    for path in sorted(p for p in (ROOT / "examples").rglob("*") if p.is_file() and p.suffix == "" and "build" not in p.parts):
        text = path.read_text(errors="replace")
        if text.startswith("#!") and "python" in text.splitlines()[0]:
            sources.append((str(path.relative_to(ROOT)), text))
    pages = [*ROOT.glob("docs/*.md"), ROOT / "README.md", *ROOT.glob("plugins-contrib/**/README.md"), *ROOT.glob("examples/**/*.md")]
    for page in sorted(p for p in pages if "build" not in p.parts):
        for number, block in enumerate(_FENCE.findall(page.read_text()), 1):
            sources.append((f"{page.relative_to(ROOT)} python block {number}", block))
    return sources


def _cpcreds_imports(text: str) -> set[str]:
    """The cpcreds modules ``text`` imports (anywhere); a block that is not whole Python (a
    fragment with ``...``) is read line by line."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return {a or b for a, b in _IMPORT_LINE.findall(text)}
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == "cpcreds")
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "cpcreds":
            found.add(node.module or "")
    return found


def test_contrib_examples_and_docs_import_only_cpcreds_and_the_sdk() -> None:
    sources = _third_party_sources()
    assert len(sources) > 30  # the globs found the contrib packages and the pages
    wrong = {where: sorted(extra) for where, text in sources if (extra := _cpcreds_imports(text) - PUBLIC - APPLICATION_ONLY.get(where, set()))}
    assert wrong == {}


def test_the_import_guard_sees_imports_in_functions_and_fragments() -> None:
    assert _cpcreds_imports("def f():\n    from cpcreds.config import parse_duration\n") == {"cpcreds.config"}
    assert _cpcreds_imports("from cpcreds._parse import load_document\n...more words\n") == {"cpcreds._parse"}
    assert _cpcreds_imports("import cpcreds.sdk as sdk\nfrom cpcreds import CredentialEngine\n") == PUBLIC


# -- the base types are dataclasses --------------------------------------------------------------


def test_the_public_base_types_are_dataclasses_for_dataclasses_functions() -> None:
    import dataclasses
    import pickle

    from cpcreds.sdk import AccessPlan, Credential, ExecCluster, PluginRequest

    credential = Credential(token="t")
    assert dataclasses.is_dataclass(credential) and dataclasses.fields(Credential)[0].name == "token"
    assert dataclasses.replace(credential, token="u").token == "u"
    assert dataclasses.asdict(credential)["token"] == "t"
    plan = AccessPlan(provider="p", kind="k", cluster=ExecCluster(server="https://x"))
    assert dataclasses.replace(plan, timeout=5.0).key != plan.key
    assert pickle.loads(pickle.dumps(credential)) == credential
    assert [f.name for f in dataclasses.fields(PluginRequest)] == ["api_version", "interactive", "cluster", "from_environment"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        credential.token = "x"  # type: ignore[misc]

    @dataclasses.dataclass(frozen=True)
    class Labelled(Credential):  # a dataclass may extend one, as any frozen dataclass
        label: str = ""

    assert [f.name for f in dataclasses.fields(Labelled)][-1] == "label"
    assert Labelled(token="t", label="x").label == "x" and dataclasses.fields(type("Sub", (Credential,), {}))[0].name == "token"
    if sys.version_info >= (3, 13):  # copy.replace is new in 3.13; dataclasses support it there
        import copy

        assert copy.replace(credential, token="u").token == "u"  # type: ignore[attr-defined]
        assert copy.replace(plan, timeout=5.0).key == dataclasses.replace(plan, timeout=5.0).key  # type: ignore[attr-defined]


# -- private names stay in their module ----------------------------------------------------------------------------------


def _private_imports(path: Path, package_root: Path) -> list[str]:
    """``from X import _name`` in ``path`` where ``_name`` is not a module of the package: a
    private name reached from outside the module that defines it."""
    found = []
    tree = ast.parse(path.read_text(), str(path))
    imported: set[str] = set()  # names this module took from the package's other modules
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ImportFrom) and node.level):
            continue
        imported.update(alias.asname or alias.name for alias in node.names)
        base = path.parent
        for _ in range(node.level - 1):
            base = base.parent
        target = base.joinpath(*(node.module or "").split(".")) if node.module else base
        for alias in node.names:
            name = alias.name
            if name.startswith("_") and not name.startswith("__"):
                if not (target / f"{name}.py").exists() and not (target / name / "__init__.py").exists():
                    found.append(f"{path.relative_to(package_root)}:{node.lineno} {name}")
    # ``Imported._name``: a private attribute of a class or function another module defines.
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in imported:
            if node.attr.startswith("_") and not node.attr.startswith("__") and not node.value.id.startswith("_"):
                found.append(f"{path.relative_to(package_root)}:{node.lineno} {node.value.id}.{node.attr}")
    return found


def test_no_module_imports_another_modules_private_names() -> None:
    roots = [PACKAGE, *sorted((ROOT / "plugins-contrib").glob("*/src/*"))]
    found = [hit for root in roots for path in sorted(root.rglob("*.py")) for hit in _private_imports(path, root.parent)]
    assert found == []


def test_the_private_name_guard_sees_one(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "_mod.py").write_text("")
    (tmp_path / "pkg" / "a.py").write_text("from . import _mod\nfrom .b import _hidden, Shown\n_mod._x\nShown._made(1)\n")
    assert _private_imports(tmp_path / "pkg" / "a.py", tmp_path) == ["pkg/a.py:2 _hidden", "pkg/a.py:4 Shown._made"]


# -- imports flow one way: cli/serve -> fleet/shard -> adapters -> engine/images -> exec/providers -> config -> base


#: Each folder's layer (docs/architecture.md); a module at the package's top is a base module,
#: except the public paths and the console script, which sit above everything.
LAYERS = {"config": 1, "providers": 2, "exec": 2, "engine": 3, "images": 3, "adapters": 4, "fleet": 5, "shard": 5, "serve": 6, "cli": 6}
ABOVE_ALL = {"__init__", "sdk", "_entry", "__main__"}
#: The engine's ``api_client``/``build_config`` conveniences hand the profile to the kubernetes
#: adapter, imported when called (DESIGN.md: ``engine.api_client(profile)`` is the controller's
#: entry point); the adapter itself reaches the engine only through ``bind()``.
UPWARD_ALLOWED = {("cpcreds.engine.core", "cpcreds.adapters.kubernetes"), ("cpcreds.engine.core", "cpcreds.adapters")}


def _layer(module: str) -> int:
    parts = module.split(".")[1:]
    if not parts or parts[0] in ABOVE_ALL:
        return 99
    return LAYERS.get(parts[0], 0)


def _imported_modules(path: Path) -> set[str]:
    """The cpcreds modules ``path`` imports at run time (inside functions too; not in a
    ``TYPE_CHECKING`` block, which only annotations read), the package's root (lazy) left out."""
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    name = ".".join(relative.parts[:-1] if relative.name == "__init__" else relative.parts)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    tree = ast.parse(path.read_text())
    typing_only = {
        id(inner)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and isinstance(block.test, ast.Name) and block.test.id == "TYPE_CHECKING"
        for statement in block.body
        for inner in ast.walk(statement)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)] if node.level else []
            target = ".".join([*base, node.module] if node.module else base) if node.level else node.module or ""
            candidates = [target, *(f"{target}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            continue
        for candidate in candidates:
            file = PACKAGE.parent / candidate.replace(".", "/")
            if candidate.startswith("cpcreds.") and (file.with_suffix(".py").exists() or (file / "__init__.py").exists()):
                found.add(candidate)
    return found


def test_imports_flow_one_way_through_the_layers() -> None:
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        me = ".".join(relative.parts[:-1] if relative.name == "__init__" else relative.parts)
        for target in _imported_modules(path):
            if _layer(target) > _layer(me) and (me, target) not in UPWARD_ALLOWED:
                upward.append(f"{me} -> {target}")
    assert upward == []
