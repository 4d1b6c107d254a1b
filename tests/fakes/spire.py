"""A fake SPIRE agent: the SPIFFE Workload API over gRPC on a unix socket, issuing real JWT-SVIDs.

Built from the ``spiffe`` package's own generated stubs with grpcio, so a Workload API client
(``spiffe.WorkloadApiClient``, go-spiffe, ``spire-agent api fetch jwt``) talks to it as to a real
agent. Like SPIRE, it refuses calls without the ``workload.spiffe.io: true`` metadata header
(INVALID_ARGUMENT), and answers PERMISSION_DENIED "no identity issued" to a workload it has no
identity for. JWT-SVIDs are ES256-signed with a key whose public half the agent serves as the
trust domain's JWT bundle (``FetchJWTBundles``), and checks in ``ValidateJWTSVID``.

Knobs, set between calls (attribute writes are atomic; no lock needed for tests):

- ``identities``: the SPIFFE IDs this workload is entitled to, in answer order; ``[]`` denies.
- ``ttl``: lifetime of issued tokens, in seconds.
- ``failure``: ``(grpc.StatusCode, details)`` to answer every FetchJWTSVID with, or ``None``.
- ``hang``: FetchJWTSVID never answers; the call ends at the client's deadline (or cancel).
- ``answer``: a list of strings returned verbatim as the SVIDs (hostile-agent tests), or ``None``.

What it saw: ``requests`` (one :class:`JwtRequest` per FetchJWTSVID that carried the header),
``refused`` (calls without the header) and ``connections`` (connections accepted on the socket:
the agent listens through a small counting relay, so a test can check that fetches share one
connection rather than open one each; grpcio may share one connection between channels to the
same socket, so this counts connections, not clients).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import grpc
import jwt
from cryptography.hazmat.primitives.asymmetric import ec
from google.protobuf import struct_pb2
from jwt.algorithms import ECAlgorithm
from spiffe._proto import workload_pb2, workload_pb2_grpc

#: The metadata header every Workload API call must carry (SPIFFE Workload Endpoint spec).
SECURITY_HEADER = ("workload.spiffe.io", "true")
DEFAULT_TRUST_DOMAIN = "example.org"
DEFAULT_IDENTITY = "spiffe://example.org/fleet/controller"


@dataclass(frozen=True)
class JwtRequest:
    """One FetchJWTSVID call as the agent received it."""

    audience: tuple[str, ...]
    spiffe_id: str


class _WorkloadApi(workload_pb2_grpc.SpiffeWorkloadAPIServicer):
    def __init__(self, agent: SpireAgent) -> None:
        self.agent = agent

    def _authorised(self, context: grpc.ServicerContext) -> bool:
        if SECURITY_HEADER in tuple(context.invocation_metadata()):
            return True
        self.agent.refused += 1
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, "security header missing from request")
        return False  # not reached: abort raises

    def FetchJWTSVID(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._authorised(context)
        agent = self.agent
        agent.requests.append(JwtRequest(tuple(request.audience), request.spiffe_id))
        if agent.hang:
            agent._wait_until_done(context)
            return workload_pb2.JWTSVIDResponse()
        if agent.failure is not None:
            context.abort(*agent.failure)
        if not request.audience:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "audience must be specified")
        identities = [i for i in agent.identities if not request.spiffe_id or i == request.spiffe_id]
        if not identities:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, "no identity issued")
        if agent.answer is not None:
            svids = [workload_pb2.JWTSVID(spiffe_id=identities[0], svid=raw) for raw in agent.answer]
        else:
            svids = [workload_pb2.JWTSVID(spiffe_id=i, svid=agent.issue(i, request.audience)) for i in identities]
        return workload_pb2.JWTSVIDResponse(svids=svids)

    def FetchJWTBundles(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        self._authorised(context)
        yield workload_pb2.JWTBundlesResponse(bundles={self.agent.trust_domain: self.agent.jwks()})
        # A real agent keeps the stream open to push rotations; so does this one, until the end.
        self.agent._wait_until_done(context)

    def ValidateJWTSVID(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._authorised(context)
        if not request.audience or not request.svid:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "audience and svid must be specified")
        claims = self.agent.verify(request.svid, request.audience)
        if claims is None:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "token is not a valid JWT-SVID for this audience")
        struct = struct_pb2.Struct()
        struct.update(claims)
        return workload_pb2.ValidateJWTSVIDResponse(spiffe_id=claims["sub"], claims=struct)


class SpireAgent:
    """The agent; ``start()`` (or ``with``) binds ``socket_path`` in a fresh temporary folder.

    The folder is made under the system temp dir, not pytest's ``tmp_path``: a unix socket path
    must stay under about 100 bytes.
    """

    def __init__(
        self,
        *,
        trust_domain: str = DEFAULT_TRUST_DOMAIN,
        identities: Sequence[str] = (DEFAULT_IDENTITY,),
        ttl: float = 300.0,
    ) -> None:
        self.trust_domain = trust_domain
        self.identities = list(identities)
        self.ttl = ttl
        self.failure: tuple[grpc.StatusCode, str] | None = None
        self.hang = False
        self.answer: list[str] | None = None
        self.requests: list[JwtRequest] = []
        self.refused = 0
        self.connections = 0
        self._key = ec.generate_private_key(ec.SECP256R1())
        self._kid = uuid.uuid4().hex
        self._directory: Path | None = None  # made by start(), removed by stop()
        #: Set by start(): ``<fresh temp folder>/agent.sock``.
        self.socket_path = Path("/nonexistent/agent.sock")
        self._server: grpc.Server | None = None
        self._listener: socket.socket | None = None
        self._relayed: set[socket.socket] = set()
        self._waiting: set[threading.Event] = set()
        self._lock = threading.Lock()
        self._stopped = False

    @property
    def address(self) -> str:
        """The socket as SPIFFE_ENDPOINT_SOCKET spells it: ``unix:///…/agent.sock``."""
        return f"unix://{self.socket_path}"

    # -- tokens ----------------------------------------------------------------------------------

    def issue(self, spiffe_id: str, audience: Sequence[str], ttl: float | None = None, **claims: Any) -> str:
        """A JWT-SVID for ``spiffe_id`` signed by this agent's key (``claims`` override or add)."""
        now = int(time.time())
        payload: dict[str, Any] = {
            "sub": spiffe_id,
            "aud": list(audience),
            "exp": now + int(self.ttl if ttl is None else ttl),
            "iat": now,
        }
        payload.update(claims)
        return jwt.encode(payload, self._key, algorithm="ES256", headers={"kid": self._kid, "typ": "JWT"})

    def jwks(self) -> bytes:
        """The trust domain's JWT bundle: a JWK set holding this agent's public key."""
        key = ECAlgorithm.to_jwk(self._key.public_key(), as_dict=True)
        key.update(kid=self._kid, use="jwt-svid")
        return json.dumps({"keys": [key]}).encode()

    def verify(self, token: str, audience: str) -> dict[str, Any] | None:
        """The claims of ``token`` if this agent signed it for ``audience`` and it is unexpired."""
        try:
            return jwt.decode(token, self._key.public_key(), algorithms=["ES256"], audience=audience)
        except jwt.PyJWTError:
            return None

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> Self:
        self._directory = Path(tempfile.mkdtemp(prefix="spire-"))
        self.socket_path = self._directory / "agent.sock"
        inner = self._directory / "grpc.sock"
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
        workload_pb2_grpc.add_SpiffeWorkloadAPIServicer_to_server(_WorkloadApi(self), server)
        server.add_insecure_port(f"unix:{inner}")
        server.start()
        self._server = server
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(self.socket_path))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener, str(inner)), daemon=True, name="spire-relay").start()
        return self

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            waiting, self._waiting = self._waiting, set()
            relayed, self._relayed = self._relayed, set()
        for event in waiting:
            event.set()
        if self._listener is not None:
            self._listener.close()
        for conn in relayed:
            _close(conn)
        if self._server is not None:
            self._server.stop(grace=None).wait()
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def _wait_until_done(self, context: grpc.ServicerContext) -> None:
        # Ends when the client's deadline passes or it cancels (grpc runs the callback), or at stop().
        done = threading.Event()
        with self._lock:
            if self._stopped:
                return
            self._waiting.add(done)
        context.add_callback(done.set)
        done.wait()
        with self._lock:
            self._waiting.discard(done)

    # -- the counting relay ----------------------------------------------------------------------

    def _accept(self, listener: socket.socket, inner: str) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:  # closed by stop()
                return
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            with self._lock:
                if self._stopped:
                    _close(client)
                    return
                self.connections += 1
                self._relayed.update((client, upstream))
            try:
                upstream.connect(inner)
            except OSError:
                _close(client)
                _close(upstream)
                continue
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(src, dst), daemon=True, name="spire-relay-pump").start()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while chunk := src.recv(65536):
            dst.sendall(chunk)
    except OSError:
        pass
    finally:
        # One side ended: end both, as a closed agent connection would.
        _close(src)
        _close(dst)


def _close(conn: socket.socket) -> None:
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    conn.close()


def stale_socket() -> tuple[Path, Any]:
    """A socket file nobody listens on (an agent that died without cleaning up): connecting to it
    is refused. Returns its path and a function that removes it."""
    directory = Path(tempfile.mkdtemp(prefix="spire-stale-"))
    path = directory / "agent.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))  # bound, never listening: connect() gets ECONNREFUSED
    sock.close()

    def remove() -> None:
        shutil.rmtree(directory, ignore_errors=True)

    assert os.path.exists(path)
    return path, remove
