"""``cpcreds-gcp-credential-provider`` in place of auth-provider-gcp in an unchanged kubelet config:
its command line (``get-credentials --v=3`` in GKE's and kOps' configs, ``--authFlow``/``-a``) and
the cases of its own tests (cmd/auth-provider-gcp: TestValidateAuthFlow, TestFlagError,
TestContainerRegistry), replayed through the console script as the kubelet runs it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("cpcreds_gcp", reason="install plugins-contrib/gcp")

from cpcreds.images.protocol import API_VERSION_V1  # noqa: E402
from cpcreds.sdk import AuthConfig, encode_request, parse_response  # noqa: E402
from cpcreds_gcp.dropin import DropInError, read_arguments  # noqa: E402
from cpcreds_gcp.kubelet import USERNAME  # noqa: E402
from tests.fakes.fixtures import command_runner  # noqa: E402
from tests.fakes.google import FakeMetadataServer  # noqa: E402

KUBELET_PLUGIN = Path(sys.executable).with_name("cpcreds-gcp-credential-provider")
IMAGE = "europe-west4-docker.pkg.dev/fleet-project/apps/checkout:1.4"

_run = command_runner()


def run(metadata: FakeMetadataServer, *args: str, image: str = IMAGE):
    return _run([KUBELET_PLUGIN, *args], input=encode_request(image, API_VERSION_V1).decode(), GCE_METADATA_HOST=metadata.host)


@pytest.mark.parametrize(
    "args",
    [
        ["get-credentials"],
        ["get-credentials", "--v=3"],  # GKE's and kOps' kubelet configs
        ["--v=3", "get-credentials"],
        ["get-credentials", "--authFlow=gcr"],
        ["get-credentials", "-a", "gcr", "-v", "2"],
        ["get-credentials", "--v", "3", "--authFlow", "gcr", "--scopes=https://www.googleapis.com/auth/cloud-platform"],
    ],
)
def test_auth_provider_gcps_kubelet_args_work_unchanged(metadata, args):
    result = run(metadata, *args)
    assert (result.returncode, result.stderr) == (0, "")
    [issued] = metadata.issued
    assert parse_response(result.stdout, API_VERSION_V1).auth["*.pkg.dev"] == AuthConfig(USERNAME, issued.token)


@pytest.mark.parametrize(
    ("flow", "said"),
    [("dockercfg", "not supported"), ("dockercfg-url", "not supported"), ("bad-flow", "'bad-flow'"), ("", "authFlow"), ("Gcrauthflow", "'Gcrauthflow'")],
)
def test_auth_flows_other_than_gcr_are_refused_naming_the_value(metadata, flow, said):
    # auth-provider-gcp's TestValidateAuthFlow and TestFlagError: a bad flow (case-sensitive, empty) is
    # refused and named; dockercfg and dockercfg-url are its own, which cpcreds does not offer.
    result = run(metadata, "get-credentials", f"--authFlow={flow}")
    assert (result.returncode, result.stdout) == (1, "") and result.stderr.count("\n") == 1
    assert result.stderr.startswith("cpcreds-gcp-credential-provider: ") and said in result.stderr
    assert metadata.seen == []


@pytest.mark.parametrize(
    "args",
    [["get-credentials", "--bogus=1"], ["get-credentials", "extra"], ["get-credentials", "get-credentials"], ["get-credentials", "--v=three"],
     ["get-credentials", "--identity-provider=https://container.googleapis.com/v1/projects/p/locations/l/clusters/c"]],
    ids=["unknown-flag", "second-word", "subcommand-twice", "verbosity-not-a-number", "identity-provider-without-project"],
)
def test_anything_else_is_refused_in_one_line_before_any_call(metadata, args):
    result = run(metadata, *args)
    assert (result.returncode, result.stdout) == (1, "") and result.stderr.count("\n") == 1
    assert metadata.seen == []


def test_an_image_outside_googles_registries_gets_an_empty_success_and_no_token(metadata):
    # auth-provider-gcp's TestContainerRegistry hands registry.k8s.io the node's token; cpcreds does not.
    result = run(metadata, "get-credentials", "--v=3", image="registry.k8s.io/pause:3.10")
    assert result.returncode == 0
    response = parse_response(result.stdout, API_VERSION_V1)
    assert (response.auth, response.cache_key_type, response.cache_duration) == ({}, "Registry", None)
    assert metadata.seen == []


def test_verbosity_4_shows_the_plugins_steps_on_stderr_without_the_token(metadata):
    quiet, verbose = run(metadata, "get-credentials", "--v=3"), run(metadata, "get-credentials", "--v=4")
    assert quiet.stderr == "" and verbose.returncode == 0
    assert "gcp token obtained" in verbose.stderr
    assert all(issued.token not in verbose.stderr for issued in metadata.issued)


_FLAG_WORDS = st.sampled_from(["get-credentials", "--v", "-v", "--authFlow", "-a", "gcr", "3", "--scopes", "--v=1", "-a=gcr", "--", "-", "=", "x"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(_FLAG_WORDS, st.text(max_size=20)), max_size=8))
def test_hostile_command_lines_are_read_or_refused_never_crash(argv):
    try:
        arguments = read_arguments(argv)
    except DropInError as exc:
        assert "\n" not in str(exc)
        return
    # What is left is argv without the subcommand and auth-provider-gcp's own flags, in order.
    remaining = iter(argv)
    assert all(any(word == other for other in remaining) for word in arguments.rest)
    assert isinstance(arguments.verbosity, int)
