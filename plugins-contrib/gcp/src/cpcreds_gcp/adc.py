"""Which credentials to use: the ``credentialsFile`` option, else application default credentials
searched in google-auth's (and gke-gcloud-auth-plugin's) order, then optional impersonation.

1. ``credentialsFile`` (only that file: a missing or broken one is an error, not a fallback);
2. the file named by ``GOOGLE_APPLICATION_CREDENTIALS``;
3. gcloud's well-known file (``gcloud auth application-default login``):
   ``$CLOUDSDK_CONFIG/application_default_credentials.json``, else
   ``~/.config/gcloud/application_default_credentials.json`` (``%APPDATA%\\gcloud\\...`` on Windows);
4. the metadata server: at ``GCE_METADATA_HOST`` if set, else where a probe of ``GCE_METADATA_IP``
   (default 169.254.169.254) finds one.

Unlike ``google.auth.default()``, nothing here looks up a project ID (for workload identity
federation that is an extra call to the Resource Manager API) or runs ``gcloud``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import google.auth.credentials

from cpcreds.sdk import shown_endpoint

from .files import CredentialsFileError, load_credentials_info, read_credentials_file
from .metadata import MetadataCredentials, metadata_host, probe, probe_address
from .options import GcpOptions
from .transport import BoundedRequest

__all__ = ["Source", "SourceError", "find_source", "well_known_file"]

_CREDENTIALS_VARIABLE = "GOOGLE_APPLICATION_CREDENTIALS"


class SourceError(Exception):
    """No usable credentials; the message is one line naming what was looked at, never a value."""


@dataclass(frozen=True)
class Source:
    """The google-auth credentials to refresh, what they are (for logs), and labels for the
    endpoints they call (shown URL -> ``token endpoint``, ``metadata server``, ...)."""

    credentials: google.auth.credentials.Credentials
    description: str
    endpoints: dict[str, str] = field(default_factory=dict)
    #: ``host[:port]`` called without proxies (the metadata server is link-local).
    direct: frozenset[str] = frozenset()
    #: The credentials file, and its identity when it was read (see :meth:`changed`).
    path: Path | None = None
    stamp: tuple[int, int, int] | None = None

    def changed(self) -> bool:
        """True when the credentials file is no longer the one that was read: a rotated key in a
        mounted Secret (whose symlink swap gives a new inode), an edited file, a deleted one."""
        return self.path is not None and _stamp(self.path) != self.stamp


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        status = path.stat()
    except OSError:
        return None
    return status.st_ino, status.st_size, status.st_mtime_ns


def well_known_file(environ: Mapping[str, str]) -> Path:
    """Where ``gcloud auth application-default login`` writes its credentials."""
    config = environ.get("CLOUDSDK_CONFIG", "").strip()
    if config:
        return Path(config) / "application_default_credentials.json"
    if os.name == "nt":
        return Path(environ.get("APPDATA", "")) / "gcloud" / "application_default_credentials.json"
    return Path(os.path.expanduser("~")) / ".config" / "gcloud" / "application_default_credentials.json"


def _shown(path: Path | str) -> str:
    text = str(path)
    return text if text.isprintable() and len(text) <= 512 else repr(text[:512])


def _from_file(path: Path, origin: str, options: GcpOptions) -> Source:
    where = f"credentials file {_shown(path)} ({origin})"
    problem = None
    stamp = _stamp(path)  # before reading: a change while reading is seen next time
    try:
        info = read_credentials_file(path)
        loaded = load_credentials_info(info, options.scopes)
    except FileNotFoundError:
        problem = f"{where} does not exist"
    except CredentialsFileError as exc:
        problem = f"{where} {exc}"
    if problem is not None:
        # Raised here, not in the except blocks: nothing of the parsing chains onto it.
        raise SourceError(problem)
    return Source(loaded.credentials, f"{loaded.kind} from {_shown(path)} ({origin})", loaded.endpoints, path=path, stamp=stamp)


def _from_metadata(host: str, origin: str, options: GcpOptions) -> Source:
    credentials = MetadataCredentials(host, options.scopes)
    endpoints = {shown_endpoint(credentials.token_url): "metadata server", shown_endpoint(f"http://{host}/"): "metadata server"}
    return Source(credentials, f"the metadata server at {host} ({origin})", endpoints, frozenset({host}))


def _find(options: GcpOptions, request: BoundedRequest, environ: Mapping[str, str]) -> Source:
    if options.credentials_file is not None:
        return _from_file(options.credentials_file, "credentialsFile", options)
    named = environ.get(_CREDENTIALS_VARIABLE, "")
    if named:
        return _from_file(Path(named), _CREDENTIALS_VARIABLE, options)
    gcloud_file = well_known_file(environ)
    if gcloud_file.is_file():
        return _from_file(gcloud_file, "gcloud application-default credentials", options)
    problem, address = None, ""
    try:
        host, variable = metadata_host(environ)
        if host is None:
            address = probe_address(environ)
    except ValueError as exc:
        problem = str(exc)
    if problem is not None:
        raise SourceError(problem)
    if host is not None:
        return _from_metadata(host, variable, options)
    request.direct.add(address)
    request.labels[shown_endpoint(f"http://{address}/")] = "metadata server"
    reason = probe(request, address)
    if reason is None:
        return _from_metadata(address, "found by probing GCE_METADATA_IP" if environ.get("GCE_METADATA_IP") else "found by probing", options)
    raise SourceError(
        f"found no application default credentials ({_CREDENTIALS_VARIABLE} is not set, {_shown(gcloud_file)} does not exist, "
        f"and no metadata server answered at {address}: {reason}); set credentialsFile or {_CREDENTIALS_VARIABLE}, "
        "run `gcloud auth application-default login`, or run on Google Cloud"
    )


def find_source(options: GcpOptions, request: BoundedRequest, environ: Mapping[str, str] | None = None) -> Source:
    """The credentials ``options`` ask for, wrapped for impersonation when
    ``impersonateServiceAccount`` is set. May probe for a metadata server through ``request``.
    :class:`SourceError` when there are none or they are unusable."""
    source = _find(options, request, os.environ if environ is None else environ)
    url = options.impersonation_url()
    if url is None:
        return source
    from google.auth import impersonated_credentials

    credentials = impersonated_credentials.Credentials(
        source_credentials=source.credentials,
        target_principal=options.impersonate_service_account,
        target_scopes=list(options.scopes),
        delegates=list(options.delegates),
        lifetime=options.lifetime or 3600,
        iam_endpoint_override=url,
    )
    endpoints = {**source.endpoints, shown_endpoint(url): "IAM Credentials endpoint"}
    description = f"{options.impersonate_service_account} impersonated by {source.description}"
    return Source(credentials, description, endpoints, source.direct, source.path, source.stamp)
