"""Kubeconfigs for kubectl, k9s or Argo CD: one per profile and one merged, each user an exec
entry that runs ``cpcreds get-credential`` for that profile. No credential is written: each file
holds the cluster's endpoint and CA (public data from the profile) and a command line.

Layout of ``--kubeconfig-dir``::

    kubeconfig                  every profile's context (merged)
    <namespace>.<name>.yaml     one context
    profiles/<namespace>.<name>.json  the profile as serve saw it (what get-credential reads)

Files are 0600 in 0700 folders, written atomically (a reader never sees half a file), and
removed when their profile goes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ..access import AccessPlan
from ..kubeconfig import KubeconfigContext, build_kubeconfig

__all__ = ["KubeconfigWriter", "file_stem", "MERGED_NAME"]

MERGED_NAME = "kubeconfig"
_PLAIN_KEY = re.compile(r"(?:[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?/)?[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


def file_stem(key: str) -> str:
    """The file name (without suffix) for a profile key: ``namespace.name`` for Kubernetes-style
    names (a namespace has no dots, so this is unambiguous), a digest for anything else."""
    if _PLAIN_KEY.fullmatch(key):
        return key.replace("/", ".")
    return "profile-" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically with mode 0600."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as stream:
            stream.write(text)  # no fsync: the files are rebuilt at every start; rename is what makes them atomic
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise


class KubeconfigWriter:
    """Keeps ``directory`` in step with the profiles' plans (see the module docstring)."""

    def __init__(self, directory: str | os.PathLike[str], config_path: str | os.PathLike[str], *, command: str | None = None) -> None:
        self.directory = Path(directory).resolve()
        self.profiles_dir = self.directory / "profiles"
        self.config_path = Path(config_path).resolve()
        self.command = command or sys.executable
        self._contexts: dict[str, KubeconfigContext] = {}
        self._dirty = True
        for folder in (self.directory, self.profiles_dir):
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(folder, 0o700)

    def update(self, key: str, plan: AccessPlan | None, profile: Mapping[str, Any] | None) -> None:
        """Write (``plan`` given) or remove (``plan`` None) the files of one profile."""
        stem = file_stem(key)
        single = self.directory / f"{stem}.yaml"
        snapshot = self.profiles_dir / f"{stem}.json"
        if plan is None or profile is None:
            if self._contexts.pop(key, None) is not None:
                self._dirty = True
            for path in (single, snapshot):
                try:
                    path.unlink()
                except FileNotFoundError:
                    pass
            return
        write_private(snapshot, json.dumps(profile, sort_keys=True))
        args = ("-m", "cpcreds", "get-credential", "--config", str(self.config_path), "--profile", str(snapshot))
        context = KubeconfigContext(name=key, plan=plan, command=self.command, args=args)
        write_private(single, yaml.safe_dump(build_kubeconfig([context]), sort_keys=False))
        self._contexts[key] = context
        self._dirty = True

    def flush(self) -> bool:
        """Rewrite the merged kubeconfig if anything changed since the last flush."""
        if not self._dirty:
            return False
        contexts = [self._contexts[key] for key in sorted(self._contexts)]
        write_private(self.directory / MERGED_NAME, yaml.safe_dump(build_kubeconfig(contexts), sort_keys=False))
        self._dirty = False
        return True

    def clear(self) -> None:
        """Remove every file this writer wrote (not the folders)."""
        for key in list(self._contexts):
            self.update(key, None, None)
        try:
            (self.directory / MERGED_NAME).unlink()
        except FileNotFoundError:
            pass
