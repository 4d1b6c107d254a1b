"""SDK for writing KEP-541 exec plugins in Python, and for running an in-process provider as one.

A plugin reads its request from ``KUBERNETES_EXEC_INFO``, prints one ExecCredential on stdout in
the apiVersion it was asked for, and exits 0; on failure it prints one line on stderr and exits
non-zero (client-go and cpcreds show that line to the user). :func:`run_plugin` does all of it::

    from cpcreds.exec.plugin import run_plugin, PluginRequest
    from cpcreds import Credential

    def get(request: PluginRequest) -> Credential:
        name = (request.cluster.config or {}).get("clusterName") if request.cluster else None
        return Credential(token=mint_token_for(name), expiration_timestamp=...)

    if __name__ == "__main__":
        run_plugin(get)

An in-process provider (what a ``cpcreds_register_providers`` hook registers) becomes an exec
plugin with no code of its own: :func:`provider_main` makes the ``main`` of a
``[project.scripts]`` entry, which builds the provider from ``--option=value`` flags, builds its
:class:`~cpcreds.AccessPlan` from the request, and answers::

    [project.scripts]
    cpcreds-vault = "cpcreds_vault.plugin:main"

    main = provider_main("vault", VaultProvider)   # in cpcreds_vault/plugin.py

A provider class whose ``options_model`` attribute declares its options (a
:class:`cpcreds.sdk.Options` subclass, read without pydantic; or a pydantic model) gets a
``--help`` that lists every option with its type, default and description, and an unknown flag
is refused before anything runs, with a "did you mean" and the list of options.

The request and answer are read and written by :mod:`.pluginrequest`, the flags and ``--help`` by
:mod:`.pluginflags`; every name listed in ``__all__`` is imported from here.
"""

from __future__ import annotations
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, NoReturn

from ..config.options import OptionError
from ..credential import Credential
from ..errors import ProviderError
from ..kep import API_VERSION_V1, ExecCluster
from ..plan import AccessPlan
from .pluginflags import (
    OptionFlagError,
    command_line,
    describe_options,
    option_flags,
    options_model_of,
    parse_option_flags,
)
from .pluginrequest import PluginRequest, PluginRequestError, read_request, write_response

# pydantic is imported only to word what the plain reading refuses, and for a provider whose
# options_model is still a pydantic model (which its own module has imported): a plugin run whose
# request and options are well-formed loads none of it (its start-up is in bench/bench_startup.py).

__all__ = [
    "PluginRequest",
    "PluginRequestError",
    "OptionFlagError",
    "read_request",
    "write_response",
    "run_plugin",
    "parse_option_flags",
    "plan_for_request",
    "run_provider",
    "provider_main",
    "options_model_of",
    "describe_options",
]

def run_plugin(
    get_credential: Callable[[PluginRequest], Credential],
    *,
    name: str | None = None,
    default_api_version: str = API_VERSION_V1,
) -> NoReturn:
    """Run a plugin main: read the request, answer, exit 0; any error becomes one stderr line and exit 1."""
    label = name or os.path.basename(sys.argv[0] or "plugin")
    try:
        request = read_request(default_api_version=default_api_version)
        credential = get_credential(request)
        if not isinstance(credential, Credential):
            raise TypeError(f"get_credential returned {type(credential).__name__}, not a Credential")
        write_response(credential, request.api_version)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # the plugin boundary: the client wants one line and an exit code
        _fail(label, exc)
    sys.exit(0)


def _fail(label: str, exc: BaseException) -> NoReturn:
    # The client shows this line to its user and may log it: nothing that looks like a secret.
    from ..logs import redact_text  # only on failure: a run that answers loads no redaction patterns

    message: Any = redact_text(" ".join(str(exc).split())) or type(exc).__name__
    sys.stderr.write(f"{label}: {message}\n")
    sys.stderr.flush()
    sys.exit(1)


def plan_for_request(
    request: PluginRequest, *, provider: str, options: Mapping[str, Any] | None = None, timeout: float = 60.0
) -> AccessPlan:
    """The :class:`~cpcreds.AccessPlan` an in-process provider receives when it runs as an exec
    plugin: ``provider`` (also its ``kind``), the options, and the cluster the client sent
    (``provideClusterInfo: true``), else a cluster with an empty ``server`` and ``config=None``."""
    cluster = request.cluster if request.cluster is not None else ExecCluster(server="")
    return AccessPlan(
        provider=provider,
        kind=provider,
        cluster=cluster,
        options=MappingProxyType(dict(options or {})),
        timeout=timeout,
    )


def build_provider(factory: Callable[[Mapping[str, Any]], Any], options: Mapping[str, Any]) -> Any:
    """The provider ``factory`` makes of ``options``, for a plugin run (exec or kubelet mode);
    a factory's failure is a worded error without the options (they may hold secrets)."""
    # Raised after the except blocks: a pydantic error holds the options given, secrets included.
    problem = None
    try:
        return factory(dict(options))
    except (ValueError, TypeError, KeyError) as exc:  # OptionError and pydantic's ValidationError are ValueErrors
        problem = _options_problem(exc)
    raise PluginRequestError(problem)


def _options_problem(exc: BaseException) -> str:
    if isinstance(exc, OptionError):  # worded by the options declaration, naming the option
        return str(exc)
    if _is_validation_error(exc):
        from ..config.wording import describe_validation_error

        where, what = describe_validation_error(exc)[0]  # type: ignore[arg-type]
        return f"option {where}: {what}" if where else f"options: {what}"
    from ..logs import redact_text

    return f"options: {redact_text(' '.join(str(exc).split())) or type(exc).__name__}"


def _is_validation_error(exc: BaseException) -> bool:
    # A pydantic error can only come from a provider that loaded pydantic: no import to ask.
    core = sys.modules.get("pydantic_core")
    return core is not None and isinstance(exc, core.ValidationError)


def run_provider(
    factory: Callable[[Mapping[str, Any]], Any],
    *,
    name: str,
    options: Mapping[str, Any] | None = None,
    argv: Sequence[str] | None = None,
    timeout: float = 60.0,
    default_api_version: str = API_VERSION_V1,
) -> NoReturn:
    """Run an in-process provider once as a KEP-541 exec plugin, and exit.

    ``factory`` is what the provider registers (called with the options); ``name`` is its type
    name, which is also ``plan.provider``. The options are ``options`` overlaid with the flags of
    ``argv`` (default ``sys.argv[1:]``, see :func:`parse_option_flags`). The answer is written in
    the apiVersion of ``KUBERNETES_EXEC_INFO`` (v1 or v1beta1); without the variable (run by hand,
    or by a client that is not client-go) in ``default_api_version`` (v1 unless the provider
    mimics a tool that answers v1beta1, as ``aws eks get-token`` does). Bad flags,
    bad options, a bad request and a provider failure are one line on stderr (prefixed by the
    program's name) and exit 1; Ctrl-C exits 130. ``-h``/``--help`` describes the provider and
    exits 0.
    """
    label, arguments = command_line(
        name,
        argv,
        "[--OPTION=VALUE ...]",
        f"Runs the cpcreds provider {name!r} as a KEP-541 exec plugin: it reads KUBERNETES_EXEC_INFO "
        "and prints an ExecCredential in the apiVersion asked for.",
        factory,
    )
    provider = None
    try:
        given = {**dict(options or {}), **option_flags(arguments, factory)}
        request = read_request(default_api_version=default_api_version)
        provider = build_provider(factory, given)
        plan = plan_for_request(request, provider=name, options=given, timeout=timeout)
        from ..providers.deadline import fetch_deadline

        with fetch_deadline(timeout):  # the provider's cpcreds.sdk.deadline(), as the engine sets it
            credential = provider.get_credential(plan)
        if not isinstance(credential, Credential):
            raise ProviderError(f"returned {type(credential).__name__}, not a Credential", provider=name)
        write_response(credential, request.api_version)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # the plugin boundary: the client wants one line and an exit code
        close_provider(provider)
        _fail(label, exc)
    close_provider(provider)
    sys.exit(0)


def provider_main(
    name: str,
    factory: Callable[[Mapping[str, Any]], Any],
    *,
    options: Mapping[str, Any] | None = None,
    timeout: float = 60.0,
    default_api_version: str = API_VERSION_V1,
) -> Callable[[], NoReturn]:
    """A zero-argument ``main`` for a ``[project.scripts]`` entry that runs ``factory``'s provider
    as an exec plugin (see :func:`run_provider`); ``options`` are defaults the flags override."""

    def main() -> NoReturn:
        run_provider(factory, name=name, options=options, timeout=timeout, default_api_version=default_api_version)

    main.__doc__ = f"Run the {name} provider as a KEP-541 exec plugin."
    return main


def close_provider(provider: Any) -> None:
    """Close ``provider`` if it has ``close()``; a failure to close does not change the answer."""
    close = getattr(provider, "close", None)
    if callable(close):
        try:
            close()
        except Exception:  # noqa: BLE001 - the process is ending; the answer or error stands
            pass
