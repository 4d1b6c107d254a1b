"""An installed distribution on disk: what ``pip install`` leaves in site-packages, made by hand
so a test can put a plugin (a working one, or one that fails on import) on ``sys.path`` or
``PYTHONPATH``."""

from __future__ import annotations

from pathlib import Path


def installed_distribution(
    site: Path, *, dist: str, module: str, body: str, entry_points: dict[str, str], version: str = "1.0.0"
) -> Path:
    """Write package ``module`` (its ``__init__.py`` is ``body``) and the ``dist-info`` of
    distribution ``dist`` with ``entry_points`` (name -> target) in group ``cpcreds``.
    Returns ``site``, the folder to put on the path."""
    package = site / module
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(body, encoding="utf-8")
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n", encoding="utf-8")
    lines = "".join(f"{name} = {target}\n" for name, target in entry_points.items())
    (info / "entry_points.txt").write_text(f"[cpcreds]\n{lines}", encoding="utf-8")
    return site
