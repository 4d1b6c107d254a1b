"""The engine: the only stateful part of cpcreds (see docs/architecture.md).

:class:`CredentialEngine` (``core``) is the façade. Behind it, per plan: the credential store
(``entries``), the in-flight fetch and its waiters (``flight``), the walk across a profile's
providers (``failover``), running one fetch (``fetching``) on the engine's threads
(``workers``), profile identity to plan (``plancache``), and :class:`Binding` (``binding``),
what a caller holds for one profile.
"""

from .binding import Binding
from .core import Answer, BackoffPolicy, CredentialEngine, RefreshPolicy, call_provider

__all__ = ["CredentialEngine", "Answer", "Binding", "RefreshPolicy", "BackoffPolicy", "call_provider"]
