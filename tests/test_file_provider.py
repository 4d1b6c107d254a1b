"""The built-in ``file`` provider: a token and/or a client certificate and key read from disk."""

from __future__ import annotations

import base64
import json
import os
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from cpcreds.config.access import AccessPlan, resolve
from cpcreds.config import ProviderConfig
from cpcreds.credential import Credential
from cpcreds.errors import ConfigError, ProviderError
from cpcreds.providers.file import MAX_FILE_BYTES, FileProvider
from cpcreds.providers.registry import ProviderRegistry
from tests.fakes.pki import make_key_pair as self_signed_pair

UTC = timezone.utc
PROVIDER = "fleet-files"


# -- helpers -------------------------------------------------------------------------------------


def make_key_pair(*, not_after: datetime | None = None) -> tuple[str, str]:
    """A fresh EC key and a self-signed certificate for it (PEM text: cert, key)."""
    cert_pem, key_pem, _ = self_signed_pair(not_after=not_after)
    return cert_pem, key_pem


def jwt(claims: dict[str, Any]) -> str:
    """An unsigned-looking JWT with ``claims`` as payload (the provider only reads ``exp``)."""

    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode("ascii")

    return f"{part({'alg': 'RS256', 'typ': 'JWT'})}.{part(claims)}.c2lnbmF0dXJl"


def profile(name: str = PROVIDER) -> dict[str, Any]:
    return {
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": "spoke-1", "namespace": "fleet"},
        "status": {"accessProviders": [{"name": name, "cluster": {"server": "https://spoke-1.example:6443"}}]},
    }


def file_entry(options: dict[str, Any]) -> dict[str, Any]:
    return {"name": PROVIDER, "type": "file", "options": options}


def plan_and_provider(options: dict[str, Any]) -> tuple[AccessPlan, Any]:
    """Build the provider the way the engine does: config entry -> registry -> provider, plus its plan."""
    config = ProviderConfig.from_dict({"providers": [file_entry(options)]})
    provider = ProviderRegistry(entry_points=False).create(config.providers[0], source=config.source)
    return resolve(config, profile()), provider


def get(options: dict[str, Any]) -> Credential:
    plan, provider = plan_and_provider(options)
    return provider.get_credential(plan)


def create_error(options: dict[str, Any]) -> ConfigError:
    entry = ProviderConfig.from_dict({"providers": [file_entry(options)]}).providers[0]
    with pytest.raises(ConfigError) as info:
        ProviderRegistry(entry_points=False).create(entry, source="providers.yaml")
    return info.value


# -- tokens --------------------------------------------------------------------------------------


def test_registry_builds_a_file_provider_for_type_file(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("abc")
    _, provider = plan_and_provider({"tokenFile": str(token_file)})
    assert isinstance(provider, FileProvider)


def test_token_is_read_from_the_file_and_stripped(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("  \n fleet-token-123 \n\n")
    credential = get({"tokenFile": str(token_file)})
    assert credential.token == "fleet-token-123"
    assert credential.kind == "token"


def test_missing_token_file_raises_provider_error_naming_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "token"
    with pytest.raises(ProviderError) as info:
        get({"tokenFile": str(missing)})
    assert str(missing) in str(info.value)
    assert "does not exist" in str(info.value)
    assert info.value.provider == PROVIDER


@pytest.mark.parametrize("content", ["", "  \n\t\n"], ids=["empty", "whitespace"])
def test_empty_token_file_raises_provider_error(tmp_path: Path, content: str) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(content)
    with pytest.raises(ProviderError, match="is empty") as info:
        get({"tokenFile": str(token_file)})
    assert str(token_file) in str(info.value)


def test_token_file_that_is_not_utf8_raises_provider_error(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(ProviderError, match="not UTF-8") as info:
        get({"tokenFile": str(token_file)})
    assert str(token_file) in str(info.value)


def test_token_file_that_is_a_directory_raises_provider_error(tmp_path: Path) -> None:
    with pytest.raises(ProviderError, match="cannot read tokenFile") as info:
        get({"tokenFile": str(tmp_path)})
    assert str(tmp_path) in str(info.value)


def test_token_rotated_on_disk_is_returned_by_the_next_call(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("first-token\n")
    plan, provider = plan_and_provider({"tokenFile": str(token_file)})
    assert provider.get_credential(plan).token == "first-token"
    token_file.write_text("second-token\n")
    assert provider.get_credential(plan).token == "second-token"


# -- expiry --------------------------------------------------------------------------------------


def test_refresh_interval_bounds_the_expiration_of_a_plain_token(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("opaque-token")
    plan, provider = plan_and_provider({"tokenFile": str(token_file), "refreshInterval": "90s"})
    before = datetime.now(UTC)
    credential = provider.get_credential(plan)
    after = datetime.now(UTC)
    assert before + timedelta(seconds=90) <= credential.expiration_timestamp <= after + timedelta(seconds=90)


def test_default_refresh_interval_is_one_minute(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("opaque-token")
    before = datetime.now(UTC)
    credential = get({"tokenFile": str(token_file)})
    after = datetime.now(UTC)
    assert before + timedelta(minutes=1) <= credential.expiration_timestamp <= after + timedelta(minutes=1)


def test_jwt_exp_bounds_the_expiration_when_it_comes_before_the_refresh_interval(tmp_path: Path) -> None:
    exp = int(datetime.now(UTC).timestamp()) + 120
    token_file = tmp_path / "token"
    token_file.write_text(jwt({"sub": "system:serviceaccount:fleet:hub", "exp": exp}) + "\n")
    credential = get({"tokenFile": str(token_file), "refreshInterval": "1h"})
    assert credential.expiration_timestamp == datetime.fromtimestamp(exp, UTC)


def test_refresh_interval_bounds_the_expiration_when_jwt_exp_is_later(tmp_path: Path) -> None:
    exp = int(datetime.now(UTC).timestamp()) + 24 * 3600
    token_file = tmp_path / "token"
    token_file.write_text(jwt({"exp": exp}))
    before = datetime.now(UTC)
    credential = get({"tokenFile": str(token_file), "refreshInterval": "5m"})
    after = datetime.now(UTC)
    assert before + timedelta(minutes=5) <= credential.expiration_timestamp <= after + timedelta(minutes=5)


@pytest.mark.parametrize(
    "token",
    ["a.b.c", jwt({"sub": "no-exp"}), jwt({"exp": "tomorrow"}), jwt({"exp": True}), jwt({"exp": 10**20})],
    ids=["garbage-parts", "no-exp", "string-exp", "bool-exp", "huge-exp"],
)
def test_token_without_a_usable_jwt_exp_falls_back_to_the_refresh_interval(tmp_path: Path, token: str) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(token)
    before = datetime.now(UTC)
    credential = get({"tokenFile": str(token_file), "refreshInterval": "2m"})
    after = datetime.now(UTC)
    assert credential.token == token
    assert before + timedelta(minutes=2) <= credential.expiration_timestamp <= after + timedelta(minutes=2)


# -- client certificates -------------------------------------------------------------------------


def write_pair(tmp_path: Path, **kwargs: Any) -> tuple[Path, Path, str, str]:
    cert_pem, key_pem = make_key_pair(**kwargs)
    cert_file, key_file = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert_file.write_text(cert_pem)
    key_file.write_text(key_pem)
    return cert_file, key_file, cert_pem, key_pem


def test_client_certificate_and_key_are_read_from_files(tmp_path: Path) -> None:
    cert_file, key_file, cert_pem, key_pem = write_pair(tmp_path)
    credential = get({"clientCertificateFile": str(cert_file), "clientKeyFile": str(key_file)})
    assert credential.kind == "client-certificate"
    assert credential.token is None
    assert credential.client_certificate_data == cert_pem
    assert credential.client_key_data == key_pem


def test_token_and_client_certificate_can_be_read_together(tmp_path: Path) -> None:
    cert_file, key_file, _, _ = write_pair(tmp_path)
    token_file = tmp_path / "token"
    token_file.write_text("both-token")
    credential = get({"tokenFile": str(token_file), "clientCertificateFile": str(cert_file), "clientKeyFile": str(key_file)})
    assert credential.kind == "token+client-certificate"
    assert credential.token == "both-token"


def test_certificate_not_after_bounds_the_expiration(tmp_path: Path) -> None:
    not_after = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=10)
    cert_file, key_file, _, _ = write_pair(tmp_path, not_after=not_after)
    credential = get({"clientCertificateFile": str(cert_file), "clientKeyFile": str(key_file), "refreshInterval": "1h"})
    assert credential.expiration_timestamp == not_after


def test_missing_client_key_file_raises_provider_error_naming_the_file(tmp_path: Path) -> None:
    cert_file, key_file, _, _ = write_pair(tmp_path)
    key_file.unlink()
    with pytest.raises(ProviderError) as info:
        get({"clientCertificateFile": str(cert_file), "clientKeyFile": str(key_file)})
    assert "clientKeyFile" in str(info.value)
    assert str(key_file) in str(info.value)


def test_key_file_that_does_not_match_the_certificate_raises_provider_error(tmp_path: Path) -> None:
    cert_file, key_file, _, _ = write_pair(tmp_path)
    key_file.write_text(make_key_pair()[1])
    with pytest.raises(ProviderError, match="does not match") as info:
        get({"clientCertificateFile": str(cert_file), "clientKeyFile": str(key_file)})
    assert info.value.provider == PROVIDER


def test_certificate_rotated_on_disk_is_returned_by_the_next_call(tmp_path: Path) -> None:
    cert_file, key_file, first_cert, _ = write_pair(tmp_path)
    plan, provider = plan_and_provider({"clientCertificateFile": str(cert_file), "clientKeyFile": str(key_file)})
    assert provider.get_credential(plan).client_certificate_data == first_cert
    _, _, second_cert, second_key = write_pair(tmp_path)
    rotated = provider.get_credential(plan)
    assert rotated.client_certificate_data == second_cert != first_cert
    assert rotated.client_key_data == second_key


# -- options validation --------------------------------------------------------------------------


def test_options_without_any_file_are_rejected() -> None:
    error = create_error({})
    assert error.field == "options"
    assert "set tokenFile" in error.reason
    assert "providers.yaml" in str(error) and f'"{PROVIDER}"' in str(error)


def test_options_with_certificate_but_no_key_are_rejected(tmp_path: Path) -> None:
    error = create_error({"clientCertificateFile": str(tmp_path / "tls.crt")})
    assert error.field == "options"
    assert "go together" in error.reason


def test_options_with_key_but_no_certificate_are_rejected(tmp_path: Path) -> None:
    error = create_error({"tokenFile": str(tmp_path / "t"), "clientKeyFile": str(tmp_path / "tls.key")})
    assert "go together" in error.reason


@pytest.mark.parametrize("interval", ["soon", "10", 30, "0s", "-5s"], ids=["word", "no-unit", "number", "zero", "negative"])
def test_options_with_a_bad_refresh_interval_are_rejected(tmp_path: Path, interval: Any) -> None:
    error = create_error({"tokenFile": str(tmp_path / "t"), "refreshInterval": interval})
    assert error.field == "options.refreshInterval"


def test_huge_refresh_interval_is_rejected_up_front_or_still_yields_credentials(tmp_path: Path) -> None:
    # now + 1e9 hours is past year 9999: either validation refuses it, or fetching must still work.
    token_file = tmp_path / "token"
    token_file.write_text("opaque-token")
    options = {"tokenFile": str(token_file), "refreshInterval": "1000000000h"}
    try:
        plan, provider = plan_and_provider(options)
    except ConfigError as exc:
        assert exc.field == "options.refreshInterval"
        return
    credential = provider.get_credential(plan)
    assert credential.token == "opaque-token"
    assert credential.expiration_timestamp is None or credential.expiration_timestamp > datetime.now(UTC)


def test_options_with_an_unknown_key_are_rejected(tmp_path: Path) -> None:
    error = create_error({"tokenFile": str(tmp_path / "t"), "tokenPath": "/x"})
    assert error.field == "options.tokenPath"


def test_refresh_interval_accepts_go_durations(tmp_path: Path) -> None:
    provider = FileProvider({"tokenFile": str(tmp_path / "t"), "refreshInterval": "1m30s"})
    assert provider.options.refresh_interval == 90.0


# -- bounded reads -------------------------------------------------------------------------------


def test_token_file_on_dev_zero_fails_fast_without_reading_it() -> None:
    started = time.perf_counter()
    with pytest.raises(ProviderError) as info:
        get({"tokenFile": "/dev/zero"})
    assert time.perf_counter() - started < 1.0
    assert str(info.value) == f"provider {PROVIDER}: file provider: cannot read tokenFile /dev/zero: is not a regular file"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_token_file_that_is_a_fifo_without_writer_fails_fast(tmp_path: Path) -> None:
    fifo = tmp_path / "token"
    os.mkfifo(fifo)
    started = time.perf_counter()
    with pytest.raises(ProviderError, match="is not a regular file"):
        get({"tokenFile": str(fifo)})
    assert time.perf_counter() - started < 1.0


def test_token_file_larger_than_the_bound_is_refused(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_bytes(b"a" * (MAX_FILE_BYTES + 1))
    with pytest.raises(ProviderError, match=r"cannot read tokenFile .*: is larger than 1024 KiB"):
        get({"tokenFile": str(token_file)})


def test_token_file_at_the_bound_is_read(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_bytes(b"a" * MAX_FILE_BYTES)
    assert len(get({"tokenFile": str(token_file)}).token) == MAX_FILE_BYTES


def test_symlinked_token_file_is_read_as_projected_volumes_use_them(tmp_path: Path) -> None:
    (tmp_path / "..data").mkdir()
    (tmp_path / "..data" / "token").write_text("projected")
    (tmp_path / "token").symlink_to(tmp_path / "..data" / "token")
    assert get({"tokenFile": str(tmp_path / "token")}).token == "projected"


def test_jwt_with_a_deeply_nested_payload_falls_back_to_the_refresh_interval(tmp_path: Path) -> None:
    payload = base64.urlsafe_b64encode(b"[" * 50_000).rstrip(b"=").decode()
    token_file = tmp_path / "token"
    token_file.write_text(f"eyJhbGciOiJSUzI1NiJ9.{payload}.c2ln")
    before = datetime.now(UTC)
    credential = get({"tokenFile": str(token_file), "refreshInterval": "5m"})
    assert credential.expiration_timestamp >= before + timedelta(minutes=5) - timedelta(seconds=1)
