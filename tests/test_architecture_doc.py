"""docs/architecture.md names every folder of the package and every module at its top, so the map
of the code changes in the same commit as the code."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "cpcreds"


def test_the_architecture_page_names_every_folder_and_top_level_module() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text()
    folders = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
    modules = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py", "sdk.py"))
    missing = [f"{name}/" for name in folders if f"`{name}/`" not in page]
    missing += [name for name in modules if f"`{name}`" not in page and f"`{name}," not in page and f", `{name}`" not in page]
    for folder in folders:  # and each folder's modules, by name, in its row or in the fetch's walk
        for module in sorted((PACKAGE / folder).glob("*.py")):
            if module.stem != "__init__" and f"`{module.stem}`" not in page and f"{folder}/{module.name}" not in page:
                missing.append(f"{folder}/{module.name}")
    assert missing == [], f"docs/architecture.md does not name: {', '.join(missing)}"
