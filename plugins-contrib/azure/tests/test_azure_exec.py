"""``cpcreds-azure get-token`` as a KEP-541 exec plugin: a real subprocess answering an
ExecCredential in the apiVersion asked for, with kubelogin's flags; under real kubectl against the
spoke fake; and its failures as one line on stderr, exit 1, nothing secret."""

from __future__ import annotations

import base64
import json
import shutil

import pytest

from cpcreds.config.wire import API_VERSION_V1, API_VERSION_V1BETA1, EXEC_INFO_ENV
from tests.fakes.azure import AKS_SERVER_ID, Fault

from azure_helpers import CLIENT_ID, CPCREDS_AZURE, SECRET


def _exec_info(api_version: str) -> str:
    return json.dumps({"apiVersion": api_version, "kind": "ExecCredential", "spec": {"interactive": False}})


def _kubelogin_args(entra) -> list[str]:
    # As a kubeconfig written by `kubelogin convert-kubeconfig -l workloadidentity` passes them.
    return ["get-token", "--login", "workloadidentity", "--server-id", AKS_SERVER_ID, "--authority-host", entra.authority,
            "--disable-instance-discovery"]


@pytest.mark.parametrize("api_version", [API_VERSION_V1, API_VERSION_V1BETA1])
def test_get_token_answers_an_exec_credential(entra, workload_identity, run_command, api_version) -> None:
    result = run_command([CPCREDS_AZURE, *_kubelogin_args(entra)], **{EXEC_INFO_ENV: _exec_info(api_version)})
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert (answer["apiVersion"], answer["kind"]) == (api_version, "ExecCredential")
    assert entra.verify(answer["status"]["token"], AKS_SERVER_ID)
    assert answer["status"]["expirationTimestamp"].endswith("Z")


def test_short_login_flag_and_spn_secret_from_the_environment(entra, run_command) -> None:
    entra.add_secret(CLIENT_ID, SECRET)
    result = run_command(
        [CPCREDS_AZURE, "get-token", "-l", "spn", "--client-id", CLIENT_ID, "--tenant-id", entra.tenant, "--disable-instance-discovery"],
        AAD_SERVICE_PRINCIPAL_CLIENT_SECRET=SECRET, **{EXEC_INFO_ENV: _exec_info(API_VERSION_V1)},
    )
    assert result.returncode == 0, result.stderr
    assert entra.verify(json.loads(result.stdout)["status"]["token"])


@pytest.mark.parametrize("client_flags", [[], ["--client-id", CLIENT_ID]], ids=["system-assigned", "user-assigned"])
def test_msi_from_the_instance_metadata_service(entra, run_command, client_flags) -> None:
    # As on a VM or an AKS node: kubelogin's `-l msi [--client-id X]`, IMDS pointed at the fake.
    entra.add_managed_identity("system-assigned" if client_flags else CLIENT_ID)
    entra.add_managed_identity(CLIENT_ID)
    result = run_command([CPCREDS_AZURE, "get-token", "-l", "msi", "--server-id", AKS_SERVER_ID, *client_flags],
                         AZURE_POD_IDENTITY_AUTHORITY_HOST=entra.imds_authority, **{EXEC_INFO_ENV: _exec_info(API_VERSION_V1)})
    assert result.returncode == 0, result.stderr
    assert entra.verify(json.loads(result.stdout)["status"]["token"], AKS_SERVER_ID)
    assert [(issued.client_id, issued.grant) for issued in entra.issued] == [(CLIENT_ID, "imds")]


def test_a_refused_secret_is_one_line_exit_1_without_the_secret(entra, run_command) -> None:
    entra.add_secret(CLIENT_ID, "another")
    result = run_command(
        [CPCREDS_AZURE, "get-token", "--login=spn", f"--client-id={CLIENT_ID}", f"--tenant-id={entra.tenant}", "--disable-instance-discovery"],
        AZURE_CLIENT_SECRET=SECRET, **{EXEC_INFO_ENV: _exec_info(API_VERSION_V1)},
    )
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "AADSTS7000215" in result.stderr and "HTTP 401" in result.stderr
    assert SECRET not in result.stderr


def test_an_echoing_token_endpoint_leaks_nothing(entra, run_command) -> None:
    entra.add_secret(CLIENT_ID, SECRET)
    entra.fail("token", Fault(status=400, echo=True))
    result = run_command(
        [CPCREDS_AZURE, "get-token", "--login=spn", f"--client-id={CLIENT_ID}", f"--tenant-id={entra.tenant}", "--disable-instance-discovery"],
        AZURE_CLIENT_SECRET=SECRET, **{EXEC_INFO_ENV: _exec_info(API_VERSION_V1)},
    )
    assert result.returncode == 1 and result.stderr.count("\n") == 1
    assert SECRET not in result.stderr and "HTTP 400" in result.stderr


def test_a_bad_option_names_it(run_command) -> None:
    result = run_command([CPCREDS_AZURE, "get-token", "--login", "devicecode"], **{EXEC_INFO_ENV: _exec_info(API_VERSION_V1)})
    assert result.returncode == 1 and "login" in result.stderr and result.stderr.count("\n") == 1


def test_help_lists_kubelogins_options(run_command) -> None:
    result = run_command([CPCREDS_AZURE, "--help"])
    assert result.returncode == 0
    for option in ("--serverId", "--clientId", "--tenantId", "--login", "--clientCertificate", "--federatedTokenFile", "--authorityHost"):
        assert option in result.stdout


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_runs_it_in_place_of_kubelogin(entra, spoke, pki, workload_identity, run_command, tmp_path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "aks", "cluster": {"server": spoke.url, "certificate-authority-data": base64.b64encode(pki.ca_pem).decode()}}],
        "users": [{"name": "aks", "user": {"exec": {
            "apiVersion": API_VERSION_V1BETA1, "command": str(CPCREDS_AZURE), "args": _kubelogin_args(entra),
            "env": None, "installHint": "pip install cpcreds-azure", "provideClusterInfo": False, "interactiveMode": "IfAvailable"}}}],
        "contexts": [{"name": "aks", "context": {"cluster": "aks", "user": "aks"}}],
        "current-context": "aks",
    }))
    result = run_command([shutil.which("kubectl"), "--kubeconfig", kubeconfig, "--request-timeout=20s", "get", "namespaces", "-o", "name"])
    assert result.returncode == 0, result.stderr
    assert "namespace/default" in result.stdout
    assert spoke.requests and all(seen.auth == "token" for seen in spoke.requests)
