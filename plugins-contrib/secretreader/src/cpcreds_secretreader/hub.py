"""The hub: where its credentials come from, one shared client per process, and reading a Secret.

Hub credentials, in order (as the Go plugins, plus explicit options):

1. the ``kubeconfig`` option (a path, ``~`` expanded) with its ``context`` option or its
   current context;
2. only ``context`` given: that context of the default kubeconfig (below);
3. in-cluster config, when ``KUBERNETES_SERVICE_HOST``/``_PORT`` are set and the service
   account's token exists (the pod's service account; its token is re-read as it rotates);
4. the default kubeconfig: ``KUBECONFIG`` (a list of paths, merged) or ``~/.kube/config``.

A plain kubeconfig (one file; a context whose cluster has a server, a CA and perhaps a TLS
server name, and whose user has a token, a token file or a client certificate and key, inline or
as files) and the in-cluster config are read here and served by the standard library's HTTPS
(:mod:`cpcreds_secretreader.hubhttp`), with an ``ssl`` context built from the CA and client
certificate: a one-shot run of the console scripts then imports neither the ``kubernetes``
client (its package ``__init__`` loads the whole client and google-auth, requests-oauthlib and
cryptography: 150-300 ms of a 30 ms job) nor urllib3 (~35 ms). Anything else (a KUBECONFIG list,
an exec plugin, an auth-provider, a proxy in the kubeconfig or in the environment (any spelling),
basic auth, a context or cluster that is missing) is read by the ``kubernetes`` client's own
loader, as before, which also words what is wrong with it. A hub user's exec plugin is run by
cpcreds' exec provider within the fetch's timeout (the loader would run it without one), and the
client is built again shortly before the credential it gave expires.

One :class:`HubClient` (an ``ApiClient`` with its urllib3 pool, or a plain hub with its pool of
keep-alive connections) exists per :class:`HubSource` per process, shared by every provider that
uses that source and closed when the last of them closes (:class:`HubClients`). It is
thread-safe; calls from many worker threads share its keep-alive connections.

The Secret is read with the ``ApiClient`` itself (``param_serialize`` + ``call_api``), not
``CoreV1Api``: the same request, headers and authentication, but without importing the
generated 50,000-line module and its models (about half a second at every start of the
console scripts), and with the answer read bounded (:data:`MAX_SECRET_BYTES`) and within the
plan's timeout, which the model-deserialising path cannot do.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from cpcreds.sdk import Cutoff, DocumentError, deadline, load_document, open_regular, read_bounded, watch_pool_manager

from .exchange import HubError, failure_kind, failure_message, read_bounded as read_answer

if TYPE_CHECKING:  # imported on first use: `cpcreds plugins` need not load the kubernetes client
    from kubernetes.client.api_client import ApiClient

    from .hubhttp import PlainHub

__all__ = [
    "HubSource",
    "HubClient",
    "HubClients",
    "HubError",
    "HUB_CLIENTS",
    "SERVICE_ACCOUNT_DIR",
    "MAX_SECRET_BYTES",
    "resolve_hub_source",
    "default_namespace",
]

#: Where a pod's service account is mounted (token, ca.crt, namespace).
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
#: Largest Secret read from the hub: a Secret holds at most 1 MiB of data, 1.4 MiB in base64.
MAX_SECRET_BYTES = 3 * 1024 * 1024
#: Largest error answer read (only its status is used; reading it lets the connection be reused).
_MAX_ERROR_BYTES = 64 * 1024


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


class HubClient:
    """One hub: an ``ApiClient`` with its urllib3 connection pool (``api``), or a
    :class:`~cpcreds_secretreader.hubhttp.PlainHub` (the standard library's HTTPS), and the
    kubeconfig context's namespace (``None`` for in-cluster config or a context without one).
    ``expires_at`` (epoch seconds) is when the credential a hub exec plugin gave runs out, else
    ``None``. Thread-safe."""

    def __init__(
        self, api: ApiClient | PlainHub, source: HubSource, context_namespace: str | None, *, expires_at: float | None = None
    ) -> None:
        self.api = api
        self.source = source
        self.context_namespace = context_namespace
        self.expires_at = expires_at
        self._plain = not hasattr(api, "param_serialize")
        if self._plain:
            from .hubhttp import TRANSPORT_ERRORS

            self.url = _without_userinfo(str(api.url))
            self._errors = TRANSPORT_ERRORS
        else:
            # The kubernetes client's ApiException(status=0) is how it reports TLS errors.
            from kubernetes.client.exceptions import ApiException
            from urllib3.exceptions import HTTPError

            self.url = _without_userinfo(str(api.configuration.host))  # type: ignore[union-attr]
            self._errors = (HTTPError, OSError, ApiException)

    def _get(self, namespace: str, name: str, timeout: float) -> Any:
        """The response to GET the Secret (urllib3's, or one with the same names), its body not read yet."""
        if self._plain:
            return self.api.get(f"/api/v1/namespaces/{namespace}/secrets/{name}", timeout)  # type: ignore[union-attr]
        method, url, headers, _, _ = self.api.param_serialize(
            method="GET",
            resource_path="/api/v1/namespaces/{namespace}/secrets/{name}",
            path_params={"namespace": namespace, "name": name},
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
        )
        return self.api.call_api(method, url, header_params=headers, _request_timeout=timeout).response

    def read_secret(self, namespace: str, name: str, timeout: float) -> dict[str, Any]:
        """GET Secret ``namespace/name`` by the fetch's deadline (:func:`cpcreds.sdk.deadline`;
        outside a fetch, one for ``timeout`` seconds); the object as a dict. Raises
        :class:`HubError` for anything else than a Secret."""
        where = f"Secret {namespace}/{name}"
        until = deadline(timeout)
        timeout = until.seconds  # what messages name
        with Cutoff(until) as exchange:  # the deadline of the whole exchange, head included
            failure = None
            try:
                raw = self._get(namespace, name, max(0.001, until.remaining()))
            except self._errors as exc:
                failure = "timeout" if exchange.expired else failure_kind(exc)
            if failure is not None:
                # Raised outside the except block: urllib3's exceptions repeat URLs (a proxy's may
                # hold a password) and nothing of a transport's error may chain onto ours.
                raise HubError(failure_message(failure, where, self.url, timeout))
            status = raw.status
            if status == 200:
                body = read_answer(raw, MAX_SECRET_BYTES, exchange, where, self.url, timeout, self._errors)
                return _secret_object(body, where, self.url)
            try:
                # Read (and ignore) the error's body so that the connection can serve the next
                # fetch; one too large or too slow is dropped with its connection instead.
                read_answer(raw, _MAX_ERROR_BYTES, exchange, where, self.url, timeout, self._errors)
            except HubError:
                pass
        raise HubError(_status_message(status, where, namespace, self.url), status=status)

    def close(self) -> None:
        self.api.close()


def _without_userinfo(url: str) -> str:
    """``url`` as messages show it: without a ``user:password@`` before the host (a kubeconfig's
    server may carry one; parsed by hand, as a malformed URL must be shown too)."""
    scheme, separator, rest = url.partition("://")
    if not separator:
        return url
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    authority = rest[:end]
    return f"{scheme}://{authority.rpartition('@')[2]}{rest[end:]}" if "@" in authority else url


def _secret_object(body: bytes, where: str, url: str) -> dict[str, Any]:
    obj: Any = None
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError):
        pass
    if not isinstance(obj, dict):
        raise HubError(f"the hub {url} answered for {where} with something that is not a Secret")
    return obj


def _status_message(status: int, where: str, namespace: str, url: str) -> str:
    # The hub's Status message is not quoted: only the status matters, and a hostile hub could
    # put anything there.
    if status == 404:
        return f"{where} not found on the hub {url}"
    if status == 401:
        return f"the hub {url} refused its credentials (401 Unauthorized) reading {where}: check the hub kubeconfig or service account token"
    if status == 403:
        return f"the hub credentials may not read {where} (403 Forbidden): grant get on secrets in namespace {namespace}"
    return f"the hub {url} answered HTTP {status} reading {where}"


class HubClients:
    """The process-wide hub clients: one per :class:`HubSource`, built on first use, shared by
    every provider that uses that source, closed when the last one releases it. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clients: dict[HubSource, HubClient] = {}
        self._users: dict[HubSource, set[int]] = {}

    def get(self, source: HubSource, user: object, timeout: float) -> HubClient:
        """The client for ``source``, built if needed (by the fetch's deadline,
        :func:`cpcreds.sdk.deadline`, a hub exec plugin included), and built again when the
        credential such a plugin gave is about to expire; ``user`` (a provider) holds it until
        :meth:`release`. Raises :class:`HubError` when the hub config cannot be loaded."""
        # The fetch's deadline ends before the caller's timeout: a hub exec plugin's failure, not
        # the engine's "did not answer", is what the caller sees when it hangs.
        until = deadline(timeout).at
        stale = None
        with self._lock:
            # Under the lock: concurrent first fetches build one client, not one each.
            client = self._clients.get(source)
            if client is not None and client.expires_at is not None and time.time() > client.expires_at - min(_REFRESH_AHEAD, 10 * timeout):
                stale, client = client, None
                del self._clients[source]
            if client is None:
                client = self._clients[source] = _build(source, until)
            self._users.setdefault(source, set()).add(id(user))
        if stale is not None:
            stale.close()
        return client

    def discard(self, source: HubSource, client: HubClient) -> None:
        """Forget ``client`` (after the hub refused its credentials), so that the next fetch
        loads the hub config again: a rotated kubeconfig or token is then picked up."""
        with self._lock:
            if self._clients.get(source) is client:
                del self._clients[source]
            else:
                client = None  # type: ignore[assignment]
        if client is not None:
            client.close()

    def release(self, source: HubSource, user: object) -> None:
        """``user`` no longer needs ``source``'s client; the last user's release closes it."""
        with self._lock:
            users = self._users.get(source, set())
            users.discard(id(user))
            client = None
            if not users:
                self._users.pop(source, None)
                client = self._clients.pop(source, None)
        if client is not None:
            client.close()

    def __len__(self) -> int:
        with self._lock:
            return len(self._clients)


#: The clients of this process.
HUB_CLIENTS = HubClients()
#: A hub exec plugin's credential is fetched again this long (at most) before it expires.
_REFRESH_AHEAD = 300.0


def _build(source: HubSource, deadline: float) -> HubClient:
    plain = _plain_hub(source)
    if plain is not None:
        return HubClient(plain[0], source, plain[1])
    from kubernetes.client.api_client import ApiClient
    from kubernetes.client.configuration import Configuration

    configuration = Configuration()
    problem = None
    context_namespace = expires_at = None
    try:
        if source.kind == "in-cluster":
            from kubernetes.config.incluster_config import InClusterConfigLoader

            directory = Path(source.service_account_dir or SERVICE_ACCOUNT_DIR)
            environ = {"KUBERNETES_SERVICE_HOST": source.host or "", "KUBERNETES_SERVICE_PORT": source.port or ""}
            InClusterConfigLoader(str(directory / "token"), str(directory / "ca.crt"), environ=environ).load_and_set(configuration)
        else:
            context_namespace, expires_at = _load_kubeconfig(source, configuration, deadline)
    except _Worded as exc:
        problem = str(exc)
    except Exception as exc:  # the loaders raise ConfigException, yaml errors, OSError, ValueError...
        problem = f"cannot load the hub {source.describe()}: {_loader_reason(exc)}"
    if problem is not None:
        raise HubError(problem)
    # Failures are the engine's to retry (with backoff), within the plan's timeout: urllib3's
    # default three retries would multiply the time a dead hub holds a fetch.
    configuration.retries = False
    configuration.client_go_retries = False
    api = ApiClient(configuration)
    watch_pool_manager(api.rest_client.pool_manager)  # its sockets under each read's deadline
    return HubClient(api, source, context_namespace, expires_at=expires_at)


class _Worded(Exception):
    """A problem with the hub config whose message is ready to show as it is."""


def _load_kubeconfig(source: HubSource, configuration: Any, deadline: float) -> tuple[str | None, float | None]:
    """Load the kubeconfig ``source`` into ``configuration`` with the kubernetes client's loader
    (KUBECONFIG lists merged as it merges them); its context's namespace, and when the
    credential of the user's exec plugin expires (epoch seconds; None: no exec plugin, or no
    expiry). The exec plugin is run here, by cpcreds, until ``deadline`` (monotonic): the loader
    would run it without a deadline (a hanging one would hold every fetch of the process) and
    leave it running."""
    from kubernetes.config import kube_config
    from kubernetes.config.config_exception import ConfigException

    paths = [os.path.expanduser(p) for p in (source.kubeconfig or "").split(kube_config.ENV_KUBECONFIG_PATH_SEPARATOR) if p]
    if not any(os.path.isfile(p) for p in paths):
        # Worded so that no secret-looking name ("credentials:") precedes the path: redaction
        # would take the path for a credential and blank it.
        raise _Worded(
            f"no hub kubeconfig: {source.kubeconfig} does not exist and this is not a pod with a service account "
            "(set the kubeconfig option, or KUBECONFIG)"
        )
    for path in paths:
        # The kubernetes loader opens with a blocking open(): refuse a FIFO or a device first.
        if os.path.lexists(path):
            os.close(open_regular(path))
    merged = kube_config.KubeConfigMerger(source.kubeconfig)
    if merged.config is None:
        raise ConfigException("Invalid kube-config file. No configuration found.")
    document = merged.config.value
    context_name = source.context if source.context is not None else document.get("current-context")
    context, _ = _merged_entry(document, "contexts", context_name)
    body = context.get("context") if isinstance(context, dict) else None
    body = body if isinstance(body, dict) else {}
    expires_at = _run_exec_user(document, body, deadline)
    # What load_kube_config does with a file, on the merged document it read (and we changed).
    loader = kube_config.KubeConfigLoader(config_dict=merged.config, config_base_path=None, active_context=source.context)
    loader.load_and_set(configuration)
    namespace = body.get("namespace")
    return (namespace if isinstance(namespace, str) and namespace.strip() else None), expires_at


def _merged_entry(document: dict[str, Any], section: str, name: Any) -> tuple[Any, str | None]:
    """The entry ``name`` of ``section`` in a merged kubeconfig (the merger wraps each entry in
    a ``ConfigNode`` holding the file it came from), and that file."""
    entries = document.get(section)
    for item in entries if isinstance(entries, list) else ():
        value, path = (item.value, item.path) if hasattr(item, "value") and hasattr(item, "path") else (item, None)
        if isinstance(value, dict) and value.get("name") == name:
            return value, path
    return None, None


def _run_exec_user(document: dict[str, Any], context: dict[str, Any], deadline: float) -> float | None:
    """If the context's user runs an exec plugin, run it (cpcreds' exec provider, until
    ``deadline``, its process group killed then) and put the credential it answers where
    the ``exec`` entry was, for the loader to read as a static user. When it expires (epoch
    seconds), else None. :class:`_Worded` when it fails."""
    entry, path = _merged_entry(document, "users", context.get("user"))
    user = entry.get("user") if isinstance(entry, dict) else None
    if not isinstance(user, dict) or not isinstance(user.get("exec"), dict):
        return None
    from cpcreds import ExecProvider
    from cpcreds.sdk import AccessPlan, CredentialError, ExecSpec

    exec_entry = user["exec"]
    command, api_version, env = exec_entry.get("command"), exec_entry.get("apiVersion"), exec_entry.get("env")
    for name, value in (("command", command), ("apiVersion", api_version)):
        if not isinstance(value, str) or not value:
            raise _Worded(f"the hub kubeconfig's user has an exec entry without {name}")
    if not isinstance(env, (list, type(None))) or not all(isinstance(e, dict) for e in env or ()):
        raise _Worded("the hub kubeconfig's user has an exec entry whose env is not a list of name and value")
    if not isinstance(exec_entry.get("args"), (list, type(None))):
        raise _Worded("the hub kubeconfig's user has an exec entry whose args are not a list")
    # client-go runs a relative command with a slash from the kubeconfig's folder.
    if "/" in command and not os.path.isabs(command) and path:
        command = os.path.join(os.path.dirname(os.path.abspath(path)), command)
    timeout = deadline - time.monotonic()
    if timeout <= 0:
        raise _Worded("no time was left to run the hub kubeconfig's exec plugin")
    problem = None
    runner = ExecProvider()
    try:
        spec = ExecSpec(
            api_version=api_version,
            command=command,
            args=tuple(str(a) for a in exec_entry.get("args") or ()),
            env=tuple((str(e.get("name")), str(e.get("value"))) for e in env or ()),
            provide_cluster_info=exec_entry.get("provideClusterInfo") is True,
            interactive_mode="Never",  # a plugin run by a controller or the kubelet has no terminal
            install_hint=str(exec_entry.get("installHint") or ""),
        )
        plan = AccessPlan(provider="hub kubeconfig", kind="exec", cluster=_exec_cluster(document, context), exec=spec, timeout=timeout)
        credential = runner.get_credential(plan)
    except CredentialError as exc:
        problem = f"the hub kubeconfig's exec plugin failed: {' '.join(str(exc).split())}"
    except (TypeError, ValueError, AttributeError):
        problem = "the hub kubeconfig's user has an exec entry that is not valid"
    finally:
        runner.close()
    if problem is not None:
        raise _Worded(problem)
    del user["exec"]
    if credential.token:
        user["token"] = credential.token
    else:
        import base64

        user["client-certificate-data"] = base64.b64encode((credential.client_certificate_data or "").encode()).decode()
        user["client-key-data"] = base64.b64encode((credential.client_key_data or "").encode()).decode()
    return credential.expiration_timestamp.timestamp() if credential.expiration_timestamp is not None else None


def _exec_cluster(document: dict[str, Any], context: dict[str, Any]) -> Any:
    """The context's cluster as a KEP-541 ``Cluster`` (for ``provideClusterInfo``)."""
    from cpcreds.sdk import EXEC_EXTENSION, ExecCluster

    entry, _ = _merged_entry(document, "clusters", context.get("cluster"))
    cluster = entry.get("cluster") if isinstance(entry, dict) else None
    cluster = cluster if isinstance(cluster, dict) else {}
    extension = None
    for item in cluster.get("extensions") or ():
        if isinstance(item, dict) and item.get("name") == EXEC_EXTENSION:
            extension = item.get("extension")
    return ExecCluster(
        server=str(cluster.get("server") or ""),
        tls_server_name=str(cluster.get("tls-server-name") or ""),
        insecure_skip_tls_verify=cluster.get("insecure-skip-tls-verify") is True,
        certificate_authority_data=str(cluster.get("certificate-authority-data") or ""),
        proxy_url=str(cluster.get("proxy-url") or ""),
        config=extension,
    )


def _loader_reason(exc: BaseException) -> str:
    from kubernetes.config.config_exception import ConfigException

    if isinstance(exc, DocumentError):  # cpcreds' own words: a path and what is wrong with the file
        return str(exc)
    # A YAML error quotes the offending line, which may hold the token: say only that it is broken.
    if isinstance(exc, ConfigException):
        text = " ".join(str(exc).split())
        if "token" not in text.lower() and len(text) <= 300:
            return text
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return f"{type(exc).__name__} (not a valid kubeconfig)"


# -- plain hubs: the standard library's HTTPS, without the kubernetes client ---------------------

#: Largest hub kubeconfig read on the plain path (a larger one goes to the kubernetes loader).
_MAX_KUBECONFIG_BYTES = 4 * 1024 * 1024
#: What the plain path reads of a kubeconfig; any other field sends it to the kubernetes loader.
_PLAIN_CLUSTER = {"server", "certificate-authority", "certificate-authority-data", "tls-server-name", "extensions"}
_PLAIN_USER = {"token", "tokenFile", "token-file", "client-certificate", "client-certificate-data", "client-key", "client-key-data", "extensions"}


def _plain_hub(source: HubSource) -> tuple[PlainHub, str | None] | None:
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
