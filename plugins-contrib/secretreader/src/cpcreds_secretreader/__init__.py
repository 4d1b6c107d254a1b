"""cpcreds providers ``secretreader`` and ``kubeconfig-secretreader``: a cluster's credential
read from a Secret on the hub (KEP-5339's Secret Reader), in-process or as exec plugins.

Importing this package imports nothing heavy: the ``kubernetes`` client is loaded on the first
fetch. The providers are in :mod:`cpcreds_secretreader.provider`, their options in
:mod:`cpcreds_secretreader.options`, the hub client in :mod:`cpcreds_secretreader.hub`.
"""
