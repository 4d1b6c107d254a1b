"""The ``spire`` provider's options, and the parsing shared with the other places values come from.

An audience and a socket may also come from outside the options (the ClusterProfile's exec
extension, ``SPIFFE_JWT_AUDIENCE``, ``SPIFFE_ENDPOINT_SOCKET``); :func:`parse_audience` and
:func:`workload_address` check those with the same rules, so every source fails the same way.
"""

from __future__ import annotations

from typing import Any

from cpcreds.sdk import Duration, Options, option, parse_duration, type_name

__all__ = ["SpireOptions", "parse_audience", "workload_address", "MAX_AUDIENCES", "MAX_AUDIENCE_CHARS"]

#: Most audiences one token is asked for (SPIFFE recommends one).
MAX_AUDIENCES = 16
MAX_AUDIENCE_CHARS = 1024
#: A unix socket path is at most 107 bytes on Linux (sun_path is 108, with the final NUL).
MAX_SOCKET_PATH_BYTES = 107
#: Longest wait asked for with ``timeout``.
MAX_TIMEOUT = 3600.0


def parse_audience(value: Any) -> tuple[str, ...]:
    """One audience (a string) or several (a list of strings), as a tuple without repeats.

    ``ValueError`` says what is wrong without quoting the value (it came from a profile).
    """
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise ValueError(f"must be a string or a list of strings, not {type_name(value)}")
    if not items:
        raise ValueError("must not be empty")
    if len(items) > MAX_AUDIENCES:
        raise ValueError(f"has more than {MAX_AUDIENCES} audiences")
    audiences: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise ValueError(f"must be a string or a list of strings, not a list holding {type_name(item)}")
        if not item:
            raise ValueError("must not hold an empty audience")
        if len(item) > MAX_AUDIENCE_CHARS:
            raise ValueError(f"holds an audience longer than {MAX_AUDIENCE_CHARS} characters")
        if not item.isprintable():
            raise ValueError("holds an audience with a control character")
        if item not in audiences:
            audiences.append(item)
    return tuple(audiences)


def workload_address(value: Any) -> str:
    """The Workload API socket as ``unix:///absolute/path``, from that form, ``unix:/path`` or a
    bare absolute path. ``ValueError`` otherwise: SPIRE agents serve the Workload API on a unix
    socket, and the ``spiffe`` client supports nothing else."""
    if not isinstance(value, str):
        raise ValueError(f"must be a string, not {type_name(value)}")
    path = value
    if value.startswith("unix:"):
        path = value[len("unix:") :]
        if path.startswith("//"):
            path = path[2:]
            if not path.startswith("/"):
                raise ValueError("must be unix:///path/to/socket (no host part) or an absolute path")
    if not path.startswith("/"):
        raise ValueError("must be unix:///path/to/socket or an absolute path (the Workload API is a unix socket)")
    if not path.isprintable() or "?" in path or "#" in path:
        raise ValueError("must be a plain socket path (no control characters, ? or #)")
    if len(path.encode("utf-8", "surrogateescape")) > MAX_SOCKET_PATH_BYTES:
        raise ValueError(f"is longer than a unix socket path may be ({MAX_SOCKET_PATH_BYTES} bytes)")
    return "unix://" + "/" + path.lstrip("/")


def _spiffe_id(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"must be a string, not {type_name(value)}")
    from spiffe.spiffe_id.spiffe_id import SpiffeId  # only when a spiffeId is given
    from spiffe.errors import PySpiffeError

    problem = None
    try:
        return str(SpiffeId(value))
    except (PySpiffeError, ValueError):
        # Not shown: the library quotes the value, and the message is ours to word.
        problem = "must be a SPIFFE ID such as spiffe://example.org/workload"
    raise ValueError(problem)


def _timeout(value: Any) -> float | None:
    # Go's `-timeout 0` (the SPIFFE exec plugin's spelling) means no limit of its own.
    if value in ("0", 0) and not isinstance(value, bool):
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"must be a duration such as 30s, 2m or 1h30m, not {type_name(value)}")
    try:
        seconds = parse_duration(value) if isinstance(value, str) else float(value)
    except ValueError:
        raise ValueError("must be a duration such as 30s, 2m or 1h30m") from None
    if not 0 < seconds <= MAX_TIMEOUT:
        raise ValueError("must be longer than zero and at most 1h")
    return seconds


class SpireOptions(Options):
    """A JWT-SVID from the SPIFFE Workload API (a SPIRE agent) for the cluster's audience; its
    ``exp`` is the credential's expiry. The audience comes from the ``audience`` option, else
    ``audience`` in the ClusterProfile's ``client.authentication.k8s.io/exec`` extension, else
    SPIFFE_JWT_AUDIENCE; the socket from the ``socket`` option, else SPIFFE_ENDPOINT_SOCKET.

    ``socketPath`` and ``spiffeID`` are accepted too: the spellings of ``spire-agent api fetch
    jwt``, so its flags carry over to ``cpcreds-spire``.
    """

    # This docstring and each option's description are what `cpcreds-spire --help` shows; unknown
    # keys are errors.

    audience: tuple[str, ...] | None = option(
        None, parse=parse_audience, description="An audience, or several (a repeated flag): all go into the token's aud."
    )
    socket: str | None = option(
        None,
        names=("socket", "socketPath"),
        parse=workload_address,
        description="The Workload API socket: unix:///path/to/agent.sock or /path/to/agent.sock.",
    )
    spiffe_id: str | None = option(
        None,
        names=("spiffeId", "spiffeID"),
        parse=_spiffe_id,
        description="Which SPIFFE ID's JWT-SVID to take when the workload has several.",
    )
    #: Seconds; None: only the entry's timeout bounds the call.
    timeout: Duration | None = option(
        None,
        parse=_timeout,
        description="The longest wait for the agent (30s), at most 1h and at most the entry's timeout; 0: no limit of its own.",
    )
