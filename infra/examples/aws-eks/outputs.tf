output "api_url" {
  description = "Where the API and the console answer."
  value       = module.kubernetes.api_url
}

output "cluster_name" {
  description = "The EKS cluster (aws eks update-kubeconfig --name …)."
  value       = module.aws.cluster_name
}

output "data_bucket" {
  description = "S3 bucket of the object-storage connectors; tenant T's jobs reach s3://<bucket>/tenants/T/."
  value       = module.aws.data_bucket
}

output "platform_admin_key" {
  description = "SPATE_PLATFORM_ADMIN_KEY, the key that creates tenants (terraform output -raw platform_admin_key)."
  value       = random_password.platform_admin_key.result
  sensitive   = true
}
