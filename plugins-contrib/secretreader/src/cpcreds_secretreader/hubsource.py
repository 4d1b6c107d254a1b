"""Where the hub's address and credentials come from, in order (as the Go plugins, plus explicit
options):

1. the ``kubeconfig`` option (a path, ``~`` expanded) with its ``context`` option or its
   current context;
2. only ``context`` given: that context of the default kubeconfig (below);
3. in-cluster config, when ``KUBERNETES_SERVICE_HOST``/``_PORT`` are set and the service
   account's token exists (the pod's service account; its token is re-read as it rotates);
4. the default kubeconfig: ``KUBECONFIG`` (a list of paths, merged) or ``~/.kube/config``.

And the namespace a Secret is read from when no option names one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from cpcreds.sdk import read_bounded

__all__ = ["SERVICE_ACCOUNT_DIR", "HubSource", "default_namespace", "resolve_hub_source"]

#: Where a pod's service account is mounted (token, ca.crt, namespace).
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


@dataclass(frozen=True)
class HubSource:
    """Where the hub's address and credentials come from: a kubeconfig (``kubeconfig`` is a
    path or KUBECONFIG's list of paths; ``context`` None means its current context) or the
    pod's in-cluster config (``service_account_dir``, ``host``, ``port``)."""

    kind: Literal["kubeconfig", "in-cluster"]
    kubeconfig: str | None = None
    context: str | None = None
    service_account_dir: str | None = None
    host: str | None = None
    port: str | None = None

    def describe(self) -> str:
        if self.kind == "in-cluster":
            return "in-cluster config"
        return f"kubeconfig {self.kubeconfig}" + (f" (context {self.context})" if self.context else "")


def resolve_hub_source(
    kubeconfig: str | None,
    context: str | None,
    *,
    service_account_dir: str = SERVICE_ACCOUNT_DIR,
    environ: Mapping[str, str] | None = None,
) -> HubSource:
    """Where the hub credentials come from, in the order of the module docstring."""
    env = os.environ if environ is None else environ
    if kubeconfig:
        return HubSource("kubeconfig", kubeconfig=os.path.expanduser(kubeconfig), context=context)
    host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "")
    # client-go's inClusterClientConfig.Possible(): both variables set and the token present.
    if context is None and host and port and os.path.isfile(os.path.join(service_account_dir, "token")):
        return HubSource("in-cluster", service_account_dir=service_account_dir, host=host, port=port)
    default = env.get("KUBECONFIG", "").strip() or "~/.kube/config"
    return HubSource("kubeconfig", kubeconfig=default, context=context)


def default_namespace(
    context_namespace: str | None, *, service_account_dir: str = SERVICE_ACCOUNT_DIR, environ: Mapping[str, str] | None = None
) -> str:
    """The namespace when no option names one: the hub kubeconfig context's namespace, else
    POD_NAMESPACE, else the service account's namespace file, else ``default`` (client-go's
    order, which the Go plugins use)."""
    if context_namespace:
        return context_namespace
    env = os.environ if environ is None else environ
    if env.get("POD_NAMESPACE", "").strip():
        return env["POD_NAMESPACE"].strip()
    try:
        written = read_bounded(os.path.join(service_account_dir, "namespace"), 256).decode("ascii", "replace").strip()
    except (OSError, ValueError):  # ValueError: larger than a namespace, or not a regular file
        written = ""
    return written or "default"
