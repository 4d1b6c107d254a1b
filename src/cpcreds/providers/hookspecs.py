"""The whole contract for third-party providers: one pluggy hook.

A provider package exposes a module (or object) with a :data:`hookimpl`-marked
``cpcreds_register_providers`` and names it in its ``pyproject.toml``::

    [project.entry-points.cpcreds]
    vault = "cpcreds_vault.plugin"

and in ``cpcreds_vault/plugin.py``::

    from cpcreds.sdk import Credential, hookimpl

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
``exec``) and the ``file`` provider are plugins registered exactly this way, with
``@hookimpl(tryfirst=True)``; their names are reserved: no other plugin can take them.

cpcreds calls the hook through pluggy (``pm.hook.cpcreds_register_providers(register=...)``),
once over every loaded plugin, so pluggy's options work as in pytest:

- ``@hookimpl(tryfirst=True)`` / ``@hookimpl(trylast=True)``: be called before / after the
  plugins without it. A type name belongs to the first plugin that registers it, so
  ``tryfirst`` wins a name that two plugins register; plugins with the same marks are called
  in the order they were found, the first found first.
- ``@hookimpl(wrapper=True)``: a generator that runs around all the others: code before its
  ``yield`` runs first, code after it once every other plugin has registered.
  ``register.types`` is a read-only mapping (type name to factory) of what this call has
  registered so far, so a wrapper (or a ``trylast`` hook) can see what the others did, e.g.
  register a fallback only for a name nobody took.

``register`` may be called only while the hook runs, from its own code (each type is credited
to the plugin whose hook implementation calls it). A plugin whose hook raises, or that
registers a name already taken, fails to load as a whole: none of its types are kept, the error
is recorded (``cpcreds plugins`` shows it) and the other plugins register without it. The hook
may be called more than once in a process (each registry calls it, and calls it again without
a plugin that failed): register types and do nothing else there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import pluggy

# The base only (tests/test_imports.py): the plan, the credential, the errors.
from ..credential import Credential
from ..errors import ProviderError
from ..plan import AccessPlan

__all__ = [
    "PROJECT_NAME",
    "hookspec",
    "hookimpl",
    "Provider",
    "ImageCredentialProvider",
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
#: ``register(type_name, factory)``: what ``cpcreds_register_providers`` receives (it also has
#: ``register.types``, the read-only mapping of the types registered so far in the call).
Register = Callable[[str, ProviderFactory], None]


@hookspec
def cpcreds_register_providers(register: Register) -> None:
    """Register provider types: call ``register("name", factory)`` once per type.

    Called when a registry loads its plugins (see the module's docstring for ordering, wrappers
    and ``register.types``). A name may be registered by one plugin only: a later duplicate is
    a load error of the plugin that registered it, which is then left out as a whole.
    """


# -- image credentials (KEP-2133) ------------------------------------------------------------------

if TYPE_CHECKING:  # at run time only when used: the protocol module is not needed to load plugins
    from ..images.protocol import CredentialProviderRequest, CredentialProviderResponse


@runtime_checkable
class ImageCredentialProvider(Protocol):
    """A provider that also answers for container registries, as a kubelet image credential
    provider plugin does (KEP-2133). The method is optional: a provider without it serves
    clusters only.

    ``get_image_credential(request, *, timeout)`` receives a
    :class:`~cpcreds.images.protocol.CredentialProviderRequest` (``image`` as the kubelet has it,
    e.g. ``us-docker.pkg.dev/team/app:1.2``; in v1 perhaps ``service_account_token`` and
    ``service_account_annotations`` of the pod's service account) and must answer within
    ``timeout`` seconds with a :class:`~cpcreds.images.protocol.CredentialProviderResponse`:

    - ``auth``: registry match keys (``gcr.io``, ``*.pkg.dev``, ``registry.io:8080/path``, with
      the globs of ``matchImages``) mapped to ``AuthConfig(username, password)``. Every key must
      be one the credential is good for; empty means "no credentials for this image", which is
      not an error (the image may be public).
    - ``cache_key_type``: ``"Image"``, ``"Registry"`` or ``"Global"``: how widely the answer
      may be reused (the image without tag or digest, its host and port, or every image).
    - ``cache_duration``: seconds the answer may be reused, ``None`` for the consumer's
      ``defaultCacheDuration``, 0 for not at all. A credential that expires must say so here.

    It may be called from several threads at once, and in a short-lived process once
    (:func:`cpcreds.images.kubelet_plugin.kubelet_plugin_main` runs it as a kubelet plugin). Raise
    :class:`ProviderError` to fail; never put a password or token in the message. The answer's
    ``apiVersion`` is not the provider's business: it is always the request's.
    """

    def get_image_credential(self, request: CredentialProviderRequest, *, timeout: float) -> CredentialProviderResponse: ...
