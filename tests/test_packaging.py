"""Every distribution (cpcreds and each plugins-contrib/*) has complete metadata and the same
version, released together by scripts/release.sh (docs/releasing.md); requirements.lock pins
every dependency with hashes, within what each pyproject.toml allows."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from cpcreds.adapters.kubeconfig import INSTALL_HINT

ROOT = Path(__file__).resolve().parent.parent


def _projects(root: Path) -> list[Path]:
    """cpcreds' folder, then each contrib distribution's."""
    return [root, *sorted(p.parent for p in (root / "plugins-contrib").glob("*/pyproject.toml"))]


PROJECTS = _projects(ROOT)


def _project(folder: Path) -> dict:
    with (folder / "pyproject.toml").open("rb") as handle:
        return tomllib.load(handle)


def _version(folder: Path) -> str:
    return _project(folder)["project"]["version"]


def _image_tag(root: Path) -> str:
    (deployment,) = [d for d in yaml.safe_load_all((root / "deploy" / "serve.yaml").read_text()) if d and d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container["image"].rpartition(":")[2]


def _versions_agree(root: Path) -> str:
    """The one version of every distribution under ``root``, after checking they agree."""
    projects = _projects(root)
    version = _version(root)
    assert {p.name: _version(p) for p in projects} == {p.name: version for p in projects}
    for plugin in projects[1:]:
        pins = [d for d in _project(plugin)["project"]["dependencies"] if Requirement(d).name == "cpcreds"]
        assert pins == [f"cpcreds=={version}"], plugin
    assert _image_tag(root) == version
    return version


def test_every_distribution_has_the_same_version_and_pins_that_cpcreds() -> None:
    assert len(PROJECTS) >= 4  # cpcreds, gcp, secretreader, spire
    _versions_agree(ROOT)


@pytest.mark.parametrize("folder", PROJECTS, ids=lambda p: p.name)
def test_every_distribution_has_complete_metadata(folder: Path) -> None:
    document = _project(folder)
    project = document["project"]
    assert project["name"] == "cpcreds" or project["name"].startswith("cpcreds-")
    assert project["description"] and project["requires-python"] == ">=3.11"
    assert (folder / project["readme"]).is_file()
    assert project["license"] == "Apache-2.0"
    assert all((folder / name).read_text().lstrip().startswith("Apache License") for name in project["license-files"])
    assert project["authors"] and project["keywords"]
    classifiers = project["classifiers"]
    assert {"Programming Language :: Python :: 3.11", "Programming Language :: Python :: 3 :: Only"} <= set(classifiers)
    assert any(c.startswith("Development Status :: ") for c in classifiers)
    assert {"Homepage", "Source", "Issues", "Documentation"} <= set(project["urls"])
    # PEP 639's license expression needs setuptools 77 to build.
    assert "setuptools>=77" in document["build-system"]["requires"]


@pytest.mark.parametrize("folder", PROJECTS, ids=lambda p: p.name)
def test_every_dependency_states_its_tested_lower_bound(folder: Path) -> None:
    project = _project(folder)["project"]
    for requirement in [*project["dependencies"], *(d for extra in project.get("optional-dependencies", {}).values() for d in extra)]:
        operators = {spec.operator for spec in Requirement(requirement).specifier}
        assert operators & {">=", "=="}, f"{folder.name}: {requirement} has no lower bound"


def _lock() -> dict[str, tuple[str, list[str]]]:
    """requirements.lock as {name: (version, hashes)}."""
    text = (ROOT / "requirements.lock").read_text()
    entries: dict[str, tuple[str, list[str]]] = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        if block.startswith("#"):  # the header
            continue
        requirement = Requirement(block.split(" \\")[0].strip())
        (spec,) = requirement.specifier
        assert spec.operator == "==", block.splitlines()[0]
        entries[requirement.name.lower().replace("_", "-")] = (spec.version, re.findall(r"--hash=sha256:([0-9a-f]{64})", block))
    return entries


def test_the_lock_pins_every_dependency_with_hashes_within_what_each_distribution_allows() -> None:
    lock = _lock()
    assert lock and all(hashes for _, hashes in lock.values())
    names = {_project(p)["project"]["name"] for p in PROJECTS}
    for folder in PROJECTS:
        for dependency in _project(folder)["project"]["dependencies"]:
            requirement = Requirement(dependency)
            if requirement.name in names:
                continue  # our own distributions install from the clone, never from the lock
            name = requirement.name.lower().replace("_", "-")
            assert name in lock, f"{dependency} ({folder.name}) is not in requirements.lock: run bash scripts/lock.sh"
            assert SpecifierSet(str(requirement.specifier)).contains(lock[name][0], prereleases=True), (
                f"requirements.lock has {name}=={lock[name][0]}, {folder.name} needs {dependency}: run bash scripts/lock.sh"
            )
    text = (ROOT / "requirements.lock").read_text()
    assert "file:" not in text and not re.search(r"^\s*-e ", text, re.M)  # usable on any machine


def test_a_generated_kubeconfig_says_how_cpcreds_really_installs() -> None:
    assert "pip install ." in INSTALL_HINT and "pip install cpcreds" not in INSTALL_HINT  # cpcreds is not on PyPI
    assert (ROOT / re.search(r"docs/\S+\.md", INSTALL_HINT).group(0)).is_file()


@pytest.mark.slow
@pytest.mark.skipif(not (ROOT / ".git").exists() or shutil.which("git") is None, reason="needs a git checkout and git")
def test_one_command_releases_every_distribution_at_one_version_with_checked_packages(tmp_path: Path) -> None:
    pytest.importorskip("build", reason="the release extra is not installed: pip install -e '.[release]'")
    pytest.importorskip("twine", reason="the release extra is not installed: pip install -e '.[release]'")
    clone = tmp_path / "cpcreds"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=120)
    env = {**os.environ, "PYTHON": sys.executable}
    run = subprocess.run(["bash", "scripts/release.sh", "9.8.7"], cwd=clone, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert _versions_agree(clone) == "9.8.7"
    names = [_project(p)["project"]["name"].replace("-", "_") for p in _projects(clone)]
    expected = {f"{n}-9.8.7.tar.gz" for n in names} | {f"{n}-9.8.7-py3-none-any.whl" for n in names}
    assert {p.name for p in (clone / "dist").iterdir()} == expected
    assert run.stdout.count("PASSED") == len(expected)
    bad = subprocess.run(["bash", "scripts/release.sh", "two"], cwd=clone, env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
