"""``cpcreds image-credential``, run as a user runs it (a new process), with real plugins."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.kubelet_plugin import install, provider_entry, write_config

SECRET = "cli-secret-never-in-errors"


def cpcreds(*args: str | os.PathLike[str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CPCREDS_")}
    return subprocess.run(
        [sys.executable, "-m", "cpcreds", "image-credential", *map(os.fspath, args)],
        capture_output=True, text=True, env=env, timeout=60,
    )


@pytest.fixture
def node(tmp_path: Path) -> list[str]:
    """The kubelet flags of a node whose gcr plugin answers for gcr.io and *.gcr.io."""
    install(tmp_path / "bin", "gcr", "--auth", f"gcr.io=oauth2accesstoken:{SECRET}", "--auth", "gcr.io/team=team:other")
    install(tmp_path / "bin", "broken", "--exit-code", "1", "--stderr", f"cannot log in: token={SECRET}")
    config = write_config(tmp_path / "config.json", provider_entry("gcr", "gcr.io", "*.gcr.io"), provider_entry("broken", "broken.io"))
    return ["--image-credential-provider-config", str(config), "--image-credential-provider-bin-dir", str(tmp_path / "bin")]


def test_json_output_lists_every_matching_credential_best_first(node: list[str]) -> None:
    run = cpcreds("gcr.io/team/app:1.0", *node)
    assert run.returncode == 0 and run.stderr == ""
    assert json.loads(run.stdout) == {
        "image": "gcr.io/team/app",
        "registry": "gcr.io",
        "credentials": [
            {"key": "gcr.io/team", "username": "team", "password": "other", "provider": "gcr"},
            {"key": "gcr.io", "username": "oauth2accesstoken", "password": SECRET, "provider": "gcr"},
        ],
    }


def test_docker_config_output_is_a_config_json_for_the_images_registry(node: list[str]) -> None:
    run = cpcreds("gcr.io/project/app", "-o", "docker-config", *node)
    assert run.returncode == 0 and run.stderr == ""
    auth = base64.b64encode(f"oauth2accesstoken:{SECRET}".encode()).decode()
    assert json.loads(run.stdout) == {"auths": {"gcr.io": {"auth": auth, "username": "oauth2accesstoken", "password": SECRET}}}


def test_no_credentials_is_an_empty_answer_with_a_warning(node: list[str]) -> None:
    run = cpcreds("quay.io/team/app", "-o", "docker-config", *node)
    assert run.returncode == 0 and json.loads(run.stdout) == {"auths": {}}
    assert run.stderr == "cpcreds: warning: no credentials for quay.io/team/app: no provider's matchImages match it\n"
    run = cpcreds("eu.gcr.io/team/app", *node)
    assert run.returncode == 0 and json.loads(run.stdout)["credentials"] == []
    assert "gcr answered no key that matches it" in run.stderr


@pytest.mark.parametrize(
    "image, extra, words",
    [
        ("broken.io/app", [], "cpcreds: error: provider broken: exec: "),
        ("gcr.io/App", [], "cpcreds: error: invalid image 'gcr.io/App': the repository name must be lowercase"),
    ],
)
def test_runtime_error_is_one_line_exit_1_without_secrets(node: list[str], image: str, extra: list[str], words: str) -> None:
    run = cpcreds(image, *node, *extra)
    assert run.returncode == 1 and run.stdout == ""
    assert len(run.stderr.splitlines()) == 1 and run.stderr.startswith(words)
    assert SECRET not in run.stderr


def test_config_error_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    config = write_config(tmp_path / "config.json", provider_entry("gcr", "gcr.io"))
    run = cpcreds("gcr.io/app", "--image-credential-provider-config", config, "--image-credential-provider-bin-dir", tmp_path / "bin")
    assert run.returncode == 1
    assert run.stderr == (
        f"cpcreds: error: {config}: provider gcr: field providers[0].name: plugin binary executable {tmp_path}/bin/gcr did not exist\n"
    )


@pytest.mark.parametrize(
    "args, words",
    [
        (["gcr.io/app"], "the following arguments are required: --image-credential-provider-config"),
        (["gcr.io/app", "--timeout", "soon"], "argument --timeout"),
        (["gcr.io/app", "--timeout", "0s"], "must be more than 0s"),
        (["gcr.io/app", "-o", "yaml"], "invalid choice"),
        (["gcr.io/app", "--service-account-annotation", "novalue"], "expected an annotation key"),
    ],
)
def test_usage_error_is_one_line_exit_2(node: list[str], args: list[str], words: str) -> None:
    run = cpcreds(*args, *(node if len(args) > 1 else []))
    assert run.returncode == 2 and run.stdout == ""
    assert len(run.stderr.splitlines()) == 1 and words in run.stderr
    assert run.stderr.rstrip().endswith("(see cpcreds image-credential --help)")


def test_timeout_bounds_each_plugin_run(tmp_path: Path) -> None:
    install(tmp_path / "bin", "slow", "--hang")
    config = write_config(tmp_path / "config.json", provider_entry("slow", "slow.io"))
    run = cpcreds("slow.io/app", "--timeout", "300ms", "--image-credential-provider-config", config,
                  "--image-credential-provider-bin-dir", tmp_path / "bin")
    assert run.returncode == 1 and "did not answer within 0.3s" in run.stderr


def test_help_says_the_output_holds_secrets() -> None:
    run = cpcreds("--help")
    assert run.returncode == 0
    text = " ".join(run.stdout.split())
    assert "The output holds passwords" in text and "--image-credential-provider-bin-dir" in text


# -- docs/images.md: the complete example runs as shown ------------------------------------------


def _section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end]


def _blocks(section: str, language: str) -> list[str]:
    import re

    return re.findall(rf"```{language}\n(.*?)```", section, re.S)


def test_the_complete_example_of_the_docs_runs_as_shown(tmp_path: Path) -> None:
    import shlex

    section = _section((Path(__file__).parent.parent / "docs" / "images.md").read_text(), "A complete example")
    setup, = _blocks(section, "sh")
    subprocess.run(["bash", "-e", "-c", setup], cwd=tmp_path, check=True, timeout=30)
    console, = _blocks(section, "console")
    commands: list[tuple[str, list[str]]] = []
    for line in console.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        elif commands and commands[-1][0].endswith("\\"):
            commands[-1] = (commands[-1][0][:-1] + line.strip(), commands[-1][1])
        else:
            commands[-1][1].append(line)
    assert len(commands) == 3
    env = {k: v for k, v in os.environ.items() if not k.startswith("CPCREDS_")}
    for command, expected in commands:
        argv = shlex.split(command)
        assert argv[0] == "cpcreds"
        run = subprocess.run([sys.executable, "-m", "cpcreds", *argv[1:]], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=60)
        assert run.returncode == 0
        assert sorted(run.stdout.splitlines() + run.stderr.splitlines()) == sorted(expected)
    program, = _blocks(section, "python")
    output, = _blocks(section, "text")
    run = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 0 and run.stdout == output


def test_passwords_a_failing_plugin_echoes_never_reach_the_error(tmp_path: Path) -> None:
    # How programs a plugin calls echo a password on stderr (docker, curl, prose, URLs).
    echoed = (
        f"+ docker login -p {SECRET} registry.io\n+ docker login --password {SECRET} registry.io\n"
        f"+ curl -u robot:{SECRET} https://registry.io/v2/\n+ podman login --password={SECRET}\n"
        f"login failed: password {SECRET} rejected\npassword: {SECRET}\npasswd={SECRET}\n"
        f"GET https://robot:{SECRET}@registry.io/v2/ and robot:{SECRET}@proxy.corp:3128: 401\n"
    )
    install(tmp_path / "bin", "echoes", "--exit-code", "1", "--stderr", echoed)
    config = write_config(tmp_path / "config.json", provider_entry("echoes", "registry.io"))
    run = cpcreds("registry.io/app", "--image-credential-provider-config", str(config), "--image-credential-provider-bin-dir", str(tmp_path / "bin"))
    assert run.returncode == 1 and len(run.stderr.splitlines()) == 1
    assert "docker login -p [REDACTED]" in run.stderr and SECRET not in run.stderr


def test_a_provider_skipped_for_a_missing_required_annotation_is_named_in_a_warning(tmp_path: Path) -> None:
    attributes = {"serviceAccountTokenAudience": "sts.amazonaws.com", "requireServiceAccount": True,
                  "requiredServiceAccountAnnotationKeys": ["eks.amazonaws.com/ecr-role-arn"], "cacheType": "ServiceAccount"}
    record = tmp_path / "record.jsonl"
    install(tmp_path / "bin", "ecr", "--auth", "REGISTRY=AWS:p", "--record", str(record))
    config = write_config(tmp_path / "config.json", provider_entry("ecr", "*.dkr.ecr.*.amazonaws.com", tokenAttributes=attributes))
    token = tmp_path / "token"
    token.write_text(SECRET)
    flags = ["--image-credential-provider-config", config, "--image-credential-provider-bin-dir", tmp_path / "bin", "--service-account-token-file", token]
    image = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/app"
    run = cpcreds(image, *flags, "--service-account-annotation", "other.io/x=y")
    assert run.returncode == 0 and json.loads(run.stdout)["credentials"] == []
    assert run.stderr == (
        "cpcreds: warning: provider ecr not run: the service account has no annotation eks.amazonaws.com/ecr-role-arn, "
        "which its tokenAttributes require (the kubelet skips it too)\n"
    )
    assert not record.exists()
    run = cpcreds(image, *flags, "--service-account-annotation", "eks.amazonaws.com/ecr-role-arn=arn:aws:iam::123456789012:role/puller")
    assert run.returncode == 0 and run.stderr == "" and SECRET not in run.stderr
    request = json.loads(record.read_text())["request"]
    assert (request["serviceAccountToken"], request["serviceAccountAnnotations"]) == (SECRET, {"eks.amazonaws.com/ecr-role-arn": "arn:aws:iam::123456789012:role/puller"})
