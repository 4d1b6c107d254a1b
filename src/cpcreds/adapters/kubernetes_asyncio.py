"""An adapter to ``kubernetes_asyncio`` (the most used asyncio Kubernetes client), on the same
rules as :mod:`cpcreds.adapters.kubernetes`'s adapters: endpoint and TLS from the profile's plan, the bearer
token refreshed through ``refresh_api_key_hook``, a client certificate through a private file,
the REST client rebuilt when the certificate or the endpoint changes, and 401 -> invalidate ->
refresh -> retry once (:func:`cpcreds.adapters.kubernetes.request_flow`, the policy every adapter follows).

``kubernetes_asyncio`` raises :class:`~kubernetes_asyncio.client.exceptions.ApiException` for a
401 where ``kubernetes.aio`` returns the response: the flow here turns the exception into the
"401 answered" step and raises it again when the retry is not made or is rejected too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..engine.binding import Binder
from .kubernetes import AsyncCredentialedClient, aconfigure

__all__ = ["aapi_client", "abuild_config"]


async def abuild_config(engine: Binder, profile: Mapping[str, Any] | Any) -> Any:
    """A ``kubernetes_asyncio.client.Configuration`` for the profile that stays fresh."""
    from kubernetes_asyncio import client

    return await aconfigure(client.Configuration(), engine, profile)


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

    class CredentialedApiClient(AsyncCredentialedClient, client.ApiClient):  # type: ignore[misc]
        rest_client_class = rest.RESTClientObject

        async def request(self, method: str, url: str, *args: Any, headers: Any = None, **kwargs: Any) -> Any:
            call = super().request

            async def send(headers: Any) -> Any:
                try:
                    return await call(method, url, *args, headers=headers, **kwargs)
                except ApiException as exc:
                    if exc.status != 401:
                        raise
                    return _Rejected(exc)

            async def drain(response: Any) -> None:
                return None  # kubernetes_asyncio read the 401's body before raising

            result = await self._drive(headers, send, drain)
            if isinstance(result, _Rejected):
                raise result.error from None
            return result

    conf = await abuild_config(engine, profile)
    return CredentialedApiClient(conf, conf.cpcreds_binding)
