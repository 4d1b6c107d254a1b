"""The providers: ``secretreader`` (a token from a Secret) and ``kubeconfig-secretreader`` (the
credentials of a kubeconfig stored in a Secret).

Both read one Secret from the hub per fetch, through the process's shared hub client
(:mod:`cpcreds_secretreader.hub`), and give the credential an expiry when it has one (a JWT's
``exp``, a certificate's ``notAfter``): the Go plugins give none, so their callers never refresh.
The engine caches the answer; a provider is called again only when the credential expires or a
spoke refused it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, ClassVar

from cpcreds.sdk import EXEC_EXTENSION, AccessPlan, Credential, ExecCluster, ProviderError

if TYPE_CHECKING:  # the KEP-2133 types are imported by the image provider when it answers
    from cpcreds.sdk import CredentialProviderRequest, CredentialProviderResponse

from .hub import HUB_CLIENTS, SERVICE_ACCOUNT_DIR, HubClient, HubClients, HubError, HubSource, default_namespace, resolve_hub_source
from .options import (
    DockerConfigSecretReaderOptions,
    HubOptions,
    KubeconfigSecretReaderOptions,
    SecretReaderOptions,
    is_data_key,
    is_namespace,
    is_secret_name,
    render_secret_name,
)
from .secret import SecretContentError, bearer_token, data_value, token_expiry

__all__ = ["SecretReaderProvider", "KubeconfigSecretReaderProvider", "DockerConfigSecretReaderProvider"]


def _shown(value: object) -> str:
    # Profile values are quoted only when they are short printable text.
    return repr(value) if isinstance(value, str) and len(value) <= 64 and value.isprintable() else "(a value not shown)"


class _HubProvider:
    """What both types share: the hub client (resolved and acquired on the first fetch, never
    in the factory, which ``cpcreds validate`` also calls), the namespace, reading a Secret."""

    kind: ClassVar[str]
    #: The options model: what the console scripts' --help lists and their flags may set.
    options_model: ClassVar[type[HubOptions]]
    options: HubOptions

    def __init__(
        self,
        options: Mapping[str, Any],
        *,
        service_account_dir: str = SERVICE_ACCOUNT_DIR,
        hub_clients: HubClients = HUB_CLIENTS,
    ) -> None:
        self.options = self.options_model.read(options)
        self._service_account_dir = service_account_dir
        self._hub_clients = hub_clients
        self._lock = threading.Lock()  # guards _source and _namespace, set once on first use
        self._source: HubSource | None = None
        self._namespace: str | None = None

    def _hub(self, plan: AccessPlan) -> HubClient:
        with self._lock:
            if self._source is None:
                self._source = resolve_hub_source(self.options.kubeconfig, self.options.context, service_account_dir=self._service_account_dir)
            source = self._source
        problem = None
        try:
            return self._hub_clients.get(source, self, plan.timeout)
        except HubError as exc:
            problem = str(exc)
        raise ProviderError(problem, provider=plan.provider)

    def _default_namespace(self, hub: HubClient) -> str:
        """The options' namespace, else the inferred one (computed once)."""
        if self.options.namespace:
            return self.options.namespace
        with self._lock:
            if self._namespace is None:
                self._namespace = default_namespace(hub.context_namespace, service_account_dir=self._service_account_dir)
            return self._namespace

    def _read_secret(self, plan: AccessPlan, hub: HubClient, namespace: str, name: str) -> Mapping[str, Any]:
        problem = None
        try:
            return hub.read_secret(namespace, name, plan.timeout)
        except HubError as exc:
            problem = str(exc)
            if exc.status == 401:
                # The hub refused our credentials: load them again next time (rotated kubeconfig).
                self._hub_clients.discard(hub.source, hub)
        raise ProviderError(problem, provider=plan.provider)

    #: What this type reads from the profile's exec extension, for the error when there is none.
    needs: ClassVar[str]

    def _extension(self, plan: AccessPlan) -> Mapping[str, Any]:
        config = plan.cluster.config
        if config is None:
            if not plan.cluster.server:
                raise ProviderError(
                    "no cluster information in the request: the exec config needs provideClusterInfo: true", provider=plan.provider
                )
            raise ProviderError(f"the access provider has no {EXEC_EXTENSION} extension; {self.kind} needs its {self.needs}", provider=plan.provider)
        if not isinstance(config, Mapping):
            raise ProviderError(f"the {EXEC_EXTENSION} extension is not an object", provider=plan.provider)
        return config

    def close(self) -> None:
        """Release the hub client (closed when no other provider of this process uses it)."""
        with self._lock:
            source = self._source
        if source is not None:
            self._hub_clients.release(source, self)


class SecretReaderProvider(_HubProvider):
    """``type: secretreader``: the token in ``data.<key>`` of Secret ``<namespace>/<secretName>``
    on the hub, ``secretName`` rendered with the ``clusterName`` of the profile's exec
    extension. Options: :class:`~cpcreds_secretreader.options.SecretReaderOptions`."""

    kind = "secretreader"
    needs = "clusterName (the cluster's name on the hub, which names the Secret)"
    options_model = SecretReaderOptions
    options: SecretReaderOptions

    def get_credential(self, plan: AccessPlan) -> Credential:
        cluster_name = self._extension(plan).get("clusterName")
        if cluster_name is None or cluster_name == "":
            raise ProviderError(f"missing clusterName in the {EXEC_EXTENSION} extension", provider=plan.provider)
        if not isinstance(cluster_name, str):
            raise ProviderError(f"clusterName in the {EXEC_EXTENSION} extension is not a string", provider=plan.provider)
        name = render_secret_name(self.options.secret_name, cluster_name)
        if not is_secret_name(name):
            raise ProviderError(
                f"clusterName {_shown(cluster_name)} does not make a valid Secret name with secretName {self.options.secret_name}",
                provider=plan.provider,
            )
        hub = self._hub(plan)
        namespace = self._default_namespace(hub)
        where = f"Secret {namespace}/{name}"
        secret = self._read_secret(plan, hub, namespace, name)
        what = f"{where} data.{self.options.key}"
        problem = None
        try:
            token = bearer_token(data_value(secret, self.options.key, where), what)
            return Credential(token=token, expiration_timestamp=token_expiry(token, what))
        except SecretContentError as exc:
            problem = str(exc)
        raise ProviderError(problem, provider=plan.provider)


class KubeconfigSecretReaderProvider(_HubProvider):
    """``type: kubeconfig-secretreader``: the token and/or client certificate of a kubeconfig
    stored in ``data.<key>`` of Secret ``<namespace>/<name>``, all named by the profile's exec
    extension (``name``, ``key``, optional ``namespace`` and ``context``), as with the Go plugin.
    Options: :class:`~cpcreds_secretreader.options.KubeconfigSecretReaderOptions`."""

    kind = "kubeconfig-secretreader"
    needs = "name and key (the Secret holding the kubeconfig, and its data key)"
    options_model = KubeconfigSecretReaderOptions
    options: KubeconfigSecretReaderOptions

    def get_credential(self, plan: AccessPlan) -> Credential:
        extension = self._extension(plan)
        name, key = self._field(plan, extension, "name"), self._field(plan, extension, "key")
        if not is_secret_name(name):
            raise ProviderError(f"name {_shown(name)} in the {EXEC_EXTENSION} extension is not a Secret name", provider=plan.provider)
        if not is_data_key(key):
            raise ProviderError(f"key {_shown(key)} in the {EXEC_EXTENSION} extension is not a Secret data key", provider=plan.provider)
        context = extension.get("context") or None
        if context is not None and (not isinstance(context, str) or not context.isprintable()):
            raise ProviderError(f"context in the {EXEC_EXTENSION} extension is not a context name", provider=plan.provider)
        hub = self._hub(plan)
        namespace = self._namespace_for(plan, extension, hub)
        where = f"Secret {namespace}/{name}"
        secret = self._read_secret(plan, hub, namespace, name)
        what = f"{where} data.{key}"
        # Imported here: the token-only console script need not load the kubeconfig reader.
        from .kubeconfig import kubeconfig_user

        problem = None
        try:
            user = kubeconfig_user(data_value(secret, key, where), context=context, what=what)
            expiry = token_expiry(user.token, f"{what} token") if user.token else None
            credential = Credential(
                token=user.token,
                client_certificate_data=user.client_certificate_data,
                client_key_data=user.client_key_data,
                expiration_timestamp=expiry,
            )
            return _bounded_by_certificate(credential, what)
        except SecretContentError as exc:
            problem = str(exc)
        except ValueError as exc:  # Credential's own checks: a key that is not the certificate's
            problem = f"{what}: {exc}"
        raise ProviderError(problem, provider=plan.provider)

    @staticmethod
    def _field(plan: AccessPlan, extension: Mapping[str, Any], field: str) -> str:
        value = extension.get(field)
        if value is None or value == "":
            raise ProviderError(f"missing {field} in the {EXEC_EXTENSION} extension", provider=plan.provider)
        if not isinstance(value, str):
            raise ProviderError(f"{field} in the {EXEC_EXTENSION} extension is not a string", provider=plan.provider)
        return value

    def _namespace_for(self, plan: AccessPlan, extension: Mapping[str, Any], hub: HubClient) -> str:
        named = extension.get("namespace") or None
        if named is not None and not is_namespace(named):
            raise ProviderError(f"namespace {_shown(named)} in the {EXEC_EXTENSION} extension is not a namespace name", provider=plan.provider)
        pinned = self.options.namespace
        if pinned and named and named != pinned:
            # The option is the operator's word; a profile (written on the hub by someone else)
            # may not send the provider to read Secrets elsewhere.
            raise ProviderError(
                f"the {EXEC_EXTENSION} extension names namespace {named}, but this provider reads only namespace {pinned} (option namespace)",
                provider=plan.provider,
            )
        return pinned or named or self._default_namespace(hub)


class DockerConfigSecretReaderProvider(_HubProvider):
    """``type: dockerconfig-secretreader``: registry credentials for container images (KEP-2133)
    from the image pull Secret ``<namespace>/<secretName>`` on the hub, of type
    ``kubernetes.io/dockerconfigjson`` or ``kubernetes.io/dockercfg`` (see
    :mod:`cpcreds_secretreader.dockerconfig`). The answer holds every registry of the Secret and
    does not depend on the image, so it is cached once for all images (``cacheKeyType: Global``)
    for ``cacheDuration`` (unset: the consumer's ``defaultCacheDuration``); the Secret is read
    again when that runs out. Options:
    :class:`~cpcreds_secretreader.options.DockerConfigSecretReaderOptions`. It gives no cluster
    credentials (``get_credential`` says so)."""

    kind = "dockerconfig-secretreader"
    options_model = DockerConfigSecretReaderOptions
    options: DockerConfigSecretReaderOptions

    def get_image_credential(self, request: CredentialProviderRequest, *, timeout: float) -> CredentialProviderResponse:
        # The hub helpers name the provider and bound the read by a plan's fields.
        plan = AccessPlan(provider=self.kind, kind=self.kind, cluster=_NO_CLUSTER, timeout=timeout)
        hub = self._hub(plan)
        namespace = self._default_namespace(hub)
        name = self.options.secret_name
        where = f"Secret {namespace}/{name}"
        secret = self._read_secret(plan, hub, namespace, name)
        from cpcreds.sdk import CACHE_KEY_GLOBAL, CredentialProviderResponse

        from .dockerconfig import DATA_KEYS, registry_auths

        problem = None
        try:
            kind = secret.get("type")
            data_key = DATA_KEYS.get(kind) if isinstance(kind, str) else None
            if data_key is None:
                shown = repr(kind) if isinstance(kind, str) and len(kind) <= 64 and kind.isprintable() else "another type"
                raise SecretContentError(f"{where} is of type {shown}, not kubernetes.io/dockerconfigjson or kubernetes.io/dockercfg")
            auths = registry_auths(data_value(secret, data_key, where), data_key, where)
            return CredentialProviderResponse(CACHE_KEY_GLOBAL, auths, cache_duration=self.options.cache_duration)
        except SecretContentError as exc:
            problem = str(exc)
        raise ProviderError(problem, provider=self.kind)

    def get_credential(self, plan: AccessPlan) -> Credential:
        raise ProviderError(
            "answers only for container images (KEP-2133), not for clusters: use type secretreader for cluster tokens", provider=plan.provider
        )


# Image requests name no cluster.
_NO_CLUSTER = ExecCluster(server="")


def _bounded_by_certificate(credential: Credential, what: str) -> Credential:
    """The credential expires no later than its certificate (an expired one is an error)."""
    not_after = credential.certificate_not_after
    expiry: datetime | None = credential.expiration_timestamp
    if not_after is None or (expiry is not None and expiry <= not_after):
        return credential
    if not_after <= datetime.now(timezone.utc):
        raise SecretContentError(f"{what}: the client certificate expired at {not_after.strftime('%Y-%m-%dT%H:%M:%SZ')}")
    return Credential(
        token=credential.token,
        client_certificate_data=credential.client_certificate_data,
        client_key_data=credential.client_key_data,
        expiration_timestamp=not_after,
    )
