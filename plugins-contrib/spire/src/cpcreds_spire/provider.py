"""cpcreds provider type ``spire``: a JWT-SVID from the SPIFFE Workload API (a SPIRE agent).

The token is a JWT-SVID for the cluster's audience, fetched from the agent's unix socket; its
``exp`` is the credential's expiry. The audience comes from, in this order: the ``audience``
option (in the console script, ``-audience`` flags, including those a ClusterProfile appends
under ``profileSourcedCLIArgsPolicy: Append``), ``audience`` in the ClusterProfile's
``client.authentication.k8s.io/exec`` extension, the ``SPIFFE_JWT_AUDIENCE`` environment variable.
The socket comes from the ``socket`` option, else ``SPIFFE_ENDPOINT_SOCKET``. The options are
:class:`~cpcreds_spire.options.SpireOptions` (``cpcreds-spire --help`` lists them).

The type is registered by :mod:`cpcreds_spire.plugin` (the pluggy hook) and run as an exec
plugin by :mod:`cpcreds_spire.console` (the ``cpcreds-spire`` console script, without pluggy).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TypeVar

from cpcreds.sdk import AccessPlan, Credential, ProviderError, deadline

from .options import SpireOptions, parse_audience, workload_address
from .svid import UnusableToken, check_token, expiry_from_exp
from .workload import WorkloadClients, WorkloadError

if TYPE_CHECKING:  # the spiffe client is imported when the Workload API is called (workload.py)
    from spiffe import JwtSvid

__all__ = ["SpireProvider", "SOCKET_ENV", "AUDIENCE_ENV"]

#: The Workload API socket, as every SPIFFE library reads it.
SOCKET_ENV = "SPIFFE_ENDPOINT_SOCKET"
#: The audience when neither the options nor the profile name one (the SPIFFE project's exec
#: plugin, k8s-spiffe-workload-jwt-exec-auth, reads the same variable).
AUDIENCE_ENV = "SPIFFE_JWT_AUDIENCE"

_T = TypeVar("_T")


class SpireProvider:
    """Built once per config entry. ``get_credential`` may run in many threads at once: they
    share one Workload API client per socket."""

    #: What ``cpcreds-spire --help`` lists and its flags may set.
    options_model = SpireOptions

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.options = SpireOptions.read(options)
        self._workload = WorkloadClients()

    def get_credential(self, plan: AccessPlan) -> Credential:
        """A JWT-SVID for the plan's audience, expiring at its ``exp``; :class:`ProviderError`
        (one line, naming the socket or the missing setting, never the token) otherwise."""
        address = self._address(plan)
        audience = self._audience(plan)
        # The fetch's deadline (cpcreds.sdk) ends before the caller's timeout, so that our error
        # naming the agent is the one the caller sees; the timeout option may shorten the wait.
        until = deadline(plan.timeout)
        own = self.options.timeout
        if own is not None and own < until.remaining():
            wait, said = own, own
        else:
            wait, said = max(0.001, until.remaining()), until.seconds
        wanted = self.options.spiffe_id
        problem = None
        try:
            svids = self._workload.fetch_jwt_svids(address, audience, wanted, wait, said=said)
        except WorkloadError as exc:
            problem = str(exc)
        if problem is not None:
            raise _error(plan, problem)
        chosen = [svid for svid in svids if wanted is None or str(svid.spiffe_id) == wanted]
        if not chosen:
            # The request named the SPIFFE ID; an agent that answers with another is broken.
            raise _error(plan, f"the SPIFFE Workload API at {address} returned no JWT-SVID for spiffeId {wanted}")
        return _credential(plan, address, chosen[0])

    def close(self) -> None:
        """Close the connections to the agent (the engine calls this when it closes)."""
        self._workload.close()

    def _address(self, plan: AccessPlan) -> str:
        if self.options.socket is not None:
            return self.options.socket
        configured = os.environ.get(SOCKET_ENV, "")
        if not configured:
            raise _error(plan, f"no SPIFFE Workload API socket: set the socket option (-socket) or {SOCKET_ENV}")
        return _read(plan, workload_address, configured, SOCKET_ENV)

    def _audience(self, plan: AccessPlan) -> tuple[str, ...]:
        if self.options.audience is not None:
            return self.options.audience
        config = plan.cluster.config
        if isinstance(config, Mapping) and config.get("audience") is not None:
            return _read(plan, parse_audience, config["audience"], "audience in the ClusterProfile's client.authentication.k8s.io/exec extension")
        from_env = os.environ.get(AUDIENCE_ENV, "")
        if from_env:
            return _read(plan, parse_audience, from_env, AUDIENCE_ENV)
        raise _error(
            plan,
            "no audience for the JWT-SVID: set the audience option (-audience), audience in the "
            f"ClusterProfile's client.authentication.k8s.io/exec extension, or {AUDIENCE_ENV}",
        )


def _credential(plan: AccessPlan, address: str, svid: JwtSvid) -> Credential:
    """The bearer token and expiry of ``svid``, after the checks the ``spiffe`` package leaves
    to us: the token's shape (it goes into an HTTP header) and a numeric ``exp`` to come."""
    try:
        token = check_token(svid.token)
        expiry = expiry_from_exp(svid.expiry)
    except UnusableToken as exc:
        reason = str(exc)
    else:
        if expiry > datetime.now(timezone.utc):
            return Credential(token=token, expiration_timestamp=expiry)
        reason = "it has expired"
    raise _error(plan, f"the SPIFFE Workload API at {address} returned a JWT-SVID that is not usable: {reason}")


def _error(plan: AccessPlan, message: str) -> ProviderError:
    return ProviderError(f"spire: {message}", provider=plan.provider)


def _read(plan: AccessPlan, read: Callable[[Any], _T], value: Any, where: str) -> _T:
    """``read(value)``, or the provider's error naming ``where`` and what is wrong with it
    (raised outside the except: the rejected value stays out of the exception chain)."""
    problem = ""
    try:
        return read(value)
    except ValueError as exc:
        problem = f"{where} {exc}"
    raise _error(plan, problem)
