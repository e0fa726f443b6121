output "namespace" {
  description = "Namespace of Spate's own processes."
  value       = kubernetes_namespace_v1.spate.metadata[0].name
}

output "api_service" {
  description = "In-cluster address of the API and console (Service name, namespace and port)."
  value = {
    name      = kubernetes_service_v1.api.metadata[0].name
    namespace = kubernetes_namespace_v1.spate.metadata[0].name
    port      = 80
  }
}

output "api_url" {
  description = "URL of the API through the Ingress (https when it has a TLS Secret), or the in-cluster Service URL without one."
  value = var.ingress == null ? "http://${kubernetes_service_v1.api.metadata[0].name}.${kubernetes_namespace_v1.spate.metadata[0].name}.svc" : (
    "${try(var.ingress.tls_secret, null) == null ? "http" : "https"}://${try(var.ingress.host, "")}"
  )
}

output "worker_service_account" {
  description = "ServiceAccount of the workers and beat (holds the ClusterRole of the kubernetes backend)."
  value       = kubernetes_service_account_v1.worker.metadata[0].name
}

output "tenant_namespaces" {
  description = "Tenant id -> the namespace made for it ahead of its first job."
  value       = { for tenant, namespace in kubernetes_namespace_v1.tenant : tenant => namespace.metadata[0].name }
}

output "migration_job" {
  description = "Name of the Job that ran `spate db upgrade` for this image."
  value       = kubernetes_job_v1.migrate.metadata[0].name
}
