"""Talking to the SPIFFE Workload API: one ``spiffe`` client per socket, shared by every thread.

The ``spiffe`` package's :class:`~spiffe.WorkloadApiClient` holds one gRPC channel (one
connection to the agent, HTTP/2-multiplexed); channels are thread-safe, so one client per socket
serves every concurrent fetch. Its errors are turned here into one-line reasons that name the
socket and the agent's gRPC status, and never quote a token: nothing of the library's exception
(whose message may carry the agent's text or a claim of the token) is chained or shown as is.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from cpcreds.sdk import redact_text

# grpc and the spiffe client (slow to import) are imported when the Workload API is called, not
# when the plugin is loaded: `cpcreds plugins`, and every engine whose config has no spire entry,
# load this module without them.
if TYPE_CHECKING:
    import grpc
    from spiffe import JwtSvid, WorkloadApiClient
    from spiffe.errors import PySpiffeError

__all__ = ["WorkloadError", "WorkloadClients"]

#: Longest piece of the agent's status message repeated in an error.
_MAX_DETAILS = 300


class WorkloadError(Exception):
    """A fetch failed; ``str()`` is the one-line reason, fit to show a user."""


class WorkloadClients:
    """The Workload API clients of one provider, one per socket address, built on first use.

    Thread-safe: the lock guards the map only; calls run outside it, concurrently, on the
    shared client.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clients: dict[str, WorkloadApiClient] = {}

    def fetch_jwt_svids(
        self, address: str, audience: Sequence[str], spiffe_id: str | None, timeout: float, *, said: float | None = None
    ) -> list[JwtSvid]:
        """The JWT-SVIDs the agent at ``address`` issues for ``audience`` (only ``spiffe_id``'s,
        when given), parsed and checked by the ``spiffe`` package (header, ``sub``, ``aud``
        holding every audience, ``exp`` not passed), within ``timeout`` seconds (the gRPC
        deadline; ``said`` is the timeout a message names, default ``timeout``). Raises
        :class:`WorkloadError`."""
        from spiffe import SpiffeId
        from spiffe.errors import PySpiffeError

        client = self.client(address)
        subject = SpiffeId(spiffe_id) if spiffe_id else None
        problem: WorkloadError
        try:
            return client.fetch_jwt_svids(set(audience), subject, timeout=timeout)
        except PySpiffeError as exc:
            problem = _describe(exc, address, timeout if said is None else said)
        raise problem  # outside the except block: nothing of the library's error is chained

    def close(self) -> None:
        """Close every client (their connections); later fetches build new ones."""
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()

    def client(self, address: str) -> WorkloadApiClient:
        """The client for ``address``, built on the first call and the same object after that,
        whichever thread asks. Raises :class:`WorkloadError` when the socket does not exist (the
        client is then not kept: the agent may start later)."""
        from spiffe import WorkloadApiClient
        from spiffe.errors import ArgumentError

        with self._lock:
            client = self._clients.get(address)
            if client is not None:
                return client
            problem = None
            try:
                client = WorkloadApiClient(address)
            except ArgumentError:
                # The library checks that the socket exists; the address was validated before.
                problem = f"cannot reach the SPIFFE Workload API: the socket {address} does not exist (is the SPIRE agent running, and its socket mounted here?)"
            if problem is not None:
                raise WorkloadError(problem)
            self._clients[address] = client
            return client


def _describe(exc: PySpiffeError, address: str, timeout: float) -> WorkloadError:
    import grpc
    from spiffe.workloadapi.errors import FetchJwtSvidError

    cause = exc.__cause__
    if isinstance(cause, grpc.Call):
        code, status = cause.code(), _status(cause)
        where = f"the SPIFFE Workload API at {address}"
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return WorkloadError(f"{where} did not answer within {timeout:g}s (DEADLINE_EXCEEDED)")
        if code == grpc.StatusCode.UNAVAILABLE:
            return WorkloadError(f"cannot reach {where} ({status})")
        if code == grpc.StatusCode.PERMISSION_DENIED:
            return WorkloadError(
                f"{where} issued no JWT-SVID to this workload ({status}); is it registered with the SPIRE server?"
            )
        return WorkloadError(f"{where} failed ({status})")
    if isinstance(cause, grpc.RpcError):
        return WorkloadError(f"the SPIFFE Workload API call to {address} failed ({type(cause).__name__})")
    if isinstance(exc, FetchJwtSvidError) and cause is None:  # the library's "response is empty"
        return WorkloadError(f"the SPIFFE Workload API at {address} returned no JWT-SVID")
    reason = _token_reason(cause if cause is not None else exc)
    return WorkloadError(f"the SPIFFE Workload API at {address} returned a JWT-SVID that is not usable: {reason}")


def _status(call: grpc.Call) -> str:
    """``CODE: details``, the details on one line, redacted and cut: the agent wrote them."""
    import grpc

    code = call.code()
    name = code.name if isinstance(code, grpc.StatusCode) else "UNKNOWN"
    details = call.details()
    text = redact_text(" ".join(details.split())) if isinstance(details, str) else ""
    text = "".join(ch for ch in text if ch.isprintable())
    if len(text) > _MAX_DETAILS:
        text = text[:_MAX_DETAILS] + "…"
    return f"{name}: {text}" if text else name


def _token_reason(error: BaseException) -> str:
    # Fixed words per failure: the library's messages may quote a header value or the sub claim.
    from spiffe.spiffe_id.spiffe_id import SpiffeIdError, TrustDomainError
    from spiffe.svid.errors import InvalidAlgorithmError, InvalidClaimError, InvalidTypeError, MissingClaimError, TokenExpiredError

    if isinstance(error, TokenExpiredError):
        return "it has expired"
    if isinstance(error, MissingClaimError):
        return "it lacks one of the claims aud, exp and sub"
    if isinstance(error, InvalidClaimError):
        # Its texts are the library's own constants (never a claim's value): safe to look into.
        if "exp claim" in str(error):
            return "its exp claim is not a number"
        return "its aud claim does not hold every audience asked for"
    if isinstance(error, InvalidAlgorithmError):
        return "its alg is not one that JWT-SVIDs may use"
    if isinstance(error, InvalidTypeError):
        return "its typ is neither JWT nor JOSE"
    if isinstance(error, (SpiffeIdError, TrustDomainError)):
        return "its sub is not a SPIFFE ID"
    return "it is not a well-formed JWT-SVID"
