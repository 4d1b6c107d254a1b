"""The ClusterProfile's own additions to an exec plugin's command line and environment: the
``additional-args`` and ``additional-envs`` extensions, untrusted input that a provider's policy
may let through (``profileSourcedCLIArgsPolicy``, ``profileSourcedEnvVarsPolicy``), and the
variables no profile may ever set. :func:`cpcreds.config.access.resolve` applies them.
"""

from __future__ import annotations

import re
from typing import Any, Literal
from collections.abc import Mapping

from ..errors import ProfileError
from ..kep import unpassable_text

__all__ = [
    "PROFILE_ENV_DENYLIST",
    "PROFILE_ENV_DENIED_PREFIXES",
    "MAX_PROFILE_VALUE_CHARS",
    "MAX_PROFILE_ITEMS",
    "ADDITIONAL_ARGS_KEY",
    "is_denied_env_name",
    "additional_args_form",
    "parse_additional_args",
    "additional_envs",
    "merged_env",
]

#: Environment variables a ClusterProfile may never set for a plugin, whatever the policy: they
#: change which code the dynamic loader, an interpreter or a shell runs (or where it reads its
#: start-up files from: ``HOME`` holds Python's ``usercustomize``, ``.npmrc``, ``.gemrc``, ...),
#: whom the plugin's TLS trusts, or where TLS keys are written. Compared in upper case.
PROFILE_ENV_DENYLIST = frozenset(
    {
        # the command's own lookup, and the exec request itself
        "PATH", "KUBERNETES_EXEC_INFO", "HOME",
        # shells
        "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "IFS", "CDPATH", "GLOBIGNORE",
        # interpreters
        "PERL5LIB", "PERL5OPT", "PERLLIB", "PERL5DB", "RUBYOPT", "RUBYLIB", "NODE_OPTIONS", "NODE_PATH",
        "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "GODEBUG",
        # the C library and the resolver
        "GCONV_PATH", "GLIBC_TUNABLES", "LOCPATH", "NLSPATH", "HOSTALIASES", "LOCALDOMAIN", "RES_OPTIONS",
        # TLS trust and secrets
        "OPENSSL_CONF", "OPENSSL_MODULES", "OPENSSL_ENGINES", "SSLKEYLOGFILE", "SSL_CERT_FILE", "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
    }
)  # fmt: skip
#: Name prefixes refused the same way: ``LD_PRELOAD`` and friends, ``DYLD_*``, every ``PYTHON*``
#: variable, exported bash functions, glibc's ``MALLOC_*`` tunables.
PROFILE_ENV_DENIED_PREFIXES = ("LD_", "DYLD_", "PYTHON", "BASH_FUNC_", "MALLOC_")

#: A portable environment variable name (POSIX): letters, digits and ``_``, not starting with a digit.
_PORTABLE_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

def is_denied_env_name(name: str) -> bool:
    """Whether a ClusterProfile may not set the variable ``name`` (see :data:`PROFILE_ENV_DENYLIST`)."""
    upper = name.upper()
    return upper in PROFILE_ENV_DENYLIST or upper.startswith(PROFILE_ENV_DENIED_PREFIXES)


#: Longest profile-sourced argument or variable value, and most of them (a plugin's argv and
#: environment share the kernel's ARG_MAX, typically 2 MiB).
MAX_PROFILE_VALUE_CHARS = 64 * 1024
MAX_PROFILE_ITEMS = 256


def _scalar_text(value: Any) -> str | None:
    # YAML/JSON scalars become strings as Go's yaml.v3 decodes them into a []string / map[string]string.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if value.bit_length() <= 64 else None
    if isinstance(value, float):
        return repr(value) if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, str):
        return value
    return None


def _check_text(text: str, what: str, ref: str) -> None:
    problem = unpassable_text(text)
    if problem is None and len(text) > MAX_PROFILE_VALUE_CHARS:
        problem = f"is longer than {MAX_PROFILE_VALUE_CHARS} characters"
    if problem is not None:
        raise ProfileError(f"{what} {problem}", profile=ref)


#: The key of additional-args' object form: ``{args: [...]}``.
ADDITIONAL_ARGS_KEY = "args"


def additional_args_form(raw: Any) -> Literal["list", "object"] | None:
    """Which form an additional-args extension value is written in: ``"list"`` (KEP-5339's
    string array, which the published ClusterProfile CRD cannot store: its ``extension`` is
    ``type: object``), ``"object"`` (``{args: [...]}``, the storable form), or None (absent or
    null, or neither form: :func:`parse_additional_args` says what is wrong with it)."""
    if isinstance(raw, (list, tuple)):
        return "list"
    if isinstance(raw, Mapping):
        return "object"
    return None


def parse_additional_args(raw: Any, where: str, ref: str) -> tuple[str, ...]:
    """The arguments of an additional-args extension value, in either form (see
    :func:`additional_args_form`); None and ``{}`` hold none. Anything else raises
    :class:`~cpcreds.errors.ProfileError` naming ``ref`` (the profile) and ``where`` (the
    extension), and what is wrong in it, never the value."""
    if raw is None:
        return ()
    if isinstance(raw, Mapping):
        for key in raw:
            if key != ADDITIONAL_ARGS_KEY:
                raise ProfileError(
                    f"{where}: key {_show_name(key)} is not allowed (the object form holds only {ADDITIONAL_ARGS_KEY}: a list of strings)",
                    profile=ref,
                )
        raw, where = raw.get(ADDITIONAL_ARGS_KEY), f"{where}.{ADDITIONAL_ARGS_KEY}"
        if raw is None:
            return ()
    elif not isinstance(raw, (list, tuple)):
        raise ProfileError(f"{where} must be a list of strings, or an object {{{ADDITIONAL_ARGS_KEY}: [...]}}", profile=ref)
    if not isinstance(raw, (list, tuple)):
        raise ProfileError(f"{where} must be a list of strings", profile=ref)
    if len(raw) > MAX_PROFILE_ITEMS:
        raise ProfileError(f"{where} has more than {MAX_PROFILE_ITEMS} items", profile=ref)
    args = []
    for index, item in enumerate(raw):
        text = _scalar_text(item)
        if text is None:
            raise ProfileError(f"{where}[{index}] must be a string", profile=ref)
        _check_text(text, f"{where}[{index}]", ref)
        args.append(text)
    return tuple(args)


def _show_name(name: Any) -> str:
    if isinstance(name, str) and len(name) <= 64 and name.isprintable():
        return repr(name)
    return "(a name that is not shown)"


def additional_envs(raw: Any, where: str, ref: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ProfileError(f"{where} must be a map of strings", profile=ref)
    if len(raw) > MAX_PROFILE_ITEMS:
        raise ProfileError(f"{where} has more than {MAX_PROFILE_ITEMS} entries", profile=ref)
    envs = {}
    for name, value in raw.items():
        text = _scalar_text(value)
        if not isinstance(name, str) or text is None:
            raise ProfileError(f"{where}: entry {_show_name(name)} must map a variable name to a string", profile=ref)
        if not name:
            raise ProfileError(f"{where}: a variable name is empty", profile=ref)
        if not _PORTABLE_ENV_NAME.fullmatch(name):
            reason = "is not a portable variable name (letters, digits and _, not starting with a digit)"
            raise ProfileError(f"{where}: variable {_show_name(name)} {reason}", profile=ref)
        if is_denied_env_name(name):
            raise ProfileError(
                f"{where}: variable {name} may not be set by a ClusterProfile "
                "(it changes what the plugin's loader, interpreter or shell runs, or whom it trusts)",
                profile=ref,
            )
        _check_text(text, f"{where}: the value of {name}", ref)
        envs[name] = text
    return envs


def merged_env(configured: tuple[tuple[str, str], ...], extra: dict[str, str], *, profile_wins: bool) -> tuple[tuple[str, str], ...]:
    merged: dict[str, str] = {}
    for name, value in configured:  # a name repeated in the config: the last one counts, as in Go
        merged[name] = value
    for name, value in extra.items():
        if profile_wins or name not in merged:
            merged[name] = value
    ordered = [name for name, _ in configured if name in merged]
    ordered = list(dict.fromkeys(ordered))
    ordered += sorted(name for name in extra if name not in dict(configured))
    return tuple((name, merged[name]) for name in ordered)
