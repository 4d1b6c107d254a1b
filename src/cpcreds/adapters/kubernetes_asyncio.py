"""An adapter to ``kubernetes_asyncio`` (the most used asyncio Kubernetes client), on the same
rules as :mod:`cpcreds.kube`'s adapters: endpoint and TLS from the profile's plan, the bearer
token refreshed through ``refresh_api_key_hook``, a client certificate through a private file,
the REST client rebuilt when the certificate or the endpoint changes, and 401 -> invalidate ->
refresh -> retry once (:func:`cpcreds.kube.request_flow`, the policy every adapter follows).

``kubernetes_asyncio`` raises :class:`~kubernetes_asyncio.client.exceptions.ApiException` for a
401 where ``kubernetes.aio`` returns the response: the flow here turns the exception into the
"401 answered" step and raises it again when the retry is not made or is rejected too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..binding import Binder
from ..failover import Answer
from ..kube import DRAIN, SEND, CredentialBinding, async_refresh_hook, configure_credentials, request_flow

__all__ = ["aapi_client", "abuild_config"]


async def abuild_config(engine: Binder, profile: Mapping[str, Any] | Any) -> Any:
    """A ``kubernetes_asyncio.client.Configuration`` for the profile that stays fresh."""
    from kubernetes_asyncio import client

    conf = client.Configuration()
    binding = CredentialBinding(engine.bind(profile))
    configure_credentials(conf, binding)
    await binding.aensure(conf)  # fail now, and seed api_key so the hook runs on every request
    conf.refresh_api_key_hook = async_refresh_hook(binding)
    return conf


class _Rejected:
    """A 401 that ``kubernetes_asyncio`` raised, as the request flow's response."""

    status = 401

    def __init__(self, error: Exception) -> None:
        self.error = error


async def aapi_client(engine: Binder, profile: Mapping[str, Any] | Any) -> Any:
    """A ``kubernetes_asyncio.client.ApiClient`` for the profile: fresh credentials, 401 ->
    refresh and retry once, SSL context renewed when the client certificate rotates. Close it
    with ``await client.close()`` (or ``async with``)."""
    from kubernetes_asyncio import client
    from kubernetes_asyncio.client import rest
    from kubernetes_asyncio.client.exceptions import ApiException

    class CredentialedApiClient(client.ApiClient):  # type: ignore[misc]
        def __init__(self, configuration: Any, binding: CredentialBinding) -> None:
            super().__init__(configuration)
            self._binding = binding
            self._serial = binding.connection_serial

        async def _credential(self, rejected: Answer | None) -> Answer:
            binding = self._binding
            if rejected is not None:
                binding.binding.invalidate(rejected.credential)
            answer = await binding.aensure(self.configuration)
            # The SSL context (CA, client certificate) is built with the REST client: a new
            # certificate or endpoint needs a new one; open connections of the old one close.
            if binding.connection_serial != self._serial:
                self._serial = binding.connection_serial  # before the await: one task renews
                old, self.rest_client = self.rest_client, rest.RESTClientObject(self.configuration)
                await old.close()
            return answer

        async def request(self, method: str, url: str, *args: Any, headers: Any = None, **kwargs: Any) -> Any:
            flow = request_flow(headers)
            step, value = next(flow)
            while True:
                if step == SEND:
                    try:
                        result = await super().request(method, url, *args, headers=value, **kwargs)
                    except ApiException as exc:
                        if exc.status != 401:
                            raise
                        result = _Rejected(exc)
                elif step == DRAIN:
                    result = None  # kubernetes_asyncio read the 401's body before raising
                else:  # ENSURE (value None) or REFRESH (value: the rejected answer)
                    result = await self._credential(value)
                try:
                    step, value = flow.send(result)
                except StopIteration as done:
                    if isinstance(done.value, _Rejected):
                        raise done.value.error from None
                    return done.value

        async def close(self) -> None:
            try:
                await super().close()
            finally:
                self._binding.close()

    conf = await abuild_config(engine, profile)
    return CredentialedApiClient(conf, conf.cpcreds_binding)
