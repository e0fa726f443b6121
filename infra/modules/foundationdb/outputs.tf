output "cluster_name" {
  description = "Name of the FoundationDBCluster."
  value       = kubernetes_manifest.cluster.manifest.metadata.name
}

output "namespace" {
  description = "Namespace of the cluster's pods."
  value       = kubernetes_namespace_v1.fdb.metadata[0].name
}

output "cluster_file" {
  description = "The cluster file the operator wrote (ConfigMap <name>-config, key cluster-file): the kubernetes module's fdb_cluster_file."
  value       = data.kubernetes_config_map_v1.cluster_file.data["cluster-file"]
}

output "state_url" {
  description = "SPATE_STATE_URL for Spate's pods, where the kubernetes module mounts fdb_cluster_file (/etc/foundationdb/fdb.cluster)."
  value       = "fdb:///etc/foundationdb/fdb.cluster"
}
