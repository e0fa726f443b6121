"""The kubernetes backend's spark-submit command and manifests, checked as data."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from spate.engine.job.spec import JobSpec
from spate.scheduler.backends import create_backend
from spate.scheduler.backends.kubernetes import KubernetesBackend, orphan_drivers
from spate.scheduler.config import KubernetesConfig, SchedulerConfig
from spate.scheduler.errors import ConfigurationError

SPEC = JobSpec(job_id="01jabcdefghjkmnpqrstvwxyz0", tenant_id="01tenant", pipeline_id="p1",
               sql="SELECT 1", state_url="postgresql://state.db/spate",
               checkpoint_dir="/var/lib/spate/checkpoints/01tenant/p1",
               channel_url="redis://redis:6379/0?key=spate:job:01jabcdefghjkmnpqrstvwxyz0",
               parallelism=3, spark_master=None)


def backend(**settings: object) -> KubernetesBackend:
    kubernetes = KubernetesConfig(api_server="https://k8s.example:6443", namespace_prefix="t",
                                  image="registry/spate:1.2", service_account="runner",
                                  channel_redis_url="redis://redis:6379/0",
                                  job_cidrs=("10.20.0.0/16",), **settings)
    config = SchedulerConfig(data_dir=Path("/var/lib/spate"), cluster_backend="kubernetes",
                             state_url="postgresql://state.db/spate", kubernetes=kubernetes,
                             checkpoint_root=Path("/var/lib/spate/checkpoints"),
                             egress_allow=("192.168.7.0/24", "db.internal:5432"))
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
    assert conf["spark.kubernetes.namespace"] == "t-01tenant"
    assert conf["spark.kubernetes.container.image"] == "registry/spate:1.2"
    assert conf["spark.kubernetes.authenticate.driver.serviceAccountName"] == "runner"
    assert conf["spark.kubernetes.driver.podTemplateFile"] == "/jobs/x/driver-pod.json"
    assert conf["spark.kubernetes.driver.pod.name"] == (
        "spate-01jabcdefghjkmnpqrstvwxyz0-a2-driver")
    assert conf["spark.kubernetes.driver.label.spate/tenant"] == "01tenant"
    assert conf["spark.executor.instances"] == "3"
    assert conf["spark.kubernetes.submission.waitAppCompletion"] == "false"


def test_each_tenant_gets_a_namespace_whose_role_reaches_only_it() -> None:
    manifests = backend().manifests(SPEC)
    by_kind = {m["kind"]: m for m in manifests}
    assert set(by_kind) == {"Namespace", "ServiceAccount", "Role", "RoleBinding",
                            "NetworkPolicy", "ResourceQuota", "LimitRange", "Secret"}
    assert by_kind["Namespace"]["metadata"]["name"] == "t-01tenant"
    assert all(m["metadata"]["namespace"] == "t-01tenant"
               for m in manifests if m["kind"] != "Namespace")
    assert by_kind["Role"]["kind"] == "Role"  # namespaced: never a ClusterRole
    rule = by_kind["Role"]["rules"][0]
    assert "pods" in rule["resources"] and {"create", "delete", "watch"} <= set(rule["verbs"])
    assert "secrets" not in rule["resources"]
    binding = by_kind["RoleBinding"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "runner",
                                    "namespace": "t-01tenant"}]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": "runner"}
    # The spec may carry passwords and decrypted connection secrets: a Secret, not a ConfigMap.
    secret = by_kind["Secret"]
    assert secret["metadata"]["name"] == "spate-01jabcdefghjkmnpqrstvwxyz0-spec"
    assert JobSpec.from_json(secret["stringData"]["spec.json"]) == SPEC
    json.dumps(manifests)  # what kubectl apply receives


def test_two_tenants_never_share_a_namespace() -> None:
    other = backend().manifests(replace(SPEC, tenant_id="01other"))
    assert {m["metadata"].get("namespace", m["metadata"]["name"]) for m in other} == {
        "t-01other"}


def test_the_network_policy_keeps_pods_off_private_ranges_and_metadata() -> None:
    policy = next(m for m in backend().manifests(SPEC) if m["kind"] == "NetworkPolicy")
    spec = policy["spec"]
    assert spec["podSelector"] == {} and set(spec["policyTypes"]) == {"Ingress", "Egress"}
    assert spec["ingress"] == [{"from": [{"podSelector": {}}]}]  # this namespace only
    blocks = [peer["ipBlock"] for rule in spec["egress"] for peer in rule["to"]
              if "ipBlock" in peer]
    public_v4 = next(b for b in blocks if b["cidr"] == "0.0.0.0/0")
    for private in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16",
                    "127.0.0.0/8", "100.64.0.0/10"):
        assert private in public_v4["except"]
    public_v6 = next(b for b in blocks if b["cidr"] == "::/0")
    assert {"fc00::/7", "fe80::/10", "::1/128"} <= set(public_v6["except"])
    # Jobs reach the state store's network, and the operator's allowed CIDRs (names cannot
    # be written into a NetworkPolicy: the engine's egress check covers them).
    assert {b["cidr"] for b in blocks if "except" not in b} == {"10.20.0.0/16",
                                                               "192.168.7.0/24"}


def test_quota_and_limits_cap_the_tenant() -> None:
    by_kind = {m["kind"]: m for m in backend(tenant_cpu="4", tenant_memory="8Gi").manifests(SPEC)}
    hard = by_kind["ResourceQuota"]["spec"]["hard"]
    assert hard["limits.cpu"] == "4" and hard["limits.memory"] == "8Gi"
    limits = by_kind["LimitRange"]["spec"]["limits"][0]
    assert limits["max"] == {"cpu": "4", "memory": "8Gi"} and "default" in limits


def test_the_driver_pod_template_mounts_the_spec_and_the_checkpoint_claim() -> None:
    template = backend(checkpoint_claim="spate-checkpoints").driver_pod_template(SPEC)
    volumes = {v["name"]: v for v in template["spec"]["volumes"]}
    assert volumes["spate-spec"]["secret"] == {
        "secretName": "spate-01jabcdefghjkmnpqrstvwxyz0-spec", "defaultMode": 0o400}
    assert volumes["spate-checkpoints"]["persistentVolumeClaim"]["claimName"] == (
        "spate-checkpoints")
    mounts = {m["name"]: m["mountPath"] for m in template["spec"]["containers"][0]["volumeMounts"]}
    assert mounts == {"spate-spec": "/etc/spate", "spate-checkpoints":
                      "/var/lib/spate/checkpoints/01tenant"}
    without = backend().driver_pod_template(SPEC)
    assert [v["name"] for v in without["spec"]["volumes"]] == ["spate-spec"]


def test_channels_are_redis_streams_keyed_by_job() -> None:
    url = backend().channel_url(Path("/jobs/x"), "j1")
    assert url == "redis://redis:6379/0?key=spate:job:j1"
    no_redis = SchedulerConfig(cluster_backend="kubernetes")
    with pytest.raises(ConfigurationError, match="Redis"):
        create_backend(no_redis).channel_url(Path("/jobs/x"), "j1")


def test_orphan_driver_pods_are_found_by_their_job_label() -> None:
    """What ``kubectl get pods -l spate/job,spark-role=driver -o json`` lists, read as the
    orphan sweep reads it: a running driver whose job the control plane holds as ended."""
    def pod(name: str, namespace: str, job: str, phase: str = "Running") -> dict[str, object]:
        return {"metadata": {"name": name, "namespace": namespace,
                             "labels": {"spate/job": job, "spark-role": "driver"}},
                "status": {"phase": phase}}

    listing = {"items": [
        pod("spate-j1-a0-driver", "t-01tenant", "j1"),
        pod("spate-j2-a0-driver", "t-01tenant", "j2"),
        pod("spate-j3-a0-driver", "t-01other", "j3", phase="Succeeded"),
        pod("spate-j4-a0-driver", "elsewhere", "j4"),
    ]}
    running = {"j1"}
    assert orphan_drivers(listing, "t-", lambda job: job in running) == [
        ("t-01tenant", "spate-j2-a0-driver", "j2")]
    assert orphan_drivers({}, "t-", lambda job: False) == []
