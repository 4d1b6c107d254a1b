"""Image pulls with the pod's identity (KEP-4412): ImageCredentials.get() with a pod's
service-account token and annotations, against real plugin processes
(tests/fakes/kubelet_plugin.py), following the kubelet's pluginProvider.provide: which providers
run, what they are sent, how answers are keyed per cacheType, and that the token never leaks."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpcreds import ImageCredentialError, ImageCredentials, PluginExecutionError, PluginOutputError
from cpcreds.images.protocol import API_VERSION_V1, API_VERSION_V1BETA1, ProtocolError, encode_request, parse_request
from tests.fakes.kubelet_plugin import install, provider_entry, runs, write_config

POD_TOKEN = "pod-token-never-shown-0123456789"
OTHER_TOKEN = "other-pod-token-never-shown-9876"
ROLE = "registry.io/role"
TEAM = "registry.io/team"
ATTRIBUTES = {
    "serviceAccountTokenAudience": "registry.io",
    "requireServiceAccount": True,
    "requiredServiceAccountAnnotationKeys": [ROLE],
    "optionalServiceAccountAnnotationKeys": [TEAM],
    "cacheType": "ServiceAccount",
}
WEB = ("shop", "web", "uid-web")


class Node:
    """A bin dir and a config in tmp_path; every plugin counts its runs and records its requests."""

    def __init__(self, tmp_path: Path) -> None:
        self.dir = tmp_path
        self.bin = tmp_path / "bin"
        self.count = tmp_path / "runs"
        self.record = tmp_path / "record.jsonl"

    def plugin(self, name: str, *args: str) -> None:
        install(self.bin, name, "--count-file", str(self.count), "--record", str(self.record), *args)

    def open(self, *providers: dict[str, Any], **options: Any) -> ImageCredentials:
        return ImageCredentials.from_kubelet_config(write_config(self.dir / "config.json", *providers), self.bin, **options)

    def runs(self) -> list[str]:
        return runs(self.count)

    def requests(self) -> list[dict[str, Any]]:
        if not self.record.exists():
            return []
        return [json.loads(line)["request"] for line in self.record.read_text().splitlines()]


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path)


def pod(token: str = POD_TOKEN, annotations: dict[str, str] | None = None, account: tuple[str, str, str] | None = WEB) -> dict[str, Any]:
    return {
        "service_account_token": token,
        "service_account_annotations": {ROLE: "puller"} if annotations is None else annotations,
        "service_account": account,
    }


# -- what is sent --------------------------------------------------------------------------------


def test_the_pods_token_and_only_the_named_annotations_are_sent(node: Node) -> None:
    node.plugin("p", "--auth", "REGISTRY=u:p")
    node.plugin("plain", "--auth", "IMAGE=v:q")
    with node.open(provider_entry("p", "registry.io", tokenAttributes=ATTRIBUTES), provider_entry("plain", "registry.io")) as images:
        credentials = images.get("registry.io/app", **pod(annotations={ROLE: "puller", TEAM: "web", "other.io/x": "y"}))
    first, second = node.requests()
    assert first["serviceAccountToken"] == POD_TOKEN
    assert first["serviceAccountAnnotations"] == {ROLE: "puller", TEAM: "web"}
    # A provider without tokenAttributes never sees the token, as the kubelet's.
    assert "serviceAccountToken" not in second and "serviceAccountAnnotations" not in second
    assert [c.provider for c in credentials] == ["plain", "p"]


def test_an_optional_annotation_is_sent_only_when_present(node: Node) -> None:
    node.plugin("p", "--auth", "REGISTRY=u:p")
    with node.open(provider_entry("p", "registry.io", tokenAttributes=ATTRIBUTES)) as images:
        images.get("registry.io/app", **pod())
    assert node.requests()[0]["serviceAccountAnnotations"] == {ROLE: "puller"}


def test_a_per_request_token_replaces_the_constructors_token_file_and_annotations(node: Node) -> None:
    token_file = node.dir / "own-token"
    token_file.write_text("own-token-of-this-program")
    node.plugin("p", "--auth", "REGISTRY=u:p")
    options = {"service_account_token_file": token_file, "service_account_annotations": {ROLE: "own", TEAM: "own"}}
    with node.open(provider_entry("p", "registry.io", tokenAttributes=ATTRIBUTES), **options) as images:
        images.get("registry.io/app", **pod())
        images.get("registry.io/app")
    for_pod, own = node.requests()
    assert (for_pod["serviceAccountToken"], for_pod["serviceAccountAnnotations"]) == (POD_TOKEN, {ROLE: "puller"})
    assert (own["serviceAccountToken"], own["serviceAccountAnnotations"]) == ("own-token-of-this-program", {ROLE: "own", TEAM: "own"})


def test_a_missing_required_annotation_skips_that_provider_as_the_kubelet_does(node: Node) -> None:
    node.plugin("p", "--auth", "REGISTRY=u:p")
    node.plugin("plain", "--auth", "REGISTRY=v:q")
    with node.open(provider_entry("p", "registry.io", tokenAttributes=ATTRIBUTES), provider_entry("plain", "registry.io")) as images:
        credentials = images.get("registry.io/app", **pod(annotations={TEAM: "web"}))
    assert [c.provider for c in credentials] == ["plain"]
    assert node.runs() == ["registry.io/app"]


def test_require_service_account_without_a_token_names_what_is_missing(node: Node) -> None:
    node.plugin("p", "--auth", "REGISTRY=u:p")
    with node.open(provider_entry("p", "registry.io", tokenAttributes=ATTRIBUTES)) as images:
        with pytest.raises(ImageCredentialError, match=r"provider p: tokenAttributes.requireServiceAccount is true, but no service-account token was given \(service_account_token="):
            images.get("registry.io/app")
    assert node.runs() == []


def test_without_require_service_account_a_lookup_without_a_token_runs_without_one(node: Node) -> None:
    node.plugin("p", "--auth", "REGISTRY=u:p", "--password-per-run")
    attributes = {**ATTRIBUTES, "requireServiceAccount": False, "requiredServiceAccountAnnotationKeys": [], "optionalServiceAccountAnnotationKeys": [ROLE]}
    with node.open(provider_entry("p", "registry.io", tokenAttributes=attributes)) as images:
        node_identity = images.get("registry.io/app")[0].password
        pod_identity = images.get("registry.io/app", **pod())[0].password
        assert images.get("registry.io/app")[0].password == node_identity
    # The node's answer and the pod's are kept apart: neither serves the other.
    assert (node_identity, pod_identity) == ("p-1", "p-2")
    without, with_token = node.requests()
    assert "serviceAccountToken" not in without and "serviceAccountAnnotations" not in without
    assert with_token["serviceAccountToken"] == POD_TOKEN


# -- cache keys -----------------------------------------------------------------------------------


def passwords(images: ImageCredentials, *lookups: dict[str, Any]) -> list[str]:
    return [images.get("registry.io/app", **lookup)[0].password for lookup in lookups]


def test_service_account_cache_type_shares_an_answer_per_service_account_not_per_token(node: Node) -> None:
    node.plugin("p", "--auth", "REGISTRY=u:p", "--password-per-run")
    with node.open(provider_entry("p", "registry.io", tokenAttributes=ATTRIBUTES)) as images:
        got = passwords(
            images,
            pod(POD_TOKEN),
            pod(OTHER_TOKEN),  # another pod of the same service account: the kubelet shares it
            pod(POD_TOKEN, account=("shop", "cart", "uid-cart")),  # another service account
            pod(POD_TOKEN, account=("shop", "web", "uid-web-recreated")),  # the same name, recreated
            pod(POD_TOKEN, account=("billing", "web", "uid-web")),  # another namespace
            pod(POD_TOKEN, annotations={ROLE: "admin"}),  # other annotations sent
        )
    assert got == ["p-1", "p-1", "p-2", "p-3", "p-4", "p-5"]


def test_an_annotation_not_named_by_the_provider_does_not_split_the_cache(node: Node) -> None:
    node.plugin("p", "--auth", "REGISTRY=u:p", "--password-per-run")
    with node.open(provider_entry("p", "registry.io", tokenAttributes=ATTRIBUTES)) as images:
        got = passwords(images, pod(), pod(annotations={ROLE: "puller", "unrelated.io/x": "1"}))
    assert got == ["p-1", "p-1"]


def test_service_account_cache_type_without_coordinates_keeps_answers_per_token(node: Node) -> None:
    node.plugin("p", "--auth", "REGISTRY=u:p", "--password-per-run")
    with node.open(provider_entry("p", "registry.io", tokenAttributes=ATTRIBUTES)) as images:
        got = passwords(images, pod(POD_TOKEN, account=None), pod(OTHER_TOKEN, account=None), pod(POD_TOKEN, account=None))
    assert got == ["p-1", "p-2", "p-1"]


def test_token_cache_type_keeps_answers_per_token_even_for_one_service_account(node: Node) -> None:
    node.plugin("p", "--auth", "REGISTRY=u:p", "--password-from-token")
    with node.open(provider_entry("p", "registry.io", tokenAttributes={**ATTRIBUTES, "cacheType": "Token"})) as images:
        got = passwords(images, pod(POD_TOKEN), pod(OTHER_TOKEN), pod(POD_TOKEN))
    assert got == [POD_TOKEN, OTHER_TOKEN, POD_TOKEN]
    assert len(node.runs()) == 2


def test_an_answer_that_is_the_token_itself_is_refused_unless_cache_type_is_token(node: Node) -> None:
    node.plugin("p", "--auth", "REGISTRY=u:p", "--password-from-token")
    with node.open(provider_entry("p", "registry.io", tokenAttributes=ATTRIBUTES)) as images:
        with pytest.raises(PluginOutputError, match="provider p: .* a password is the service-account token itself") as caught:
            images.get("registry.io/app", **pod())
        assert POD_TOKEN not in str(caught.value)
        # Not kept: the next lookup runs the plugin again.
        with pytest.raises(PluginOutputError):
            images.get("registry.io/app", **pod())
    assert len(node.runs()) == 2


# -- the token is a secret ------------------------------------------------------------------------


@pytest.mark.parametrize("leak", [["--echo-request"], ["--stderr", f"registry said no to {POD_TOKEN} today"]])
def test_a_plugin_echoing_the_token_on_stderr_does_not_put_it_in_the_error(node: Node, leak: list[str]) -> None:
    node.plugin("p", *leak, "--exit-code", "1")
    with node.open(provider_entry("p", "registry.io", tokenAttributes=ATTRIBUTES)) as images:
        with pytest.raises(PluginExecutionError, match="provider p: exec: .* exited with code 1") as caught:
            images.get("registry.io/app", **pod())
        assert POD_TOKEN not in str(caught.value) and POD_TOKEN not in repr(caught.value)
        assert caught.value.__cause__ is None and caught.value.__context__ is None
        assert POD_TOKEN not in repr(images)


@pytest.mark.parametrize(
    "lookup, words",
    [
        ({"service_account_token": 42}, "service_account_token must be a string, not a number"),
        ({"service_account_token": ""}, "service_account_token is empty"),
        ({"service_account_token": "t" * (64 * 1024 + 1)}, "larger than 65536 bytes"),
        ({"service_account_annotations": {ROLE: "x"}}, "service_account_token=, which was not given"),
        ({"service_account": WEB}, "service_account_token=, which was not given"),
        ({"service_account_token": POD_TOKEN, "service_account_annotations": {ROLE: 1}}, "must map strings to strings"),
        ({"service_account_token": POD_TOKEN, "service_account_annotations": [ROLE]}, "must map strings to strings"),
        ({"service_account_token": POD_TOKEN, "service_account": ("shop", "web")}, r"\(namespace, name, uid\)"),
        ({"service_account_token": POD_TOKEN, "service_account": ("", "web", "u")}, r"\(namespace, name, uid\)"),
    ],
)
def test_malformed_lookups_are_image_credential_errors_before_anything_runs(node: Node, lookup: dict[str, Any], words: str) -> None:
    node.plugin("p", "--auth", "REGISTRY=u:p")
    with node.open(provider_entry("p", "registry.io", tokenAttributes=ATTRIBUTES)) as images:
        with pytest.raises(ImageCredentialError, match=words) as caught:
            images.get("registry.io/app", **lookup)
    assert POD_TOKEN not in str(caught.value)
    assert node.runs() == []


_anything = st.one_of(st.none(), st.integers(), st.floats(allow_nan=True), st.binary(max_size=20), st.lists(st.text(max_size=5), max_size=3), st.text(max_size=40))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(token=_anything, annotations=st.one_of(_anything, st.dictionaries(st.text(max_size=20), _anything, max_size=5)), account=_anything)
def test_hostile_lookup_arguments_are_refused_or_accepted_never_crash_nor_quote_the_token(node: Node, token: Any, annotations: Any, account: Any) -> None:
    # No provider matches quay.io: a lookup that is accepted runs nothing, so only the checks run.
    node.plugin("p", "--auth", "REGISTRY=u:p")
    with node.open(provider_entry("p", "registry.io", tokenAttributes=ATTRIBUTES)) as images:
        try:
            images.get("quay.io/app", service_account_token=token, service_account_annotations=annotations, service_account=account)
        except ImageCredentialError as error:
            if isinstance(token, str) and len(token) >= 8:
                assert token not in str(error)
            assert error.__context__ is None and error.__cause__ is None
    assert node.runs() == []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(total=st.integers(min_value=256 * 1024 + 1, max_value=2 * 256 * 1024), parts=st.integers(min_value=1, max_value=64))
def test_annotations_larger_than_kubernetes_allows_are_refused(node: Node, total: int, parts: int) -> None:
    node.plugin("p", "--auth", "REGISTRY=u:p")
    size = -(-total // parts)
    annotations = {f"a{index}": "v" * size for index in range(parts)}
    with node.open(provider_entry("p", "registry.io", tokenAttributes=ATTRIBUTES)) as images:
        with pytest.raises(ImageCredentialError, match="larger than 262144 bytes"):
            images.get("registry.io/app", **pod(annotations={ROLE: "x", **annotations}))
    assert node.runs() == []


_token_text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=300)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(token=_token_text.map(lambda t: "tok\n" + t + "\r\n\t"), value=st.text(st.characters(blacklist_categories=("Cs",)), max_size=200))
def test_a_token_and_annotation_values_reach_the_plugin_exactly_as_given(tmp_path_factory: pytest.TempPathFactory, token: str, value: str) -> None:
    node = Node(tmp_path_factory.mktemp("node"))
    node.plugin("p", "--auth", "REGISTRY=u:p")
    with node.open(provider_entry("p", "registry.io", tokenAttributes={**ATTRIBUTES, "cacheType": "Token"})) as images:
        images.get("registry.io/app", service_account_token=token, service_account_annotations={ROLE: value, "x": "y"}, service_account=WEB)
    (request,) = node.requests()
    assert request["serviceAccountToken"] == token
    assert request["serviceAccountAnnotations"] == {ROLE: value}


# -- the wire: what a plugin reads ---------------------------------------------------------------


@settings(max_examples=200)
@given(
    token=st.one_of(st.none(), st.text(max_size=200)),
    annotations=st.dictionaries(st.text(max_size=40), st.text(max_size=200), max_size=8),
)
def test_v1_requests_carry_the_token_and_annotations_exactly(token: str | None, annotations: dict[str, str]) -> None:
    request = parse_request(encode_request("registry.io/app", API_VERSION_V1, service_account_token=token, service_account_annotations=annotations))
    assert request.service_account_token == (token or None)
    assert dict(request.service_account_annotations) == annotations


@settings(max_examples=200)
@given(value=st.one_of(st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.booleans(), st.lists(st.text(max_size=3), max_size=2), st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2)))
def test_non_string_token_or_annotation_values_are_refused_by_name_not_quoted(value: Any) -> None:
    for field in ("serviceAccountToken", "serviceAccountAnnotations"):
        document = {"apiVersion": API_VERSION_V1, "kind": "CredentialProviderRequest", "image": "registry.io/app"}
        document[field] = value if field == "serviceAccountToken" else {ROLE: value}
        with pytest.raises(ProtocolError) as caught:
            parse_request(json.dumps(document))
        assert caught.value.field == field and json.dumps(value) not in str(caught.value)


def test_huge_annotations_are_refused_by_the_request_bound() -> None:
    document = {"apiVersion": API_VERSION_V1, "kind": "CredentialProviderRequest", "image": "registry.io/app",
                "serviceAccountAnnotations": {ROLE: "v" * (1024 * 1024)}}
    with pytest.raises(ProtocolError, match="larger than|bytes"):
        parse_request(json.dumps(document))


def test_older_request_versions_carry_no_token_even_when_a_peer_writes_one() -> None:
    document = {"apiVersion": API_VERSION_V1BETA1, "kind": "CredentialProviderRequest", "image": "registry.io/app",
                "serviceAccountToken": POD_TOKEN, "serviceAccountAnnotations": {ROLE: "x"}}
    request = parse_request(json.dumps(document))
    assert (request.service_account_token, dict(request.service_account_annotations)) == (None, {})


# An in-process provider run as a kubelet plugin: it answers with what it was sent.
ECHO_PROVIDER = '''
import json
from cpcreds.images.kubelet_plugin import AuthConfig, CredentialProviderResponse, kubelet_plugin_main

class Echo:
    def __init__(self, options):
        pass

    def get_image_credential(self, request, *, timeout):
        seen = json.dumps([request.service_account_token, dict(request.service_account_annotations)])
        return CredentialProviderResponse("Image", {"registry.io": AuthConfig("seen", seen)}, cache_duration=0)

kubelet_plugin_main("echo", Echo)()
'''


@pytest.mark.parametrize("api_version", [API_VERSION_V1, API_VERSION_V1BETA1])
def test_an_in_process_provider_run_as_a_kubelet_plugin_gets_the_token_on_v1_only(tmp_path: Path, api_version: str) -> None:
    import subprocess
    import sys

    script = tmp_path / "echo.py"
    script.write_text(textwrap.dedent(ECHO_PROVIDER))
    document = {"apiVersion": api_version, "kind": "CredentialProviderRequest", "image": "registry.io/app",
                "serviceAccountToken": "tok\nen", "serviceAccountAnnotations": {ROLE: "puller"}}
    result = subprocess.run([sys.executable, str(script)], input=json.dumps(document).encode(), capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr
    seen = json.loads(json.loads(result.stdout)["auth"]["registry.io"]["password"])
    assert seen == (["tok\nen", {ROLE: "puller"}] if api_version == API_VERSION_V1 else [None, {}])
