"""Run one kubelet credential provider plugin once, as the kubelet runs it.

``<bin dir>/<name> args...`` with the process environment plus the provider's ``env`` (the
provider's value wins, as Go's ``exec.Cmd`` keeps the last of duplicate names), the
CredentialProviderRequest on stdin, the CredentialProviderResponse read from stdout.

The running is the one process supervisor of the package (:mod:`cpcreds.exec.process`), worded as
KEP-541's runner words it (:func:`cpcreds.exec.provider.run_command`): a deadline after which
the plugin's whole process group is killed, stdout bounded to
:data:`~.protocol.MAX_RESPONSE_BYTES`, and only a redacted tail of stderr in error messages. The
answer must be in the request's apiVersion with a valid cacheKeyType, else it is not used
(:class:`~cpcreds.PluginOutputError`, naming the provider and the field, never a password).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

from ..exec.process import Groups
from ..errors import CredentialError, PluginOutputError, ProviderError
from ..exec.provider import Job, run_command
from .config import CredentialProvider
from .protocol import MAX_RESPONSE_BYTES, CredentialProviderResponse, ProtocolError, encode_request, parse_response
from .serviceaccount import scrub

__all__ = ["PluginRunner", "DEFAULT_TIMEOUT"]

#: The kubelet's catch-all bound on one plugin run.
DEFAULT_TIMEOUT = 60.0


def _environment(provider: CredentialProvider) -> dict[bytes, bytes]:
    env = dict(os.environb)
    for name, value in provider.env:
        env[os.fsencode(name)] = os.fsencode(value)
    return env


class PluginRunner:
    """Runs plugins for one :class:`~cpcreds.ImageCredentials`. Thread-safe; :meth:`close`
    kills the plugins running and refuses new runs."""

    def __init__(self, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        if not timeout > 0:
            raise ValueError("timeout must be a positive number of seconds")
        self.timeout = timeout
        self._groups = Groups()  # process groups of the plugins running now, for close()
        self._closed = False

    def run(
        self,
        provider: CredentialProvider,
        image: str,
        *,
        service_account_token: str | None = None,
        service_account_annotations: Mapping[str, str] | None = None,
    ) -> CredentialProviderResponse:
        """Ask ``provider`` for ``image`` (a repository, as the kubelet sends it) and return its
        validated answer. Raises a :class:`~cpcreds.PluginError`: not found, failed, timed out
        (:class:`~cpcreds.PluginTimeout`), or answered something unusable
        (:class:`~cpcreds.PluginOutputError`)."""
        if self._closed:
            raise ProviderError("the plugin runner is closed", provider=provider.name)
        request = encode_request(
            image,
            provider.api_version,
            service_account_token=service_account_token,
            service_account_annotations=service_account_annotations,
        )
        try:
            result = run_command(
                Job(provider.name, provider.executable, self.timeout),
                provider.executable,
                [provider.executable, *provider.args],
                _environment(provider),
                deadline=time.monotonic() + self.timeout,
                groups=self._groups,
                max_stdout_bytes=MAX_RESPONSE_BYTES,
                stdin=request,
            )
        except CredentialError as error:
            # A plugin may echo its request on stderr, whose tail the message quotes: the token
            # it was sent is taken out, whatever its shape (redaction knows JWTs, not every token).
            message = str(error)
            scrubbed = scrub(message, service_account_token)
            if scrubbed != message:
                error.args = (scrubbed,)
            raise
        problem = None
        try:
            return parse_response(result.stdout, provider.api_version)
        except ProtocolError as exc:
            problem = f"{provider.executable}: the response is not used: {exc}"
        # Raised outside the except block: nothing of the answer hangs off the error.
        raise PluginOutputError(problem, provider=provider.name)

    def close(self) -> None:
        self._closed = True
        self._groups.kill_all()
