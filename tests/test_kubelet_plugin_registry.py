"""The registry fake (tests/fakes/registry.py) answers GET /v2/ as a registry with basic auth does,
proven with an ordinary HTTPS client (requests) rather than with cpcreds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests

from tests.fakes.pki import PKI
from tests.fakes.registry import UNAUTHORIZED_BODY, FakeRegistry, RegistryRequest, basic_credentials


@pytest.fixture
def registry(pki: PKI) -> Iterator[FakeRegistry]:
    with FakeRegistry(pki, users={"robot": "pa:ss"}, realm="fake realm") as server:
        yield server


def test_without_credentials_v2_is_a_basic_challenge(registry: FakeRegistry, ca_file: str) -> None:
    answer = requests.get(f"{registry.url}/v2/", verify=ca_file, timeout=10)
    assert answer.status_code == 401
    assert answer.headers["WWW-Authenticate"] == 'Basic realm="fake realm"'
    assert answer.headers["Docker-Distribution-API-Version"] == "registry/2.0"
    assert answer.json() == UNAUTHORIZED_BODY


def test_the_right_basic_credentials_open_v2(registry: FakeRegistry, ca_file: str) -> None:
    answer = requests.get(f"{registry.url}/v2/", auth=("robot", "pa:ss"), verify=ca_file, timeout=10)
    assert (answer.status_code, answer.json()) == (200, {})
    assert registry.requests == [RegistryRequest("GET", "/v2/", "robot", True)]


@pytest.mark.parametrize("auth", [("robot", "wrong"), ("other", "pa:ss"), ("robot", "pa:ss ")])
def test_wrong_credentials_are_refused(registry: FakeRegistry, ca_file: str, auth: tuple[str, str]) -> None:
    answer = requests.get(f"{registry.url}/v2/", auth=auth, verify=ca_file, timeout=10)
    assert answer.status_code == 401
    assert registry.requests[-1] == RegistryRequest("GET", "/v2/", auth[0], False)


def test_a_rotated_password_replaces_the_old_one(registry: FakeRegistry, ca_file: str) -> None:
    registry.set_users({"robot": "new"})
    assert requests.get(f"{registry.url}/v2/", auth=("robot", "pa:ss"), verify=ca_file, timeout=10).status_code == 401
    assert requests.get(f"{registry.url}/v2/", auth=("robot", "new"), verify=ca_file, timeout=10).status_code == 200


def test_head_and_other_paths(registry: FakeRegistry, ca_file: str) -> None:
    assert requests.head(f"{registry.url}/v2/", auth=("robot", "pa:ss"), verify=ca_file, timeout=10).status_code == 200
    assert requests.get(f"{registry.url}/v2/team/app/manifests/1", auth=("robot", "pa:ss"), verify=ca_file, timeout=10).status_code == 404
    assert requests.get(f"{registry.url}/v2/team/app/manifests/1", verify=ca_file, timeout=10).status_code == 401


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("Basic cm9ib3Q6cGE6c3M=", ("robot", "pa:ss")),
        ("basic cm9ib3Q6cGE6c3M=", ("robot", "pa:ss")),
        ("Bearer cm9ib3Q6cGE6c3M=", None),
        ("Basic !!!", None),
        ("Basic bm9jb2xvbg==", None),  # "nocolon"
        ("Basic", None),
        (None, None),
    ],
)
def test_basic_credentials_are_read_as_go_reads_them(header: str | None, expected: tuple[str, str] | None) -> None:
    assert basic_credentials(header) == expected
