"""The ``kubernetes`` backend: ``spark-submit --deploy-mode cluster`` onto Kubernetes.

The driver runs in a pod, so the job's spec travels in a Secret (it can hold
a state-store password and connection tables' decrypted secrets) mounted
into the driver pod (through a pod template), its channel is a Redis stream
(the pod cannot write the worker's files), and liveness is the driver pod's
phase as ``kubectl`` reports it. Every job gets its own Spark application;
the namespace's ServiceAccount, Role and RoleBinding let the driver create
its executor pods. Checkpoints live on the ReadWriteMany claim
``checkpoint_claim``, mounted at the checkpoint root in the driver pod and at
the same path in the worker's pod (so a restart without state can remove
one). Killing a job deletes its driver pod; Kubernetes removes
the executors the driver owns.

The command line and the manifests are built as data (:meth:`command`,
:meth:`manifests`), so they are checked without a cluster. The image must
hold Spate installed at ``/opt/spate`` (the application file is
``local:///opt/spate/engine/job/main.py``).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

from engine.job.spec import JobSpec
from scheduler.backends.base import ClusterBackend
from scheduler.backends.standalone import conf_arguments, spark_submit
from scheduler.config import KubernetesConfig
from scheduler.errors import BackendCommandError, ConfigurationError

APPLICATION = "local:///opt/spate/engine/job/main.py"
SPEC_MOUNT = "/etc/spate"
KUBECTL_TIMEOUT_S = 60
SUBMIT_TIMEOUT_S = 300
#: Driver pod phases of a pod whose process may still run.
_LIVE_PHASES = ("Pending", "Running", "Unknown")


def dns_name(text: str) -> str:
    """``text`` as a DNS-1123 label (what pod and ConfigMap names must be)."""
    label = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return label[:63].rstrip("-")


class KubernetesBackend(ClusterBackend):
    """Jobs as Spark applications on Kubernetes, driver pod included."""

    name = "kubernetes"

    @property
    def settings(self) -> KubernetesConfig:
        return self.config.kubernetes

    def channel_url(self, job_dir: Path, job_id: str) -> str:
        base = self.settings.channel_redis_url
        if not base:
            raise ConfigurationError("the kubernetes backend needs a Redis for job channels: "
                                     "set SPATE_BROKER_URL to redis://… or SPATE_REDIS_URL")
        separator = "&" if "?" in base else "?"
        return f"{base}{separator}key=spate:job:{job_id}"

    # -- as data ----------------------------------------------------------------

    def names(self, spec: JobSpec, attempt: int) -> dict[str, str]:
        job = dns_name(f"spate-{spec.job_id}")
        return {"spec_secret": f"{job}-spec", "driver_pod": dns_name(f"{job}-a{attempt}-driver"),
                "application": job}

    def command(self, spec: JobSpec, template_path: Path, attempt: int) -> list[str]:
        """The spark-submit command line that launches ``spec``'s driver pod."""
        names = self.names(spec, attempt)
        conf = {
            "spark.kubernetes.namespace": self.settings.namespace,
            "spark.kubernetes.container.image": self.settings.image,
            "spark.kubernetes.authenticate.driver.serviceAccountName":
                self.settings.service_account,
            "spark.kubernetes.driver.podTemplateFile": str(template_path),
            "spark.kubernetes.driver.pod.name": names["driver_pod"],
            "spark.kubernetes.driver.label.spate/job": dns_name(spec.job_id),
            "spark.kubernetes.driver.label.spate/tenant": dns_name(spec.tenant_id),
            "spark.kubernetes.executor.label.spate/job": dns_name(spec.job_id),
            "spark.kubernetes.executor.label.spate/tenant": dns_name(spec.tenant_id),
            "spark.executor.instances": str(spec.parallelism),
            "spark.executor.cores": "1",
            # spark-submit returns once the driver pod exists; the pod is then watched.
            "spark.kubernetes.submission.waitAppCompletion": "false",
            **self.config.spark_conf, **spec.spark_conf,
        }
        return [str(spark_submit()), "--master", f"k8s://{self.settings.api_server}",
                "--deploy-mode", "cluster", "--name", names["application"],
                *conf_arguments(conf), APPLICATION, f"{SPEC_MOUNT}/spec.json"]

    def manifests(self, spec: JobSpec) -> list[dict[str, Any]]:
        """The namespace's access objects for drivers and the Secret holding the job's spec."""
        namespace, account = self.settings.namespace, self.settings.service_account
        labels = {"app.kubernetes.io/managed-by": "spate"}
        return [
            {"apiVersion": "v1", "kind": "ServiceAccount",
             "metadata": {"name": account, "namespace": namespace, "labels": labels}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
             "metadata": {"name": account, "namespace": namespace, "labels": labels},
             # A driver creates, watches and removes its executor pods and their services.
             "rules": [{"apiGroups": [""],
                        "resources": ["pods", "services", "configmaps",
                                      "persistentvolumeclaims"],
                        "verbs": ["create", "get", "list", "watch", "delete", "deletecollection",
                                  "patch", "update"]}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": account, "namespace": namespace, "labels": labels},
             "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                         "name": account}},
            {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
             "metadata": {"name": self.names(spec, 0)["spec_secret"], "namespace": namespace,
                          "labels": {**labels, "spate/job": dns_name(spec.job_id),
                                     "spate/tenant": dns_name(spec.tenant_id)}},
             "stringData": {"spec.json": spec.to_json()}},
        ]

    def driver_pod_template(self, spec: JobSpec) -> dict[str, Any]:
        """The pod template spark-submit merges into the driver pod: the spec mounted."""
        volumes: list[dict[str, Any]] = [
            {"name": "spate-spec", "secret": {"secretName": self.names(spec, 0)["spec_secret"],
                                              "defaultMode": 0o400}}]
        mounts: list[dict[str, Any]] = [
            {"name": "spate-spec", "mountPath": SPEC_MOUNT, "readOnly": True}]
        if self.settings.checkpoint_claim:
            volumes.append({"name": "spate-checkpoints", "persistentVolumeClaim": {
                "claimName": self.settings.checkpoint_claim}})
            # The same path as in the worker's pod, so both see one checkpoint tree.
            mounts.append({"name": "spate-checkpoints",
                           "mountPath": str(self.config.checkpoint_root)})
        return {"apiVersion": "v1", "kind": "Pod",
                "spec": {"volumes": volumes,
                         "containers": [{"name": "spark-kubernetes-driver",
                                         "volumeMounts": mounts}]}}

    # -- acting ---------------------------------------------------------------

    def submit(self, spec: JobSpec, spec_path: Path, log_path: Path,
               attempt: int) -> dict[str, Any]:
        template_path = spec_path.with_name("driver-pod.json")
        template_path.write_text(json.dumps(self.driver_pod_template(spec), indent=2))
        manifest_list = {"apiVersion": "v1", "kind": "List", "items": self.manifests(spec)}
        self._run(["kubectl", "apply", "-f", "-"], json.dumps(manifest_list), KUBECTL_TIMEOUT_S)
        output = self._run(self.command(spec, template_path, attempt), None, SUBMIT_TIMEOUT_S)
        log_path.write_text(output)
        return {"namespace": self.settings.namespace,
                "driver_pod": self.names(spec, attempt)["driver_pod"],
                "submitted_at": time.time()}

    def is_alive(self, handle: dict[str, Any]) -> bool | None:
        try:
            phase = self._run(["kubectl", "get", "pod", handle["driver_pod"], "-n",
                               handle["namespace"], "--ignore-not-found", "-o",
                               "jsonpath={.status.phase}"], None, KUBECTL_TIMEOUT_S).strip()
        except BackendCommandError:
            return None  # the API server did not answer: liveness unknown, heartbeats decide
        return phase in _LIVE_PHASES

    def kill(self, handle: dict[str, Any]) -> None:
        self._run(["kubectl", "delete", "pod", handle["driver_pod"], "-n", handle["namespace"],
                   "--ignore-not-found", "--grace-period=0", "--force"], None, KUBECTL_TIMEOUT_S)

    @staticmethod
    def _run(command: list[str], stdin: str | None, timeout_s: float) -> str:
        try:
            done = subprocess.run(command, input=stdin, capture_output=True, text=True,
                                  timeout=timeout_s, check=False)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise BackendCommandError(f"{command[0]} failed: {error}") from None
        if done.returncode != 0:
            raise BackendCommandError(f"{command[0]} exited {done.returncode}: "
                                      f"{done.stderr.strip()[-2000:]}")
        return done.stdout

