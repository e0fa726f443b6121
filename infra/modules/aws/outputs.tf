output "vpc_id" {
  description = "The VPC's id."
  value       = aws_vpc.main.id
}

output "data_subnet_cidrs" {
  description = "CIDR blocks of the data subnets (PostgreSQL, Redis): what every job must reach, SPATE_K8S_JOB_CIDRS."
  value       = local.data_cidrs
}

output "cluster_name" {
  description = "Name of the EKS cluster."
  value       = aws_eks_cluster.main.name
}

output "cluster_endpoint" {
  description = "URL of the EKS API server."
  value       = aws_eks_cluster.main.endpoint
}

output "cluster_ca_certificate" {
  description = "The EKS cluster's CA certificate, PEM."
  value       = base64decode(aws_eks_cluster.main.certificate_authority[0].data)
}

output "database_url" {
  description = "SPATE_DATABASE_URL of the control-plane database."
  value       = "postgresql://spate:${var.db_password}@${aws_db_instance.db["control"].endpoint}/spate?sslmode=require"
  sensitive   = true
}

output "state_url" {
  description = "SPATE_STATE_URL of the PostgreSQL state store, or null when state_db is null (FoundationDB holds state)."
  value       = var.state_db == null ? null : "postgresql://spate:${var.db_password}@${aws_db_instance.db["state"].endpoint}/spate_state?sslmode=require"
  sensitive   = true
}

output "broker_url" {
  description = "SPATE_BROKER_URL (and SPATE_REDIS_URL): the Redis primary over TLS, with its auth token."
  value       = "rediss://:${var.redis_auth_token}@${aws_elasticache_replication_group.redis.primary_endpoint_address}:6379/0?ssl_cert_reqs=required"
  sensitive   = true
}

output "data_bucket" {
  description = "Name of the S3 bucket for the object-storage connectors."
  value       = aws_s3_bucket.data.bucket
}

output "tenant_role_arns" {
  description = "Tenant id -> IAM role of the jobs' ServiceAccount in that tenant's namespace (annotation eks.amazonaws.com/role-arn)."
  value       = { for tenant, role in aws_iam_role.tenant : tenant => role.arn }
}

output "checkpoint_volume_handle" {
  description = "EFS CSI volume handle of the checkpoint tree's root (file system::access point)."
  value       = "${aws_efs_file_system.checkpoints.id}::${aws_efs_access_point.checkpoints[""].id}"
}

output "tenant_checkpoint_volume_handles" {
  description = "Tenant id -> EFS CSI volume handle of that tenant's checkpoint folder."
  value       = { for tenant in var.tenants : tenant => "${aws_efs_file_system.checkpoints.id}::${aws_efs_access_point.checkpoints[tenant].id}" }
}
