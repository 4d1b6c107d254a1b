"""cpcreds-spire: the ``spire`` provider type (JWT-SVIDs from the SPIFFE Workload API).

The provider is :class:`cpcreds_spire.plugin.SpireProvider`, registered through the ``cpcreds``
entry point; ``cpcreds-spire`` runs it as a KEP-541 exec plugin. Nothing is imported here, so
``import cpcreds_spire`` stays cheap.
"""
