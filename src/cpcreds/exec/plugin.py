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
"""

from __future__ import annotations

import base64
import json
import os
import re
import sys
import typing
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import IO, Any, NoReturn

from ..config.documents import Limits, load_or_raise
from dataclasses import dataclass
from ..credential import Credential
from ..errors import CredentialError, ProviderError
from .._patterns import LazyPattern
from ..kep import API_VERSION_V1, EXEC_INFO_ENV, SUPPORTED_API_VERSIONS, ExecCluster, exec_cluster_of_validated
from ..config.options import OptionError, Options, did_you_mean
from ..config.optionspec import annotation_text, default_text, type_text
from ..plan import AccessPlan

# pydantic is imported only to word what the plain reading refuses, and for a provider whose
# options_model is still a pydantic model (which its own module has imported): a plugin run whose
# request and options are well-formed loads none of it (tests/test_imports.py).
if typing.TYPE_CHECKING:
    from pydantic import BaseModel

#: client-go's request is a few KiB (a CA bundle at most); anything near this is not one.
_MAX_EXEC_INFO_BYTES = 1024 * 1024

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


class PluginRequestError(CredentialError, ValueError):
    """KUBERNETES_EXEC_INFO is present but not a usable ExecCredential request."""


@dataclass(frozen=True, slots=True)
class PluginRequest:
    """What the client asked: the apiVersion to answer in, whether stdin is ours, the cluster.

    ``cluster`` is ``None`` unless the client was configured with ``provideClusterInfo: true``;
    ``from_environment`` is False when KUBERNETES_EXEC_INFO was absent (run by hand).
    """

    api_version: str
    interactive: bool = False
    cluster: ExecCluster | None = None
    from_environment: bool = True


def read_request(environ: Mapping[str, str] | None = None, *, default_api_version: str = API_VERSION_V1) -> PluginRequest:
    """Parse KUBERNETES_EXEC_INFO; without it, a request for ``default_api_version``."""
    env = os.environ if environ is None else environ
    raw = env.get(EXEC_INFO_ENV, "")
    if not raw.strip():
        return PluginRequest(api_version=default_api_version, interactive=False, cluster=None, from_environment=False)
    # The client wrote this, but a hostile environment is possible: parse it bounded, never quote it.
    document = load_or_raise(
        raw, PluginRequestError, source=EXEC_INFO_ENV, syntax="json", limits=Limits(max_bytes=_MAX_EXEC_INFO_BYTES),
        message=f"{EXEC_INFO_ENV} is not JSON ({{detail}})",
    )
    if not isinstance(document, dict) or document.get("kind") != "ExecCredential":
        raise PluginRequestError(f"{EXEC_INFO_ENV} is not an ExecCredential")
    api_version = document.get("apiVersion")
    if api_version not in SUPPORTED_API_VERSIONS:
        shown = repr(api_version) if isinstance(api_version, str) and len(api_version) <= 64 and api_version.isprintable() else "an unsupported value"
        raise PluginRequestError(f"{EXEC_INFO_ENV} asks for apiVersion {shown}; supported: {', '.join(SUPPORTED_API_VERSIONS)}")
    plain = _read_plain_spec(document)
    if plain is not None:
        return PluginRequest(api_version=api_version, interactive=plain[0], cluster=plain[1])
    from pydantic import ValidationError

    from ..config.wire import ExecCredential
    from ..config import describe_validation_error

    request = None
    try:
        request = ExecCredential.model_validate(document)
    except ValidationError as exc:
        where, what = describe_validation_error(exc, ExecCredential)[0]
        problem = f"{EXEC_INFO_ENV}: field {where} {what}"
    if request is None:
        raise PluginRequestError(problem or f"{EXEC_INFO_ENV} is not a valid ExecCredential")
    return PluginRequest(api_version=api_version, interactive=request.spec.interactive, cluster=request.spec.cluster)


#: Fields of a request's spec.cluster, as the wire spells them, with their plain types.
_CLUSTER_TEXT = ("tls-server-name", "proxy-url")
_CLUSTER_FLAGS = ("insecure-skip-tls-verify", "disable-compression")
#: Python spellings the model also accepts (populate_by_name): those go to the model.
_PYTHON_SPELLINGS = frozenset({"api_version", "tls_server_name", "insecure_skip_tls_verify", "certificate_authority_data", "proxy_url", "disable_compression"})


def _read_plain_spec(document: dict[str, Any]) -> tuple[bool, ExecCluster | None] | None:
    """``(interactive, cluster)`` of a well-formed request read directly, as
    :class:`cpcreds.config.wire.ExecCredential` reads it; ``None`` for anything else (the model then reads
    it and words what is wrong). tests/test_imports.py checks both agree on generated requests."""
    if not _PYTHON_SPELLINGS.isdisjoint(document) or document.get("status") is not None:
        return None
    spec = document.get("spec", {})
    if type(spec) is not dict or not _PYTHON_SPELLINGS.isdisjoint(spec):
        return None
    interactive = spec.get("interactive", False)
    cluster = spec.get("cluster")
    if type(interactive) is not bool:
        return None
    if cluster is None:
        return interactive, None
    if type(cluster) is not dict or not _PYTHON_SPELLINGS.isdisjoint(cluster) or type(cluster.get("server")) is not str:
        return None
    if any(type(cluster.get(key, "")) is not str for key in _CLUSTER_TEXT):
        return None
    if any(type(cluster.get(key, False)) is not bool for key in _CLUSTER_FLAGS):
        return None
    ca_text = cluster.get("certificate-authority-data", "")
    if type(ca_text) is not str:
        return None
    try:
        ca_data = base64.b64decode(ca_text, validate=True) if ca_text else b""
    except ValueError:  # binascii.Error: the model words it
        return None
    return interactive, exec_cluster_of_validated(
        cluster["server"],
        cluster.get("tls-server-name", ""),
        cluster.get("insecure-skip-tls-verify", False),
        ca_data,
        cluster.get("proxy-url", ""),
        cluster.get("disable-compression", False),
        cluster.get("config"),
    )


def write_response(credential: Credential, api_version: str, stream: IO[str] | None = None) -> None:
    """Print the ExecCredential answer (one JSON line) and flush."""
    out = stream or sys.stdout
    out.write(json.dumps(credential.to_exec_credential(api_version)) + "\n")
    out.flush()


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


# -- in-process providers as exec plugins ---------------------------------------------------------

#: Most arguments a provider's command line may carry (argv is the client's, but bounded all the same).
_MAX_ARGUMENTS = 256
# Go's flag package spelling, which the Go plugins use (-audience x): one dash or two.
_FLAG = re.compile(r"--?([A-Za-z][A-Za-z0-9_]*(?:-[A-Za-z0-9_]+)*)(?:=(.*))?", re.DOTALL)


class OptionFlagError(PluginRequestError):
    """The plugin's command line is not a list of ``--option=value`` flags."""


def _option_name(flag: str) -> str:
    # --secret-name and --secretName both name the option secretName (the config's spelling).
    head, *rest = flag.split("-")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def parse_option_flags(argv: Sequence[str]) -> dict[str, Any]:
    """The provider options given as flags: ``--name=value`` or ``--name value``; one dash works
    too, as with Go's flag package (``-audience x``), so a Go plugin's arguments carry over.

    A flag's name is the option's name, in the config's camelCase or in kebab-case
    (``--secret-name`` is ``secretName``). Values are strings (the provider's option model
    converts them); a flag given more than once becomes a list of strings; a flag followed by
    nothing or by an argument starting with ``-`` is ``"true"``. Raises :class:`OptionFlagError` naming the first
    argument that is not a flag by its position (quoting it only when it looks like a flag).
    """
    if len(argv) > _MAX_ARGUMENTS:
        raise OptionFlagError(f"more than {_MAX_ARGUMENTS} arguments")
    options: dict[str, Any] = {}
    index = 0
    while index < len(argv):
        argument = argv[index]
        match = _FLAG.fullmatch(argument) if isinstance(argument, str) else None
        if match is None:
            # Only something shaped like a flag is quoted: a stray word may be a token.
            flag_like = isinstance(argument, str) and argument.startswith("-") and len(argument) <= 64
            shown = repr(argument) if flag_like and argument.isprintable() and "=" not in argument else f"argument {index + 1}"
            raise OptionFlagError(f"{shown} is not an option flag (expected --name=value or -name value)")
        name, value = _option_name(match.group(1)), match.group(2)
        if value is None:
            following = argv[index + 1] if index + 1 < len(argv) else None
            if following is not None and not following.startswith("-"):
                value, index = following, index + 1
            else:
                value = "true"
        if name in options:
            previous = options[name]
            options[name] = [*previous, value] if isinstance(previous, list) else [previous, value]
        else:
            options[name] = value
        index += 1
    return options


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
        from ..config import describe_validation_error

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
) -> NoReturn:
    """Run an in-process provider once as a KEP-541 exec plugin, and exit.

    ``factory`` is what the provider registers (called with the options); ``name`` is its type
    name, which is also ``plan.provider``. The options are ``options`` overlaid with the flags of
    ``argv`` (default ``sys.argv[1:]``, see :func:`parse_option_flags`). The answer is written in
    the apiVersion of ``KUBERNETES_EXEC_INFO`` (v1 or v1beta1; v1 when run by hand). Bad flags,
    bad options, a bad request and a provider failure are one line on stderr (prefixed by the
    program's name) and exit 1; Ctrl-C exits 130. ``-h``/``--help`` describes the provider and
    exits 0.
    """
    label = os.path.basename(sys.argv[0] or "") or name
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] in (["-h"], ["--help"]):
        print_help(
            f"usage: {label} [--OPTION=VALUE ...]",
            f"Runs the cpcreds provider {name!r} as a KEP-541 exec plugin: it reads KUBERNETES_EXEC_INFO "
            "and prints an ExecCredential in the apiVersion asked for.",
            factory,
        )
    provider = None
    try:
        given = {**dict(options or {}), **option_flags(arguments, factory)}
        request = read_request()
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
) -> Callable[[], NoReturn]:
    """A zero-argument ``main`` for a ``[project.scripts]`` entry that runs ``factory``'s provider
    as an exec plugin (see :func:`run_provider`); ``options`` are defaults the flags override."""

    def main() -> NoReturn:
        run_provider(factory, name=name, options=options, timeout=timeout)

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


# -- what a provider's options are: --help and unknown flags ----------------------------------------


def options_model_of(factory: Any) -> type | None:
    """The options declaration of ``factory``: its ``options_model`` attribute when that is a
    :class:`cpcreds.sdk.Options` subclass or a pydantic model, else ``None``."""
    model = getattr(factory, "options_model", None)
    if not isinstance(model, type):
        return None
    if issubclass(model, Options):
        return model
    # A pydantic model exists only once its module imported pydantic: without it, there is none.
    pydantic = sys.modules.get("pydantic")
    return model if pydantic is not None and issubclass(model, pydantic.BaseModel) else None


def option_flags(argv: Sequence[str], factory: Any) -> dict[str, Any]:
    """:func:`parse_option_flags`, and when ``factory`` has an options declaration that forbids
    unknown keys (every :class:`~cpcreds.sdk.Options`; a pydantic model unless ``extra="allow"``),
    every flag must name one of its options: :class:`OptionFlagError` otherwise, with a "did you
    mean" and the list of options (before the request is read or the provider built)."""
    given = parse_option_flags(argv)
    model = options_model_of(factory)
    if model is None or (not issubclass(model, Options) and model.model_config.get("extra") == "allow"):  # type: ignore[attr-defined]
        return given
    described = _options(model)
    accepted = {spelling for _, spellings, _ in described for spelling in spellings}
    for flag in given:
        if flag not in accepted:
            primary = [shown[0] for _, _, shown in described]
            shown = flag if len(flag) <= 64 else flag[:61] + "..."
            raise OptionFlagError(
                f"option {shown}: is not a known option{did_you_mean(flag, primary)} "
                f"(options: {', '.join(primary)}; --help describes them)"
            )
    return given


def describe_options(model: type) -> list[tuple[str, str, str]]:
    """One ``(flag, type and default, description)`` per option of ``model`` (an
    :class:`~cpcreds.sdk.Options` subclass or a pydantic model), in its order: the flag as the
    config spells the option (``--secretName``, other accepted spellings after it), the type
    (``duration`` for a :data:`~cpcreds.sdk.Duration`; for a pydantic field, read from the
    annotation or its ``json_schema_extra={"format": ...}``), the default (or ``required``), and
    the option's description."""
    return [(" ".join(f"--{name}" for name in shown), about, description) for about, _, shown, description in _described(model)]


def _options(model: type) -> list[tuple[str, set[str], list[str]]]:
    """(type and default, accepted spellings, spellings shown: the config's first) per option."""
    return [(about, spellings, shown) for about, spellings, shown, _ in _described(model)]


def _described(model: type) -> list[tuple[str, set[str], list[str], str]]:
    """(type and default, accepted spellings, shown spellings, description) per option of ``model``."""
    if issubclass(model, Options):
        out = []
        for spec in model.declared():
            kind = type_text(spec)
            out.append((f"{kind}; {default_text(spec.required, spec.default, kind)}", spec.spellings, spec.shown, " ".join(spec.description.split())))
        return out
    return _described_pydantic(model)


def _described_pydantic(model: Any) -> list[tuple[str, set[str], list[str], str]]:
    """:func:`_described` of a pydantic model: the Python name of an aliased field is accepted
    when the model populates by name, not shown."""
    from pydantic import AliasChoices

    by_name = bool(model.model_config.get("populate_by_name") or model.model_config.get("validate_by_name"))
    out = []
    for name, field in model.model_fields.items():
        spellings: list[str] = []
        if field.alias:
            spellings.append(field.alias)
        if isinstance(field.validation_alias, str):
            spellings.append(field.validation_alias)
        elif isinstance(field.validation_alias, AliasChoices):
            spellings.extend(choice for choice in field.validation_alias.choices if isinstance(choice, str))
        shown = list(dict.fromkeys(spellings or [name]))
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        kind = str(extra["format"]) if "format" in extra else annotation_text(field.annotation)
        required = field.is_required()
        about = f"{kind}; {default_text(required, None if required else field.get_default(call_default_factory=True), kind)}"
        out.append((about, {*shown, name} if by_name else set(shown), shown, " ".join((field.description or "").split())))
    return out


_CAMEL_HUMP = LazyPattern(r"([a-z0-9])([A-Z])")  # --help only


def print_help(usage: str, intro: str, factory: Any) -> NoReturn:
    """Print ``--help`` for a provider run as a plugin (``usage``, ``intro``, then what the
    provider is and its options, see :func:`describe_options`) and exit 0."""
    import textwrap  # --help only

    width = 100
    parts = [usage, textwrap.fill(intro, width, break_on_hyphens=False)]
    model = options_model_of(factory)
    if model is not None:
        parts.extend(textwrap.fill(paragraph, width, break_on_hyphens=False) for paragraph in _plain(model.__doc__ or "").split("\n\n") if paragraph.strip())
        options = describe_options(model)
        # camelCase options may be given in kebab-case (parse_option_flags): show one.
        camel = next((flag.split()[0][2:] for flag, _, _ in options if _CAMEL_HUMP.search(flag.split()[0])), None)
        kebab = "; kebab-case works too: --" + _CAMEL_HUMP.sub(r"\1-\2", camel).lower() if camel else ""
        lines = [f"Options (--name=VALUE, --name VALUE or -name VALUE{kebab}):"]
        for flag, kind, description in options:
            lines.append(f"  {flag}  {kind}")
            if description:
                lines.append(textwrap.fill(description, width, initial_indent=" " * 6, subsequent_indent=" " * 6, break_on_hyphens=False))
        parts.append("\n".join(lines))
    else:
        # A provider without an options model: what its module says about itself.
        module = sys.modules.get(getattr(factory, "__module__", "") or "")
        described = (getattr(module, "__doc__", None) or "").strip()
        parts.append("Each flag --name=VALUE (or --name VALUE) sets the provider option of that name, in camelCase or kebab-case.")
        if described:
            parts.append(described)
    sys.stdout.write("\n\n".join(parts) + "\n")
    sys.stdout.flush()
    sys.exit(0)


def _plain(docstring: str) -> str:
    """A docstring as help text: dedented, without reStructuredText's ``literal`` marks."""
    import inspect

    return inspect.cleandoc(docstring).replace("``", "")
