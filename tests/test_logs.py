"""Redaction: secrets leave no trace in log lines; ordinary words survive."""

from __future__ import annotations

import io
import json
import logging

import pytest

from cpcreds.logs import REDACTED, configure_logging, get_logger, redact_text

KEY = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBx\n-----END EC PRIVATE KEY-----"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Bearer abc.def", f"Authorization: Bearer {REDACTED}"),
        ('{"token": "abc"}', f'{{"token": "{REDACTED}"}}'),
        ("token=abc rest", f"token={REDACTED} rest"),
        (f"key follows {KEY} end", f"key follows {REDACTED} end"),
        ("get-token: cannot reach https://sts.example", "get-token: cannot reach https://sts.example"),
        ("refresh_token_file: /var/run/x", "refresh_token_file: /var/run/x"),
    ],
)
def test_redact_text(text: str, expected: str) -> None:
    assert redact_text(text) == expected


@pytest.fixture
def captured() -> io.StringIO:
    stream = io.StringIO()
    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    configure_logging("debug", "json", stream=stream)
    yield stream
    for handler in list(root.handlers):
        if handler not in before:
            root.removeHandler(handler)
    root.setLevel(level)


def test_library_events_are_redacted_by_key_and_by_shape(captured: io.StringIO) -> None:
    get_logger("cpcreds.test").warning("fetched", token="abc", provider="google", detail="Bearer xyz", client_key_data=KEY)
    event = json.loads(captured.getvalue())
    assert event == {
        "level": "warning",
        "logger": "cpcreds.test",
        "event": "fetched",
        "token": REDACTED,
        "provider": "google",
        "detail": f"Bearer {REDACTED}",
        "client_key_data": REDACTED,
    }


@pytest.mark.parametrize(
    "key", ["token", "vault_token", "clientSecret", "client_key_data", "api_key", "password", "authorization", "private"]
)
def test_event_fields_named_like_secrets_are_redacted(captured: io.StringIO, key: str) -> None:
    get_logger("cpcreds.test").warning("event", **{key: "s3cr3t-value"})
    assert json.loads(captured.getvalue())[key] == REDACTED


@pytest.mark.parametrize("key", ["token_file", "tokenFile", "token_type", "refresh_token_file", "provider", "keys_loaded"])
def test_event_fields_that_only_mention_a_secret_word_are_kept(captured: io.StringIO, key: str) -> None:
    get_logger("cpcreds.test").warning("event", **{key: "/var/run/secrets/tokens/t"})
    assert json.loads(captured.getvalue())[key] == "/var/run/secrets/tokens/t"


def test_records_of_other_libraries_are_redacted_too(captured: io.StringIO) -> None:
    logging.getLogger("urllib3").warning("header Authorization: Bearer sekrit")
    assert "sekrit" not in captured.getvalue()


def test_library_configures_no_logging_on_import() -> None:
    import importlib

    import cpcreds

    root = logging.getLogger()
    handlers = list(root.handlers)
    importlib.reload(cpcreds)
    assert root.handlers == handlers
    assert not logging.getLogger("cpcreds").handlers


@pytest.mark.parametrize(
    ("setup", "shown"),
    [
        ("", False),  # nothing configured: the root logger's WARNING drops it
        ("from cpcreds.logs import configure_logging; configure_logging('debug', on_first_use=True)", True),  # get-credential
        ("from cpcreds.logs import configure_logging; configure_logging('debug')", True),  # serve, the other commands
        ("import logging; logging.basicConfig(level=logging.DEBUG)", True),  # an application configuring after the import
        ("import logging; logging.basicConfig(level=logging.DEBUG); logging.getLogger('vendor').setLevel('INFO')", False),
    ],
    ids=["unconfigured", "cli-on-first-use", "cli", "application", "application-info"],
)
def test_a_debug_event_reaches_every_configuration_at_its_level(setup: str, shown: bool) -> None:
    # A provider's debug event, the way a one-shot plugin emits it (sdk.get_logger at import).
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from cpcreds.sdk import get_logger\n"
        "log = get_logger('vendor')\n"
        f"{setup}\n"
        "log.debug('minting', audience='fleet', token='s3cr3t')\n"
        "log.info('minted')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert ("minting" in result.stderr) is shown
    assert "minted" in result.stderr if setup else result.stderr == ""
    assert "s3cr3t" not in result.stderr
