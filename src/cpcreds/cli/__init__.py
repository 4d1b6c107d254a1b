"""The ``cpcreds`` command line, one module per concern.

- :mod:`~cpcreds.cli.main`: the entry (:func:`cpcreds.cli.main.main`): settings, logging, dispatch;
- :mod:`~cpcreds.cli.parser`: the parser, built from the settings' declarations and each command's options;
- :mod:`~cpcreds.cli.common`: what several commands share (provider config, profiles, output);
- :mod:`~cpcreds.cli.credential`: ``get-credential`` and ``cache``; :mod:`~cpcreds.cli.diskcache`, its cache;
- :mod:`~cpcreds.cli.kubeconfig`, :mod:`~cpcreds.cli.providers` (``validate``, ``resolve``,
  ``plugins``, ``pin``), :mod:`~cpcreds.cli.serve`, :mod:`~cpcreds.cli.completion`.

This file imports nothing: kubectl's hit path (:mod:`cpcreds._entry`) loads
:mod:`cpcreds.cli.diskcache` through it, and must load nothing else.
"""
