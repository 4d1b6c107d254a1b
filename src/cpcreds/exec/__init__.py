"""KEP-541, the exec credential plugins: running one and reading its answer (``provider``, the
``exec`` provider type), supervising the process (``process``: its own session, a timeout that
kills the group, bounded output; ``signals``: SIGTERM and SIGHUP stop the plugins first), and
deciding what may run (``policy``: client-go's ``pluginPolicy``; ``pinning``: sha256-pinned
executables run from a sealed copy; ``envline``: what ``env`` in a ``#!`` line would run).
"""
