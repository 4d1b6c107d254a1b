"""Settings are declared once (pydantic-settings): the command's ``cpcreds.Settings`` and serve's
``ServeSettings``. The help, the flags and the docs' tables show what the declaration says, and a
bad value is one line naming where it was given."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cpcreds.serve.settings import ServeSettings
from cpcreds.config.settings import Settings, SettingInfo, describe
from tests.test_cli import cli_env, run_cli

ROOT = Path(__file__).resolve().parents[1]


def table(doc: str, header: str) -> list[list[str]]:
    """The rows of the markdown table that starts with ``header``, cells stripped; ``\\|`` kept."""
    text = (ROOT / "docs" / doc).read_text()
    start = text.index(header)
    lines = text[start:].split("\n\n", 1)[0].splitlines()[2:]
    return [[cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))] for line in lines]


def unquoted(cell: str) -> str:
    return cell.strip("`")


def shown_default(model: type, info: SettingInfo) -> str:
    """A declared value in backticks; words (what an unset setting means) as they are."""
    field = model.model_fields[info.name]
    declared = field.default not in (None, "") and field.default_factory is None
    return f"`{info.default}`" if declared else info.default


def test_serve_docs_list_every_declared_setting_with_its_names_and_default() -> None:
    rows = table("serve.md", "| Flag | Variable | `serve:` field | Default | Meaning |")
    by_variable = {unquoted(row[1]): row for row in rows}
    declared = describe(ServeSettings, section="serve")
    assert list(by_variable) == [info.variable for info in declared]
    for info in declared:
        flag, _, field, default, meaning = by_variable[info.variable]
        assert unquoted(flag) == (f"--[no-]{info.flag[2:]}" if info.switch else f"{info.flag} {info.metavar}")
        assert unquoted(field) == ("" if info.name == "config" else info.field)
        assert default == shown_default(ServeSettings, info), info.name
        assert meaning


def test_cli_docs_list_every_declared_setting_with_its_default() -> None:
    rows = table("cli.md", "| Variable | Default | Used by |")
    by_variable = {unquoted(row[0]): row for row in rows if unquoted(row[0]).startswith("CPCREDS_")}
    declared = describe(Settings)
    assert list(by_variable) == [info.variable for info in declared]
    for info in declared:
        assert by_variable[info.variable][1] == shown_default(Settings, info), info.name


def test_serve_help_shows_each_declared_setting_with_its_default(tmp_path: Path) -> None:
    result = run_cli("serve", "--help", cwd=tmp_path, env=cli_env(COLUMNS="1000"))  # no wrap at a hyphen
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    for info in describe(ServeSettings, section="serve"):
        if info.name == "config":
            continue
        assert info.flag in text
        assert f"[{info.variable}, {info.field}]" in text
        if info.default:
            assert f"(default: {info.default}) [{info.variable}, {info.field}]" in text, info.name


def test_help_lists_every_variable_of_the_command_with_its_default(tmp_path: Path) -> None:
    result = run_cli("--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = {line.split()[0]: " ".join(line.split()) for line in result.stdout.splitlines() if line.strip().startswith("CPCREDS_")}
    for info in describe(Settings):
        assert info.variable in lines
        if info.default:
            assert lines[info.variable].endswith(f"(default: {info.default})"), lines[info.variable]


def test_a_serve_flag_overrides_the_variable_which_overrides_the_file() -> None:
    section = {"concurrency": 3, "probePath": "/readyz", "listen": "127.0.0.1:1"}
    environ = {"CPCREDS_CONCURRENCY": "5", "CPCREDS_PROBE_PATH": "/version"}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in environ.items():
            patch.setenv(name, value)
        settings = ServeSettings.load({"concurrency": "7"}, section)
    assert (settings.concurrency, settings.probe_path, settings.listen) == (7, "/version", "127.0.0.1:1")


@pytest.mark.parametrize(
    ("args", "environ", "named"),
    [
        (["--probe-path", "hunter2 s3cret"], {}, "--probe-path / CPCREDS_PROBE_PATH / serve.probePath"),
        ([], {"CPCREDS_LISTEN": "hunter2s3cret"}, "--listen / CPCREDS_LISTEN / serve.listen"),
        (["--concurrency", "0"], {}, "--concurrency / CPCREDS_CONCURRENCY / serve.concurrency"),
    ],
)
def test_a_bad_serve_setting_is_one_line_naming_it_without_its_value(tmp_path: Path, args: list[str], environ: dict[str, str], named: str) -> None:
    result = run_cli("serve", "--config", str(ROOT / "config.example.yaml"), *args, cwd=tmp_path, env=cli_env(**environ))
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith(f"cpcreds: error: serve settings: {named}: ") and result.stderr.count("\n") == 1
    assert "hunter2" not in result.stderr and "s3cret" not in result.stderr


def test_a_bad_variable_stops_every_command_with_one_line_naming_it(tmp_path: Path) -> None:
    result = run_cli("plugins", cwd=tmp_path, env=cli_env(CPCREDS_LOG_FORMAT="xml"))
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == "cpcreds: error: CPCREDS_LOG_FORMAT: must be 'console' or 'json' (got 'xml')\n"


@pytest.mark.parametrize("word", ["off", "0", "FALSE", "no", "on", "1", "true", "Yes", ""])
def test_the_cache_setting_reads_the_words_the_hit_path_reads(word: str) -> None:
    from cpcreds.cli.diskcache import cache_setting

    assert Settings(environ={"CPCREDS_CACHE": word}).cache == ("on" if cache_setting({"CPCREDS_CACHE": word}) else "off")


def test_settings_are_read_only_and_know_only_their_fields() -> None:
    settings = Settings(environ={})
    with pytest.raises(Exception):
        settings.log_level = "debug"  # type: ignore[misc]
    with pytest.raises(TypeError, match="unknown setting"):
        Settings(environ={}, loudness="high")
