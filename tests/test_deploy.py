"""The container recipe and the sample manifests: parsed and checked against what serve does
(the image is not built in CI)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from cpcreds import ProviderConfig
from cpcreds.serve.settings import ServeSettings, parse_listen

ROOT = Path(__file__).resolve().parent.parent


def _objects() -> dict[str, dict[str, Any]]:
    documents = [d for d in yaml.safe_load_all((ROOT / "deploy" / "serve.yaml").read_text()) if d]
    return {f"{d['kind']}/{d['metadata']['name']}": d for d in documents}


def test_the_manifests_are_the_expected_objects() -> None:
    assert set(_objects()) == {
        "Namespace/cpcreds-system",
        "ServiceAccount/cpcreds",
        "ClusterRole/cpcreds-clusterprofile-reader",
        "ClusterRoleBinding/cpcreds-clusterprofile-reader",
        "Role/cpcreds-secretreader",
        "RoleBinding/cpcreds-secretreader",
        "ConfigMap/cpcreds-config",
        "Deployment/cpcreds",
        "Service/cpcreds",
    }


def test_rbac_lets_serve_list_and_watch_clusterprofiles() -> None:
    objects = _objects()
    rules = objects["ClusterRole/cpcreds-clusterprofile-reader"]["rules"]
    assert {"apiGroups": ["multicluster.x-k8s.io"], "resources": ["clusterprofiles"], "verbs": ["get", "list", "watch"]} in rules
    binding = objects["ClusterRoleBinding/cpcreds-clusterprofile-reader"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "cpcreds", "namespace": "cpcreds-system"}]
    assert objects["Role/cpcreds-secretreader"]["rules"] == [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]


def test_the_configmap_is_a_valid_config_with_a_valid_serve_section() -> None:
    text = _objects()["ConfigMap/cpcreds-config"]["data"]["providers.yaml"]
    config = ProviderConfig.from_dict(yaml.safe_load(text), source="providers.yaml")
    settings = ServeSettings.load({}, config.serve)
    assert settings.in_cluster and settings.source == "hub"
    assert parse_listen(settings.listen) == ("0.0.0.0", 9733)  # a pod must listen beyond loopback


def test_the_deployment_runs_serve_with_the_mounted_config_and_its_probes() -> None:
    objects = _objects()
    pod = objects["Deployment/cpcreds"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "cpcreds"
    (container,) = pod["containers"]
    assert container["args"] == ["--config", "/etc/cpcreds/providers.yaml"]
    assert {"name": "config", "mountPath": "/etc/cpcreds", "readOnly": True} in container["volumeMounts"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["ports"] == [{"name": "http", "containerPort": 9733}]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["terminationGracePeriodSeconds"] > 5  # serve's shutdown takes at most 5 s
    assert objects["Service/cpcreds"]["spec"]["ports"][0]["targetPort"] == "http"


def test_the_dockerfile_installs_cpcreds_and_the_contrib_providers_from_the_lock_and_runs_serve() -> None:
    lines = [line.strip() for line in (ROOT / "Dockerfile").read_text().splitlines()]
    assert lines[[i for i, line in enumerate(lines) if line.startswith("FROM ")][0]].startswith("FROM python:3.1")
    assert "COPY plugins-contrib ./plugins-contrib" in lines
    # Dependencies only from the lock, checked by hash; our distributions without pip's choices.
    assert lines.index("RUN pip install --require-hashes -r requirements.lock") < lines.index("RUN pip install --no-deps . \\")
    assert 'if [ -f "$plugin/pyproject.toml" ]; then pip install --no-deps "$plugin"; fi; \\' in lines
    entrypoint = json.loads(next(line for line in lines if line.startswith("ENTRYPOINT")).removeprefix("ENTRYPOINT"))
    assert entrypoint == ["cpcreds", "serve"]
    assert any(line.startswith("USER ") and line != "USER root" for line in lines)


# -- several replicas (deploy/shard.yaml) -----------------------------------------------------


def _shard_objects() -> dict[str, dict[str, Any]]:
    documents = [d for d in yaml.safe_load_all((ROOT / "deploy" / "shard.yaml").read_text()) if d]
    return {f"{d['kind']}/{d['metadata']['name']}": d for d in documents}


def test_the_shard_manifests_are_the_lease_role_its_binding_a_disruption_budget_and_the_deployment() -> None:
    objects = _shard_objects()
    assert set(objects) == {"Role/cpcreds-shard-leases", "RoleBinding/cpcreds-shard-leases", "PodDisruptionBudget/cpcreds", "Deployment/cpcreds-serve-sharded"}
    role = objects["Role/cpcreds-shard-leases"]
    assert role["metadata"]["namespace"] == "cpcreds-system"
    assert role["rules"] == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "list", "watch", "create", "update", "delete"]}]
    binding = objects["RoleBinding/cpcreds-shard-leases"]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cpcreds-shard-leases"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "cpcreds", "namespace": "cpcreds-system"}]
    budget = objects["PodDisruptionBudget/cpcreds"]["spec"]
    assert budget["maxUnavailable"] == 1
    assert budget["selector"]["matchLabels"] == _objects()["Deployment/cpcreds"]["spec"]["selector"]["matchLabels"]


def test_applying_serve_and_shard_manifests_together_replaces_no_object_of_the_other() -> None:
    # kubectl apply -f deploy/serve.yaml -f deploy/shard.yaml: an object in both would be one,
    # the second file's (the single replica's Deployment silently became the sharded one).
    assert not set(_objects()) & set(_shard_objects())
    sharded = _shard_objects()["Deployment/cpcreds-serve-sharded"]
    assert sharded["metadata"]["namespace"] == _objects()["Deployment/cpcreds"]["metadata"]["namespace"]
    # Its pods are the Service's: requests reach the sharded replicas.
    assert _objects()["Service/cpcreds"]["spec"]["selector"].items() <= sharded["spec"]["template"]["metadata"]["labels"].items()


def test_the_shard_deployment_runs_three_replicas_of_serve_shard_on_the_hub_with_their_status_url() -> None:
    from cpcreds.cli.parser import build_parser
    from cpcreds.cli.serve import serve_flags

    deployment = _shard_objects()["Deployment/cpcreds-serve-sharded"]
    single = _objects()["Deployment/cpcreds"]
    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["selector"] == single["spec"]["selector"] == {"matchLabels": _shard_objects()["PodDisruptionBudget/cpcreds"]["spec"]["selector"]["matchLabels"]}
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    (plain,) = single["spec"]["template"]["spec"]["containers"]
    assert {k: v for k, v in container.items() if k not in ("args", "env")} == {k: v for k, v in plain.items() if k != "args"}
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]}
    assert env == {"POD_NAME": "metadata.name", "POD_IP": "status.podIP"}
    # The args as the kubelet expands them, read by serve's own parser and settings.
    args = [arg.replace("$(POD_IP)", "10.0.0.7") for arg in container["args"]]
    parsed = build_parser().parse_args(["serve", *args])
    flags = serve_flags(parsed)
    text = _objects()["ConfigMap/cpcreds-config"]["data"]["providers.yaml"]
    config = ProviderConfig.from_dict(yaml.safe_load(text), source="providers.yaml")
    settings = ServeSettings.load(flags, config.serve)
    assert settings.shard and settings.source == "hub" and settings.shard_namespace == objects_namespace()
    assert settings.shard_status_url == "http://10.0.0.7:9733" and parse_listen(settings.listen)[1] == 9733
    # Stopping takes serve's shutdown and then the Lease's release, bounded by the renew deadline.
    assert pod["terminationGracePeriodSeconds"] >= settings.shutdown_timeout + settings.shard_renew_deadline


def objects_namespace() -> str:
    return _shard_objects()["Role/cpcreds-shard-leases"]["metadata"]["namespace"]


def test_the_lease_role_is_all_a_replica_needs(hub: Any, tmp_path: Path) -> None:
    from cpcreds import HubOptions
    from cpcreds.shard import Shard
    from tests.fleet_harness import until

    (rule,) = _shard_objects()["Role/cpcreds-shard-leases"]["rules"]
    hub.grant("replica", namespaces=["cpcreds-system"], resources=rule["resources"], verbs=rule["verbs"])
    options = HubOptions(kubeconfig=hub.write_kubeconfig(tmp_path / "hub.kubeconfig", "replica"), timeout=5)
    shards = [Shard(options, namespace="cpcreds-system", identity=name, lease_duration=1, renew_deadline=0.6, retry_interval=0.2) for name in ("a", "b")]
    try:
        for shard in shards:
            shard.start()
        until(lambda: all(s.claiming() and s.membership.members == ("a", "b") for s in shards), timeout=5, what="two replicas")
        shards[1].stop()  # releasing (update) and, on the other side, deleting the released Lease
        until(lambda: shards[0].cleaned == 1, timeout=2, what="the released Lease deleted")
        assert set(hub.leases("cpcreds-system")) == {shards[0].lease_name}
        assert all(s.renewals["renewed"] > 0 for s in shards)
        assert not [seen for seen in hub.requests if seen.status in (401, 403)]
    finally:
        for shard in shards:
            shard.stop()
