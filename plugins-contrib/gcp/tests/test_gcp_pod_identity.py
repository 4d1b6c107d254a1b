"""Image pulls with the pod's own identity (KEP-4412): ``cpcreds-gcp-credential-provider`` run as a
kubelet runs it, with the pod's service account token and its service account's annotations in
the request, against the Google fake's STS (which checks the token's signature, issuer and
audience), IAM Credentials (which accepts only the federated token it is granted for) and
Artifact Registry (which lets in only the identity granted reading: the node's token is refused)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("cpcreds_gcp", reason="install plugins-contrib/gcp")

from cpcreds import ProviderError  # noqa: E402
from cpcreds.images.protocol import API_VERSION_V1  # noqa: E402
from cpcreds.sdk import AuthConfig, CredentialProviderRequest, encode_request, parse_response  # noqa: E402
from cpcreds_gcp import GcpProvider  # noqa: E402
from cpcreds_gcp.kubelet import GOOGLE_REGISTRIES, USERNAME  # noqa: E402
from cpcreds_gcp.podidentity import ENABLE_ANNOTATION, PROVIDER_ANNOTATION, SERVICE_ACCOUNT_ANNOTATION  # noqa: E402
from tests.fakes.fixtures import command_runner  # noqa: E402
from tests.fakes.google import FakeGoogle, FakeMetadataServer, ServiceAccountIssuer  # noqa: E402

KUBELET_PLUGIN = Path(sys.executable).with_name("cpcreds-gcp-credential-provider")
IMAGE = "us-docker.pkg.dev/fleet-project/apps/checkout:1.4"
PULLER = "image-puller@fleet-project.iam.gserviceaccount.com"
CLUSTER = "https://container.googleapis.com/v1/projects/my-project/locations/us-central1/clusters/my-cluster"

_run = command_runner()


def pull(google: FakeGoogle, metadata: FakeMetadataServer, *args: str, token: str | None = None, annotations=None, image: str = IMAGE):
    """The kubelet's call: the request on stdin, the config's args, the node's metadata server."""
    stdin = encode_request(image, API_VERSION_V1, service_account_token=token, service_account_annotations=annotations)
    endpoints = (f"--sts-endpoint={google.url}", f"--iam-endpoint={google.iam_endpoint}")
    return _run([KUBELET_PLUGIN, *args, *endpoints], input=stdin.decode(), GCE_METADATA_HOST=metadata.host)


def answered(result: subprocess.CompletedProcess[str]) -> AuthConfig:
    assert result.returncode == 0, result.stderr
    response = parse_response(result.stdout, API_VERSION_V1)
    assert list(response.auth) == list(GOOGLE_REGISTRIES) and len(set(response.auth.values())) == 1
    return response.auth["*.pkg.dev"]


def registry_status(google: FakeGoogle, password: str) -> int:
    return requests.get(google.registry_url, auth=(USERNAME, password), timeout=10).status_code


def node_token(metadata: FakeMetadataServer) -> str:
    url = f"http://{metadata.host}/computeMetadata/v1/instance/service-accounts/default/token"
    return requests.get(url, headers={"Metadata-Flavor": "Google"}, timeout=10).json()["access_token"]


@pytest.fixture
def pool(google: FakeGoogle, cluster_issuer: ServiceAccountIssuer) -> str:
    return google.add_pool_provider(cluster_issuer)


def test_the_pods_token_impersonates_the_annotated_service_account_and_only_that_opens_the_registry(google, metadata, pool, cluster_issuer):
    pod_token = cluster_issuer.token("apps", "puller", audience=f"https:{pool}")
    google.allow_impersonation(google.pool_principal(pool, "apps", "puller"), PULLER)
    google.grant_registry_reader(PULLER)
    result = pull(google, metadata, f"--workload-identity-provider={pool}", token=pod_token, annotations={SERVICE_ACCOUNT_ANNOTATION: PULLER})
    auth = answered(result)
    federated, impersonated = google.issued
    assert (federated.grant, federated.principal) == ("token-exchange", google.pool_principal(pool, "apps", "puller"))
    assert (impersonated.grant, impersonated.principal, auth) == ("generateAccessToken", PULLER, AuthConfig(USERNAME, impersonated.token))
    assert metadata.issued == []  # the node's identity was not asked
    assert registry_status(google, auth.password) == 200
    # Where the pod's identity was asked, the node's token does not open the registry.
    assert registry_status(google, node_token(metadata)) == 403
    assert pod_token not in result.stderr


def test_with_require_service_account_the_federated_token_itself_pulls(google, metadata, pool, cluster_issuer):
    principal = google.pool_principal(pool, "apps", "puller")
    google.grant_registry_reader(principal)
    pod_token = cluster_issuer.token("apps", "puller", audience=f"https:{pool}")
    auth = answered(pull(google, metadata, f"--workload-identity-provider={pool}", "--require-service-account=true", token=pod_token))
    [federated] = google.issued
    assert (federated.principal, federated.scopes, auth.password) == (principal, ("https://www.googleapis.com/auth/cloud-platform",), federated.token)
    assert registry_status(google, auth.password) == 200 and metadata.issued == []


def test_the_provider_annotation_chooses_the_pool_provider(google, metadata, cluster_issuer):
    google.add_pool_provider(cluster_issuer, provider="other-cluster")
    chosen = google.add_pool_provider(cluster_issuer, pool="team-pool", provider="team-cluster")
    pod_token = cluster_issuer.token("team", "builder", audience=f"https:{chosen}")
    auth = answered(pull(google, metadata, token=pod_token, annotations={PROVIDER_ANNOTATION: chosen}))
    [federated] = google.issued
    assert federated.principal == google.pool_principal(chosen, "team", "builder") and auth.password == federated.token


def test_without_an_annotation_the_node_pulls_exactly_as_before(google, metadata, pool, cluster_issuer):
    pod_token = cluster_issuer.token(audience=f"https:{pool}")
    auth = answered(pull(google, metadata, f"--workload-identity-provider={pool}", token=pod_token))
    [issued] = metadata.issued
    assert auth.password == issued.token and google.issued == []


@pytest.mark.parametrize(
    ("args", "annotations", "with_token", "missing"),
    [
        ((), {SERVICE_ACCOUNT_ANNOTATION: PULLER}, True, "workloadIdentityProvider"),
        (("--require-service-account=true", "--workload-identity-provider={pool}"), {}, False, "no service account token"),
        (("--workload-identity-provider={pool}",), {SERVICE_ACCOUNT_ANNOTATION: PULLER}, False, "tokenAttributes"),
        (("--workload-identity-provider={pool}",), {SERVICE_ACCOUNT_ANNOTATION: "not an account"}, True, SERVICE_ACCOUNT_ANNOTATION),
        ((), {PROVIDER_ANNOTATION: "//iam.googleapis.com/elsewhere"}, True, PROVIDER_ANNOTATION),
    ],
    ids=["no-pool", "required-without-token", "annotated-without-token", "bad-account", "bad-provider"],
)
def test_asked_for_and_impossible_is_one_line_naming_the_missing_piece_and_no_node_token(google, metadata, pool, cluster_issuer, args, annotations, with_token, missing):
    token = cluster_issuer.token(audience=f"https:{pool}") if with_token else None
    result = pull(google, metadata, *(a.format(pool=pool) for a in args), token=token, annotations=annotations)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.count("\n") == 1 and missing in result.stderr
    assert metadata.issued == [] and google.issued == []


def test_sts_refuses_a_token_for_another_audience_or_issuer_and_nothing_falls_back(google, metadata, pool, cluster_issuer):
    google.allow_impersonation(google.pool_principal(pool, "apps", "puller"), PULLER)
    for token in (
        cluster_issuer.token(audience="https://kubernetes.default.svc"),  # the API server's audience
        cluster_issuer.token(audience=f"https:{pool}", issuer="https://someone-else.example"),
        cluster_issuer.token(audience=f"https:{pool}", lifetime=-3600),  # expired an hour ago
    ):
        result = pull(google, metadata, f"--workload-identity-provider={pool}", token=token, annotations={SERVICE_ACCOUNT_ANNOTATION: PULLER})
        assert result.returncode == 1 and result.stderr.count("\n") == 1
        assert f"STS token endpoint {google.sts_url} answered HTTP 400" in result.stderr and token not in result.stderr
    assert metadata.issued == [] and google.issued == []


def test_impersonation_refused_fails_fast(google, metadata, pool, cluster_issuer):
    pod_token = cluster_issuer.token(audience=f"https:{pool}")
    result = pull(google, metadata, f"--workload-identity-provider={pool}", token=pod_token, annotations={SERVICE_ACCOUNT_ANNOTATION: PULLER})
    assert result.returncode == 1
    assert f"IAM Credentials endpoint {google.generate_access_token_url(PULLER)} answered HTTP 403" in result.stderr
    assert metadata.issued == []


def test_an_image_outside_googles_registries_spends_no_token(google, metadata, pool, cluster_issuer):
    result = pull(google, metadata, f"--workload-identity-provider={pool}", token=cluster_issuer.token(audience=f"https:{pool}"),
                  annotations={SERVICE_ACCOUNT_ANNOTATION: PULLER}, image="registry.k8s.io/pause:3.10")
    assert result.returncode == 0 and parse_response(result.stdout, API_VERSION_V1).auth == {}
    assert google.seen == [] and metadata.seen == []


# -- auth-provider-gcp's own flow (pkg/gcpcredential's cases), through its kubelet config's args ----


@pytest.mark.parametrize(
    ("identity_provider", "project"),
    [(CLUSTER, "my-project"), ("https://custom-provider.com", "my-project"), (CLUSTER, "pre-configured-project")],
    ids=["direct-access", "configured-identity-provider", "pre-configured-project"],
)
def test_auth_provider_gcps_flow_exchanges_for_its_identity_namespace(google, metadata, cluster_issuer, identity_provider, project):
    audience = google.add_identity_namespace(cluster_issuer, project, identity_provider)
    assert audience == f"identitynamespace:{project}.svc.id.goog:{identity_provider}"
    pod_token = cluster_issuer.token("apps", "puller", audience=f"{project}.svc.id.goog")
    args = ("get-credentials", "--v=3", f"--identity-provider={identity_provider}", f"--project-id={project}")
    auth = answered(pull(google, metadata, *args, token=pod_token, annotations={ENABLE_ANNOTATION: "true"}))
    [federated] = google.issued
    assert (federated.grant, auth.password) == ("token-exchange", federated.token) and metadata.issued == []


@pytest.mark.parametrize(
    ("args", "annotations"),
    [(("--identity-provider=" + CLUSTER, "--project-id=my-project"), {}), ((), {ENABLE_ANNOTATION: "true"}),
     (("--identity-provider=" + CLUSTER, "--project-id=my-project"), {ENABLE_ANNOTATION: "false"})],
    ids=["unannotated", "annotated-but-flow-not-configured", "annotation-false"],
)
def test_auth_provider_gcps_fallback_cases_pull_with_the_node(google, metadata, cluster_issuer, args, annotations):
    pod_token = cluster_issuer.token(audience="my-project.svc.id.goog")
    auth = answered(pull(google, metadata, "get-credentials", *args, token=pod_token, annotations=annotations))
    [issued] = metadata.issued
    assert auth.password == issued.token and google.issued == []


def test_auth_provider_gcps_fail_fast_cases(google, metadata, cluster_issuer):
    google.add_identity_namespace(cluster_issuer, "my-project", CLUSTER)
    flags = ("get-credentials", f"--identity-provider={CLUSTER}", "--project-id=my-project")
    google.fail("sts", status=500, body=b'{"error": "internal"}', times=5)
    sts_fails = pull(google, metadata, *flags, token=cluster_issuer.token(audience="my-project.svc.id.goog"), annotations={ENABLE_ANNOTATION: "true"})
    no_token = pull(google, metadata, *flags, annotations={ENABLE_ANNOTATION: "true"})
    no_project = pull(google, metadata, "get-credentials", f"--identity-provider={CLUSTER}", annotations={ENABLE_ANNOTATION: "true"})
    for result in (sts_fails, no_token, no_project):
        assert (result.returncode, result.stdout) == (1, "") and result.stderr.count("\n") == 1
    assert "projectId" in no_project.stderr
    assert metadata.issued == []


# -- hostile input, in-process ---------------------------------------------------------------------


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    token=st.one_of(st.text(min_size=1, max_size=300), st.from_regex(r"[A-Za-z0-9_-]{1,40}\.[A-Za-z0-9_-]{1,80}\.[A-Za-z0-9_-]{0,40}", fullmatch=True)),
    account=st.one_of(st.none(), st.text(max_size=80), st.just(PULLER)),
    provider=st.one_of(st.none(), st.text(max_size=120)),
)
def test_hostile_tokens_and_annotations_never_leak_or_fall_back_to_the_node(google, metadata, pool, monkeypatch, token, account, provider):
    monkeypatch.setenv("GCE_METADATA_HOST", metadata.host)
    annotations = {k: v for k, v in ((SERVICE_ACCOUNT_ANNOTATION, account), (PROVIDER_ANNOTATION, provider)) if v is not None}
    gcp = GcpProvider({"workloadIdentityProvider": pool, "requireServiceAccount": True, "stsEndpoint": google.url, "iamEndpoint": google.iam_endpoint})
    try:
        request = CredentialProviderRequest(IMAGE, service_account_token=token, service_account_annotations=annotations)
        with pytest.raises(ProviderError) as caught:
            gcp.get_image_credential(request, timeout=10)
    finally:
        gcp.close()
    message = str(caught.value)
    assert "\n" not in message and (len(token) < 8 or token not in message)
    assert metadata.issued == [] and google.issued == []
