"""dockerconfig-secretreader: registry credentials from an image pull Secret on the hub (KEP-2133),
as the kubelet plugin ``cpcreds-secretreader-credential-provider`` (request on stdin, answer on
stdout) and in-process; the credential it answers with opens a registry. Hostile Secrets (bad
base64, broken JSON, wrong types, odd registry keys) fail with one line that names the Secret
and never a password."""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("cpcreds_secretreader", reason="install plugins-contrib/secretreader")

from cpcreds import ProviderError  # noqa: E402
from cpcreds.images.protocol import (  # noqa: E402
    API_VERSION_V1,
    SUPPORTED_API_VERSIONS,
    AuthConfig,
    CredentialProviderRequest,
    encode_request,
    parse_response,
)
from cpcreds_secretreader.dockerconfig import match_key, registry_auths  # noqa: E402
from cpcreds_secretreader.provider import DockerConfigSecretReaderProvider  # noqa: E402
from cpcreds_secretreader.secret import SecretContentError  # noqa: E402
from secretreader_helpers import BIN, FLEET  # noqa: E402
from tests.fakes.hub import HubServer, secret  # noqa: E402
from tests.fakes.pki import PKI  # noqa: E402
from tests.fakes.registry import FakeRegistry  # noqa: E402

PLUGIN = BIN / "cpcreds-secretreader-credential-provider"
PASSWORD = "pull-Secret-Passw0rd"
IMAGE = "registry.example.com/team/app:1.4"


def basic(username: str, password: str) -> str:
    return base64.b64encode(f"{username}:{password}".encode()).decode()


def pull_secret(name: str, auths: dict[str, Any], *, namespace: str = FLEET) -> dict[str, Any]:
    """An image pull Secret as ``kubectl create secret docker-registry`` writes it."""
    return secret(namespace, name, {".dockerconfigjson": json.dumps({"auths": auths})}, type="kubernetes.io/dockerconfigjson")


def run(*args: str, stdin: bytes = encode_request(IMAGE), **env: str) -> subprocess.CompletedProcess[bytes]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CPCREDS_")}
    environment.update(env)
    return subprocess.run([str(PLUGIN), *args], input=stdin, capture_output=True, env=environment, timeout=60)


def error_line(result: subprocess.CompletedProcess[bytes]) -> str:
    assert result.returncode == 1 and result.stdout == b"", result
    text = result.stderr.decode()
    assert text.count("\n") == 1 and PASSWORD not in text, text
    return text.rstrip("\n")


# -- the kubelet plugin -------------------------------------------------------------------------


@pytest.mark.parametrize("api_version", SUPPORTED_API_VERSIONS)
def test_the_plugin_answers_with_every_registry_of_the_secret(hub: HubServer, kubeconfig: Path, api_version: str) -> None:
    hub.create(
        pull_secret(
            "registry-pull",
            {
                "registry.example.com": {"auth": basic("robot", PASSWORD), "email": "ops@example.com"},
                "https://quay.example.org/v2/": {"username": "ci", "password": "other"},
            },
        )
    )
    result = run(f"--kubeconfig={kubeconfig}", "--secret-name=registry-pull", stdin=encode_request(IMAGE, api_version))
    assert result.returncode == 0, result.stderr
    response = parse_response(result.stdout, api_version)
    assert response.cache_key_type == "Global" and response.cache_duration is None
    assert list(response.auth.items()) == [
        ("registry.example.com", AuthConfig("robot", PASSWORD)),
        ("quay.example.org", AuthConfig("ci", "other")),
    ]
    assert "cacheDuration" not in json.loads(result.stdout)  # the kubelet's defaultCacheDuration applies


def test_cache_duration_and_namespace_flags(hub: HubServer, kubeconfig: Path) -> None:
    hub.create(pull_secret("pull", {"registry.example.com": {"auth": basic("robot", PASSWORD)}}, namespace="images"))
    result = run(f"--kubeconfig={kubeconfig}", "--secret-name=pull", "--namespace=images", "--cache-duration=10m")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["cacheDuration"] == "10m0s"


def test_a_dockercfg_secret_of_the_older_type(hub: HubServer, kubeconfig: Path) -> None:
    data = {".dockercfg": json.dumps({"https://index.docker.io/v1/": {"auth": basic("hubuser", PASSWORD)}})}
    hub.create(secret(FLEET, "legacy", data, type="kubernetes.io/dockercfg"))
    result = run(f"--kubeconfig={kubeconfig}", "--secret-name=legacy", stdin=encode_request("docker.io/library/nginx:1"))
    assert result.returncode == 0, result.stderr
    auth = parse_response(result.stdout, API_VERSION_V1).auth
    assert dict(auth) == {"docker.io": AuthConfig("hubuser", PASSWORD), "index.docker.io": AuthConfig("hubuser", PASSWORD)}


def test_the_answer_opens_the_registry(hub: HubServer, kubeconfig: Path, pki: PKI, tmp_path: Path) -> None:
    with FakeRegistry(pki, users={"robot": PASSWORD}) as registry:
        hub.create(pull_secret("pull", {registry.host: {"auth": basic("robot", PASSWORD)}}))
        result = run(f"--kubeconfig={kubeconfig}", "--secret-name=pull", stdin=encode_request(f"{registry.host}/team/app:1"))
        assert result.returncode == 0, result.stderr
        auth = parse_response(result.stdout, API_VERSION_V1).auth[registry.host]
        ca = tmp_path / "ca.pem"
        ca.write_bytes(pki.ca_pem)
        assert requests.get(f"{registry.url}/v2/", verify=str(ca), timeout=10).status_code == 401
        assert requests.get(f"{registry.url}/v2/", auth=(auth.username, auth.password), verify=str(ca), timeout=10).status_code == 200


def test_a_kubeconfig_that_cannot_be_read_is_named_by_its_path(tmp_path: Path) -> None:
    # A path is not a secret: it was shown as [REDACTED] ("no hub credentials: <path>").
    missing = tmp_path / "hub-kubeconfig"
    line = error_line(run(f"--kubeconfig={missing}", "--secret-name=pull-secret"))
    assert line == (
        f"cpcreds-secretreader-credential-provider: provider dockerconfig-secretreader: no hub kubeconfig: {missing} does not exist "
        "and this is not a pod with a service account (set the kubeconfig option, or KUBECONFIG)"
    )


def test_help_lists_the_options_without_reading_a_request() -> None:
    result = run("--help", stdin=b"")
    assert (result.returncode, result.stderr) == (0, b"")
    assert b"  --secretName  string; required\n" in result.stdout and b"  --cacheDuration  duration; default: unset\n" in result.stdout


def test_a_missing_secret_is_named(hub: HubServer, kubeconfig: Path) -> None:
    line = error_line(run(f"--kubeconfig={kubeconfig}", "--secret-name=nowhere"))
    assert line.startswith(f"cpcreds-secretreader-credential-provider: provider dockerconfig-secretreader: Secret {FLEET}/nowhere not found")


def test_a_secret_of_another_type_is_refused(hub: HubServer, kubeconfig: Path) -> None:
    hub.create(secret(FLEET, "opaque", {".dockerconfigjson": json.dumps({"auths": {}})}))
    line = error_line(run(f"--kubeconfig={kubeconfig}", "--secret-name=opaque"))
    assert line.endswith(f"Secret {FLEET}/opaque is of type 'Opaque', not kubernetes.io/dockerconfigjson or kubernetes.io/dockercfg")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "option secretName: is required"),
        (["--secret-name=Not_A_Name"], "option secretName: must be a Secret name"),
        (["--secret-name=x", "--cache-duration=soon"], "option cacheDuration: must be a duration such as 30s, 2m or 1h30m"),
        (["--secret-name=x", "--colour=red"], "option colour: is not a known option (options: namespace, kubeconfig, context, secretName, cacheDuration; --help describes them)"),
        # Refused before the request is read or the hub is asked.
        (["--secret-nmae=x"], "option secretNmae: is not a known option; did you mean 'secretName'? (options: "),
    ],
)
def test_bad_options_are_named(kubeconfig: Path, args: list[str], message: str) -> None:
    line = error_line(run(f"--kubeconfig={kubeconfig}", *args))
    assert message in line


@pytest.fixture
def silent_hub(tmp_path: Path, pki: PKI) -> Iterator[Path]:
    """A kubeconfig whose hub accepts connections and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        path = tmp_path / "silent.kubeconfig"
        ca = base64.b64encode(pki.ca_pem).decode()
        path.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "hub", "cluster": {"server": f"https://127.0.0.1:{port}", "certificate-authority-data": ca}}],
                    "users": [{"name": "u", "user": {"token": "hub-token"}}],
                    "contexts": [{"name": "hub", "context": {"cluster": "hub", "user": "u", "namespace": FLEET}}],
                    "current-context": "hub",
                }
            )
        )
        yield path


def test_a_hub_that_never_answers_fails_within_the_timeout(silent_hub: Path) -> None:
    began = time.monotonic()
    result = run(f"--kubeconfig={silent_hub}", "--secret-name=pull", CPCREDS_DEFAULT_TIMEOUT="1s")
    assert result.returncode == 1 and result.stdout == b""
    assert result.stderr.count(b"\n") == 1
    assert time.monotonic() - began < 15



def test_a_hub_trickling_its_answer_is_hung_up_on_within_the_timeout(hub: HubServer, kubeconfig: Path) -> None:
    # Each byte comes within any socket timeout; the run's deadline ends the exchange.
    hub.inject_answer(f"/api/v1/namespaces/{FLEET}/secrets/pull", 200, b'{"data": {}}', trickle=0.05)
    # 5 s: the provider's own error must come before the runner's, in the last fifth of the timeout.
    result = run(f"--kubeconfig={kubeconfig}", "--secret-name=pull", CPCREDS_DEFAULT_TIMEOUT="5s")
    assert error_line(result).endswith(f"the hub {hub.url} did not answer within 5s reading Secret {FLEET}/pull")


# -- in-process ---------------------------------------------------------------------------------


def test_in_process_the_provider_answers_image_requests(hub: HubServer, kubeconfig: Path) -> None:
    hub.create(pull_secret("pull", {"registry.example.com": {"username": "robot", "password": PASSWORD}}))
    provider = DockerConfigSecretReaderProvider({"kubeconfig": str(kubeconfig), "secretName": "pull", "cacheDuration": "1h"})
    try:
        response = provider.get_image_credential(CredentialProviderRequest(IMAGE), timeout=5)
        rotated = pull_secret("pull", {"registry.example.com": {"username": "robot", "password": "rotated"}})
        hub.put(rotated)
        again = provider.get_image_credential(CredentialProviderRequest(IMAGE), timeout=5)
    finally:
        provider.close()
    assert response.auth["registry.example.com"] == AuthConfig("robot", PASSWORD) and response.cache_duration == 3600
    assert again.auth["registry.example.com"].password == "rotated"  # every call reads the Secret


def test_in_process_it_gives_no_cluster_credentials(make_engine: Any, kubeconfig: Path) -> None:
    from secretreader_helpers import cluster, entry

    engine = make_engine(entry({"kubeconfig": str(kubeconfig), "secretName": "pull"}, type="dockerconfig-secretreader"))
    with pytest.raises(ProviderError, match="answers only for container images"):
        engine.get_credential(cluster("spoke-1"))


# -- reading the Secret's content ---------------------------------------------------------------

WHERE = "Secret fleet-system/pull"


def config_json(auths: Any) -> bytes:
    return json.dumps({"auths": auths}).encode()


@pytest.mark.parametrize(
    ("registry", "key"),
    [
        ("registry.example.com", "registry.example.com"),
        ("Registry.Example.com", "registry.example.com"),
        ("https://registry.example.com", "registry.example.com"),
        ("http://localhost:5000", "localhost:5000"),
        ("https://index.docker.io/v1/", "index.docker.io"),
        ("quay.io/team/", "quay.io/team"),
        ("https://gcr.io/v2/project", "gcr.io/project"),
        ("*.azurecr.io", "*.azurecr.io"),
        ("registry.io:8080/path", "registry.io:8080/path"),
        ("", None),
        ("registry example.com", None),
        ("https://", None),
        ("a" * 600, None),
        ("reg\nistry.io", None),
    ],
)
def test_registry_keys_become_match_keys_as_the_kubelet_reads_them(registry: str, key: str | None) -> None:
    assert match_key(registry) == key


def test_auth_wins_over_username_and_password_as_in_the_kubelet() -> None:
    auths = registry_auths(config_json({"r.io": {"auth": basic("a", "b:c"), "username": "x", "password": "y"}}), ".dockerconfigjson", WHERE)
    assert auths == {"r.io": AuthConfig("a", "b:c")}


def test_keys_that_name_no_registry_are_skipped() -> None:
    auths = registry_auths(config_json({"not a registry": {"auth": basic("a", "b")}, "r.io": {"auth": basic("c", "d")}}), ".dockerconfigjson", WHERE)
    assert auths == {"r.io": AuthConfig("c", "d")}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"not json", f"{WHERE} data..dockerconfigjson is not JSON"),
        (b"[1]", "is not a JSON object"),
        (json.dumps({"auths": [PASSWORD]}).encode(), "has no auths object"),
        (json.dumps({"credsStore": "desktop"}).encode(), "has no auths object"),
        (config_json({}), "names no registry"),
        (config_json({"bad key": {"auth": basic("a", "b")}}), "names no registry"),
        (config_json({"r.io": PASSWORD}), "registry 'r.io' is not an object"),
        (config_json({"r.io": {"auth": PASSWORD + "!"}}), "registry 'r.io': auth is not base64 of UTF-8 text"),
        (config_json({"r.io": {"auth": base64.b64encode(PASSWORD.encode()).decode()}}), "auth is not base64(username:password)"),
        (config_json({"r.io": {"auth": base64.b64encode(b"\xff:\xfe").decode()}}), "auth is not base64 of UTF-8 text"),
        (config_json({"r.io": {"username": 7, "password": PASSWORD}}), "registry 'r.io': username is not a string"),
        (config_json({"r.io": {"password": ["x"]}}), "password is not a string"),
        (config_json({PASSWORD + " x": {"password": 5}}), "entry 1: password is not a string"),
        (config_json({f"r{i}.io": {} for i in range(1001)}), "holds more than 1000 registries"),
    ],
)
def test_a_malformed_secret_is_named_never_quoted(raw: bytes, message: str) -> None:
    with pytest.raises(SecretContentError) as caught:
        registry_auths(raw, ".dockerconfigjson", WHERE)
    assert message in str(caught.value) and PASSWORD not in str(caught.value)
    assert caught.value.__cause__ is None and caught.value.__context__ is None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=3),
    max_leaves=10,
)
entries = st.fixed_dictionaries(
    {},
    optional={
        "auth": st.builds(basic, st.text(max_size=8), st.just(PASSWORD)) | st.text(max_size=20) | json_values,
        "username": st.text(max_size=8) | json_values,
        "password": st.just(PASSWORD) | json_values,
        "email": json_values,
    },
)
documents = st.one_of(
    st.builds(lambda auths: {"auths": auths}, st.dictionaries(st.sampled_from(["r.io", "https://q.io/v1/", "x y", "*.z.io", ""]) | st.text(max_size=20), entries | json_values, max_size=4)),
    json_values,
)


@settings(max_examples=300)
@given(documents, st.sampled_from([".dockerconfigjson", ".dockercfg"]))
def test_any_secret_content_is_credentials_or_one_line_error(document: Any, data_key: str) -> None:
    try:
        auths = registry_auths(json.dumps(document).encode(), data_key, WHERE)
    except SecretContentError as exc:
        assert "\n" not in str(exc) and PASSWORD not in str(exc)
        assert str(exc).startswith(WHERE)
    else:
        assert auths and all(match_key(key) == key for key in auths)
        assert all(isinstance(auth, AuthConfig) for auth in auths.values())


# -- docs/providers-secretreader.md ---------------------------------------------------------------

DOCS = Path(__file__).resolve().parents[3] / "docs" / "providers-secretreader.md"
SHOWN_HUB = "https://10.96.0.1:443"


def test_the_docs_example_runs_as_shown(hub: HubServer, tmp_path: Path) -> None:
    from tests.fakes.fixtures import HUB_TOKEN

    text = DOCS.read_text(encoding="utf-8")
    [secret_yaml] = [b.split("```", 1)[0] for b in text.split("```yaml\n")[1:] if b.startswith("# secret-registry-pull.yaml\n")]
    hub.put(yaml_load(secret_yaml))
    # The page keeps the hub kubeconfig at ~/.kube/hub.kubeconfig (HOME is the test's own).
    (Path(os.environ["HOME"]) / ".kube").mkdir(exist_ok=True)
    hub.write_kubeconfig(Path(os.environ["HOME"]) / ".kube" / "hub.kubeconfig", HUB_TOKEN)
    consoles = [b.split("```", 1)[0] for b in text.split("```console\n")[1:]]
    [console] = [b for b in consoles if "cpcreds-secretreader-credential-provider" in b]
    lines = console.splitlines()
    assert len(lines) == 4
    for command, shown in zip(lines[0::2], lines[1::2], strict=True):
        assert command.startswith("$ ")
        result = subprocess.run(
            ["bash", "-c", command[2:]],
            cwd=tmp_path,
            env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=60,
        )
        assert result.stdout.decode().rstrip("\n").replace(hub.url, SHOWN_HUB) == shown


def yaml_load(text: str) -> Any:
    import yaml

    return yaml.safe_load(text)
