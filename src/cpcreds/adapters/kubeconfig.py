"""kubeconfig documents whose users run ``cpcreds get-credential`` as their exec plugin.

Nothing secret is written: the kubeconfig holds the cluster's endpoint and CA (public data from
the ClusterProfile) and a command line; the credential is fetched when kubectl runs it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..config.access import AccessPlan, cluster_to_wire
from ..kep import API_VERSION_V1
from ..config.profiles import profile_ref

__all__ = ["KubeconfigContext", "build_kubeconfig", "context_name"]

# What kubectl prints when the kubeconfig's cpcreds command is missing.
INSTALL_HINT = "install cpcreds from a clone: pip install . (docs/install.md)"


def context_name(profile: Mapping[str, Any]) -> str:
    """The name of a profile's context (and of its cluster and user) in every kubeconfig cpcreds
    writes, ``cpcreds kubeconfig``'s and serve's alike: ``namespace/name``, or ``name`` for a
    profile without a namespace. The profile's own identity, so a context keeps its name whatever
    other profiles a file or a fleet holds, and ``get-credential --name`` takes it as it is."""
    return profile_ref(profile)


@dataclass(frozen=True)
class KubeconfigContext:
    """One context: a name, the resolved plan (for the cluster) and the exec command line."""

    name: str
    plan: AccessPlan
    command: str
    args: tuple[str, ...]


def _cluster(plan: AccessPlan) -> dict[str, Any]:
    # kubeconfig's Cluster spells its fields as KEP-541's does; the plugin config is not one of them.
    return {key: value for key, value in cluster_to_wire(plan.cluster).items() if key != "config"}


def build_kubeconfig(contexts: Sequence[KubeconfigContext], *, current: str | None = None) -> dict[str, Any]:
    """A ``kind: Config`` document with one cluster, user and context per entry."""
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [],
        "users": [],
        "contexts": [],
        "current-context": current or (contexts[0].name if contexts else ""),
    }
    for ctx in contexts:
        doc["clusters"].append({"name": ctx.name, "cluster": _cluster(ctx.plan)})
        doc["users"].append(
            {
                "name": ctx.name,
                "user": {
                    "exec": {
                        "apiVersion": API_VERSION_V1,
                        "command": ctx.command,
                        "args": list(ctx.args),
                        "interactiveMode": "Never",
                        "provideClusterInfo": False,
                        # cpcreds is not on PyPI: it installs from a clone (docs/install.md).
                        "installHint": INSTALL_HINT,
                    }
                },
            }
        )
        doc["contexts"].append({"name": ctx.name, "context": {"cluster": ctx.name, "user": ctx.name}})
    return doc
