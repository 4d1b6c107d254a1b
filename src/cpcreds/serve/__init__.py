"""``cpcreds serve``: a fleet's credentials kept warm, watched and visible.

See docs/serve.md. The pieces: :mod:`.settings` (flags, ``CPCREDS_*``, the config's ``serve:``
section), :mod:`.inventory` and :mod:`.hub` (where profiles come from), :mod:`.keeper` (fetch and
refresh through the engine), :mod:`.kubeconfigs`, :mod:`.status`, :mod:`.http` and :mod:`.page`
(what is shown), :mod:`.service` (the wiring, reload and shutdown).
"""
