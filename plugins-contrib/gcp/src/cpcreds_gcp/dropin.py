"""auth-provider-gcp's command line, read by ``cpcreds-gcp-credential-provider`` so that it
replaces that binary in an unchanged kubelet ``CredentialProviderConfig``.

auth-provider-gcp (kubernetes/cloud-provider-gcp, ``cmd/auth-provider-gcp``) is a cobra command
whose one subcommand is ``get-credentials``; GKE's and kOps' kubelet configs run it as
``get-credentials --v=3``. Its flags, and what they do here:

- ``get-credentials``: the subcommand, accepted once, before or after the flags; it changes nothing.
- ``--authFlow``/``-a``: ``gcr`` (its default) is what this plugin does; ``dockercfg`` and
  ``dockercfg-url`` (a docker config read from the instance's metadata) are refused, as is any
  other value (auth-provider-gcp refuses those too).
- ``--v``/``-v``: klog's verbosity, a whole number. At :data:`DEBUG_VERBOSITY` or more (where
  auth-provider-gcp logs each step of its flows) the plugin's debug lines go to stderr.
- ``--identity-provider`` and ``--project-id`` are options of the provider itself
  (``identityProvider``, ``projectId``) and pass through.

Everything else passes through to the provider's option flags, which refuse an unknown one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["COMMAND", "DEBUG_VERBOSITY", "DropInError", "DropInArguments", "read_arguments"]

#: auth-provider-gcp's subcommand.
COMMAND = "get-credentials"
#: klog's level at which auth-provider-gcp logs the steps of its flows.
DEBUG_VERBOSITY = 4
_FLOW = "gcr"
_UNSUPPORTED_FLOWS = ("dockercfg", "dockercfg-url")
# Go's flag and pflag spellings: one dash or two, a value after "=" or as the next argument.
_FLAG = re.compile(r"--?([A-Za-z][A-Za-z0-9_]*(?:-[A-Za-z0-9_]+)*)(?:=(.*))?", re.DOTALL)
_WORD = re.compile(r"[A-Za-z0-9_.-]{1,32}")
_INT32 = 2**31


class DropInError(ValueError):
    """An auth-provider-gcp flag with a value this plugin cannot honour; the message says why."""


@dataclass(frozen=True)
class DropInArguments:
    """The arguments left for the provider's option flags, and klog's verbosity."""

    rest: list[str]
    verbosity: int = 0


def _shown(value: str) -> str:
    return repr(value) if _WORD.fullmatch(value) else "that value"


def _auth_flow(value: str) -> None:
    if value == _FLOW:
        return
    if value in _UNSUPPORTED_FLOWS:
        raise DropInError(
            f"authFlow {value} is not supported: this plugin answers for Google's registries (authFlow gcr), "
            "it does not read a docker config from the instance metadata"
        )
    raise DropInError(f"authFlow {_shown(value)} is not valid: it must be gcr (auth-provider-gcp's dockercfg and dockercfg-url are not supported)")


def _verbosity(value: str) -> int:
    try:
        level = int(value, 10)
    except ValueError:
        level = None
    if level is None or not -_INT32 <= level < _INT32:
        raise DropInError("flag v (klog's verbosity) must be a whole number such as 3")
    return level


def read_arguments(argv: Sequence[str]) -> DropInArguments:
    """Take auth-provider-gcp's subcommand and its own flags out of ``argv`` (see the module's
    text); :class:`DropInError` for a value that cannot be honoured."""
    rest: list[str] = []
    verbosity, command_seen, index = 0, False, 0
    while index < len(argv):
        argument = argv[index]
        index += 1
        match = _FLAG.fullmatch(argument)
        if match is None:
            if argument == COMMAND and not command_seen:
                command_seen = True
            else:
                rest.append(argument)  # the option flags refuse it, saying where it was
            continue
        name, value = match.group(1), match.group(2)
        if value is None and index < len(argv) and not argv[index].startswith("-"):
            value, index = argv[index], index + 1  # "--name value", as both flag packages read it
            if name not in ("v", "a", "authFlow"):
                rest.extend((argument, value))
                continue
        if name == "v":
            verbosity = _verbosity(value if value is not None else "")
        elif name in ("a", "authFlow"):
            _auth_flow(value if value is not None else "")
        else:
            rest.append(argument)
    return DropInArguments(rest, verbosity)
