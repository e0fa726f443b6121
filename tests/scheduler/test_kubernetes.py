"""The kubernetes backend's spark-submit command and manifests, checked as data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.job.spec import JobSpec
from scheduler.backends import KubernetesBackend, create_backend
from scheduler.config import KubernetesConfig, SchedulerConfig
from scheduler.errors import ConfigurationError

SPEC = JobSpec(job_id="01jabcdefghjkmnpqrstvwxyz0", tenant_id="01tenant", pipeline_id="p1",
               sql="SELECT 1", state_url="postgresql://state.db/spate",
               checkpoint_dir="/var/lib/spate/checkpoints/01tenant/p1",
               channel_url="redis://redis:6379/0?key=spate:job:01jabcdefghjkmnpqrstvwxyz0",
               parallelism=3, spark_master=None)


def backend(**settings: object) -> KubernetesBackend:
    kubernetes = KubernetesConfig(api_server="https://k8s.example:6443", namespace="jobs",
                                  image="registry/spate:1.2", service_account="runner",
                                  channel_redis_url="redis://redis:6379/0", **settings)
    config = SchedulerConfig(data_dir=Path("/var/lib/spate"), cluster_backend="kubernetes",
                             state_url="postgresql://state.db/spate", kubernetes=kubernetes,
                             checkpoint_root=Path("/var/lib/spate/checkpoints"))
    created = create_backend(config)
    assert isinstance(created, KubernetesBackend)
    return created


def conf_of(command: list[str]) -> dict[str, str]:
    pairs = [command[i + 1] for i, part in enumerate(command) if part == "--conf"]
    return dict(pair.split("=", 1) for pair in pairs)


def test_the_submit_command_runs_the_job_in_cluster_mode() -> None:
    command = backend().command(SPEC, Path("/jobs/x/driver-pod.json"), attempt=2)
    assert command[0].endswith("/bin/spark-submit")
    assert command[command.index("--master") + 1] == "k8s://https://k8s.example:6443"
    assert command[command.index("--deploy-mode") + 1] == "cluster"
    assert command[-2:] == ["local:///opt/spate/engine/job/main.py", "/etc/spate/spec.json"]
    conf = conf_of(command)
    assert conf["spark.kubernetes.namespace"] == "jobs"
    assert conf["spark.kubernetes.container.image"] == "registry/spate:1.2"
    assert conf["spark.kubernetes.authenticate.driver.serviceAccountName"] == "runner"
    assert conf["spark.kubernetes.driver.podTemplateFile"] == "/jobs/x/driver-pod.json"
    assert conf["spark.kubernetes.driver.pod.name"] == (
        "spate-01jabcdefghjkmnpqrstvwxyz0-a2-driver")
    assert conf["spark.kubernetes.driver.label.spate/tenant"] == "01tenant"
    assert conf["spark.executor.instances"] == "3"
    assert conf["spark.kubernetes.submission.waitAppCompletion"] == "false"


def test_manifests_grant_the_driver_its_executors_and_carry_the_spec() -> None:
    manifests = backend().manifests(SPEC)
    by_kind = {m["kind"]: m for m in manifests}
    assert set(by_kind) == {"ServiceAccount", "Role", "RoleBinding", "Secret"}
    assert all(m["metadata"]["namespace"] == "jobs" for m in manifests)
    rule = by_kind["Role"]["rules"][0]
    assert "pods" in rule["resources"] and {"create", "delete", "watch"} <= set(rule["verbs"])
    binding = by_kind["RoleBinding"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "runner",
                                    "namespace": "jobs"}]
    assert binding["roleRef"]["name"] == "runner"
    # The spec may carry passwords and decrypted connection secrets: a Secret, not a ConfigMap.
    secret = by_kind["Secret"]
    assert secret["metadata"]["name"] == "spate-01jabcdefghjkmnpqrstvwxyz0-spec"
    assert JobSpec.from_json(secret["stringData"]["spec.json"]) == SPEC
    json.dumps(manifests)  # what kubectl apply receives


def test_the_driver_pod_template_mounts_the_spec_and_the_checkpoint_claim() -> None:
    template = backend(checkpoint_claim="spate-checkpoints").driver_pod_template(SPEC)
    volumes = {v["name"]: v for v in template["spec"]["volumes"]}
    assert volumes["spate-spec"]["secret"] == {
        "secretName": "spate-01jabcdefghjkmnpqrstvwxyz0-spec", "defaultMode": 0o400}
    assert volumes["spate-checkpoints"]["persistentVolumeClaim"]["claimName"] == (
        "spate-checkpoints")
    mounts = {m["name"]: m["mountPath"] for m in template["spec"]["containers"][0]["volumeMounts"]}
    assert mounts == {"spate-spec": "/etc/spate", "spate-checkpoints":
                      "/var/lib/spate/checkpoints"}
    without = backend().driver_pod_template(SPEC)
    assert [v["name"] for v in without["spec"]["volumes"]] == ["spate-spec"]


def test_channels_are_redis_streams_keyed_by_job() -> None:
    url = backend().channel_url(Path("/jobs/x"), "j1")
    assert url == "redis://redis:6379/0?key=spate:job:j1"
    no_redis = SchedulerConfig(cluster_backend="kubernetes")
    with pytest.raises(ConfigurationError, match="Redis"):
        create_backend(no_redis).channel_url(Path("/jobs/x"), "j1")
