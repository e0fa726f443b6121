# Spate on AWS: the cloud dependencies, then Spate itself on the EKS cluster,
# with its state store on RDS PostgreSQL or FoundationDB.

locals {
  namespace        = "spate"
  namespace_prefix = "spate-t"
  use_fdb          = var.state_store == "foundationdb"
}

# Passwords and keys made once and kept in Terraform's state: keep the state
# encrypted (an S3 backend with encryption, say), or pass your own through
# variables of a copy of this example.
resource "random_password" "db" {
  length  = 40
  special = false
}

resource "random_password" "redis" {
  length  = 48
  special = false
}

resource "random_password" "platform_admin_key" {
  length  = 48
  special = false
}

resource "random_bytes" "secret_key" {
  length = 32
}

module "aws" {
  source = "../../modules/aws"

  db_password      = random_password.db.result
  redis_auth_token = random_password.redis.result

  name                                 = var.name
  cluster_endpoint_public_access_cidrs = var.cluster_endpoint_public_access_cidrs
  tenant_namespace_prefix              = local.namespace_prefix
  tenants                              = var.tenants
  deletion_protection                  = true
  state_db = local.use_fdb ? null : {
    instance_class    = "db.r6g.large"
    allocated_storage = 100
  }
}

module "foundationdb" {
  source = "../../modules/foundationdb"
  count  = local.use_fdb ? 1 : 0

  name            = "spate-state"
  redundancy_mode = "double"

  depends_on = [module.aws]
}

module "kubernetes" {
  source = "../../modules/kubernetes"

  namespace               = local.namespace
  image                   = var.image
  tenant_namespace_prefix = local.namespace_prefix

  database_url       = module.aws.database_url
  broker_url         = module.aws.broker_url
  redis_url          = module.aws.broker_url
  state_url          = local.use_fdb ? module.foundationdb[0].state_url : module.aws.state_url
  fdb_cluster_file   = local.use_fdb ? module.foundationdb[0].cluster_file : null
  platform_admin_key = random_password.platform_admin_key.result
  # Fernet wants URL-safe base64.
  secret_key = replace(replace(random_bytes.secret_key.base64, "+", "-"), "/", "_")

  job_cidrs = module.aws.data_subnet_cidrs

  checkpoint_volume = {
    csi_driver         = "efs.csi.aws.com"
    root_volume_handle = module.aws.checkpoint_volume_handle
  }

  tenants = {
    for tenant in var.tenants : tenant => {
      checkpoint_volume_handle        = module.aws.tenant_checkpoint_volume_handles[tenant]
      job_service_account_annotations = { "eks.amazonaws.com/role-arn" = module.aws.tenant_role_arns[tenant] }
    }
  }

  ingress = var.ingress_host == null ? null : {
    host        = var.ingress_host
    class_name  = var.ingress_class_name
    annotations = { "alb.ingress.kubernetes.io/scheme" = "internet-facing", "alb.ingress.kubernetes.io/target-type" = "ip" }
  }

  depends_on = [module.aws]
}
