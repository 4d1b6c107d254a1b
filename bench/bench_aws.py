"""The aws provider (plugins-contrib/aws) against the AWS fakes (issue 23).

    .venv/bin/python bench/bench_aws.py [--rounds 15]

(a) Cold: ``CredentialEngine.get_credential(profile)`` for an EKS cluster the engine has never
    seen (a new plan; the provider signs a token for the profile's clusterName) against running
    ``cpcreds-aws eks-token --cluster-name <name>`` as client-go runs it for the same cluster,
    alternating which goes first. Both log in at the container credentials endpoint fake (EKS
    Pod Identity: AWS_CONTAINER_CREDENTIALS_FULL_URI): the console script fetches the keys on
    each run, the in-process provider holds botocore's refreshable credentials (fetched once,
    before the timing, as a running controller has them). Every token is then verified by the
    STS fake (outside the timing). Target: in-process at least 50x faster. Also the engine's
    cached hit.
(b) ``cpcreds-aws eks-token``'s whole run, keys in the environment (the cheapest login: no
    request at all), against ``.venv/bin/python -c pass``, with its ``-X importtime`` profile.
    Target: at most 4x.

The fakes (tests/fakes/aws.py, aws_metadata.py) run in this process, on loopback, STS with real TLS. Needs the
test dependencies and the package: ``pip install -e '.[test]' -e plugins-contrib/aws``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from _common import alternate, imports_line, pair, summary, timed, tmpdir
from prometheus_client import CollectorRegistry

from cpcreds import CredentialEngine, ProviderConfig, ProviderRegistry

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.fakes
from tests.fakes.aws import FakeAWS  # noqa: E402
from tests.fakes.aws_metadata import FakeAWSMetadata  # noqa: E402

BIN = Path(sys.executable).parent
SCRIPT = BIN / "cpcreds-aws"
REGION = "us-west-2"
POD_IDENTITY = "pod-identity-bench-" + "x" * 16


def profile(name: str) -> dict:
    """A ClusterProfile as the kubernetes client returns it, naming its EKS cluster."""
    return {
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": name, "namespace": "fleet-system", "uid": f"uid-{name}", "resourceVersion": "1"},
        "status": {
            "accessProviders": [
                {
                    "name": "argo-cd-builtin-aws",
                    "cluster": {
                        "server": f"https://{name}.gr7.{REGION}.eks.amazonaws.com",
                        "extensions": [{"name": "client.authentication.k8s.io/exec", "extension": {"clusterName": name}}],
                    },
                }
            ]
        },
    }


def engine_for(rounds: int) -> CredentialEngine:
    from cpcreds_aws import plugin

    config = ProviderConfig.from_dict({"providers": [{"name": "argo-cd-builtin-aws", "type": "aws"}]})
    return CredentialEngine(
        config, registry=ProviderRegistry(entry_points=False, plugins=(plugin,)), prometheus_registry=CollectorRegistry(), max_entries=rounds + 100
    )


def run_script(name: str, env: dict[str, str], *python_flags: str) -> tuple[str, str]:
    """Run ``cpcreds-aws eks-token`` for cluster ``name`` as client-go would; (token, stderr)."""
    command = [str(SCRIPT), "eks-token", "--cluster-name", name]
    if python_flags:
        command = [sys.executable, *python_flags, *command]
    info = {"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential", "spec": {"interactive": False}}
    result = subprocess.run(command, env={**env, "KUBERNETES_EXEC_INFO": json.dumps(info)}, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        sys.exit(f"cpcreds-aws failed: {result.stderr.strip()[-500:]}")
    return json.loads(result.stdout)["status"]["token"], result.stderr


def cold(aws: FakeAWS, metadata: FakeAWSMetadata, env: dict[str, str], rounds: int) -> None:
    pod_env = {
        **env,
        "AWS_CONTAINER_CREDENTIALS_FULL_URI": metadata.container_url,
        "AWS_CONTAINER_AUTHORIZATION_TOKEN": POD_IDENTITY,
    }
    saved = dict(os.environ)
    os.environ.update(pod_env)
    try:
        engine = engine_for(rounds)
        engine.get_credential(profile("warm"))  # the provider's credentials are fetched here, once
        run_script("warm", pod_env)  # warm the OS caches for the script
        tokens: dict[str, str] = {}
        ours, script, ratios = [], [], []
        for number in range(rounds):
            mine, theirs = f"eks-{number}", f"eks-script-{number}"

            def in_process() -> None:
                tokens[mine] = engine.get_credential(profile(mine)).token or ""

            def console() -> None:
                tokens[theirs] = run_script(theirs, pod_env)[0]

            took_ours, took_script = pair(number, in_process, console)
            ours.append(took_ours)
            script.append(took_script)
            ratios.append(took_script / took_ours)
        hits = [timed(lambda: engine.get_credential(profile("eks-0"))) for _ in range(1000)]
        engine.close()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    refused = [name for name, token in tokens.items() if not aws.authenticator(name)(token)]
    assert not refused, f"STS refused the tokens of {refused}"
    print(f"(a) cold in-process CredentialEngine.get_credential: {summary(ours)}")
    print(f"    cpcreds-aws eks-token console script:          {summary(script)}")
    print(
        f"    in-process is {statistics.median(script) / statistics.median(ours):.0f}x faster (ratio of medians); "
        f"median of per-round ratios {statistics.median(ratios):.0f}x (target >= 50x); {len(tokens)} tokens verified by the STS fake"
    )
    print(f"    cached hit (the engine's):                     {summary(hits)}")


def startup(aws: FakeAWS, env: dict[str, str], rounds: int) -> None:
    keys_env = {**env, **aws.add_user("bench").env()}
    python = Path(sys.executable)
    full, bare, ratios = alternate(
        rounds, lambda number: run_script(f"eks-{number}", keys_env), lambda: subprocess.run([str(python), "-c", "pass"], check=True)
    )
    print(f"(b) cpcreds-aws eks-token, keys in the environment: {summary(full)}")
    print(f"    bare .venv/bin/python -c pass:                  {summary(bare)}")
    print(f"    {statistics.median(full) / statistics.median(bare):.1f}x (ratio of medians); median of per-round ratios {statistics.median(ratios):.1f}x (target <= 4x)")
    print(imports_line(lambda: run_script("eks-import", keys_env, "-X", "importtime")[1], rounds))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15, help="rounds of (a) and (b)")
    options = parser.parse_args()
    folder = tmpdir()
    with FakeAWS(region=REGION) as aws:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CPCREDS_"))}
        env.update(aws.env(folder / "aws-ca.pem"))
        env.update(
            AWS_REGION=REGION,
            AWS_CONFIG_FILE=str(folder / "aws-config"),
            AWS_SHARED_CREDENTIALS_FILE=str(folder / "aws-credentials"),
            AWS_EC2_METADATA_DISABLED="true",
            NO_PROXY="127.0.0.1,localhost",
        )
        with FakeAWSMetadata(aws, aws.add_role("fleet-controller"), container_authorization=POD_IDENTITY) as metadata:
            cold(aws, metadata, env, options.rounds)
        startup(aws, env, options.rounds)


if __name__ == "__main__":
    main()
