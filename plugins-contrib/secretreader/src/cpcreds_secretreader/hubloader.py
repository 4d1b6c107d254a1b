"""The hub's ``ApiClient``, loaded by the ``kubernetes`` client's own loaders: the in-cluster config,
or a kubeconfig (a KUBECONFIG list merged as it merges them; a proxy, in the kubeconfig or the
environment in any spelling, applied by its own rule). That loader also words what is wrong with a
kubeconfig.

Our bounds go around it, not beside it: every kubeconfig file is read first by cpcreds' bounded
loader (size, depth, aliases; a FIFO or a device refused without blocking), and the files the
context's user and cluster name (token file, CA, client certificate and key) are read bounded and
handed to the loader as data, since it opens them with a blocking ``open()`` and reads them
whole. A token file is read again before each request (a projected token rotates), as client-go
reads one. A hub user's exec plugin is run by cpcreds' exec provider within the fetch's deadline
(the loader would run it without one), and :func:`kubernetes_api` says when the credential it gave
expires, so that the client is built again shortly before.
"""

from __future__ import annotations

import base64
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cpcreds.sdk import DocumentError, load_document, read_bounded, watch_pool_manager

from .exchange import HubError
from .hubsource import SERVICE_ACCOUNT_DIR, HubSource

if TYPE_CHECKING:
    from kubernetes.client.api_client import ApiClient

__all__ = ["kubernetes_api"]

#: Largest hub kubeconfig, CA or client certificate file read.
_MAX_FILE_BYTES = 4 * 1024 * 1024
#: Largest token file read (a projected service-account token is 1-2 KiB).
_MAX_TOKEN_FILE_BYTES = 64 * 1024
#: The files a context's user and cluster may name, which are read here and given as ``-data``.
_FILE_FIELDS = (("users", "user", "client-certificate"), ("users", "user", "client-key"), ("clusters", "cluster", "certificate-authority"))


def kubernetes_api(source: HubSource, deadline: float) -> tuple[ApiClient, str | None, float | None]:
    """An ``ApiClient`` for ``source`` loaded by the kubernetes client's loaders (a hub exec plugin
    run until ``deadline``, monotonic), its context's namespace and when the exec plugin's
    credential expires (epoch seconds, or None). :class:`HubError` when it cannot be loaded."""
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
            # Its token is read again as it rotates (the loader's own refresh).
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
    # default three retries would multiply the time a dead hub holds a fetch. Retries off also
    # means a redirect is not followed: its status is the answer (the Secret is at one URL).
    configuration.retries = False
    configuration.client_go_retries = False
    api = ApiClient(configuration)
    watch_pool_manager(api.rest_client.pool_manager)  # its sockets under each read's deadline
    return api, context_namespace, expires_at


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
        if os.path.lexists(path):
            # The loader reads it with a blocking open() and PyYAML unbounded: ours first.
            load_document(read_bounded(path, _MAX_FILE_BYTES), source=path)
    merged = kube_config.KubeConfigMerger(source.kubeconfig)
    if merged.config is None:
        raise ConfigException("Invalid kube-config file. No configuration found.")
    document = merged.config.value
    context_name = source.context if source.context is not None else document.get("current-context")
    context, _ = _merged_entry(document, "contexts", context_name)
    body = context.get("context") if isinstance(context, dict) else None
    body = body if isinstance(body, dict) else {}
    expires_at = _run_exec_user(document, body, deadline)
    token_file = _read_files(document, body)
    # What load_kube_config does with a file, on the merged document it read (and we changed).
    loader = kube_config.KubeConfigLoader(config_dict=merged.config, config_base_path=None, active_context=source.context)
    loader.load_and_set(configuration)
    if token_file is not None:
        # The loader reads a token file once; refresh_api_key_hook is its Configuration's hook
        # run before each request's authentication.
        configuration.refresh_api_key_hook = _token_reader(token_file)
    namespace = body.get("namespace")
    return (namespace if isinstance(namespace, str) and namespace.strip() else None), expires_at


def _read_files(document: dict[str, Any], context: dict[str, Any]) -> str | None:
    """Put the content of the files the context's user and cluster name into the merged document,
    read bounded (a FIFO, a device, a folder or a huge file is refused without blocking), where
    the loader takes data: ``token`` for ``tokenFile`` (unless a ``token`` is there, which the
    loader prefers), ``<field>-data`` for a certificate or key. Returns the token file's path
    (to read again as it rotates), else None. :class:`_Worded` when a file cannot be used."""
    for section, kind, field in (*_FILE_FIELDS, ("users", "user", "tokenFile")):
        entry, path = _merged_entry(document, section, context.get(kind))
        body = entry.get(kind) if isinstance(entry, dict) else None
        if not isinstance(body, dict):
            continue
        data_field = "token" if field == "tokenFile" else f"{field}-data"
        if field == "tokenFile" and isinstance(body.get("token"), str):
            body["token"] = _bearer(body["token"].encode(), "token")
            continue
        name = body.get(field)
        if body.get(data_field) or not name:
            continue
        if not isinstance(name, str):
            raise _Worded(f"the hub kubeconfig's {kind} has a {field} that is not a file path")
        # Relative to the kubeconfig file the entry came from, as the loader resolves it.
        full = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(path)) if path else "", name))
        data = _read_file(full, kind, field, _MAX_TOKEN_FILE_BYTES if field == "tokenFile" else _MAX_FILE_BYTES)
        del body[field]
        if field == "tokenFile":
            body["token"] = _bearer(data, field)
            return full
        body[data_field] = base64.b64encode(data).decode("ascii")
    return None


def _read_file(path: str, kind: str, field: str, limit: int) -> bytes:
    problem = None
    try:
        return read_bounded(path, limit)
    except DocumentError as exc:
        problem = f"its {field} {exc}"
    except OSError as exc:
        problem = f"its {field} {path} cannot be read ({exc.strerror or type(exc).__name__})"
    raise _Worded(f"the hub kubeconfig's {kind} cannot be used: {problem}")


def _bearer(raw: bytes, field: str) -> str:
    """A hub token as a header may carry it: surrounding whitespace removed, one line of visible
    ASCII; never quoted in the error (worded so that redaction leaves the message alone)."""
    token = raw.decode("utf-8", "replace").strip()
    if not token or not all(33 <= ord(c) <= 126 for c in token):
        raise _Worded(f"the hub kubeconfig's user {field} is not one line of visible ASCII characters, as a request header needs")
    return token


def _token_reader(path: str) -> Any:
    """A ``refresh_api_key_hook`` that reads the token file again; while it cannot be read (being
    replaced) or holds no token, the last one read is kept."""

    def refresh(configuration: Any) -> None:
        try:
            token = _bearer(read_bounded(path, _MAX_TOKEN_FILE_BYTES), "tokenFile")
        except (OSError, DocumentError, _Worded):
            return
        configuration.api_key["BearerToken"] = f"Bearer {token}"

    return refresh


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
