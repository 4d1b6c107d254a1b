"""The ``options:`` of the two provider types, validated when the provider is built.

Declared with :class:`cpcreds.sdk.Options` (read without pydantic, on every plugin run). Unknown
keys are errors, so a typo fails ``cpcreds validate`` instead of being ignored; each error names
the option. The console scripts take the same options as flags
(``--secret-name`` or ``--secretName``); each field's ``description`` is what their ``--help`` shows.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable

from cpcreds.sdk import Duration, Options, option

__all__ = [
    "HubOptions",
    "SecretReaderOptions",
    "KubeconfigSecretReaderOptions",
    "DockerConfigSecretReaderOptions",
    "render_secret_name",
    "is_secret_name",
    "is_namespace",
    "is_data_key",
    "CLUSTER_NAME_FIELD",
]

#: The one placeholder a ``secretName`` template may hold.
CLUSTER_NAME_FIELD = "clusterName"

# Kubernetes' own rules: a namespace is a DNS-1123 label, a Secret name a DNS-1123 subdomain,
# a data key [-._a-zA-Z0-9]+ of at most 253 characters.
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DATA_KEY = re.compile(r"[-._a-zA-Z0-9]+")
# What a template may hold around its placeholders: the characters of a Secret name.
_TEMPLATE_TEXT = re.compile(r"[-.a-z0-9]*")


def is_namespace(value: object) -> bool:
    return isinstance(value, str) and _LABEL.fullmatch(value) is not None


def is_secret_name(value: object) -> bool:
    return isinstance(value, str) and len(value) <= 253 and _SUBDOMAIN.fullmatch(value) is not None


def is_data_key(value: object) -> bool:
    return isinstance(value, str) and len(value) <= 253 and _DATA_KEY.fullmatch(value) is not None and value not in (".", "..")


def render_secret_name(template: str, cluster_name: str) -> str:
    """The Secret name for ``cluster_name`` (the template was validated by the options model)."""
    return template.replace("{" + CLUSTER_NAME_FIELD + "}", cluster_name)


def _must(is_valid: Callable[[str], bool], problem: str) -> Callable[[str], str]:
    """An option's check: the value as given when ``is_valid`` accepts it, else ``problem``."""

    def check(value: str) -> str:
        if not is_valid(value):
            raise ValueError(problem)
        return value

    return check


_namespace = _must(is_namespace, "must be a namespace name (lower-case letters, digits and '-', at most 63)")
_key = _must(is_data_key, "must be a Secret data key (letters, digits, '-', '_' and '.', at most 253)")
_secret_name = _must(is_secret_name, "must be a Secret name (lower-case letters, digits, '-' and '.', at most 253)")


def _line(value: str) -> str:
    if not value or len(value) > 4096 or not value.isprintable():
        raise ValueError("must be a non-empty line of printable text")
    return value


def _template(value: str) -> str:
    problem = _template_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def _cache_duration(seconds: float) -> float:
    if not 0 <= seconds <= 366 * 86400:
        raise ValueError("must be between 0s and a year")
    return seconds


class HubOptions(Options):
    """Where the Secrets are: the hub's credentials and the namespace. Shared by both types."""

    namespace: str | None = option(
        None,
        check=_namespace,
        description="The namespace of the Secrets. Unset: the hub kubeconfig context's namespace, else "
        "POD_NAMESPACE, else the service-account namespace file, else default.",
    )
    kubeconfig: str | None = option(
        None, check=_line, description="A kubeconfig file for the hub. Unset: in-cluster config, else KUBECONFIG or ~/.kube/config."
    )
    context: str | None = option(
        None, check=_line, description="A context of that kubeconfig (of the default kubeconfig when kubeconfig is unset)."
    )


class SecretReaderOptions(HubOptions):
    """``type: secretreader``: the token is ``data.<key>`` of Secret ``<namespace>/<secretName>`` on
    the hub. The profile's ``client.authentication.k8s.io/exec`` extension must hold the cluster's
    ``clusterName`` (the exec config needs ``provideClusterInfo: true``)."""

    key: str = option("token", check=_key, description="The key of the Secret's data that holds the token.")
    secret_name: str = option(
        "{clusterName}",
        names=("secretName",),
        check=_template,
        description="The Secret's name; {clusterName} is the clusterName of the profile's client.authentication.k8s.io/exec extension.",
    )


class KubeconfigSecretReaderOptions(HubOptions):
    """``type: kubeconfig-secretreader``: the Secret, its key and the context inside the stored
    kubeconfig come from the profile's exec extension (``name``, ``key``, ``namespace``,
    ``context``), as with the Go plugin. ``namespace`` here, when set, is the only namespace a
    profile may name."""


class DockerConfigSecretReaderOptions(HubOptions):
    """``type: dockerconfig-secretreader`` (the kubelet plugin ``cpcreds-secretreader-credential-provider``):
    the registry credentials of the image pull Secret ``<namespace>/<secretName>`` on the hub."""

    secret_name: str = option(
        names=("secretName",),
        check=_secret_name,
        description="The image pull Secret's name (of type kubernetes.io/dockerconfigjson or kubernetes.io/dockercfg).",
    )
    #: Seconds once read.
    cache_duration: Duration | None = option(
        None,
        names=("cacheDuration",),
        check=_cache_duration,
        description="How long the kubelet may reuse the answer (10m, 1h). Unset: the kubelet config's defaultCacheDuration.",
    )


def _template_problem(template: str) -> str | None:
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError:
        return "has an unmatched '{' or '}'; the only placeholder is {clusterName}"
    placeholders = 0
    for text, field, spec, conversion in parts:
        if not _TEMPLATE_TEXT.fullmatch(text):
            return "may hold only lower-case letters, digits, '-', '.' and {clusterName}"
        if field is None:
            continue
        if field != CLUSTER_NAME_FIELD or spec or conversion:
            return "the only placeholder is {clusterName}, without format or conversion"
        placeholders += 1
    if placeholders == 0:
        return "must contain {clusterName} (every cluster has its own Secret)"
    if len(render_secret_name(template, "x")) > 253:
        return "is longer than a Secret name may be (253)"
    return None
