"""``cpcreds-gcp``, the provider as a KEP-541 exec plugin: run by cpcreds itself from a provider
config (v1 and v1beta1), run directly as kubectl would run it, as a drop-in for
``gke-gcloud-auth-plugin --use_application_default_credentials``; and the package as cpcreds finds
it through its entry point."""

from __future__ import annotations

import base64
import json
import re
import secrets
import shutil
import sys
from pathlib import Path

import pytest

pytest.importorskip("cpcreds_gcp", reason="install plugins-contrib/gcp")

from cpcreds.config.wire import API_VERSION_V1, API_VERSION_V1BETA1, EXEC_INFO_ENV  # noqa: E402
from cpcreds.credential import parse_rfc3339  # noqa: E402

CPCREDS = Path(sys.executable).with_name("cpcreds")
CPCREDS_GCP = Path(sys.executable).with_name("cpcreds-gcp")
CPCREDS_GCP_KUBELET = Path(sys.executable).with_name("cpcreds-gcp-credential-provider")


def _exec_info(api_version: str) -> str:
    return json.dumps(
        {"apiVersion": api_version, "kind": "ExecCredential", "spec": {"interactive": False, "cluster": {"server": "https://34.118.0.10"}}}
    )


@pytest.mark.parametrize("api_version", [API_VERSION_V1, API_VERSION_V1BETA1])
def test_cpcreds_runs_the_console_script_as_an_exec_plugin(google, sa_key, write_json, exec_files, run_command, api_version):
    # With gke-gcloud-auth-plugin's flag, as a config written for it would pass.
    config, profile = exec_files(api_version, args=["--use_application_default_credentials"])
    key_file = write_json(google.service_account_info(sa_key))
    result = run_command(
        [CPCREDS, "get-credential", "--config", config, "--profile", profile],
        GOOGLE_APPLICATION_CREDENTIALS=str(key_file),
    )
    assert result.returncode == 0, result.stderr
    [issued] = google.issued
    status = json.loads(result.stdout)["status"]
    assert status["token"] == issued.token
    assert abs((parse_rfc3339(status["expirationTimestamp"]) - issued.expires_at).total_seconds()) < 2
    assert issued.scopes == ("https://www.googleapis.com/auth/cloud-platform", "https://www.googleapis.com/auth/userinfo.email")


AUDIENCE = "//iam.googleapis.com/projects/123456789/locations/global/workloadIdentityPools/fleet/providers/hub"


def _source(name, google, metadata, sa_key, target_key, write_json, gcloud_dir, tmp_path):
    """(arguments, environment, issuer) that make cpcreds-gcp use one credential source."""
    if name == "service-account":
        return [], {"GOOGLE_APPLICATION_CREDENTIALS": str(write_json(google.service_account_info(sa_key)))}, google
    if name == "workload-identity-federation":
        subject = tmp_path / "subject-token"
        subject.write_text("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJmbGVldCJ9.c2ln")
        google.add_external_subject(subject.read_text(), AUDIENCE)
        info = google.external_account_info(AUDIENCE, {"file": str(subject)})
        return [f"--credentials-file={write_json(info)}"], {}, google
    if name == "gcloud-user":  # refreshed at https://oauth2.googleapis.com/token, through the proxy
        (gcloud_dir / "application_default_credentials.json").write_text(json.dumps(google.add_user("developer@example.com")))
        return [], {}, google
    if name == "metadata-server":
        return [], {"GCE_METADATA_HOST": metadata.host}, metadata
    # impersonation, at https://iamcredentials.googleapis.com through the proxy
    google.allow_impersonation(sa_key.email, target_key.email)
    key_file = write_json(google.service_account_info(sa_key))
    return [f"--credentials-file={key_file}", f"--impersonate-service-account={target_key.email}", "--lifetime=20m"], {}, google


# Every source answering v1, and one answering v1beta1 too: which version is answered does not
# depend on the source (test_cpcreds_runs_the_console_script_as_an_exec_plugin runs both).
@pytest.mark.parametrize(
    ("source", "api_version"),
    [*((source, API_VERSION_V1) for source in ("service-account", "workload-identity-federation", "gcloud-user", "metadata-server", "impersonation")),
     ("workload-identity-federation", API_VERSION_V1BETA1)],
)
def test_each_credential_source_through_the_console_script(
    google_via_proxy, metadata, sa_key, target_key, write_json, no_outside_credentials, tmp_path, run_command, source, api_version
):
    args, env, issuer = _source(source, google_via_proxy, metadata, sa_key, target_key, write_json, no_outside_credentials, tmp_path)
    # google-auth's expiry is a naive UTC time: read as local time it would be off by the zone's
    # offset, 5:45 in Kathmandu.
    result = run_command([CPCREDS_GCP, *args], TZ="Asia/Kathmandu", **env, **{EXEC_INFO_ENV: _exec_info(api_version)})
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["apiVersion"] == api_version and answer["kind"] == "ExecCredential"
    assert set(answer["status"]) == {"token", "expirationTimestamp"}  # what gke-gcloud-auth-plugin prints
    issued = issuer.issued[-1]
    assert answer["status"]["token"] == issued.token
    assert abs((parse_rfc3339(answer["status"]["expirationTimestamp"]) - issued.expires_at).total_seconds()) < 2


def test_options_are_flags(google, sa_key, write_json, run_command):
    key_file = write_json(google.service_account_info(sa_key))
    result = run_command(
        [CPCREDS_GCP, f"--credentials-file={key_file}", "--scopes", "openid,email", "-scopes", "https://www.googleapis.com/auth/cloud-platform"],
        **{EXEC_INFO_ENV: _exec_info(API_VERSION_V1)},
    )
    assert result.returncode == 0, result.stderr
    assert google.issued[0].scopes == ("openid", "email", "https://www.googleapis.com/auth/cloud-platform")


def test_a_failure_is_one_line_on_stderr_and_exit_1_without_secrets(google, sa_key, write_json, run_command):
    google.fail("token", echo=True, status=400)
    key_file = write_json(google.service_account_info(sa_key))
    result = run_command([CPCREDS_GCP, f"--credentials-file={key_file}"], **{EXEC_INFO_ENV: _exec_info(API_VERSION_V1)})
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == f"cpcreds-gcp: provider gcp: gcp: token endpoint {google.token_uri} answered HTTP 400 (invalid_request)\n"


def test_cpcreds_shows_the_plugins_error_line(exec_files, run_command, tmp_path):
    config, profile = exec_files(API_VERSION_V1, args=[f"--credentials-file={tmp_path / 'absent.json'}"])
    result = run_command([CPCREDS, "get-credential", "--config", config, "--profile", profile])
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert f"credentials file {tmp_path / 'absent.json'} (credentialsFile) does not exist" in result.stderr


def test_a_bad_flag_names_the_option(run_command):
    result = run_command([CPCREDS_GCP, "--lifetime=2h"])
    assert result.returncode == 1
    assert result.stderr == "cpcreds-gcp: options: lifetime applies only with impersonateServiceAccount\n"
    unknown = run_command([CPCREDS_GCP, "--scope=openid"])
    assert (unknown.returncode, unknown.stdout) == (1, "")
    assert unknown.stderr == (
        "cpcreds-gcp: option scope: is not a known option; did you mean 'scopes'? "
        "(options: scopes, credentialsFile, impersonateServiceAccount, delegates, lifetime, iamEndpoint, workloadIdentityProvider, "
        "identityProvider, projectId, requireServiceAccount, stsEndpoint; --help describes them)\n"
    )


@pytest.mark.parametrize("script", [CPCREDS_GCP, CPCREDS_GCP_KUBELET], ids=["exec", "kubelet"])
def test_help_lists_every_option_with_its_type_and_default_and_no_other_plugins_flags(run_command, script):
    result = run_command([script, "--help"])
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.startswith(f"usage: {Path(script).name} [--OPTION=VALUE ...]")
    for line in (
        "  --scopes  list of strings (repeat the flag); default: https://www.googleapis.com/auth/cloud-platform,https://www.googleapis.com/auth/userinfo.email",
        "  --credentialsFile  path; default: unset",
        "  --impersonateServiceAccount  string; default: unset",
        "  --delegates  list of strings (repeat the flag); default: none",
        "  --lifetime  duration; default: unset",
        "  --iamEndpoint  string; default: https://iamcredentials.googleapis.com",
        "  --workloadIdentityProvider  string; default: unset",
        "  --requireServiceAccount  true or false; default: false",
        "  --stsEndpoint  string; default: https://sts.googleapis.com",
    ):
        assert line in result.stdout.splitlines()
    assert "kebab-case works too: --credentials-file" in result.stdout
    assert "secretName" not in result.stdout and "secret-name" not in result.stdout


def test_the_package_is_found_by_its_entry_point_and_runs_in_process(google, sa_key, write_json, run_command, tmp_path, gke_profile):
    listed = run_command([CPCREDS, "plugins"])
    assert listed.returncode == 0, listed.stderr
    assert re.search(r"^gcp\s+cpcreds-gcp 0\.1\.0$", listed.stdout, flags=re.MULTILINE)

    key_file = write_json(google.service_account_info(sa_key))
    config = tmp_path / "providers.yaml"
    config.write_text(f"providers:\n- name: google\n  type: gcp\n  options:\n    credentialsFile: {key_file}\n")
    profile = tmp_path / "gke-1.json"
    profile.write_text(json.dumps(gke_profile()))
    result = run_command([CPCREDS, "get-credential", "--config", config, "--profile", profile])
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["status"]["token"] == google.issued[0].token


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_runs_it_in_place_of_gke_gcloud_auth_plugin(metadata, make_spoke, pki, run_command, tmp_path):
    # The user entry `gcloud container clusters get-credentials` writes, with the command swapped.
    # kubectl runs the plugin for discovery and again for the request; like the real metadata
    # server, the fake answers each time with the instance's current token.
    token = "ya29.kubectl-" + secrets.token_urlsafe(24)
    metadata.preset_tokens.extend([token] * 8)
    spoke = make_spoke(tokens=[token])
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "gke", "cluster": {"server": spoke.url, "certificate-authority-data": base64.b64encode(pki.ca_pem).decode()}}],
                "users": [
                    {
                        "name": "gke",
                        "user": {
                            "exec": {
                                "apiVersion": API_VERSION_V1BETA1,
                                "command": str(CPCREDS_GCP),
                                "args": ["--use_application_default_credentials"],
                                "installHint": "pip install cpcreds-gcp",
                                "provideClusterInfo": True,
                                "interactiveMode": "IfAvailable",
                            }
                        },
                    }
                ],
                "contexts": [{"name": "gke", "context": {"cluster": "gke", "user": "gke"}}],
                "current-context": "gke",
            }
        )
    )
    (tmp_path / "home").mkdir()
    result = run_command(
        ["kubectl", "--kubeconfig", kubeconfig, "--request-timeout=20s", "get", "namespaces", "-o", "name"],
        GCE_METADATA_HOST=metadata.host,
        HOME=str(tmp_path / "home"),
        NO_PROXY="127.0.0.1,localhost",
    )
    assert result.returncode == 0, result.stderr
    assert "namespace/default" in result.stdout.split()
    assert token not in result.stderr
    assert all(seen.token == token and seen.auth == "token" for seen in spoke.requests)
