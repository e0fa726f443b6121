"""A tenant's compute unit on Kubernetes: its namespace and what fences it, as data.

Every tenant's drivers and executors run in a namespace of their own
(``<prefix>-<tenant>``), holding:

- a **ServiceAccount** for drivers, whose **Role** (bound by a RoleBinding)
  reaches pods, services, config maps and claims of that namespace only: a
  driver can start and remove its executors, never another tenant's pods or
  Secrets;
- a **NetworkPolicy** for every pod of the namespace: traffic in only from
  pods of the same namespace (a driver and its executors); traffic out to
  those pods, to DNS, to the public internet without the private, loopback,
  link-local (cloud metadata) and shared ranges, to the operator's
  allow-listed networks, and to the networks jobs need to work (the state
  store and the job channel's Redis: ``job_cidrs``). Destinations are
  addresses here, so the control plane's own endpoints are kept from
  tenants' connectors by the engine's egress policy, which also runs in
  every job;
- a **ResourceQuota** (CPU, memory and pods of the tenant's plan) and a
  **LimitRange** giving each container defaults and a ceiling;
- the job's **Secret** (its spec), in that namespace only.

The worker applies these with ``kubectl apply`` before each submission, so
they are created on a tenant's first job and corrected on every later one.
"""

from __future__ import annotations

from typing import Any

from spate.scheduler.config import KubernetesConfig

#: Addresses no tenant pod may reach unless the operator allow-lists them.
PRIVATE_V4 = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10",
              "169.254.0.0/16", "127.0.0.0/8", "0.0.0.0/8", "224.0.0.0/4", "240.0.0.0/4")
PRIVATE_V6 = ("fc00::/7", "fe80::/10", "::1/128", "ff00::/8", "::ffff:0:0/96", "64:ff9b::/96")
MANAGED_BY = {"app.kubernetes.io/managed-by": "spate"}


def tenant_labels(tenant: str) -> dict[str, str]:
    return {**MANAGED_BY, "spate/tenant": tenant}


def tenant_manifests(settings: KubernetesConfig, namespace: str, tenant: str,
                     allow_cidrs: tuple[str, ...]) -> list[dict[str, Any]]:
    """Namespace, driver identity and its rights, network and resource fences."""
    labels = tenant_labels(tenant)
    account = settings.service_account
    meta = {"namespace": namespace, "labels": labels}
    return [
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": namespace, "labels": {
             **labels, "pod-security.kubernetes.io/enforce": "baseline"}}},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": account, **meta}, "automountServiceAccountToken": True},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": account, **meta},
         # A driver creates, watches and removes its executor pods and their services.
         "rules": [{"apiGroups": [""],
                    "resources": ["pods", "services", "configmaps", "persistentvolumeclaims"],
                    "verbs": ["create", "get", "list", "watch", "delete", "deletecollection",
                              "patch", "update"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": account, **meta},
         "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account}},
        network_policy(namespace, labels, settings.job_cidrs, allow_cidrs),
        {"apiVersion": "v1", "kind": "ResourceQuota",
         "metadata": {"name": "spate-tenant", **meta},
         "spec": {"hard": {"limits.cpu": settings.tenant_cpu,
                           "limits.memory": settings.tenant_memory,
                           "requests.cpu": settings.tenant_cpu,
                           "requests.memory": settings.tenant_memory,
                           "pods": str(settings.tenant_pods)}}},
        {"apiVersion": "v1", "kind": "LimitRange",
         "metadata": {"name": "spate-tenant", **meta},
         "spec": {"limits": [{"type": "Container",
                              "default": {"cpu": "1", "memory": "2Gi"},
                              "defaultRequest": {"cpu": "500m", "memory": "1Gi"},
                              "max": {"cpu": settings.tenant_cpu,
                                      "memory": settings.tenant_memory}}]}},
    ]


def network_policy(namespace: str, labels: dict[str, str], job_cidrs: tuple[str, ...],
                   allow_cidrs: tuple[str, ...]) -> dict[str, Any]:
    """Same-namespace traffic, DNS, the public internet, and the allowed networks."""
    same_namespace: list[dict[str, Any]] = [{"podSelector": {}}]
    public = [{"ipBlock": {"cidr": "0.0.0.0/0", "except": list(PRIVATE_V4)}},
              {"ipBlock": {"cidr": "::/0", "except": list(PRIVATE_V6)}}]
    allowed = [{"ipBlock": {"cidr": cidr}} for cidr in (*job_cidrs, *allow_cidrs)]
    dns = {"to": [{"namespaceSelector": {}, "podSelector": {
        "matchLabels": {"k8s-app": "kube-dns"}}}],
           "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}
    egress: list[dict[str, Any]] = [{"to": same_namespace}, dns, {"to": public}]
    if allowed:
        egress.append({"to": allowed})
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "spate-tenant", "namespace": namespace, "labels": labels},
            "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"],
                     "ingress": [{"from": same_namespace}], "egress": egress}}
