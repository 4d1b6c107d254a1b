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

# Nothing imported at the top, not even typing: kubectl's hit path (cpcreds.cli.diskcache) reads
# CPCREDS_CACHE through .switches, and importing a submodule runs this file first.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .provider import *  # noqa: F403
    from .settings import Settings


def __getattr__(name: str) -> "Any":
    # The names are provider's (its __all__ is this package's, with Settings), loaded on first use.
    from importlib import import_module

    if name == "Settings":  # pydantic-settings, in cpcreds.config.settings; re-exported as before
        value = import_module(".settings", __name__).Settings
    else:
        provider = import_module(".provider", __name__)
        if name == "__all__":
            value = [*provider.__all__, "Settings"]
        elif name in provider.__all__:
            value = getattr(provider, name)
        else:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value
