"""``cpcreds cache list`` and ``cpcreds cache clear``. ``list``: what the disk cache of
``get-credential`` holds, per entry — the cluster, the provider, the kind of credential and its
expiry — and never the credential.

Each cache file carries a one-line description (:func:`describe`, written by get-credential when
it stores an answer) beside the answer, so listing never reads, decodes or shows the token or the
key. A file that is not one cpcreds may trust, or whose description is not what cpcreds writes,
is listed among the skipped ones with the reason; it is never an error, since get-credential does
not use it either. The check digest binds a file to its key, which only the command that was
cached can compute: the list shows what each file says, as ``ls`` would.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .._show import shown_url
from ..credential import format_rfc3339, parse_rfc3339
from ..errors import CredentialError
from ..kep import SUPPORTED_API_VERSIONS
from . import diskcache

if TYPE_CHECKING:
    from ..config.settings import Settings
    from ..credential import Credential
    from ..plan import AccessPlan

__all__ = ["cache", "describe", "list_entries", "Listing"]

#: Longest description line read; cpcreds writes a few hundred bytes.
MAX_DESCRIPTION_BYTES = 8192

_Name = Annotated[str, Field(min_length=1, max_length=253)]


class Description(BaseModel):
    """The description line of a cache file, as :func:`describe` writes it (camelCase, as the
    JSON of ``cache list -o json`` names the same values)."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)

    profileFile: Annotated[str, Field(min_length=1, max_length=4096)]
    namespace: _Name | None = None
    name: _Name
    server: Annotated[str, Field(max_length=4096)]
    provider: _Name
    providerType: _Name
    credential: Annotated[tuple[Literal["token", "clientCertificate"], ...], Field(min_length=1, max_length=2)]
    apiVersion: Literal[SUPPORTED_API_VERSIONS]  # type: ignore[valid-type]
    expirationTimestamp: Annotated[str, Field(max_length=40)]
    answerBytes: Annotated[int, Field(ge=0, le=diskcache.MAX_FILE_BYTES)]

    @field_validator("profileFile", "namespace", "name", "server", "provider", "providerType")
    @classmethod
    def _printable(cls, value: str | None) -> str | None:
        # A hostile file must not reach the terminal with escapes; cpcreds never writes them.
        if value is not None and not value.isprintable():
            raise ValueError("not printable")
        return value

    @field_validator("expirationTimestamp")
    @classmethod
    def _rfc3339(cls, value: str) -> str:
        parse_rfc3339(value)  # ValueError, worded without the value
        return value


def describe(
    profile: Mapping[str, Any], plan: AccessPlan, credential: Credential, api_version: str, profile_file: str, answer_bytes: int
) -> bytes:
    """The description line stored with an answer: which cluster (the profile's namespace and
    name, its server as cpcreds shows URLs), which provider, which kind of credential and until
    when — nothing of the credential itself."""
    metadata = profile.get("metadata") or {}
    kinds = [kind for kind, value in (("token", credential.token), ("clientCertificate", credential.client_certificate_data)) if value]
    expiry = credential.expiration_timestamp
    about = {
        "profileFile": profile_file,
        "namespace": metadata.get("namespace") or None,
        "name": metadata.get("name"),
        "server": shown_url(plan.cluster.server),
        "provider": plan.provider,
        "providerType": plan.kind,
        "credential": kinds,
        "apiVersion": api_version,
        "expirationTimestamp": format_rfc3339(expiry) if expiry is not None else None,
        # A file cut short or extended is told apart without reading the answer (the check
        # digest, which would also catch an edit, needs the key: only the cached command has it).
        "answerBytes": answer_bytes,
    }
    return json.dumps(about, separators=(",", ":")).encode()


class Listing:
    """What :func:`list_entries` found: the ``directory``, one dict per usable ``entries`` (the
    JSON schema of ``cache list -o json``), ``skipped`` files with their reason, and ``notes``
    about the directory."""

    def __init__(self, directory: str, entries: list[dict[str, Any]], skipped: list[dict[str, str]], notes: list[str]) -> None:
        self.directory, self.entries, self.skipped, self.notes = directory, entries, skipped, notes

    def to_dict(self) -> dict[str, Any]:
        return {"directory": self.directory, "entries": self.entries, "skipped": self.skipped, "notes": self.notes}


def _moment(seconds: int) -> str | None:
    try:
        return format_rfc3339(datetime.fromtimestamp(seconds, timezone.utc))
    except (OverflowError, ValueError, OSError):  # past the year 9999: no time cpcreds writes
        return None


def _entry(name: str, data: bytes, now: float) -> dict[str, Any] | str:
    """The listed entry of the cache file ``name`` holding ``data``, or why it is skipped."""
    parts = diskcache.split_file(data)
    if parts is None:
        if data.startswith(diskcache.MAGIC_FAMILY):
            return "written by another version of cpcreds (another layout); get-credential does not use it"
        return "not a cpcreds cache file"
    serve_until, _, body = parts
    line, newline, answer = body.partition(b"\n")
    served_until = _moment(serve_until)
    if not newline or served_until is None:
        return "not a cpcreds cache file"
    if len(line) > MAX_DESCRIPTION_BYTES:
        return "its description is damaged"
    try:
        about = Description.model_validate_json(line)
    except ValidationError:  # its errors may quote the file's values: not shown
        return "its description is missing or damaged"
    if about.answerBytes != len(answer):
        return "damaged: its answer is not as long as when it was written"
    expiry = parse_rfc3339(about.expirationTimestamp)
    return {
        "file": name,
        "cluster": {"namespace": about.namespace, "name": about.name, "server": shown_url(about.server)},
        "profileFile": about.profileFile,
        "provider": about.provider,
        "providerType": about.providerType,
        "credential": list(about.credential),
        "apiVersion": about.apiVersion,
        "expirationTimestamp": format_rfc3339(expiry),
        "expired": expiry.timestamp() <= now,
        "servedUntil": served_until,
        "served": serve_until > now,
    }


def list_entries(environ: Mapping[str, str], profile: str | None = None, now: float | None = None) -> Listing:
    """The disk cache's entries (those of the ClusterProfile file ``profile`` only, if given),
    sorted by cluster, provider and expiry. :class:`~cpcreds.cli.diskcache.UntrustedCacheDir` if
    the directory is not this user's; ``OSError`` if it cannot be read."""
    now = time.time() if now is None else now
    directory = diskcache.cache_dir(environ)
    exists, note = diskcache.checked_dir(directory)
    assert directory is not None  # checked_dir raised otherwise
    entries: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    if not exists:
        return Listing(directory, entries, skipped, [])
    tag = diskcache.profile_tag(os.path.realpath(profile)) + "-" if profile is not None else ""
    with os.scandir(directory) as found:
        names = sorted(entry.name for entry in found if entry.name.endswith(diskcache.SUFFIX) and entry.name.startswith(tag))
    for name in names:
        path = os.path.join(directory, name)
        data = diskcache.read_file(path)
        if isinstance(data, str):
            if not os.path.lexists(path):  # removed meanwhile (a prune, a clear)
                continue
            skipped.append({"file": name, "reason": data})
            continue
        entry = _entry(name, data, now)
        if isinstance(entry, str):
            skipped.append({"file": name, "reason": entry})
        else:
            entries.append(entry)
    entries.sort(key=lambda e: (e["cluster"]["namespace"] or "", e["cluster"]["name"], e["provider"], e["expirationTimestamp"], e["file"]))
    return Listing(directory, entries, skipped, [note] if note else [])


def _remaining(seconds: float) -> str:
    """How long until (or since) an expiry, as kubectl shows ages: 45s, 59m, 3h12m, 2d."""
    whole = int(abs(seconds))
    if whole < 120:
        text = f"{whole}s"
    elif whole < 3 * 3600:
        text = f"{whole // 60}m" if whole < 3600 else f"{whole // 3600}h{whole % 3600 // 60}m"
    elif whole < 2 * 86400:
        text = f"{whole // 3600}h"
    else:
        text = f"{whole // 86400}d"
    return f"in {text}" if seconds > 0 else f"expired {text} ago"


_KIND_WORDS = {"token": "token", "clientCertificate": "client certificate"}


def render_table(listing: Listing, now: float) -> str:
    """The default output: one row per entry."""
    if not listing.entries:
        return f"no cached credentials in {listing.directory}\n"
    rows = [("CLUSTER", "PROVIDER", "CREDENTIAL", "EXPIRES", "SERVER", "PROFILE")]
    for entry in listing.entries:
        cluster = entry["cluster"]
        expiry = parse_rfc3339(entry["expirationTimestamp"])
        rows.append(
            (
                f"{cluster['namespace']}/{cluster['name']}" if cluster["namespace"] else cluster["name"],
                entry["provider"],
                " + ".join(_KIND_WORDS[kind] for kind in entry["credential"]),
                f"{entry['expirationTimestamp']} ({_remaining(expiry.timestamp() - now)})",
                cluster["server"],
                entry["profileFile"],
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return "".join("   ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() + "\n" for row in rows)


def _clear(profile: str | None) -> int:
    try:
        directory, removed = diskcache.clear(os.environ, profile)
    except diskcache.UntrustedCacheDir as exc:
        raise CredentialError(str(exc)) from None
    except OSError as exc:
        where = exc.filename or "the cache directory"
        raise CredentialError(f"{where}: cannot clear: {exc.strerror or type(exc).__name__}") from None
    what = f"{removed} cached credential{'' if removed == 1 else 's'}"
    if profile is not None:
        what += f" of {profile}"
    print(f"removed {what} from {directory}")
    return 0


def cache(args: argparse.Namespace, settings: Settings) -> int:
    """``cpcreds cache list|clear [--profile FILE]``."""
    if args.action == "clear":
        if args.output is not None:
            from .parser import build_parser

            build_parser("cache").commands["cache"].parser.error("--output/-o is an option of cache list, not of cache clear")
        return _clear(args.profile)
    now = time.time()
    try:
        listing = list_entries(os.environ, args.profile, now)
    except diskcache.UntrustedCacheDir as exc:
        raise CredentialError(str(exc)) from None
    except OSError as exc:
        where = exc.filename or "the cache directory"
        raise CredentialError(f"{where}: cannot list: {exc.strerror or type(exc).__name__}") from None
    if args.output == "json":
        sys.stdout.write(json.dumps(listing.to_dict(), indent=2) + "\n")
        return 0
    sys.stdout.write(render_table(listing, now))
    sys.stdout.flush()
    for note in listing.notes:
        sys.stderr.write(f"cpcreds: note: {listing.directory}: {note}\n")
    for item in listing.skipped:
        sys.stderr.write(f"cpcreds: note: skipped {item['file']}: {item['reason']}\n")
    return 0
