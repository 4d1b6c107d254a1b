"""The client serve reaches the hub with: the pod's service account, or a kubeconfig.

A kubeconfig whose user is an exec plugin (``gke-gcloud-auth-plugin``, ``aws``, ``kubelogin``…)
is run by cpcreds' own exec provider, not by the ``kubernetes`` client's loader: the loader runs
the plugin without a deadline (one that hangs would hold serve's inventory forever, with no
problem shown), logs its failures instead of raising them, and leaves it running when serve
stops. Here a run is bounded by ``hubTimeout``, its whole process group is killed on timeout and
on :meth:`HubConnector.close`, and a failure is an error the hub source shows as a problem.
The credential it answers replaces the ``exec`` entry, and the ``kubernetes`` client's loader
reads the rest of the kubeconfig (cluster, CA, proxy, relative paths) as it always does.
"""

from __future__ import annotations

import base64
import os
import time
from pathlib import Path
from typing import Any

from ..config.documents import load_or_raise, read_or_raise
from .._show import shown_url
from ..config.access import AccessPlan, ExecSpec
from ..config.wire import ExecCluster, ExecClusterModel
from ..errors import CredentialError
from ..exec.provider import ExecProvider

__all__ = ["HubConnector", "HubAuthError"]

#: A credential that expires within this many seconds is fetched again before the next request.
_REFRESH_AHEAD = 300.0


class HubAuthError(Exception):
    """The hub's credential could not be obtained; the message says why (no secret in it)."""


class HubConnector:
    """Builds ``kubernetes`` API clients for the hub; thread-safe for one caller per scope."""

    def __init__(self, kubeconfig: Path | None, context: str | None, *, in_cluster: bool, timeout: float) -> None:
        self.kubeconfig, self.context, self.in_cluster, self.timeout = kubeconfig, context, in_cluster, timeout
        self._exec = ExecProvider()
        #: When the credential of the last client expires (epoch seconds); None: it does not.
        self.expires_at: float | None = None

    def stale(self) -> bool:
        """Whether the last client's credential expires soon and a new client should be made."""
        return self.expires_at is not None and time.time() > self.expires_at - min(_REFRESH_AHEAD, self.timeout * 10)

    def close(self) -> None:
        """Kill the process group of a hub exec plugin still running, and run no more."""
        self._exec.close()

    def connect(self) -> tuple[Any, str]:
        """A new ``ApiClient`` and how the hub is named on the page (``hub (https://…)``)."""
        from kubernetes import client, config

        configuration = client.Configuration()
        if self.in_cluster:
            config.load_incluster_config(client_configuration=configuration)
            return client.ApiClient(configuration), "hub (in-cluster)"
        assert self.kubeconfig is not None
        path = Path(self.kubeconfig)
        document = self._read(path)
        user = _chosen_user(document, self.context)
        self.expires_at = None
        if isinstance(user, dict) and isinstance(user.get("exec"), dict):
            self._replace_exec(user, document, path)
        from kubernetes.config.kube_config import KubeConfigLoader

        KubeConfigLoader(config_dict=document, active_context=self.context, config_base_path=str(path.parent)).load_and_set(configuration)
        # The name is shown (the page, /v1/clusters' origin, problems, logs): the kubeconfig's
        # server may carry a user and password.
        return client.ApiClient(configuration), f"hub ({shown_url(configuration.host)})"

    @staticmethod
    def _read(path: Path) -> dict[str, Any]:
        # Without blocking, regular files only: a FIFO at the path is an error, not a hang.
        data = read_or_raise(path, lambda reason: HubAuthError(f"cannot read the hub kubeconfig {path}: {reason}"), max_bytes=4 * 1024 * 1024)
        document = load_or_raise(data, HubAuthError, source=str(path), message="{source}: {detail}")
        if not isinstance(document, dict):
            raise HubAuthError(f"{path}: not a kubeconfig (expected a mapping)")
        return document

    def _replace_exec(self, user: dict[str, Any], document: dict[str, Any], path: Path) -> None:
        """Run the user's exec plugin and put its credential where the ``exec`` entry was."""
        entry = user.pop("exec")
        command = entry.get("command")
        if not isinstance(command, str) or not command:
            raise HubAuthError(f"{path}: the hub user's exec entry has no command")
        # client-go runs a relative command with a slash from the kubeconfig's folder.
        if "/" in command and not os.path.isabs(command):
            command = str(path.parent / command)
        try:
            spec = ExecSpec(
                api_version=str(entry.get("apiVersion") or ""),
                command=command,
                args=tuple(str(a) for a in entry.get("args") or ()),
                env=tuple((str(e.get("name")), str(e.get("value"))) for e in entry.get("env") or () if isinstance(e, dict)),
                provide_cluster_info=bool(entry.get("provideClusterInfo")),
                interactive_mode="Never",  # serve has no terminal to hand over
                install_hint=str(entry.get("installHint") or ""),
            )
            cluster = _chosen_cluster(document, self.context)
            plan = AccessPlan(provider="hub kubeconfig", kind="exec", cluster=cluster, exec=spec, timeout=self.timeout)
            credential = self._exec.get_credential(plan)
        except CredentialError as exc:
            raise HubAuthError(f"the hub kubeconfig's exec plugin failed: {' '.join(str(exc).split())}") from None
        except (TypeError, ValueError, AttributeError):
            raise HubAuthError(f"{path}: the hub user's exec entry is not valid") from None
        if credential.token:
            user["token"] = credential.token
        else:
            user["client-certificate-data"] = base64.b64encode((credential.client_certificate_data or "").encode()).decode()
            user["client-key-data"] = base64.b64encode((credential.client_key_data or "").encode()).decode()
        if credential.expiration_timestamp is not None:
            self.expires_at = credential.expiration_timestamp.timestamp()


def _named(document: dict[str, Any], section: str, name: Any) -> Any:
    for item in document.get(section) or ():
        if isinstance(item, dict) and item.get("name") == name:
            return item.get(section[:-1])
    return None


def _context(document: dict[str, Any], context: str | None) -> dict[str, Any]:
    chosen = _named(document, "contexts", context or document.get("current-context"))
    return chosen if isinstance(chosen, dict) else {}


def _chosen_user(document: dict[str, Any], context: str | None) -> Any:
    return _named(document, "users", _context(document, context).get("user"))


def _chosen_cluster(document: dict[str, Any], context: str | None) -> ExecCluster:
    cluster = _named(document, "clusters", _context(document, context).get("cluster"))
    cluster = cluster if isinstance(cluster, dict) else {}
    fields = {k: cluster[k] for k in ("server", "tls-server-name", "insecure-skip-tls-verify", "certificate-authority-data", "proxy-url") if k in cluster}
    fields.setdefault("server", "")
    return ExecClusterModel.model_validate(fields).to_cluster()
