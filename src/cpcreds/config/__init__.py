"""The provider config and everything read at the boundary: the one schema (pydantic models),
the document loader with its bounds, ClusterProfile files, and providers' option declarations.

- :mod:`.provider`: the provider config (:class:`ProviderConfig`, :func:`load_config`, the
  ``--clusterprofile-access-provider`` flag) and its rules across fields;
- :mod:`.models`: the pydantic models of the provider config (the one schema);
- :mod:`.wording`: pydantic's error structure in cpcreds' words, never quoting a value;
- :mod:`.rules`: the values and rules the models apply (policies, durations, env names);
- :mod:`.options`: a provider's options declared once (:class:`~cpcreds.sdk.Options`);
- :mod:`.documents`: the bounded YAML/JSON loader every input goes through (with
  :mod:`.bounds`, :mod:`.jsonreader`, :mod:`.yamlbuilder` and :mod:`.plain` behind it);
- :mod:`.profiles`: ClusterProfile files.

The names below are loaded on first use, so a module that needs only the document loader (an exec
plugin reading its answer) does not load the models.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .provider import *  # noqa: F403
    from .settings import Settings


def __getattr__(name: str) -> Any:
    # The names are provider's (its __all__ is this package's, with Settings), loaded on first use.
    if name == "Settings":  # pydantic-settings, in cpcreds.config.settings; re-exported as before
        value = importlib.import_module(".settings", __name__).Settings
    else:
        provider = importlib.import_module(".provider", __name__)
        if name == "__all__":
            value = [*provider.__all__, "Settings"]
        elif name in provider.__all__:
            value = getattr(provider, name)
        else:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value
