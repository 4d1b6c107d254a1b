"""The examples of docs/providers-secretreader.md and the package README run as shown: their
Secrets go to the hub fake, their provider configs and ClusterProfiles get the credentials, in a
'pod' whose service account is the hub's credential (in-cluster config, as the pages assume)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("cpcreds_secretreader", reason="install plugins-contrib/secretreader")

from cpcreds import ConfigError, CredentialEngine, ProviderConfig, ProviderError, ProviderRegistry  # noqa: E402
from cpcreds_secretreader.jwt import jwt_expiry  # noqa: E402
from secretreader_helpers import BIN, FLEET  # noqa: E402
from tests.fakes.fixtures import HUB_TOKEN  # noqa: E402
from tests.fakes.hub import HubServer  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
PAGES = [ROOT / "docs" / "providers-secretreader.md", ROOT / "plugins-contrib" / "secretreader" / "README.md"]
#: The hub address the pages show (the in-cluster service address).
SHOWN_HUB = "https://10.96.0.1:443"


def blocks(page: Path, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.DOTALL)


def block(page: Path, marker: str) -> Any:
    """The YAML block of ``page`` that starts with the comment ``# <marker>``."""
    found = [text for text in blocks(page, "yaml") if text.startswith(f"# {marker}\n")]
    assert found, f"{page.name} has no yaml block starting with # {marker}"
    return yaml.safe_load(found[0])


@pytest.fixture
def in_pod(hub: HubServer, service_account_dir: Path, monkeypatch: pytest.MonkeyPatch) -> HubServer:
    """The controller's pod: service account fleet-system/fleet-controller, allowed to get Secrets
    in fleet-system (the pages' RBAC), the hub as its API server."""
    rbac = [document for document in yaml.safe_load_all(_rbac_text()) if document]
    role = next(d for d in rbac if d["kind"] == "Role")
    rules = role["rules"][0]
    hub.grant("pod-token", user="system:serviceaccount:fleet-system:fleet-controller", namespaces=[role["metadata"]["namespace"]], resources=rules["resources"], verbs=rules["verbs"])
    (service_account_dir / "token").write_text("pod-token")
    (service_account_dir / "ca.crt").write_bytes(hub.ca_pem)
    (service_account_dir / "namespace").write_text(FLEET)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(hub.port))
    return hub


def _rbac_text() -> str:
    found = [text for text in blocks(PAGES[0], "yaml") if text.startswith("# rbac.yaml\n")]
    assert found
    return found[0]


def engine(page: Path, marker: str, registry: ProviderRegistry) -> CredentialEngine:
    return CredentialEngine(ProviderConfig.from_dict(block(page, marker), source=marker), registry=registry)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_secret_reader_example_runs(in_pod: HubServer, pod_registry: ProviderRegistry, page: Path) -> None:
    in_pod.put(block(page, "secret-spoke-1.yaml"))
    with engine(page, "providers.yaml", pod_registry) as running:
        credential = running.get_credential(block(page, "spoke-1.yaml"))
    shown = re.search(r"\$ cpcreds get-credential --config providers.yaml --profile spoke-1.yaml\n(.*)\n", page.read_text())
    assert shown is not None
    assert credential.to_exec_credential("client.authentication.k8s.io/v1") == json.loads(shown.group(1))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_open_cluster_management_example_runs(in_pod: HubServer, pod_registry: ProviderRegistry, page: Path) -> None:
    stored = block(page, "secret-cluster1-fleet-controller.yaml")
    in_pod.put(stored)
    with engine(page, "providers-ocm.yaml", pod_registry) as running:
        credential = running.get_credential(block(page, "cluster1.yaml"))
    assert credential.token == stored["stringData"]["token"]
    assert credential.expiration_timestamp == jwt_expiry(credential.token) is not None
    assert block(page, "providers-ocm.yaml")["providers"][0]["name"] == "open-cluster-management"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_kubeconfig_secretreader_example_runs(in_pod: HubServer, pod_registry: ProviderRegistry, page: Path) -> None:
    in_pod.put(block(page, "secret-spoke-2-kubeconfig.yaml"))
    with engine(page, "providers-kubeconfig.yaml", pod_registry) as running:
        assert running.get_credential(block(page, "spoke-2.yaml")).token == "t-spoke-2-admin"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_exec_example_runs(hub: HubServer, kubeconfig: Path, page: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Outside a pod the console script takes the hub from KUBECONFIG, as the Go plugin does.
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    hub.put(block(page, "secret-spoke-1.yaml"))
    config = ProviderConfig.from_dict(block(page, "providers-exec.yaml"), source="providers-exec.yaml")
    with CredentialEngine(config, registry=ProviderRegistry(entry_points=False)) as running:
        assert running.get_credential(block(page, "spoke-1.yaml")).token == "t-0123456789abcdef"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_console_script_by_hand_answers_as_shown(hub: HubServer, page: Path) -> None:
    hub.put(block(page, "secret-spoke-1.yaml"))
    home = Path.home()
    (home / ".kube").mkdir()
    hub.write_kubeconfig(home / ".kube" / "hub.kubeconfig", HUB_TOKEN)
    text = page.read_text()
    info = re.search(r"\$ export KUBERNETES_EXEC_INFO='(.*)'\n\$ (cpcreds-secretreader .*)\n(.*)\n", text)
    assert info is not None
    arguments = info.group(2).replace("~", str(home)).split()[1:]
    result = subprocess.run(
        [str(BIN / "cpcreds-secretreader"), *arguments],
        env={**os.environ, "KUBERNETES_EXEC_INFO": info.group(1)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == json.loads(info.group(3))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_errors_shown_are_the_real_ones(in_pod: HubServer, pod_registry: ProviderRegistry, page: Path) -> None:
    text = page.read_text()
    bad = ProviderConfig.from_dict({"providers": [{"name": "secretreader", "type": "secretreader", "options": {"secretName": "{cluster}-token"}}]}, source="bad.yaml")
    with pytest.raises(ConfigError) as caught:
        CredentialEngine(bad, registry=pod_registry)
    assert f"cpcreds: error: {caught.value}\n" in text

    missing = block(page, "spoke-1.yaml")
    missing["metadata"]["name"] = "spoke-3"
    missing["status"]["accessProviders"][0]["cluster"]["extensions"][0]["extension"]["clusterName"] = "spoke-3"
    with engine(page, "providers.yaml", pod_registry) as running, pytest.raises(ProviderError) as failed:
        running.get_credential(missing)
    assert f"cpcreds: error: {str(failed.value).replace(in_pod.url, SHOWN_HUB)}\n" in text


def test_the_rbac_is_what_the_provider_needs(in_pod: HubServer, pod_registry: ProviderRegistry) -> None:
    # The in_pod grant is built from the page's Role: the examples above ran with it. Without it:
    in_pod.grant("pod-token", user="system:serviceaccount:fleet-system:fleet-controller", namespaces=[FLEET], verbs=["list"])
    in_pod.put(block(PAGES[0], "secret-spoke-1.yaml"))
    with engine(PAGES[0], "providers.yaml", pod_registry) as running, pytest.raises(ProviderError, match="403 Forbidden"):
        running.get_credential(block(PAGES[0], "spoke-1.yaml"))
