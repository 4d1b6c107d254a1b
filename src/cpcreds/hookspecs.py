"""The whole contract for third-party providers.

A provider package exposes a module (or object) with a :data:`hookimpl`-marked
``cpcreds_register_providers`` and names it in its ``pyproject.toml``::

    [project.entry-points.cpcreds]
    vault = "cpcreds_vault.plugin"

and in ``cpcreds_vault/plugin.py``::

    from cpcreds.hookspecs import hookimpl, Credential

    class VaultProvider:
        def __init__(self, options):          # the entry's `options:` mapping, from the config
            self.mount = options.get("mount", "kubernetes")   # raise ValueError on bad options

        def get_credential(self, plan):       # plan: cpcreds.AccessPlan (cluster, provider, timeout)
            cluster_name = (plan.cluster.config or {}).get("clusterName")
            return Credential(token=..., expiration_timestamp=...)

    @hookimpl
    def cpcreds_register_providers(register):
        register("vault", VaultProvider)

A config entry then uses it with ``type: vault`` and ``options: {...}``. The exec provider (kind
``exec``) and the ``file`` provider are registered exactly this way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import pluggy

from .access import AccessPlan
from .credential import Credential
from .errors import ProviderError

__all__ = [
    "PROJECT_NAME",
    "hookspec",
    "hookimpl",
    "Provider",
    "ProviderFactory",
    "Register",
    "AccessPlan",
    "Credential",
    "ProviderError",
    "cpcreds_register_providers",
]

#: The pluggy project name, which is also the entry-point group.
PROJECT_NAME = "cpcreds"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
#: Mark your ``cpcreds_register_providers`` implementation with this.
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@runtime_checkable
class Provider(Protocol):
    """Something that turns an :class:`AccessPlan` into a :class:`Credential`.

    ``get_credential`` is called from worker threads, possibly concurrently for different plans
    (never concurrently for the same plan: the engine single-flights), and must finish within
    ``plan.timeout`` seconds. Raise :class:`ProviderError` (or any exception; it is wrapped) to
    fail; never put a secret in the message. Caching is the engine's job, not the provider's.

    Optionally a provider may define ``async def aget_credential(self, plan)``: asyncio callers
    then run it in a task of its own on their event loop (bounded by ``plan.timeout``; a caller
    that gives up does not cancel it) instead of running ``get_credential`` in a thread; and
    ``close()``, called when the engine closes. ``get_credential`` of an in-process provider is
    bounded by ``plan.timeout`` too: past it, callers get :class:`~cpcreds.ProviderTimeout` and the
    call is abandoned, left to finish on its own; the provider is not called again for that plan
    until it has.
    """

    def get_credential(self, plan: AccessPlan) -> Credential: ...


#: Builds a provider from a config entry's ``options`` mapping; raise ``ValueError`` (or a
#: pydantic ``ValidationError``) with a clear message when the options are wrong.
ProviderFactory = Callable[[Mapping[str, Any]], Provider]
#: ``register(type_name, factory)``: what ``cpcreds_register_providers`` receives.
Register = Callable[[str, ProviderFactory], None]


@hookspec
def cpcreds_register_providers(register: Register) -> None:
    """Register provider types: call ``register("name", factory)`` once per type.

    Called once when the registry loads. A name may be registered by one plugin only; a later
    duplicate is reported as a load error and ignored.
    """
