"""``cpcreds serve``: a fleet's credentials kept warm, watched and visible.

See docs/serve.md. serve is a :class:`~cpcreds.Fleet` (inventory sources, KEP-4322 deduplication,
shard ownership and the keeping of credentials live in :mod:`cpcreds.fleet`) plus: :mod:`.settings`
(flags, ``CPCREDS_*``, the config's ``serve:`` section), :mod:`.kubeconfigs`, :mod:`.probe`,
:mod:`.status` (the board: every cluster, indexed) with :mod:`.sortedindex`, :mod:`.paging` and
:mod:`.clusterview`, :mod:`.shardstatus`, :mod:`.metrics`, :mod:`.http` and :mod:`.page` (what is
shown), and :mod:`.service` (the wiring, reload and shutdown).
"""
