"""How the hub is reached (the kubernetes client, from one kubeconfig file or a KUBECONFIG list):
the fetch's timeout bounds the whole exchange, a status line and headers that never end
included; and a proxy set in the environment in any spelling the kubernetes client reads is used
for the hub."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("cpcreds_secretreader", reason="install plugins-contrib/secretreader")

from cpcreds import CredentialEngine, CredentialError  # noqa: E402
from secretreader_helpers import FLEET, cluster, entry  # noqa: E402
from tests.fakes.hub import HubServer, secret  # noqa: E402
from tests.test_kube import ConnectProxy  # noqa: E402

Engine = Callable[..., CredentialEngine]
SECRET_PATH = f"/api/v1/namespaces/{FLEET}/secrets/spoke-1"
#: Generous: the fetch's timeout is 2 s; this only says "it stops at all".
HANG_UP_WITHIN = 60.0


def _source(kubeconfig: Path, kind: str) -> str:
    # A KUBECONFIG-style list is merged by the loader; one file is read as it is.
    return str(kubeconfig) if kind == "one-file" else f"{kubeconfig}{os.pathsep}{kubeconfig}"


@pytest.mark.parametrize("kind", ["one-file", "kubeconfig-list"])
def test_a_hub_trickling_its_status_line_and_headers_is_hung_up_on_at_the_timeout(
    hub: HubServer, kubeconfig: Path, make_engine: Engine, kind: str
) -> None:
    hung_up = hub.trickle_head(SECRET_PATH)
    engine = make_engine(entry({"kubeconfig": _source(kubeconfig, kind)}, timeout="2s"))

    with pytest.raises(CredentialError) as raised:
        engine.get_credential(cluster("spoke-1"))

    assert "2s" in str(raised.value) and "\n" not in str(raised.value)
    # The engine stops waiting at its timeout whatever the provider does; the provider's own
    # exchange must end too (else it holds the plan, and every later fetch of it waits on it).
    assert hung_up.wait(HANG_UP_WITHIN), "the fetch went on reading the trickle past its timeout"


@pytest.mark.parametrize("kind", ["one-file", "kubeconfig-list"])
def test_after_a_trickling_answer_the_next_fetch_reads_the_secret(
    hub: HubServer, kubeconfig: Path, make_engine: Engine, kind: str
) -> None:
    # The connection the trickle was cut on is not reused: the next answer is read whole.
    hung_up = hub.trickle_head(SECRET_PATH)
    source = _source(kubeconfig, kind)
    with pytest.raises(CredentialError):
        make_engine(entry({"kubeconfig": source}, timeout="2s")).get_credential(cluster("spoke-1"))
    assert hung_up.wait(HANG_UP_WITHIN)
    hub.clear_faults()
    hub.create(secret(FLEET, "spoke-1", {"token": "t-spoke-1"}))
    assert make_engine(entry({"kubeconfig": source}, timeout="10s")).get_credential(cluster("spoke-1")).token == "t-spoke-1"


@pytest.fixture
def no_proxy_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """None of the machine's proxy variables, in any spelling."""
    for name in list(os.environ):
        if name.lower().endswith("_proxy"):
            monkeypatch.delenv(name)


@pytest.fixture
def proxy() -> Iterator[ConnectProxy]:
    with ConnectProxy() as server:
        yield server


def _spellings(word: str) -> st.SearchStrategy[str]:
    return st.tuples(*[st.sampled_from([c.lower(), c.upper()]) for c in word]).map("".join)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=_spellings("https_proxy") | _spellings("all_proxy"))
def test_a_proxy_variable_in_any_spelling_carries_the_hub_request(
    hub: HubServer, kubeconfig: Path, make_engine: Engine, no_proxy_variables: None, proxy: ConnectProxy,
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    hub.put(secret(FLEET, "spoke-1", {"token": "t-spoke-1"}))
    before = len(proxy.targets)
    with monkeypatch.context() as env:
        env.setenv(name, proxy.url)
        # A new engine per example: its provider builds the hub client afresh, under this variable.
        engine = make_engine(entry({"kubeconfig": str(kubeconfig)}, timeout="10s"))
        try:
            assert engine.get_credential(cluster("spoke-1")).token == "t-spoke-1"
        finally:
            engine.close()
    assert proxy.targets[before:] == [hub.url.removeprefix("https://")]
