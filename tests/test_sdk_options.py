"""cpcreds.sdk.Options: a provider's options declared once, read by a pydantic model generated
from the declaration (issues 19 and 29).

Through the public surface: ``Options.read`` and keyword construction, a config entry built by
the engine (``cpcreds validate``'s path), and a console script's ``--help`` and flags."""

from __future__ import annotations

import enum
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpcreds import ConfigError, CredentialEngine
from cpcreds.providers.registry import ProviderRegistry
from cpcreds.sdk import Duration, OptionError, Options, hookimpl, option
from tests.fakes.builders import config_of


class Mode(enum.Enum):
    FAST = "fast"
    SAFE = "safe"


def _even(value: int) -> int:
    if value % 2:
        raise ValueError("must be even")
    return value


class Sample(Options):
    """A sample provider."""

    address: str = option(names=("serverAddress",), pattern=r"https://\S+", description="Where the server is.")
    role: str = option("reader", description="The role.")
    ttl: Duration | None = option(None, min=60, max=86400, description="Lifetime.")
    retries: int = option(2, min=0, max=10, check=_even)
    verbose: bool = False
    ratio: float = 0.5
    key_file: Path | None = option(None, names=("keyFile",))
    audiences: tuple[str, ...] = option((), max=3, pattern=r"[a-z]+")
    mode: Mode = Mode.SAFE
    level: Literal["low", "high"] | None = None

    def check_options(self) -> None:
        if self.verbose and self.mode is Mode.FAST:
            raise ValueError("verbose applies only with mode safe")


BASE = {"serverAddress": "https://vault.example:8200"}


def test_values_are_read_as_flags_and_yaml_give_them() -> None:
    options = Sample.read({**BASE, "ttl": "30m", "retries": "4", "verbose": "true", "ratio": 2, "keyFile": "k.pem", "audiences": "api", "mode": "fast", "level": "high"} | {"verbose": "false"})
    assert (options.address, options.role, options.ttl, options.retries, options.verbose, options.ratio) == ("https://vault.example:8200", "reader", 1800.0, 4, False, 2.0)
    assert (options.key_file, options.audiences, options.mode, options.level) == (Path("k.pem"), ("api",), Mode.FAST, "high")
    assert Sample.read({**BASE, "ttl": 90, "audiences": ["a", "b"]}).ttl == 90.0
    assert Sample(address="https://x") == Sample.read({"serverAddress": "https://x"})  # the Python name works too


def test_an_instance_is_immutable() -> None:
    options = Sample.read(BASE)
    with pytest.raises(AttributeError):
        options.role = "admin"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({}, "option serverAddress: is required"),
        ({"serverAddress": "http://x"}, r"option serverAddress: must match the pattern https://\S+ (got a string of 8 characters)"),
        ({"serverAddress": 5}, "option serverAddress: must be a string, not a number"),
        ({**BASE, "ttl": "soon"}, "option ttl: must be a duration such as 30s, 2m or 1h30m"),
        ({**BASE, "ttl": True}, "option ttl: must be a duration such as 30s, 2m or 1h30m, not a boolean"),
        ({**BASE, "ttl": "2d"}, "option ttl: must be a duration such as 30s, 2m or 1h30m"),
        ({**BASE, "ttl": "10s"}, "option ttl: must be between 1m and 24h"),
        ({**BASE, "retries": "three"}, "option retries: must be a whole number, not a string"),
        ({**BASE, "retries": 12}, "option retries: must be between 0 and 10"),
        ({**BASE, "retries": 3}, "option retries: must be even"),
        ({**BASE, "verbose": "maybe"}, "option verbose: must be true or false, not a string"),
        ({**BASE, "audiences": ["a", "b", "c", "d"]}, "option audiences: must be at most 3 item(s)"),
        ({**BASE, "audiences": ["A"]}, "option audiences: must match the pattern [a-z]+ (got a string of 1 characters)"),
        ({**BASE, "audiences": [1]}, "option audiences: must be a list of strings"),
        ({**BASE, "mode": "turbo"}, "option mode: must be one of fast, safe"),
        ({**BASE, "level": 3}, "option level: must be one of low, high"),
        ({**BASE, "rol": "x"}, "option rol: is not a known field; did you mean 'role'?"),
        ({**BASE, "address": "https://y"}, "option serverAddress: is given twice (under two spellings)"),
        ({**BASE, "verbose": True, "mode": "fast"}, "options: verbose applies only with mode safe"),
    ],
)
def test_each_problem_names_the_option_in_words(given: dict[str, Any], message: str) -> None:
    with pytest.raises(OptionError) as raised:
        Sample.read(given)
    assert str(raised.value) == message


def test_a_config_entry_with_bad_options_is_a_config_error_naming_the_field() -> None:
    class Plugin:
        @hookimpl
        def cpcreds_register_providers(self, register: Any) -> None:
            register("sample", Sample.read)

    registry = ProviderRegistry(entry_points=False, plugins=(Plugin(),))
    with pytest.raises(ConfigError) as raised:
        CredentialEngine(config_of({"name": "s", "type": "sample", "options": {"serverAddress": "https://x", "rol": "y"}}), registry=registry)
    assert str(raised.value).endswith("field options.rol: is not a known field; did you mean 'role'?")


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["serverAddress", "role", "ttl", "retries", "verbose", "ratio", "keyFile", "audiences", "mode", "level", "x"]),
        st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20), st.lists(st.text(max_size=5), max_size=4)),
    )
)
def test_any_input_is_read_or_refused_with_an_option_error_that_quotes_no_value(given: dict[str, Any]) -> None:
    try:
        options = Sample.read(given)
    except OptionError as exc:
        for value in given.values():
            if isinstance(value, str) and len(value) > 3 and value not in ("fast", "safe", "low", "high"):
                assert value not in exc.problem
        return
    assert isinstance(options.retries, int) and options.retries % 2 == 0
    assert options.ttl is None or 60 <= options.ttl <= 86400


SCRIPT = textwrap.dedent(
    """
    import sys
    from cpcreds.sdk import Credential, Duration, Options, option, provider_main

    class DemoOptions(Options):
        \"\"\"A demo provider.\"\"\"

        secret_name: str = option("demo", names=("secretName",), description="The Secret.")
        ttl: Duration | None = option(None, description="Lifetime.")

    class Demo:
        options_model = DemoOptions

        def __init__(self, options):
            self.options = DemoOptions.read(options)

        def get_credential(self, plan):
            return Credential(token=self.options.secret_name)

    sys.argv[0] = "cpcreds-demo"
    provider_main("demo", Demo)()
    """
)


def run_demo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-X", "importtime", "-c", SCRIPT, *args], capture_output=True, text=True, timeout=30, env={"PATH": ""})


def test_a_console_script_with_an_options_class_answers_helps_and_refuses() -> None:
    answered = run_demo("--secret-name", "s-1", "-ttl", "5m")
    assert answered.returncode == 0 and '"token": "s-1"' in answered.stdout
    helped = run_demo("--help")
    assert helped.returncode == 0
    assert "  --secretName  string; default: demo\n      The Secret.\n  --ttl  duration; default: unset\n      Lifetime." in helped.stdout
    assert "kebab-case works too: --secret-name" in helped.stdout and "A demo provider." in helped.stdout
    refused = run_demo("--secretNme=x")
    assert refused.returncode == 1
    assert refused.stdout == "" and refused.stderr.splitlines()[-1] == (
        "cpcreds-demo: option secretNme: is not a known option; did you mean 'secretName'? (options: secretName, ttl; --help describes them)"
    )
    bad = run_demo("--ttl=later")
    assert bad.stderr.splitlines()[-1] == "cpcreds-demo: option ttl: must be a duration such as 30s, 2m or 1h30m"


def test_the_declaration_generates_one_pydantic_model() -> None:
    from pydantic import BaseModel

    model = Sample.pydantic_model()
    assert issubclass(model, BaseModel) and Sample.pydantic_model() is model
    assert list(model.model_fields) == ["address", "role", "ttl", "retries", "verbose", "ratio", "key_file", "audiences", "mode", "level"]


#: Strings that look like secrets: a marker no message holds, then anything.
_SECRETS = st.one_of(
    st.sampled_from(["hunter2-s3cret-T0KEN", "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0.c2ln", "AKIAIOSFODNN7EXAMPLE", "Zq0000"]),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40).map(lambda text: "Zq" + text),
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["serverAddress", "role", "ttl", "retries", "verbose", "ratio", "keyFile", "audiences", "mode", "level"]), _SECRETS, st.booleans())
def test_no_option_error_contains_the_value_given(key: str, secret: str, as_list: bool) -> None:
    given = {**BASE, key: [secret] if as_list else secret}
    try:
        Sample.read(given)
    except OptionError as exc:
        # The message may name the option, a bound and the allowed values, never what was given.
        assert secret not in str(exc)
        assert exc.__cause__ is None and exc.__context__ is None
