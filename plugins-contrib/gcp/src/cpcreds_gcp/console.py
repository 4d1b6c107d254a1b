"""The console scripts (``[project.scripts]``): ``cpcreds-gcp``, the gcp provider as a KEP-541 exec
plugin, a drop-in for ``gke-gcloud-auth-plugin --use_application_default_credentials`` (its flag
is accepted); and ``cpcreds-gcp-credential-provider``, the same provider as a kubelet image
credential provider plugin for Google's registries (KEP-2133, see :mod:`cpcreds_gcp.kubelet`).
Options are flags (``--scopes=a,b``); see :mod:`cpcreds_gcp.provider`.

They live here, not in :mod:`cpcreds_gcp.plugin`: that module carries the pluggy hook that
registers the type in-process, and a one-shot run does not need pluggy.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

from cpcreds.sdk import run_provider

from .provider import GcpProvider

__all__ = ["main", "kubelet_main", "ADC_FLAGS"]

#: gke-gcloud-auth-plugin's flag. This plugin always uses application default credentials, so
#: the flag is accepted (a kubeconfig's args carry over unchanged) and means nothing more.
ADC_FLAGS = frozenset(
    f"{dashes}use_application_default_credentials{value}" for dashes in ("-", "--") for value in ("", "=true", "=True", "=1")
)


def main() -> NoReturn:
    """Run the gcp provider as a KEP-541 exec plugin (``cpcreds-gcp``)."""
    run_provider(GcpProvider, name="gcp", argv=[arg for arg in sys.argv[1:] if arg not in ADC_FLAGS])


def kubelet_main() -> NoReturn:
    """Run the gcp provider as a kubelet image credential provider plugin
    (``cpcreds-gcp-credential-provider``): Google's registries, user ``oauth2accesstoken``. It
    takes auth-provider-gcp's command line too (``get-credentials --v=3``; see
    :mod:`cpcreds_gcp.dropin`), so that it replaces that binary in an unchanged kubelet config."""
    # The kubelet runner (and the KEP-2133 wire types it loads) only for this script.
    from cpcreds.sdk import redact_text, run_image_provider

    from .dropin import DEBUG_VERBOSITY, DropInError, read_arguments

    problem = None
    try:
        arguments = read_arguments(sys.argv[1:])
    except DropInError as exc:
        problem = str(exc)
    if problem is not None:
        # As the runner words a bad flag: the program's name, then one line.
        sys.stderr.write(f"{os.path.basename(sys.argv[0] or '') or 'cpcreds-gcp-credential-provider'}: {redact_text(problem)}\n")
        sys.exit(1)
    if arguments.verbosity >= DEBUG_VERBOSITY:
        _debug_lines_to_stderr()
    run_image_provider(GcpProvider, name="gcp", argv=arguments.rest)


def _debug_lines_to_stderr() -> None:
    # This script is the application: it may route the provider's own (already redacted) debug
    # events to stderr, where the kubelet keeps a plugin's output, as klog's -v does.
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    logger = logging.getLogger(__package__)
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
