# Spate on Kubernetes: its namespace, settings, identities, the migration Job,
# the API, worker and beat Deployments, the API's Service and Ingress, and
# tenants' namespaces made ahead of their first job.

locals {
  labels = {
    "app.kubernetes.io/name"       = "spate"
    "app.kubernetes.io/managed-by" = "terraform"
  }

  data_dir        = "/var/lib/spate"
  checkpoint_root = "${local.data_dir}/checkpoints"
  checkpoint_pvc  = "spate-checkpoints"
  fdb_mount       = "/etc/foundationdb"

  # Every setting of the pods that is not a secret (names from docs/configuration.md).
  config = merge(
    {
      SPATE_LOG                  = var.log_level
      SPATE_DATA_DIR             = local.data_dir
      SPATE_CLUSTER_BACKEND      = "kubernetes"
      SPATE_K8S_API_SERVER       = "https://kubernetes.default.svc"
      SPATE_K8S_NAMESPACE_PREFIX = var.tenant_namespace_prefix
      SPATE_K8S_IMAGE            = var.image
      SPATE_K8S_SERVICE_ACCOUNT  = var.job_service_account
      SPATE_K8S_JOB_CIDRS        = join(",", var.job_cidrs)
      SPATE_K8S_TENANT_CPU       = var.tenant_cpu
      SPATE_K8S_TENANT_MEMORY    = var.tenant_memory
      SPATE_EGRESS_ALLOW         = join(",", var.egress_allow)
    },
    var.checkpoint_volume == null ? {} : { SPATE_K8S_CHECKPOINT_CLAIM = local.checkpoint_pvc },
    var.settings,
  )

  secrets = merge(
    {
      SPATE_DATABASE_URL       = var.database_url
      SPATE_BROKER_URL         = var.broker_url
      SPATE_STATE_URL          = var.state_url
      SPATE_PLATFORM_ADMIN_KEY = var.platform_admin_key
      SPATE_SECRET_KEY         = var.secret_key
    },
    var.redis_url == null ? {} : { SPATE_REDIS_URL = var.redis_url },
  )

  # The processes: what each Deployment runs.
  processes = {
    api = {
      command  = ["uvicorn", "--factory", "spate.api.http.app:app_from_settings", "--host", "0.0.0.0", "--port", "8000"]
      replicas = var.api_replicas
      account  = kubernetes_service_account_v1.api.metadata[0].name
      res      = var.api_resources
      port     = 8000
    }
    worker = {
      command  = ["spate", "worker", "--no-beat", "--concurrency", tostring(var.worker_concurrency)]
      replicas = var.worker_replicas
      account  = kubernetes_service_account_v1.worker.metadata[0].name
      res      = var.worker_resources
      port     = null
    }
    # Exactly one process sends the periodic reconcile.
    beat = {
      command  = ["spate", "worker", "--beat", "--concurrency", tostring(var.worker_concurrency)]
      replicas = 1
      account  = kubernetes_service_account_v1.worker.metadata[0].name
      res      = var.worker_resources
      port     = null
    }
  }

  tenant_namespaces = { for tenant, spec in var.tenants : tenant => "${var.tenant_namespace_prefix}-${tenant}" }
}

resource "kubernetes_namespace_v1" "spate" {
  metadata {
    name   = var.namespace
    labels = merge(local.labels, { "pod-security.kubernetes.io/enforce" = "baseline" })
  }
}

resource "kubernetes_config_map_v1" "settings" {
  metadata {
    name      = "spate-settings"
    namespace = kubernetes_namespace_v1.spate.metadata[0].name
    labels    = local.labels
  }

  data = local.config
}

resource "kubernetes_secret_v1" "settings" {
  metadata {
    name      = "spate-secrets"
    namespace = kubernetes_namespace_v1.spate.metadata[0].name
    labels    = local.labels
  }

  type = "Opaque"
  data = local.secrets
}

resource "kubernetes_config_map_v1" "fdb" {
  count = var.fdb_cluster_file == null ? 0 : 1

  metadata {
    name      = "spate-fdb-cluster-file"
    namespace = kubernetes_namespace_v1.spate.metadata[0].name
    labels    = local.labels
  }

  data = { "cluster-file" = var.fdb_cluster_file }
}

# -- identities ---------------------------------------------------------------

resource "kubernetes_service_account_v1" "api" {
  metadata {
    name        = "spate-api"
    namespace   = kubernetes_namespace_v1.spate.metadata[0].name
    labels      = local.labels
    annotations = var.worker_service_account_annotations
  }

  automount_service_account_token = false
}

resource "kubernetes_service_account_v1" "worker" {
  metadata {
    name        = "spate-worker"
    namespace   = kubernetes_namespace_v1.spate.metadata[0].name
    labels      = local.labels
    annotations = var.worker_service_account_annotations
  }
}

# What the kubernetes backend does (scheduler/backends/kubernetes.py and
# k8s_tenancy.py): `kubectl apply` of each tenant's Namespace, ServiceAccount,
# Role, RoleBinding, NetworkPolicy, ResourceQuota, LimitRange and the job's
# Secret; spark-submit in cluster mode (driver pod, its ConfigMap and
# Service); `kubectl get|delete pod` and `kubectl delete secret`. Granting the
# tenants' Role needs the rights it grants (pods, services, config maps and
# claims), so the worker holds them too. Namespaced objects cannot be limited
# to namespaces that do not exist yet: this role reaches every namespace.
resource "kubernetes_cluster_role_v1" "worker" {
  metadata {
    name   = "spate-worker"
    labels = local.labels
  }

  rule {
    api_groups = [""]
    resources  = ["namespaces"]
    verbs      = ["get", "list", "watch", "create", "patch", "update"]
  }

  rule {
    api_groups = [""]
    resources = [
      "pods", "services", "configmaps", "persistentvolumeclaims", "secrets",
      "serviceaccounts", "resourcequotas", "limitranges",
    ]
    verbs = ["get", "list", "watch", "create", "delete", "deletecollection", "patch", "update"]
  }

  rule {
    api_groups = [""]
    resources  = ["pods/log"]
    verbs      = ["get"]
  }

  rule {
    api_groups = ["rbac.authorization.k8s.io"]
    resources  = ["roles", "rolebindings"]
    verbs      = ["get", "list", "create", "patch", "update"]
  }

  rule {
    api_groups = ["networking.k8s.io"]
    resources  = ["networkpolicies"]
    verbs      = ["get", "list", "create", "patch", "update"]
  }
}

resource "kubernetes_cluster_role_binding_v1" "worker" {
  metadata {
    name   = "spate-worker"
    labels = local.labels
  }

  role_ref {
    api_group = "rbac.authorization.k8s.io"
    kind      = "ClusterRole"
    name      = kubernetes_cluster_role_v1.worker.metadata[0].name
  }

  subject {
    kind      = "ServiceAccount"
    name      = kubernetes_service_account_v1.worker.metadata[0].name
    namespace = kubernetes_namespace_v1.spate.metadata[0].name
  }
}

# -- checkpoints ----------------------------------------------------------------

resource "kubernetes_persistent_volume_v1" "checkpoints" {
  count = var.checkpoint_volume == null ? 0 : 1

  metadata {
    name   = "${var.namespace}-checkpoints"
    labels = local.labels
  }

  spec {
    capacity                         = { storage = var.checkpoint_volume.capacity }
    access_modes                     = ["ReadWriteMany"]
    persistent_volume_reclaim_policy = "Retain"
    storage_class_name               = ""

    persistent_volume_source {
      csi {
        driver        = var.checkpoint_volume.csi_driver
        volume_handle = var.checkpoint_volume.root_volume_handle
      }
    }
  }
}

resource "kubernetes_persistent_volume_claim_v1" "checkpoints" {
  count = var.checkpoint_volume == null ? 0 : 1

  metadata {
    name      = local.checkpoint_pvc
    namespace = kubernetes_namespace_v1.spate.metadata[0].name
    labels    = local.labels
  }

  spec {
    access_modes       = ["ReadWriteMany"]
    storage_class_name = ""
    volume_name        = kubernetes_persistent_volume_v1.checkpoints[0].metadata[0].name

    resources {
      requests = { storage = var.checkpoint_volume.capacity }
    }
  }
}

# -- the schema -----------------------------------------------------------------

# `spate db upgrade` once per image: the API refuses a database that is not
# migrated to its release.
resource "kubernetes_job_v1" "migrate" {
  metadata {
    name      = "spate-db-upgrade-${substr(sha1(var.image), 0, 10)}"
    namespace = kubernetes_namespace_v1.spate.metadata[0].name
    labels    = local.labels
  }

  spec {
    backoff_limit = 3

    template {
      metadata {
        labels = merge(local.labels, { "app.kubernetes.io/component" = "migrate" })
      }

      spec {
        restart_policy                  = "Never"
        automount_service_account_token = false

        container {
          name              = "migrate"
          image             = var.image
          image_pull_policy = var.image_pull_policy
          command           = ["spate", "db", "upgrade"]

          env_from {
            config_map_ref {
              name = kubernetes_config_map_v1.settings.metadata[0].name
            }
          }

          env_from {
            secret_ref {
              name = kubernetes_secret_v1.settings.metadata[0].name
            }
          }
        }
      }
    }
  }

  wait_for_completion = true

  timeouts {
    create = "10m"
  }
}

# -- the processes ----------------------------------------------------------------

resource "kubernetes_deployment_v1" "process" {
  for_each = local.processes

  metadata {
    name      = "spate-${each.key}"
    namespace = kubernetes_namespace_v1.spate.metadata[0].name
    labels    = merge(local.labels, { "app.kubernetes.io/component" = each.key })
  }

  spec {
    replicas = each.value.replicas

    selector {
      match_labels = { "app.kubernetes.io/name" = "spate", "app.kubernetes.io/component" = each.key }
    }

    # Two beats would reconcile twice: the old one goes before the new one starts.
    strategy {
      type = each.key == "beat" ? "Recreate" : "RollingUpdate"
    }

    template {
      metadata {
        labels = merge(local.labels, { "app.kubernetes.io/component" = each.key })
        annotations = {
          # New settings roll the pods.
          "spate/settings" = sha1(jsonencode(local.config))
          "spate/secrets"  = sha1(jsonencode(local.secrets))
        }
      }

      spec {
        service_account_name             = each.value.account
        automount_service_account_token  = each.key != "api"
        termination_grace_period_seconds = each.key == "api" ? 30 : 150

        security_context {
          run_as_non_root = true
          run_as_user     = 10001
          fs_group        = 10001
        }

        container {
          name              = each.key
          image             = var.image
          image_pull_policy = var.image_pull_policy
          command           = each.value.command

          env_from {
            config_map_ref {
              name = kubernetes_config_map_v1.settings.metadata[0].name
            }
          }

          env_from {
            secret_ref {
              name = kubernetes_secret_v1.settings.metadata[0].name
            }
          }

          dynamic "port" {
            for_each = each.value.port == null ? [] : [each.value.port]
            content {
              name           = "http"
              container_port = port.value
            }
          }

          dynamic "readiness_probe" {
            for_each = each.value.port == null ? [] : [each.value.port]
            content {
              tcp_socket {
                port = readiness_probe.value
              }
              period_seconds = 10
            }
          }

          resources {
            requests = { cpu = each.value.res.cpu_request, memory = each.value.res.memory_request }
            limits   = { cpu = each.value.res.cpu_limit, memory = each.value.res.memory_limit }
          }

          security_context {
            allow_privilege_escalation = false
            capabilities {
              drop = ["ALL"]
            }
          }

          volume_mount {
            name       = "data"
            mount_path = local.data_dir
          }

          dynamic "volume_mount" {
            for_each = var.checkpoint_volume != null && each.key != "api" ? [1] : []
            content {
              name       = "checkpoints"
              mount_path = local.checkpoint_root
            }
          }

          dynamic "volume_mount" {
            for_each = var.fdb_cluster_file == null ? [] : [1]
            content {
              name       = "fdb"
              mount_path = local.fdb_mount
              read_only  = true
            }
          }
        }

        volume {
          name = "data"
          empty_dir {}
        }

        dynamic "volume" {
          for_each = var.checkpoint_volume != null && each.key != "api" ? [1] : []
          content {
            name = "checkpoints"
            persistent_volume_claim {
              claim_name = kubernetes_persistent_volume_claim_v1.checkpoints[0].metadata[0].name
            }
          }
        }

        dynamic "volume" {
          for_each = kubernetes_config_map_v1.fdb
          content {
            name = "fdb"
            config_map {
              name = volume.value.metadata[0].name
              items {
                key  = "cluster-file"
                path = "fdb.cluster"
              }
            }
          }
        }
      }
    }
  }

  depends_on = [kubernetes_job_v1.migrate, kubernetes_cluster_role_binding_v1.worker]
}

resource "kubernetes_pod_disruption_budget_v1" "api" {
  metadata {
    name      = "spate-api"
    namespace = kubernetes_namespace_v1.spate.metadata[0].name
    labels    = local.labels
  }

  spec {
    max_unavailable = "1"
    selector {
      match_labels = { "app.kubernetes.io/name" = "spate", "app.kubernetes.io/component" = "api" }
    }
  }
}

resource "kubernetes_service_v1" "api" {
  metadata {
    name      = "spate-api"
    namespace = kubernetes_namespace_v1.spate.metadata[0].name
    labels    = local.labels
  }

  spec {
    selector = { "app.kubernetes.io/name" = "spate", "app.kubernetes.io/component" = "api" }

    port {
      name        = "http"
      port        = 80
      target_port = "http"
    }
  }
}

resource "kubernetes_ingress_v1" "api" {
  count = var.ingress == null ? 0 : 1

  metadata {
    name        = "spate-api"
    namespace   = kubernetes_namespace_v1.spate.metadata[0].name
    labels      = local.labels
    annotations = var.ingress.annotations
  }

  spec {
    ingress_class_name = var.ingress.class_name

    dynamic "tls" {
      for_each = var.ingress.tls_secret == null ? [] : [var.ingress.tls_secret]
      content {
        hosts       = [var.ingress.host]
        secret_name = tls.value
      }
    }

    rule {
      host = var.ingress.host
      http {
        path {
          path      = "/"
          path_type = "Prefix"
          backend {
            service {
              name = kubernetes_service_v1.api.metadata[0].name
              port {
                name = "http"
              }
            }
          }
        }
      }
    }
  }
}

# -- tenants' namespaces ------------------------------------------------------------

# The template of a tenant's namespace: the same name and labels the worker
# gives it (k8s_tenancy.tenant_manifests), so its `kubectl apply` adopts it and
# adds the Role, RoleBinding, NetworkPolicy, ResourceQuota and LimitRange. What
# only the operator can provide is made here: the jobs' ServiceAccount with
# its cloud identity, and the checkpoint claim.
resource "kubernetes_namespace_v1" "tenant" {
  for_each = local.tenant_namespaces

  metadata {
    name = each.value
    labels = {
      "app.kubernetes.io/managed-by"       = "spate"
      "spate/tenant"                       = each.key
      "pod-security.kubernetes.io/enforce" = "baseline"
    }
  }
}

resource "kubernetes_service_account_v1" "tenant_job" {
  for_each = local.tenant_namespaces

  metadata {
    name        = var.job_service_account
    namespace   = kubernetes_namespace_v1.tenant[each.key].metadata[0].name
    labels      = { "app.kubernetes.io/managed-by" = "spate", "spate/tenant" = each.key }
    annotations = var.tenants[each.key].job_service_account_annotations
  }
}

resource "kubernetes_persistent_volume_v1" "tenant_checkpoints" {
  for_each = var.checkpoint_volume == null ? {} : { for tenant, spec in var.tenants : tenant => spec if spec.checkpoint_volume_handle != null }

  metadata {
    name   = "${local.tenant_namespaces[each.key]}-checkpoints"
    labels = { "app.kubernetes.io/managed-by" = "terraform", "spate/tenant" = each.key }
  }

  spec {
    capacity                         = { storage = var.checkpoint_volume.capacity }
    access_modes                     = ["ReadWriteMany"]
    persistent_volume_reclaim_policy = "Retain"
    storage_class_name               = ""

    persistent_volume_source {
      csi {
        driver        = var.checkpoint_volume.csi_driver
        volume_handle = each.value.checkpoint_volume_handle
      }
    }
  }
}

resource "kubernetes_persistent_volume_claim_v1" "tenant_checkpoints" {
  for_each = kubernetes_persistent_volume_v1.tenant_checkpoints

  metadata {
    name      = local.checkpoint_pvc
    namespace = kubernetes_namespace_v1.tenant[each.key].metadata[0].name
    labels    = { "app.kubernetes.io/managed-by" = "terraform", "spate/tenant" = each.key }
  }

  spec {
    access_modes       = ["ReadWriteMany"]
    storage_class_name = ""
    volume_name        = each.value.metadata[0].name

    resources {
      requests = { storage = var.checkpoint_volume.capacity }
    }
  }
}
