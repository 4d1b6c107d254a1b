"""secretreader's hub client (the kubernetes client, loaded with cpcreds' bounds around its loader)
against hostile hub kubeconfigs: a token file that is a FIFO, a folder, huge, holds a line break
or any bytes, a CA or client certificate file that is a FIFO or a folder, a CA that is not PEM, a
server URL carrying a password. Each is one ProviderError within the timeout, and no token or
password shows in its message, its repr, its exception chain or the log."""

from __future__ import annotations

import base64
import itertools
import logging
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

pytest.importorskip("cpcreds_secretreader", reason="install plugins-contrib/secretreader")

from cpcreds import CredentialEngine, CredentialError, ProviderRegistry  # noqa: E402
from tests.fakes.builders import access_provider, cluster_profile, config_of  # noqa: E402
from tests.fakes.hub import HubServer, secret  # noqa: E402

FLEET = "fleet-system"
HUB_SECRET = "hub-t0ken-r0und4-xyz"
PASSWORD = "pa55w0rd-r0und4"
#: Hub clients are shared per kubeconfig path for the process: each case gets a path of its own.
_names = itertools.count()


@pytest.fixture
def engine_for() -> Iterator[Callable[[Path], CredentialEngine]]:
    from cpcreds_secretreader import plugin

    made: list[CredentialEngine] = []

    def make(kubeconfig: Path) -> CredentialEngine:
        entry = {"name": "secretreader", "type": "secretreader", "options": {"kubeconfig": str(kubeconfig)}, "timeout": "3s"}
        engine = CredentialEngine(config_of(entry), registry=ProviderRegistry(entry_points=False, plugins=(plugin,)), prometheus_registry=CollectorRegistry())
        made.append(engine)
        return engine

    yield make
    for engine in made:
        engine.close()


def profile() -> dict[str, Any]:
    return cluster_profile("spoke-1", access_provider("secretreader", "https://spoke-1.example:6443", exec_extension={"clusterName": "spoke-1"}))


def chain(exc: BaseException | None) -> Iterator[BaseException]:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def refused(engine: CredentialEngine, caplog: pytest.LogCaptureFixture, *secrets: str) -> CredentialError:
    started = time.monotonic()
    with pytest.raises(CredentialError) as raised:
        engine.get_credential(profile())
    assert time.monotonic() - started < 6
    error = raised.value
    message = str(error)
    assert "\n" not in message
    for exc in chain(error):
        for text in (str(exc), repr(exc)):
            for value in secrets:
                assert value not in text, text
    for record in caplog.records:
        for value in secrets:
            assert value not in record.getMessage() and value not in str(record.__dict__)
    return error


def kubeconfig_of(hub: HubServer, tmp_path: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    document = hub.kubeconfig(HUB_SECRET, namespace=FLEET)
    change(document)
    path = tmp_path / f"hub-{next(_names)}.kubeconfig"
    path.write_text(yaml.safe_dump(document))
    return path


def user(document: dict[str, Any]) -> dict[str, Any]:
    return document["users"][0]["user"]


def cluster(document: dict[str, Any]) -> dict[str, Any]:
    return document["clusters"][0]["cluster"]


def with_token_file(target: Path) -> Callable[[dict[str, Any]], None]:
    def change(document: dict[str, Any]) -> None:
        user(document).pop("token", None)
        user(document)["tokenFile"] = str(target)

    return change


@pytest.mark.parametrize("kind", ["fifo", "folder", "huge", "line-break", "missing"])
def test_a_hostile_token_file_is_one_provider_error(kind: str, hub: HubServer, tmp_path: Path, engine_for: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    hub.create(secret(FLEET, "spoke-1", {"token": "spoke-token-r0und4"}))
    target = tmp_path / "token"
    if kind == "fifo":
        os.mkfifo(target)  # nobody writes: a blocking open would hang
    elif kind == "folder":
        target.mkdir()
    elif kind == "huge":
        target.write_text(HUB_SECRET * 20_000)
    elif kind == "line-break":
        target.write_text(HUB_SECRET[:6] + "\r\n" + HUB_SECRET[6:])
    refused(engine_for(kubeconfig_of(hub, tmp_path, with_token_file(target))), caplog, HUB_SECRET, HUB_SECRET[:6] + "\r\n", HUB_SECRET[6:], "spoke-token-r0und4")


def test_a_server_url_with_a_password_never_shows_it(hub: HubServer, tmp_path: Path, engine_for: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)

    def change(document: dict[str, Any]) -> None:
        server = cluster(document)["server"]
        cluster(document)["server"] = server.replace("https://", f"https://admin:{PASSWORD}@").rsplit(":", 1)[0] + ":1"  # nothing listens

    refused(engine_for(kubeconfig_of(hub, tmp_path, change)), caplog, PASSWORD, HUB_SECRET)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    ca=st.binary(max_size=200) | st.sampled_from([b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", b"\x00" * 10, b"\xff\xfe"]),
    as_file=st.booleans(),
    server=st.sampled_from(["https://", "https://[", "https://:0", "https://x:99999", "https://a b", "https://\x00", f"https://u:{PASSWORD}@[::1"]) | st.none(),
)
def test_a_hostile_ca_or_server_is_one_provider_error(
    ca: bytes, as_file: bool, server: str | None, hub: HubServer, tmp_path: Path, engine_for: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.clear()

    def change(document: dict[str, Any]) -> None:
        section = cluster(document)
        section.pop("certificate-authority-data", None)
        if as_file:
            (tmp_path / "ca.pem").write_bytes(ca)
            section["certificate-authority"] = str(tmp_path / "ca.pem")
        else:
            section["certificate-authority-data"] = base64.b64encode(ca).decode()
        if server is not None:
            section["server"] = server

    refused(engine_for(kubeconfig_of(hub, tmp_path, change)), caplog, PASSWORD, HUB_SECRET)


@pytest.mark.parametrize("field", ["certificate-authority", "client-certificate", "client-key"])
@pytest.mark.parametrize("kind", ["fifo", "folder", "huge", "missing"])
def test_a_hostile_file_the_kubeconfig_names_is_one_provider_error(
    field: str, kind: str, hub: HubServer, tmp_path: Path, engine_for: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # The kubernetes loader opens these with a blocking open() and reads them whole: a FIFO nobody
    # writes would hang the fetch for ever, past every timeout.
    caplog.set_level(logging.DEBUG)
    hub.create(secret(FLEET, "spoke-1", {"token": "spoke-token-r0und4"}))
    target = tmp_path / f"{field}.pem"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "folder":
        target.mkdir()
    elif kind == "huge":
        target.write_bytes(b"A" * (5 * 1024 * 1024))

    def change(document: dict[str, Any]) -> None:
        section = cluster(document) if field == "certificate-authority" else user(document)
        section.pop(f"{field}-data", None)
        section[field] = str(target)

    error = refused(engine_for(kubeconfig_of(hub, tmp_path, change)), caplog, HUB_SECRET, "spoke-token-r0und4")
    assert field in str(error)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(content=st.binary(max_size=80))
def test_any_token_file_content_reads_the_secret_or_is_one_provider_error(
    content: bytes, hub: HubServer, tmp_path: Path, engine_for: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.clear()
    hub.put(secret(FLEET, "spoke-1", {"token": "spoke-token-r0und4"}))
    target = tmp_path / f"token-{next(_names)}"
    target.write_bytes(HUB_SECRET.encode() + content)
    engine = engine_for(kubeconfig_of(hub, tmp_path, with_token_file(target)))
    try:
        credential = engine.get_credential(profile())
    except CredentialError as exc:
        for cause in chain(exc):
            for text in (str(cause), repr(cause)):
                assert HUB_SECRET not in text and "spoke-token-r0und4" not in text
        assert "\n" not in str(exc)
    else:
        # Only a token the hub knows reads the Secret: the file's, without surrounding whitespace.
        assert credential.token == "spoke-token-r0und4"
        assert (HUB_SECRET.encode() + content).strip() == HUB_SECRET.encode()
    for record in caplog.records:
        assert HUB_SECRET not in record.getMessage() and HUB_SECRET not in str(record.__dict__)
