"""Providers and how they are found: :mod:`.hookspecs`, the pluggy hook that is the whole contract
for third-party providers; :mod:`.registry`, which loads every provider type through pluggy's
PluginManager (the built-ins, then the ``cpcreds`` entry points); and :mod:`.file`, the built-in
``file`` provider. The exec provider (KEP-541) lives in :mod:`cpcreds.exec` and is registered the
same way."""
