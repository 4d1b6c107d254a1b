"""Settings read before any other: the words of ``CPCREDS_CACHE``, shared by the disk cache
(:mod:`cpcreds.cli.diskcache`, which answers kubectl's repeated calls before anything else of
cpcreds is imported) and the settings' declaration (:mod:`cpcreds.config.settings`), so both read
it alike. Imports nothing."""

TYPE_CHECKING = False  # typing is not imported on kubectl's hit path
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["cache_setting"]


def cache_setting(environ: "Mapping[str, str]") -> "bool | None":
    """``CPCREDS_CACHE``: True when unset or on (``on``, ``1``, ``true``, ``yes``), False when off
    (``off``, ``0``, ``false``, ``no``), None for anything else (an error for the caller to name)."""
    value = environ.get("CPCREDS_CACHE", "").strip().lower()
    if value in ("", "on", "1", "true", "yes"):
        return True
    if value in ("off", "0", "false", "no"):
        return False
    return None
