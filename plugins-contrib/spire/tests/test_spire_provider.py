"""The spire provider in-process: through CredentialEngine, against a fake SPIRE agent speaking the
real Workload API on a unix socket."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from types import MappingProxyType
from typing import Any

import pytest

pytest.importorskip("cpcreds_spire", reason="install plugins-contrib/spire")

import grpc  # noqa: E402
from spiffe import WorkloadApiClient  # noqa: E402
from spiffe._proto import workload_pb2, workload_pb2_grpc  # noqa: E402

from cpcreds import AccessPlan, ConfigError, CredentialEngine, ExecCluster, ProviderError  # noqa: E402
from cpcreds_spire.plugin import SpireProvider  # noqa: E402
from tests.fakes.builders import access_provider, cluster_profile, config_of  # noqa: E402
from tests.fakes.spire import DEFAULT_IDENTITY, SpireAgent, stale_socket  # noqa: E402


def profile(name: str = "spoke-1", extension: Any = None, provider: str = "spire-agent") -> dict[str, Any]:
    return cluster_profile(name, access_provider(provider, f"https://{name}.example:6443", exec_extension=extension))


def plan(timeout: float = 5.0, config: Any = None) -> AccessPlan:
    """A plan as the engine would hand it to the provider (for calls without the engine)."""
    cluster = ExecCluster(server="https://spoke-1.example:6443", config=config)
    return AccessPlan(provider="spire-agent", kind="spire", cluster=cluster, options=MappingProxyType({}), timeout=timeout)


def claims_of(agent: SpireAgent, token: str, audience: str) -> dict[str, Any]:
    claims = agent.verify(token, audience)
    assert claims is not None, "not a JWT-SVID this agent signed for that audience"
    return claims


# -- the credential ---------------------------------------------------------------------------------


def test_the_token_is_a_jwt_svid_the_agent_signed_for_the_audience(agent, engine_for) -> None:
    credential = engine_for({"socket": agent.address, "audience": "https://spoke-1.example"}).get_credential(profile())
    claims = claims_of(agent, credential.token, "https://spoke-1.example")
    assert claims["sub"] == DEFAULT_IDENTITY
    assert agent.requests[-1].audience == ("https://spoke-1.example",)
    assert agent.refused == 0  # the client sent workload.spiffe.io: true


def test_the_expiry_is_the_tokens_exp(agent, engine_for) -> None:
    agent.ttl = 1234
    credential = engine_for({"socket": agent.address, "audience": "k8s"}).get_credential(profile())
    exp = claims_of(agent, credential.token, "k8s")["exp"]
    assert credential.expiration_timestamp == datetime.fromtimestamp(exp, timezone.utc)


def test_the_token_verifies_against_the_bundle_the_agent_publishes(agent, engine_for) -> None:
    from spiffe import JwtSvid, TrustDomain

    credential = engine_for({"socket": agent.address, "audience": "k8s"}).get_credential(profile())
    with WorkloadApiClient(agent.address) as client:
        bundle = client.fetch_jwt_bundles(timeout=5).get_bundle_for_trust_domain(TrustDomain("example.org"))
        assert str(JwtSvid.parse_and_validate(credential.token, bundle, {"k8s"}).spiffe_id) == DEFAULT_IDENTITY
        assert str(client.validate_jwt_svid(credential.token, "k8s", timeout=5).spiffe_id) == DEFAULT_IDENTITY


# -- where the audience comes from ------------------------------------------------------------------


def test_a_list_of_audiences_all_go_into_the_token(agent, engine_for) -> None:
    credential = engine_for({"socket": agent.address, "audience": ["a.example", "b.example", "a.example"]}).get_credential(profile())
    assert sorted(agent.requests[-1].audience) == ["a.example", "b.example"]
    assert sorted(claims_of(agent, credential.token, "a.example")["aud"]) == ["a.example", "b.example"]


def test_the_audience_comes_from_the_exec_extension_when_the_options_have_none(agent, engine_for) -> None:
    engine = engine_for({"socket": agent.address})
    credential = engine.get_credential(profile("spoke-2", {"clusterName": "spoke-2", "audience": "https://spoke-2.example"}))
    claims_of(agent, credential.token, "https://spoke-2.example")
    engine.get_credential(profile("spoke-3", {"audience": ["x.example", "y.example"]}))
    assert sorted(agent.requests[-1].audience) == ["x.example", "y.example"]


def test_the_audience_option_wins_over_the_exec_extension(agent, engine_for) -> None:
    engine_for({"socket": agent.address, "audience": "from-options"}).get_credential(profile(extension={"audience": "from-profile"}))
    assert agent.requests[-1].audience == ("from-options",)


def test_the_audience_comes_from_SPIFFE_JWT_AUDIENCE_last(agent, engine_for, monkeypatch) -> None:
    monkeypatch.setenv("SPIFFE_JWT_AUDIENCE", "from-env")
    engine = engine_for({"socket": agent.address})
    engine.get_credential(profile("spoke-1"))
    assert agent.requests[-1].audience == ("from-env",)
    engine.get_credential(profile("spoke-2", {"audience": "from-profile"}))
    assert agent.requests[-1].audience == ("from-profile",)


def test_no_audience_anywhere_is_an_error_naming_every_source(agent, engine_for) -> None:
    with pytest.raises(ProviderError) as caught:
        engine_for({"socket": agent.address}).get_credential(profile(extension={"clusterName": "spoke-1"}))
    assert str(caught.value) == (
        "provider spire-agent: spire: no audience for the JWT-SVID: set the audience option (-audience), audience in "
        "the ClusterProfile's client.authentication.k8s.io/exec extension, or SPIFFE_JWT_AUDIENCE"
    )
    assert agent.requests == []


@pytest.mark.parametrize(
    ("audience", "problem"),
    [
        (42, "must be a string or a list of strings, not a number"),
        ([], "must not be empty"),
        (["ok", {"a": 1}], "must be a string or a list of strings, not a list holding a mapping"),
        ("line\nbreak", "holds an audience with a control character"),
        (["x"] * 17, "has more than 16 audiences"),
    ],
)
def test_a_bad_audience_in_the_profile_is_an_error_without_its_value(agent, engine_for, audience, problem) -> None:
    with pytest.raises(ProviderError) as caught:
        engine_for({"socket": agent.address}).get_credential(profile(extension={"audience": audience}))
    assert str(caught.value) == (
        f"provider spire-agent: spire: audience in the ClusterProfile's client.authentication.k8s.io/exec extension {problem}"
    )


# -- where the socket comes from --------------------------------------------------------------------


@pytest.mark.parametrize("spelling", ["unix:///{path}", "unix:/{path}", "/{path}", "unix:////{path}"])
def test_the_socket_option_takes_a_unix_address_or_a_path(agent, engine_for, spelling) -> None:
    socket_option = spelling.format(path=str(agent.socket_path).lstrip("/"))
    credential = engine_for({"socket": socket_option, "audience": "k8s"}).get_credential(profile())
    claims_of(agent, credential.token, "k8s")


def test_the_socketPath_spelling_of_spire_agent_works_too(agent, engine_for) -> None:
    engine_for({"socketPath": str(agent.socket_path), "audience": "k8s"}).get_credential(profile())
    assert len(agent.requests) == 1


def test_the_socket_comes_from_SPIFFE_ENDPOINT_SOCKET_without_the_option(agent, engine_for, monkeypatch) -> None:
    monkeypatch.setenv("SPIFFE_ENDPOINT_SOCKET", agent.address)
    credential = engine_for({"audience": "k8s"}).get_credential(profile())
    claims_of(agent, credential.token, "k8s")


def test_the_socket_option_wins_over_SPIFFE_ENDPOINT_SOCKET(agent, engine_for, monkeypatch) -> None:
    monkeypatch.setenv("SPIFFE_ENDPOINT_SOCKET", "unix:///nonexistent/agent.sock")
    engine_for({"socket": agent.address, "audience": "k8s"}).get_credential(profile())
    assert len(agent.requests) == 1


def test_no_socket_is_an_error_naming_the_option_and_the_variable(engine_for) -> None:
    with pytest.raises(ProviderError) as caught:
        engine_for({"audience": "k8s"}).get_credential(profile())
    assert str(caught.value) == (
        "provider spire-agent: spire: no SPIFFE Workload API socket: set the socket option (-socket) or SPIFFE_ENDPOINT_SOCKET"
    )


def test_a_bad_SPIFFE_ENDPOINT_SOCKET_is_an_error_naming_it(engine_for, monkeypatch) -> None:
    monkeypatch.setenv("SPIFFE_ENDPOINT_SOCKET", "tcp://127.0.0.1:8081")
    with pytest.raises(ProviderError) as caught:
        engine_for({"audience": "k8s"}).get_credential(profile())
    assert str(caught.value) == (
        "provider spire-agent: spire: SPIFFE_ENDPOINT_SOCKET must be unix:///path/to/socket or an absolute path "
        "(the Workload API is a unix socket)"
    )


# -- several identities -----------------------------------------------------------------------------


def test_without_spiffeId_the_first_identity_is_taken(engine_for) -> None:
    with SpireAgent(identities=["spiffe://example.org/first", "spiffe://example.org/second"]) as agent:
        credential = engine_for({"socket": agent.address, "audience": "k8s"}).get_credential(profile())
        assert claims_of(agent, credential.token, "k8s")["sub"] == "spiffe://example.org/first"


@pytest.mark.parametrize("spelling", ["spiffeId", "spiffeID"])
def test_spiffeId_picks_that_identity_and_is_sent_to_the_agent(engine_for, spelling) -> None:
    with SpireAgent(identities=["spiffe://example.org/first", "spiffe://example.org/second"]) as agent:
        options = {"socket": agent.address, "audience": "k8s", spelling: "spiffe://example.org/second"}
        credential = engine_for(options).get_credential(profile())
        assert claims_of(agent, credential.token, "k8s")["sub"] == "spiffe://example.org/second"
        assert agent.requests[-1].spiffe_id == "spiffe://example.org/second"


def test_an_agent_that_answers_with_another_identity_than_spiffeId_is_an_error(agent, engine_for) -> None:
    agent.answer = [agent.issue("spiffe://example.org/someone-else", ["k8s"])]
    with pytest.raises(ProviderError) as caught:
        engine_for({"socket": agent.address, "audience": "k8s", "spiffeId": DEFAULT_IDENTITY}).get_credential(profile())
    assert str(caught.value) == (
        f"provider spire-agent: spire: the SPIFFE Workload API at {agent.address} returned no JWT-SVID for spiffeId {DEFAULT_IDENTITY}"
    )


# -- the agent's errors -----------------------------------------------------------------------------


def test_no_identity_issued_is_an_error_with_the_agents_status(agent, engine_for) -> None:
    agent.identities = []
    with pytest.raises(ProviderError) as caught:
        engine_for({"socket": agent.address, "audience": "k8s"}).get_credential(profile())
    assert str(caught.value) == (
        f"provider spire-agent: spire: the SPIFFE Workload API at {agent.address} issued no JWT-SVID to this workload "
        "(PERMISSION_DENIED: no identity issued); is it registered with the SPIRE server?"
    )


def test_an_unknown_spiffeId_is_no_identity_issued(agent, engine_for) -> None:
    with pytest.raises(ProviderError, match=r"\(PERMISSION_DENIED: no identity issued\)"):
        engine_for({"socket": agent.address, "audience": "k8s", "spiffeId": "spiffe://example.org/nobody"}).get_credential(profile())


def test_an_unavailable_agent_is_unreachable(agent, engine_for) -> None:
    agent.failure = (grpc.StatusCode.UNAVAILABLE, "agent is shutting down")
    with pytest.raises(ProviderError) as caught:
        engine_for({"socket": agent.address, "audience": "k8s"}).get_credential(profile())
    assert str(caught.value) == (
        f"provider spire-agent: spire: cannot reach the SPIFFE Workload API at {agent.address} (UNAVAILABLE: agent is shutting down)"
    )


def test_a_socket_nobody_listens_on_is_unreachable(engine_for) -> None:
    path, remove = stale_socket()
    try:
        with pytest.raises(ProviderError) as caught:
            engine_for({"socket": str(path), "audience": "k8s"}).get_credential(profile())
    finally:
        remove()
    assert str(caught.value).startswith(f"provider spire-agent: spire: cannot reach the SPIFFE Workload API at unix://{path} (UNAVAILABLE")
    assert "\n" not in str(caught.value)


def test_a_missing_socket_is_unreachable(engine_for) -> None:
    with pytest.raises(ProviderError) as caught:
        engine_for({"socket": "/nonexistent/spire/agent.sock", "audience": "k8s"}).get_credential(profile())
    assert str(caught.value) == (
        "provider spire-agent: spire: cannot reach the SPIFFE Workload API: the socket unix:///nonexistent/spire/agent.sock "
        "does not exist (is the SPIRE agent running, and its socket mounted here?)"
    )


def test_other_statuses_are_shown_as_the_agent_gave_them_on_one_line_redacted(agent, engine_for) -> None:
    token = agent.issue(DEFAULT_IDENTITY, ["k8s"])
    agent.failure = (grpc.StatusCode.INTERNAL, f"datastore\nfailed near {token}")
    with pytest.raises(ProviderError) as caught:
        engine_for({"socket": agent.address, "audience": "k8s"}).get_credential(profile())
    message = str(caught.value)
    assert message.startswith(f"provider spire-agent: spire: the SPIFFE Workload API at {agent.address} failed (INTERNAL: datastore failed near ")
    assert token not in message and token.split(".")[1] not in message
    assert "\n" not in message


# -- deadlines --------------------------------------------------------------------------------------


def test_an_agent_that_never_answers_fails_at_the_plans_timeout(agent) -> None:
    agent.hang = True
    provider = SpireProvider({"socket": agent.address, "audience": "k8s"})
    started = time.monotonic()
    with pytest.raises(ProviderError) as caught:
        provider.get_credential(plan(timeout=0.3))
    elapsed = time.monotonic() - started
    provider.close()
    assert 0.2 <= elapsed < 3  # the fetch's deadline (a fifth of 0.3 s before it), by grpc's clock, not ours
    assert str(caught.value) == (
        f"provider spire-agent: spire: the SPIFFE Workload API at {agent.address} did not answer within 0.3s (DEADLINE_EXCEEDED)"
    )


def test_the_timeout_option_shortens_the_wait_below_the_entrys_timeout(agent, engine_for) -> None:
    agent.hang = True
    started = time.monotonic()
    with pytest.raises(ProviderError, match=r"did not answer within 0\.2s \(DEADLINE_EXCEEDED\)"):
        engine_for({"socket": agent.address, "audience": "k8s", "timeout": "200ms"}, timeout="30s").get_credential(profile())
    assert time.monotonic() - started < 3


def test_through_the_engine_a_hanging_agent_fails_within_the_entrys_timeout(agent, engine_for) -> None:
    agent.hang = True
    started = time.monotonic()
    with pytest.raises(ProviderError):
        engine_for({"socket": agent.address, "audience": "k8s"}, timeout="500ms").get_credential(profile())
    assert time.monotonic() - started < 3


# -- one client per socket --------------------------------------------------------------------------


def test_one_connection_serves_every_cluster_and_thread(agent, engine_for) -> None:
    engine = engine_for({"socket": agent.address})
    names = [f"spoke-{i}" for i in range(40)]
    barrier = threading.Barrier(8)

    def fetch(name: str) -> tuple[str, str]:
        if names.index(name) < 8:
            barrier.wait(timeout=10)  # the first eight start together: a race to build the client
        return name, engine.get_credential(profile(name, {"audience": f"https://{name}.example"})).token

    with ThreadPoolExecutor(max_workers=8) as pool:
        tokens = dict(pool.map(fetch, names))
    for name, token in tokens.items():
        claims_of(agent, token, f"https://{name}.example")
    assert len(agent.requests) == 40
    assert agent.connections == 1


def test_the_client_is_reused_even_after_the_socket_file_is_gone(agent) -> None:
    # Building a client checks that the socket exists; reusing it needs only its connection.
    provider = SpireProvider({"socket": agent.address, "audience": "k8s"})
    provider.get_credential(plan())
    agent.socket_path.unlink()
    provider.get_credential(plan())
    provider.close()
    assert len(agent.requests) == 2


def test_threads_racing_for_the_first_client_get_the_same_one(agent) -> None:
    from cpcreds_spire.workload import WorkloadClients

    clients = WorkloadClients()
    barrier = threading.Barrier(16)

    def build(_: int) -> int:
        barrier.wait(timeout=10)
        return id(clients.client(agent.address))

    with ThreadPoolExecutor(max_workers=16) as pool:
        assert len(set(pool.map(build, range(16)))) == 1
    clients.close()


def test_each_socket_gets_its_own_client(monkeypatch) -> None:
    with SpireAgent() as one, SpireAgent(identities=["spiffe://example.org/other"]) as two:
        provider = SpireProvider({"audience": "k8s"})
        for agent in (one, two, one, two):
            monkeypatch.setenv("SPIFFE_ENDPOINT_SOCKET", agent.address)
            provider.get_credential(plan())
        provider.close()
        assert (one.connections, two.connections) == (1, 1)
        assert (len(one.requests), len(two.requests)) == (2, 2)


# -- options ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"audience": 5}, 'field options.audience: must be a string or a list of strings, not a number'),
        ({"audience": []}, "field options.audience: must not be empty"),
        ({"socket": "tcp://127.0.0.1:8081"}, "field options.socket: must be unix:///path/to/socket or an absolute path (the Workload API is a unix socket)"),
        ({"socket": "unix://host/agent.sock"}, "field options.socket: must be unix:///path/to/socket (no host part) or an absolute path"),
        ({"socket": "/" + "s" * 200}, "field options.socket: is longer than a unix socket path may be (107 bytes)"),
        ({"spiffeId": "not-a-spiffe-id"}, "field options.spiffeId: must be a SPIFFE ID such as spiffe://example.org/workload"),
        ({"timeout": "5 minutes"}, "field options.timeout: must be a duration such as 30s, 2m or 1h30m"),
        ({"timeout": "2h"}, "field options.timeout: must be longer than zero and at most 1h"),
        ({"audiences": "k8s"}, "field options.audiences: is not a known field; did you mean 'audience'?"),
    ],
)
def test_bad_options_are_config_errors_naming_the_option(registry, options, message) -> None:
    with pytest.raises(ConfigError) as caught:
        CredentialEngine(config_of({"name": "spire-agent", "type": "spire", "options": options}), registry=registry)
    assert str(caught.value).startswith(f'test-config.yaml: provider "spire-agent": {message}')


def test_a_zero_timeout_means_only_the_entrys_timeout(agent) -> None:
    provider = SpireProvider({"socket": agent.address, "audience": "k8s", "timeout": "0"})
    assert provider.options.timeout is None
    provider.get_credential(plan())
    provider.close()


# -- what errors carry ------------------------------------------------------------------------------


def test_errors_chain_nothing(agent) -> None:
    agent.identities = []
    provider = SpireProvider({"socket": agent.address, "audience": "k8s"})
    with pytest.raises(ProviderError) as caught:
        provider.get_credential(plan())
    provider.close()
    assert caught.value.__cause__ is None and caught.value.__context__ is None


def test_the_fake_agent_refuses_a_call_without_the_security_header(agent) -> None:
    # What makes the header assertions above meaningful: the agent checks it, as SPIRE does.
    with grpc.insecure_channel(f"unix:{agent.socket_path}") as channel:
        stub = workload_pb2_grpc.SpiffeWorkloadAPIStub(channel)
        with pytest.raises(grpc.RpcError) as caught:
            stub.FetchJWTSVID(workload_pb2.JWTSVIDRequest(audience=["k8s"]), timeout=5)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details() == "security header missing from request"
    assert agent.refused == 1 and agent.requests == []
