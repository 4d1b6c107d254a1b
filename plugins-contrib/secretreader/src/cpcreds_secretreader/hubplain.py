"""Plain hubs: a hub reached with the standard library's HTTPS (:mod:`.hubhttp`), without the
``kubernetes`` client. A plain kubeconfig (one file; a context whose cluster has a server, a CA and
perhaps a TLS server name, and whose user has a token, a token file or a client certificate and key,
inline or as files) and the in-cluster config are read here, with an ``ssl`` context built from the
CA and client certificate: a one-shot run of the console scripts then imports neither the
``kubernetes`` client (its package ``__init__`` loads the whole client with google-auth,
requests-oauthlib and cryptography, far more than the job itself) nor urllib3. Anything else is
left to the ``kubernetes`` client's own loader (:mod:`.hubloader`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cpcreds.sdk import DocumentError, load_document, read_bounded

from .hubsource import SERVICE_ACCOUNT_DIR, HubSource

if TYPE_CHECKING:
    from .hubhttp import PlainHub

__all__ = ["plain_hub"]

#: Largest hub kubeconfig read on the plain path (a larger one goes to the kubernetes loader).
_MAX_KUBECONFIG_BYTES = 4 * 1024 * 1024
#: What the plain path reads of a kubeconfig; any other field sends it to the kubernetes loader.
_PLAIN_CLUSTER = {"server", "certificate-authority", "certificate-authority-data", "tls-server-name", "extensions"}
_PLAIN_USER = {"token", "tokenFile", "token-file", "client-certificate", "client-certificate-data", "client-key", "client-key-data", "extensions"}


def plain_hub(source: HubSource) -> tuple[PlainHub, str | None] | None:
    """A plain client and the context's namespace for ``source``, or ``None`` when the source
    needs the kubernetes loader (or is broken: that loader words the error)."""
    if _proxied():
        return None
    try:
        if source.kind == "in-cluster":
            from .hubhttp import PlainHub, ssl_context

            directory = Path(source.service_account_dir or SERVICE_ACCOUNT_DIR)
            host = source.host or ""
            url = f"https://[{host}]:{source.port}" if ":" in host else f"https://{host}:{source.port}"
            ca = read_bounded(directory / "ca.crt", _MAX_KUBECONFIG_BYTES)
            return PlainHub(url, ssl_context(ca, None, None), None, None, str(directory / "token")), None
        return _plain_kubeconfig(source)
    except (OSError, ValueError, DocumentError):  # ssl.SSLError is an OSError
        return None


def _proxied() -> bool:
    """Whether the environment names a proxy for https, read as the kubernetes client reads it
    (``urllib.request.getproxies``: any spelling of HTTPS_PROXY or ALL_PROXY). A hub behind one
    is the kubernetes client's to reach: it applies the proxy, with NO_PROXY, by its own rule."""
    from urllib.request import getproxies

    proxies = getproxies()
    return bool(proxies.get("https") or proxies.get("all"))


def _plain_kubeconfig(source: HubSource) -> tuple[PlainHub, str | None] | None:
    path = os.path.expanduser(source.kubeconfig or "")
    if not path or os.pathsep in path or not os.path.isfile(path):
        return None
    document = load_document(read_bounded(path, _MAX_KUBECONFIG_BYTES), source=path)
    if not isinstance(document, dict):
        return None
    context_name = source.context if source.context is not None else document.get("current-context")
    context = _entry(document, "contexts", "context", context_name)
    cluster = _entry(document, "clusters", "cluster", (context or {}).get("cluster"))
    user = _entry(document, "users", "user", (context or {}).get("user"))
    if context is None or cluster is None or user is None or set(cluster) - _PLAIN_CLUSTER or set(user) - _PLAIN_USER:
        return None
    server = cluster.get("server")
    if not isinstance(server, str) or not server.startswith("https://"):
        return None
    base = os.path.dirname(os.path.abspath(path))
    ca = _data_or_file(cluster, "certificate-authority", base)
    cert = _data_or_file(user, "client-certificate", base)
    key = _data_or_file(user, "client-key", base)
    if (cert is None) != (key is None):
        return None
    token, token_file = user.get("token"), user.get("tokenFile") or user.get("token-file")
    if not all(isinstance(value, (str, type(None))) for value in (token, token_file, cluster.get("tls-server-name"))):
        return None
    if token_file:
        token_file = os.path.join(base, token_file)
    namespace = context.get("namespace")
    from .hubhttp import PlainHub, ssl_context

    hub = PlainHub(server, ssl_context(ca, cert, key), cluster.get("tls-server-name"), token or None, token_file or None)
    return hub, namespace if isinstance(namespace, str) and namespace.strip() else None


def _entry(document: dict[str, Any], section: str, field: str, name: Any) -> dict[str, Any] | None:
    entries = document.get(section)
    if not isinstance(name, str) or not isinstance(entries, list):
        return None
    for entry in entries:
        if isinstance(entry, dict) and entry.get("name") == name:
            body = entry.get(field)
            return body if isinstance(body, dict) else None
    return None


def _data_or_file(section: dict[str, Any], name: str, base: str) -> bytes | None:
    """The PEM of ``name-data`` (base64) or of the file ``name`` (relative to the kubeconfig)."""
    import base64

    data, path = section.get(f"{name}-data"), section.get(name)
    if data:
        if not isinstance(data, str):
            raise ValueError(f"{name}-data is not a string")
        return base64.b64decode(data, validate=True)
    if path:
        if not isinstance(path, str):
            raise ValueError(f"{name} is not a string")
        return read_bounded(os.path.join(base, os.path.expanduser(path)), _MAX_KUBECONFIG_BYTES)
    return None
