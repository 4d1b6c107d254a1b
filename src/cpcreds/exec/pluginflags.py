"""A provider's command line when it runs as a plugin: ``--option=value`` flags read into its
options (:func:`parse_option_flags`, :func:`option_flags`, which refuses an unknown option before
anything runs) and the ``--help`` that lists them (:func:`print_help`, :func:`describe_options`),
from the provider's options declaration (a :class:`cpcreds.sdk.Options` subclass, read without
pydantic, or a pydantic model). The exec and the kubelet runners share them.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from .._patterns import LazyPattern
from ..config.options import Options, did_you_mean
from ..config.optionspec import annotation_text, default_text, type_text
from .pluginrequest import PluginRequestError

__all__ = [
    "OptionFlagError",
    "command_line",
    "describe_options",
    "option_flags",
    "options_model_of",
    "parse_option_flags",
    "print_help",
]

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

def command_line(name: str, argv: Sequence[str] | None, usage: str, intro: str, factory: Any) -> tuple[str, list[str]]:
    """What a provider run as a plugin needs of its command line: the label its messages start
    with (the program's file name, else ``name``) and its arguments (``argv``, by default
    ``sys.argv[1:]``). With ``-h`` or ``--help`` first, prints :func:`print_help` (``usage: <label>
    <usage>``, ``intro``) and exits 0."""
    label = os.path.basename(sys.argv[0] or "") or name
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] in (["-h"], ["--help"]):
        print_help(f"usage: {label} {usage}", intro, factory)
    return label, arguments


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
