"""The ``cpcreds-spire`` console script (``[project.scripts]``): the spire provider run once as a
KEP-541 exec plugin. It lives here, not in :mod:`cpcreds_spire.plugin`: that module carries the
pluggy hook that registers the type in-process, which a one-shot run does not need.
"""

from __future__ import annotations

from cpcreds.sdk import provider_main

from .provider import SpireProvider

__all__ = ["main"]

#: ``cpcreds-spire``: the same provider as a KEP-541 exec plugin.
main = provider_main("spire", SpireProvider)
