# Spate's FoundationDB state store, as a FoundationDBCluster resource of the
# FoundationDB Kubernetes operator (which must already run in the cluster: its
# CRDs and controller are installed from the operator's own release, not here).

locals {
  labels = {
    "app.kubernetes.io/name"       = "spate"
    "app.kubernetes.io/component"  = "state-store"
    "app.kubernetes.io/managed-by" = "terraform"
  }

  volume_claim_spec = merge(
    { resources = { requests = { storage = var.storage_size } } },
    var.storage_class == null ? {} : { storageClassName = var.storage_class },
  )
}

resource "kubernetes_namespace_v1" "fdb" {
  metadata {
    name   = var.namespace
    labels = local.labels
  }
}

resource "kubernetes_manifest" "cluster" {
  manifest = {
    apiVersion = "apps.foundationdb.org/v1beta2"
    kind       = "FoundationDBCluster"
    metadata = {
      name      = var.name
      namespace = kubernetes_namespace_v1.fdb.metadata[0].name
      labels    = local.labels
    }
    spec = {
      version = var.fdb_version
      databaseConfiguration = {
        redundancy_mode = var.redundancy_mode
      }
      processCounts = {
        storage   = var.process_counts.storage
        log       = var.process_counts.log
        stateless = var.process_counts.stateless
      }
      processes = {
        general = {
          volumeClaimTemplate = { spec = local.volume_claim_spec }
          podTemplate = {
            spec = {
              containers = [{
                name = "foundationdb"
                resources = {
                  requests = { cpu = var.process_resources.cpu, memory = var.process_resources.memory }
                  limits   = { cpu = var.process_resources.cpu, memory = var.process_resources.memory }
                }
              }]
            }
          }
        }
      }
      # Clients find the coordinators by DNS name, so the cluster file stays
      # valid when process pods move.
      routing = {
        useDNSInClusterFile = true
      }
    }
  }

  wait {
    fields = {
      "status.health.available" = "true"
    }
  }

  timeouts {
    create = "30m"
    update = "30m"
  }
}

# The operator writes the cluster file once the cluster is up; Spate's pods
# get a copy of it in their own namespace (the kubernetes module's
# fdb_cluster_file).
data "kubernetes_config_map_v1" "cluster_file" {
  metadata {
    name      = "${var.name}-config"
    namespace = kubernetes_namespace_v1.fdb.metadata[0].name
  }

  depends_on = [kubernetes_manifest.cluster]
}
