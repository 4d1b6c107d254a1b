"""``cpcreds completion bash|zsh|fish``: completion scripts written from the parser, so every
command, option and choice completes as the parser declares it."""

from __future__ import annotations

import argparse
import sys

from ..config.settings import Settings
from .parser import Parser, build_parser

__all__ = ["completion", "completion_script"]


def completion(args: argparse.Namespace, settings: Settings) -> int:
    sys.stdout.write(completion_script(args.shell, build_parser()))
    return 0


class _Option:
    def __init__(self, action: argparse.Action) -> None:
        self.names = [o for o in action.option_strings]
        self.long = next((o for o in self.names if o.startswith("--")), self.names[0] if self.names else "")
        self.short = next((o for o in self.names if not o.startswith("--")), None)
        self.takes_value = action.nargs != 0
        self.choices = [str(c) for c in action.choices] if action.choices else []
        self.files = action.metavar == "FILE"
        self.help = " ".join((action.help or "").split()).replace("%(default)s", str(action.default))


def _completion_model(parser: Parser) -> dict[str, tuple[str, list[_Option], list[str]]]:
    """For "" (no command yet) and each command: its help, its options, and its positional choices."""
    model: dict[str, tuple[str, list[_Option], list[str]]] = {}
    top = [_Option(a) for a in parser.options if a.option_strings]
    model[""] = (parser.description or "", top, list(parser.commands))
    for name, (help, sub) in parser.commands.items():
        options = [_Option(a) for a in sub.options if a.option_strings]
        positional = [str(c) for a in sub.options if not a.option_strings and a.choices for c in a.choices]
        model[name] = (help, options, positional)
    return model


def _bash_script(parser: Parser, *, for_zsh: bool = False) -> str:
    model = _completion_model(parser)
    value_cases, word_cases = [], []
    for command, (_, options, positional) in model.items():
        words = [n for o in options for n in o.names] + positional
        word_cases.append(f'        "{command}") words="{" ".join(words)}" ;;')
        for option in options:
            if not option.takes_value:
                continue
            pattern = "|".join(f'"{command}:{n}"' for n in option.names)
            if option.choices:
                action = f'COMPREPLY=($(compgen -W "{" ".join(option.choices)}" -- "$cur")); return 0'
            elif option.files:
                action = 'compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur")); return 0'
            else:
                action = "COMPREPLY=(); return 0"
            value_cases.append(f"        {pattern}) {action} ;;")
    commands = "|".join(model[""][2])
    body = f"""_cpcreds() {{
    local cur prev cmd words i
    cur="${{COMP_WORDS[COMP_CWORD]}}"
    prev=""
    if (( COMP_CWORD > 0 )); then prev="${{COMP_WORDS[COMP_CWORD-1]}}"; fi
    # --option=value: bash splits it at "=" (COMP_WORDBREAKS)
    if [[ "$cur" == "=" ]]; then
        cur=""
    elif [[ "$prev" == "=" ]] && (( COMP_CWORD > 1 )); then
        prev="${{COMP_WORDS[COMP_CWORD-2]}}"
    fi
    cmd=""
    for (( i = 1; i < COMP_CWORD; i++ )); do
        case "${{COMP_WORDS[i]}}" in
            {commands}) cmd="${{COMP_WORDS[i]}}"; break ;;
        esac
    done
    case "$cmd:$prev" in
{chr(10).join(value_cases)}
    esac
    case "$cmd" in
{chr(10).join(word_cases)}
    esac
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
    return 0
}}
"""
    if for_zsh:
        return (
            "#compdef cpcreds\n"
            "# zsh completion for cpcreds, written by `cpcreds completion zsh`. Load it after compinit:\n"
            "#   source <(cpcreds completion zsh)\n"
            "autoload -U +X bashcompinit && bashcompinit\n"
            + body
            + "complete -F _cpcreds cpcreds\n"
        )
    return (
        "# bash completion for cpcreds, written by `cpcreds completion bash`. Load it with\n"
        "#   source <(cpcreds completion bash)\n"
        "# or install it: cpcreds completion bash > ~/.local/share/bash-completion/completions/cpcreds\n"
        + body
        + "complete -F _cpcreds cpcreds\n"
    )


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _fish_script(parser: Parser) -> str:
    model = _completion_model(parser)
    commands = model[""][2]
    lines = [
        "# fish completion for cpcreds, written by `cpcreds completion fish`. Load it with",
        "#   cpcreds completion fish | source",
        "# or install it: cpcreds completion fish > ~/.config/fish/completions/cpcreds.fish",
        "complete -c cpcreds -f",
    ]
    for name in commands:
        lines.append(f"complete -c cpcreds -n __fish_use_subcommand -a {name} -d {_fish_quote(model[name][0])}")
    for command, (_, options, positional) in model.items():
        condition = "__fish_use_subcommand" if not command else f"'__fish_seen_subcommand_from {command}'"
        for option in options:
            parts = [f"complete -c cpcreds -n {condition}"]
            for name in option.names:
                parts.append(f"-l {name[2:]}" if name.startswith("--") else f"-s {name[1:]}")
            if option.takes_value:
                parts.append("-r")
                if option.choices:
                    parts.append(f"-x -a {_fish_quote(' '.join(option.choices))}")
                elif option.files:
                    parts.append("-F")
            if option.help:
                parts.append(f"-d {_fish_quote(option.help.split('; ')[0][:80])}")
            lines.append(" ".join(parts))
        if command and positional:
            lines.append(f"complete -c cpcreds -n {condition} -a {_fish_quote(' '.join(positional))}")
    return "\n".join(lines) + "\n"


def completion_script(shell: str, parser: Parser | None = None) -> str:
    """The completion script of ``cpcreds`` for ``shell`` (bash, zsh or fish)."""
    parser = parser or build_parser()
    if shell == "fish":
        return _fish_script(parser)
    return _bash_script(parser, for_zsh=shell == "zsh")
