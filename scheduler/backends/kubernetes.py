"""The ``kubernetes`` backend: ``spark-submit --deploy-mode cluster`` onto Kubernetes.

The driver runs in a pod, so the job's spec travels in a Secret (it can hold
a state-store password and connection tables' decrypted secrets) mounted
into the driver pod (through a pod template), its channel is a Redis stream
(the pod cannot write the worker's files), and liveness is the driver pod's
phase as ``kubectl`` reports it. Every job gets its own Spark application, in
its tenant's namespace (``<namespace prefix>-<tenant>``), which is the
tenant's compute unit here: its ServiceAccount, Role and RoleBinding let the
driver create its executor pods in that namespace only, and its
NetworkPolicy, ResourceQuota and LimitRange fence it (see
:mod:`.k8s_tenancy`). Checkpoints live on the ReadWriteMany claim
``checkpoint_claim`` that the operator provides in each tenant's namespace,
mounted at ``<checkpoint root>/<tenant>`` in the driver pod, and the worker's
pod sees the same files at that path (so a restart without state can remove
one). Killing a job deletes its driver pod; Kubernetes removes
the executors the driver owns.

The command line and the manifests are built as data (:meth:`command`,
:meth:`manifests`), so they are checked without a cluster. The image must
hold Spate installed at ``/opt/spate`` (the application file is
``local:///opt/spate/engine/job/main.py``).
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from spate.engine.connectors.core.egress import AllowRule
from spate.engine.job.spec import JobSpec
from spate.scheduler.backends.base import ClusterBackend
from spate.scheduler.backends.k8s_tenancy import tenant_labels, tenant_manifests
from spate.scheduler.backends.standalone import conf_arguments, spark_submit
from spate.scheduler.config import KubernetesConfig
from spate.scheduler.errors import BackendCommandError, ConfigurationError
from spate.scheduler.sandbox.unit import ComputeUnit

log = logging.getLogger(__name__)

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

    def namespace(self, tenant_id: str) -> str:
        """The tenant's namespace: its compute unit on Kubernetes."""
        return dns_name(f"{self.settings.namespace_prefix}-{tenant_id}")

    def names(self, spec: JobSpec, attempt: int) -> dict[str, str]:
        job = dns_name(f"spate-{spec.job_id}")
        return {"spec_secret": f"{job}-spec", "driver_pod": dns_name(f"{job}-a{attempt}-driver"),
                "application": job}

    def command(self, spec: JobSpec, template_path: Path, attempt: int) -> list[str]:
        """The spark-submit command line that launches ``spec``'s driver pod."""
        names = self.names(spec, attempt)
        conf = {
            "spark.kubernetes.namespace": self.namespace(spec.tenant_id),
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
        """The tenant's namespace and its fences, and the Secret holding the job's spec."""
        namespace, tenant = self.namespace(spec.tenant_id), dns_name(spec.tenant_id)
        allow = tuple(str(rule.network) for rule in
                      (AllowRule.parse(entry) for entry in self.config.egress_allow)
                      if rule.network is not None)
        secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                  "metadata": {"name": self.names(spec, 0)["spec_secret"],
                               "namespace": namespace,
                               "labels": {**tenant_labels(tenant),
                                          "spate/job": dns_name(spec.job_id)}},
                  "stringData": {"spec.json": spec.to_json()}}
        return [*tenant_manifests(self.settings, namespace, tenant, allow), secret]

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
            mounts.append({"name": "spate-checkpoints", "mountPath": str(
                self.config.tenant_checkpoint_dir(spec.tenant_id))})
        return {"apiVersion": "v1", "kind": "Pod",
                "spec": {"volumes": volumes,
                         "containers": [{"name": "spark-kubernetes-driver",
                                         "volumeMounts": mounts}]}}

    # -- acting ---------------------------------------------------------------

    def submit(self, spec: JobSpec, spec_path: Path, log_path: Path, attempt: int,
               unit: ComputeUnit | None = None) -> dict[str, Any]:
        del unit  # the tenant's namespace is the unit on Kubernetes
        template_path = spec_path.with_name("driver-pod.json")
        template_path.write_text(json.dumps(self.driver_pod_template(spec), indent=2))
        manifest_list = {"apiVersion": "v1", "kind": "List", "items": self.manifests(spec)}
        self._run(["kubectl", "apply", "-f", "-"], json.dumps(manifest_list), KUBECTL_TIMEOUT_S)
        output = self._run(self.command(spec, template_path, attempt), None, SUBMIT_TIMEOUT_S)
        log_path.write_text(output)
        return {"namespace": self.namespace(spec.tenant_id),
                "driver_pod": self.names(spec, attempt)["driver_pod"],
                "spec_secret": self.names(spec, 0)["spec_secret"],
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

    def orphans(self, active: Callable[[str], bool]) -> list[str]:
        """Delete the driver pods (their executors go with them) of jobs ``active``
        disowns, found by the ``spate/job`` label in the tenants' namespaces."""
        try:
            listing = self._run(["kubectl", "get", "pods", "--all-namespaces", "-l",
                                 "spate/job,spark-role=driver", "-o", "json"], None,
                                KUBECTL_TIMEOUT_S)
        except BackendCommandError as error:
            log.warning("could not list the job pods to look for orphans: %s", error)
            return []
        found = orphan_drivers(json.loads(listing or "{}"),
                               f"{self.settings.namespace_prefix}-", active)
        for namespace, pod, _job in found:
            try:
                self._run(["kubectl", "delete", "pod", pod, "-n", namespace,
                           "--ignore-not-found", "--grace-period=0", "--force"], None,
                          KUBECTL_TIMEOUT_S)
            except BackendCommandError as error:
                log.warning("could not delete the orphan driver pod %s: %s", pod, error)
        return [job for _namespace, _pod, job in found]

    def release(self, handle: dict[str, Any]) -> None:
        """The job is over: its spec Secret goes (the namespace stays for the next job)."""
        if "spec_secret" not in handle:
            return
        try:
            self._run(["kubectl", "delete", "secret", handle["spec_secret"], "-n",
                       handle["namespace"], "--ignore-not-found"], None, KUBECTL_TIMEOUT_S)
        except BackendCommandError as error:
            log.warning("could not delete the spec Secret of a job: %s", error)

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



def orphan_drivers(pods: dict[str, Any], namespace_prefix: str,
                   active: Callable[[str], bool]) -> list[tuple[str, str, str]]:
    """(namespace, pod, job) of each running driver pod in ``pods`` (``kubectl get pods
    -o json``) in a tenant's namespace whose job ``active`` disowns."""
    found = []
    for pod in pods.get("items", []):
        metadata, status = pod.get("metadata", {}), pod.get("status", {})
        job = metadata.get("labels", {}).get("spate/job")
        namespace = str(metadata.get("namespace", ""))
        if (job and namespace.startswith(namespace_prefix)
                and status.get("phase") in _LIVE_PHASES and not active(job)):
            found.append((namespace, str(metadata.get("name")), str(job)))
    return found
