"""Adapters from a :class:`~cpcreds.engine.binding.Binding` to HTTP clients other than the official
``kubernetes`` package (that one is :mod:`cpcreds.adapters.kubernetes`): :mod:`.kubernetes_asyncio` and
:mod:`.httpx_auth`. Each imports its client library only when it is used."""
