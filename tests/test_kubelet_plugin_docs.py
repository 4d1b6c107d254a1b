"""docs/kubelet-plugins.md runs as shown: its provider and function examples, its console session
(commands run with bash, outputs compared line by line), the error lines it lists, and its
kubelet config (the same as docs/examples/kubelet-credential-provider-config.yaml)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from cpcreds.images.protocol import API_VERSION_V1, AuthConfig, encode_request, parse_response
from tests.fakes.pki import PKI
from tests.fakes.registry import FakeRegistry

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "kubelet-plugins.md"
EXAMPLE_CONFIG = ROOT / "docs" / "examples" / "kubelet-credential-provider-config.yaml"
TEXT = PAGE.read_text(encoding="utf-8")


def blocks(language: str) -> list[str]:
    """The page's fenced code blocks of ``language`` ("" for none), dedented by their fence's indent."""
    found: list[str] = []
    current: list[str] | None = None
    indent = ""
    for line in TEXT.splitlines():
        stripped = line.strip()
        if current is None and stripped.startswith("```"):
            current, indent = ([] if stripped[3:] == language else None), line[: len(line) - len(line.lstrip())]
            if current is None:
                current = ["\0"]  # another language: skipped to its closing fence
            continue
        if current is not None and stripped == "```":
            if current[:1] != ["\0"]:
                found.append("\n".join(current) + "\n")
            current = None
            continue
        if current is not None and current[:1] != ["\0"]:
            current.append(line[len(indent) :] if line.startswith(indent) else line)
    return found


def block(language: str, marker: str) -> str:
    """The first ``language`` code block of the page whose text starts with ``marker``."""
    found = [b for b in blocks(language) if b.startswith(marker)]
    assert found, f"no {language} block starting with {marker!r}"
    return found[0]


def session(text: str) -> list[tuple[str, list[str]]]:
    """(command, expected output lines) of a console block: ``$ `` starts a command, a trailing
    backslash continues it, other lines are its output."""
    steps: list[tuple[str, list[str]]] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        assert line.startswith("$ "), line
        command = line[2:]
        while command.endswith("\\"):
            index += 1
            command = command[:-1] + lines[index].strip()
        index += 1
        output = []
        while index < len(lines) and not lines[index].startswith("$ "):
            output.append(lines[index])
            index += 1
        steps.append((command, output))
    return steps


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A folder holding the page's examples."""
    (tmp_path / "robot_provider.py").write_text(block("python", "# robot_provider.py"), encoding="utf-8")
    (tmp_path / "static_credential_provider.py").write_text(block("python", "# static_credential_provider.py"), encoding="utf-8")
    return tmp_path


def shell(command: str, cwd: Path, stdin: bytes | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CPCREDS_")}
    # ``python`` is this interpreter (its virtualenv's bin first on PATH), as for a user who installed cpcreds.
    environment["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{environment.get('PATH', '')}"
    environment.update(env)
    return subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=environment, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60
    )  # type: ignore[call-overload]


def test_the_console_session_runs_as_shown(workdir: Path) -> None:
    console = [b for b in blocks("console") if "robot_provider.py" in b]
    assert len(console) == 1
    last = None
    for command, expected in session(console[0]):
        if command == "echo $?":
            assert expected == [str(last.returncode)]
            continue
        last = shell(command, workdir)
        assert last.stdout.decode().splitlines() == expected, command


def test_the_listed_error_lines_are_what_the_plugin_prints(workdir: Path) -> None:
    # The example provider installed as robot-credential-provider.
    script = workdir / "robot-credential-provider"
    script.write_text((workdir / "robot_provider.py").read_text(encoding="utf-8"), encoding="utf-8")
    (workdir / "robot-password").write_text("r0b0t-pa55")
    request = encode_request("registry.example.com/team/app:1")
    wrong_version = request.replace(b"/v1", b"/v2")
    listed = [line for line in block("", "robot-credential-provider:").splitlines() if line]
    assert len(listed) == 5
    cases = [
        (wrong_version, ["--registries=a", "--password-file=robot-password"]),
        (b"", ["--registries=a", "--password-file=robot-password"]),
        (request, ["--password-file=robot-password"]),
    ]
    for (stdin, args), expected in zip(cases, listed, strict=False):
        result = shell("python robot-credential-provider " + " ".join(args), workdir, stdin=stdin)
        assert result.returncode == 1
        assert result.stdout.decode().rstrip("\n") == expected


def test_the_function_example_answers_for_the_images_registry(workdir: Path) -> None:
    result = shell(
        "python static_credential_provider.py", workdir, stdin=encode_request("registry.example.com/team/app:1"), CI_REGISTRY_PASSWORD="ci-pass"
    )
    assert result.returncode == 0, result.stdout
    response = parse_response(result.stdout, API_VERSION_V1)
    assert dict(response.auth) == {"registry.example.com": AuthConfig("ci", "ci-pass")} and response.cache_duration == 300


def test_the_pages_kubelet_config_is_the_example_file() -> None:
    shown = yaml.safe_load(block("yaml", "apiVersion: kubelet.config.k8s.io/v1"))
    assert shown == yaml.safe_load(EXAMPLE_CONFIG.read_text(encoding="utf-8"))


def test_the_example_config_names_installed_console_scripts_with_flags_they_take() -> None:
    from cpcreds.plugin import parse_option_flags

    config = yaml.safe_load(EXAMPLE_CONFIG.read_text(encoding="utf-8"))
    names = [provider["name"] for provider in config["providers"]]
    assert names == ["cpcreds-gcp-credential-provider", "cpcreds-secretreader-credential-provider"]
    secretreader = pytest.importorskip("cpcreds_secretreader.options", reason="install plugins-contrib/secretreader")
    options = secretreader.DockerConfigSecretReaderOptions.read(parse_option_flags(config["providers"][1]["args"]))
    assert (options.secret_name, options.namespace, options.cache_duration) == ("registry-pull", "image-pull", 600.0)
    for provider in config["providers"]:
        assert provider["apiVersion"] == API_VERSION_V1
        assert json.dumps(provider["matchImages"])  # strings only


def test_the_wire_module_examples_hold() -> None:
    from cpcreds.images.protocol import format_duration, parse_duration

    assert 'parse_duration("1h0m0s") == 3600.0' in TEXT and parse_duration("1h0m0s") == 3600.0
    assert 'format_duration(3600) == "1h0m0s"' in TEXT and format_duration(3600) == "1h0m0s"


# -- end to end: cpcreds' consumer runs cpcreds' plugins from the sample config ---------------------


def _sample_config(tmp_path: Path, kubeconfig: Path, **match_images: list[str]) -> Path:
    """The sample config with the hub kubeconfig at ``kubeconfig`` and, per provider name, other
    matchImages (the local registry's host)."""
    config = yaml.safe_load(EXAMPLE_CONFIG.read_text(encoding="utf-8"))
    for provider in config["providers"]:
        provider["args"] = [a.replace("/etc/kubernetes/hub.kubeconfig", str(kubeconfig)) for a in provider.get("args", [])]
        provider["matchImages"] = match_images.get(provider["name"], provider["matchImages"])
    path = tmp_path / "credential-providers.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture
def both_plugins() -> Path:
    """The bin dir holding cpcreds-gcp-credential-provider and cpcreds-secretreader-credential-provider."""
    pytest.importorskip("cpcreds_gcp", reason="install plugins-contrib/gcp")
    pytest.importorskip("cpcreds_secretreader", reason="install plugins-contrib/secretreader")
    return Path(sys.executable).parent


def _pull_secret(auths: dict[str, Any]) -> dict[str, Any]:
    from tests.fakes.hub import secret

    return secret("image-pull", "registry-pull", {".dockerconfigjson": json.dumps({"auths": auths})}, type="kubernetes.io/dockerconfigjson")


def test_image_credentials_run_the_sample_configs_plugins(both_plugins: Path, hub: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import base64

    from cpcreds import ImageCredentials
    from tests.fakes.fixtures import HUB_TOKEN
    from tests.fakes.google import FakeMetadataServer

    hub.put(_pull_secret({"registry.example.com": {"auth": base64.b64encode(b"robot:r0b0t-pa55").decode()}}))
    kubeconfig = hub.write_kubeconfig(tmp_path / "hub.kubeconfig", HUB_TOKEN)
    for name in ("GOOGLE_APPLICATION_CREDENTIALS", "KUBECONFIG", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))
    with FakeMetadataServer() as metadata:
        monkeypatch.setenv("GCE_METADATA_HOST", metadata.host)
        with ImageCredentials.from_kubelet_config(_sample_config(tmp_path, kubeconfig), both_plugins, timeout=30) as images:
            google = images.get("us-docker.pkg.dev/fleet/apps/checkout:1.4")
            again = images.get("us-docker.pkg.dev/fleet/apps/cart:2")  # the same registry: cached (cacheKeyType Registry)
            private = images.get("registry.example.com/team/app:1")
            public = images.get("docker.io/library/nginx:1.27")
        [issued] = metadata.issued
    assert [(c.key, c.username, c.password) for c in google] == [("*.pkg.dev", "oauth2accesstoken", issued.token)]
    assert [c.password for c in again] == [issued.token]
    assert [(c.key, c.username, c.password) for c in private] == [("registry.example.com", "robot", "r0b0t-pa55")]
    assert list(public) == []


def test_the_cli_docker_config_opens_the_registry(both_plugins: Path, hub: Any, pki: PKI, tmp_path: Path) -> None:
    import base64

    from tests.fakes.fixtures import HUB_TOKEN

    with FakeRegistry(pki, users={"robot": "r0b0t-pa55"}) as registry:
        hub.put(_pull_secret({registry.host: {"auth": base64.b64encode(b"robot:r0b0t-pa55").decode()}}))
        kubeconfig = hub.write_kubeconfig(tmp_path / "hub.kubeconfig", HUB_TOKEN)
        config = _sample_config(tmp_path, kubeconfig, **{"cpcreds-secretreader-credential-provider": [registry.host]})
        result = subprocess.run(
            [str(both_plugins / "cpcreds"), "image-credential", f"{registry.host}/team/app:1", "-o", "docker-config",
             "--image-credential-provider-config", str(config), "--image-credential-provider-bin-dir", str(both_plugins)],
            capture_output=True, text=True, timeout=60,
        )
        assert result.returncode == 0, result.stderr
        [entry] = json.loads(result.stdout)["auths"].values()
        username, password = base64.b64decode(entry["auth"]).decode().split(":", 1)
        ca = tmp_path / "ca.pem"
        ca.write_bytes(pki.ca_pem)
        assert requests.get(f"{registry.url}/v2/", verify=str(ca), timeout=10).status_code == 401
        assert requests.get(f"{registry.url}/v2/", auth=(username, password), verify=str(ca), timeout=10).status_code == 200
