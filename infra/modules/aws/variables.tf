variable "name" {
  type        = string
  description = "Name of this Spate deployment: the prefix of every AWS resource's name."

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{1,22}[a-z0-9]$", var.name))
    error_message = "name must be 3 to 24 characters: lower-case letters, digits and '-', starting with a letter."
  }
}

variable "tags" {
  type        = map(string)
  description = "Tags added to every resource."
  default     = {}
}

variable "vpc_cidr" {
  type        = string
  description = "CIDR block of the VPC; it is cut into public, private (nodes) and data (databases, Redis) subnets, one of each per availability zone."
  default     = "10.40.0.0/16"

  validation {
    condition     = can(cidrhost(var.vpc_cidr, 0)) && tonumber(split("/", var.vpc_cidr)[1]) <= 20
    error_message = "vpc_cidr must be an IPv4 CIDR block of /20 or larger."
  }
}

variable "availability_zone_count" {
  type        = number
  description = "Availability zones the VPC, the node group and the data stores span."
  default     = 3

  validation {
    condition     = contains([2, 3], var.availability_zone_count)
    error_message = "availability_zone_count must be 2 or 3 (RDS and EKS need at least two)."
  }
}

variable "kubernetes_version" {
  type        = string
  description = "Kubernetes version of the EKS cluster."
  default     = "1.31"

  validation {
    condition     = can(regex("^1\\.[0-9]{2}$", var.kubernetes_version))
    error_message = "kubernetes_version must look like 1.31."
  }
}

variable "cluster_endpoint_public_access_cidrs" {
  type        = list(string)
  description = "Networks that may reach the EKS API server from outside the VPC; empty: the endpoint is private only."
  default     = []

  validation {
    condition     = alltrue([for cidr in var.cluster_endpoint_public_access_cidrs : can(cidrhost(cidr, 0))])
    error_message = "cluster_endpoint_public_access_cidrs must be CIDR blocks."
  }
}

variable "node_group" {
  type = object({
    instance_types = list(string)
    min_size       = number
    max_size       = number
    desired_size   = number
    disk_size_gb   = optional(number, 100)
  })
  description = "The EKS managed node group running Spate and the tenants' Spark drivers and executors."
  default = {
    instance_types = ["m6i.2xlarge"]
    min_size       = 2
    max_size       = 10
    desired_size   = 3
  }

  validation {
    condition     = var.node_group.min_size >= 1 && var.node_group.min_size <= var.node_group.desired_size && var.node_group.desired_size <= var.node_group.max_size
    error_message = "node_group needs 1 <= min_size <= desired_size <= max_size."
  }

  validation {
    condition     = length(var.node_group.instance_types) > 0
    error_message = "node_group.instance_types must name at least one instance type."
  }
}

variable "postgres_version" {
  type        = string
  description = "PostgreSQL major version of the control-plane and state-store databases."
  default     = "16"

  validation {
    condition     = contains(["14", "15", "16", "17"], var.postgres_version)
    error_message = "postgres_version must be 14, 15, 16 or 17."
  }
}

variable "control_db" {
  type = object({
    instance_class    = string
    allocated_storage = number
    multi_az          = optional(bool, true)
  })
  description = "RDS PostgreSQL instance of the control plane (SPATE_DATABASE_URL)."
  default = {
    instance_class    = "db.t4g.medium"
    allocated_storage = 20
  }

  validation {
    condition     = var.control_db.allocated_storage >= 20
    error_message = "control_db.allocated_storage must be at least 20 (GiB)."
  }
}

variable "state_db" {
  type = object({
    instance_class    = string
    allocated_storage = number
    multi_az          = optional(bool, true)
  })
  description = "RDS PostgreSQL instance of the state store (SPATE_STATE_URL=postgresql://…); null when the state store is FoundationDB."
  default = {
    instance_class    = "db.r6g.large"
    allocated_storage = 100
  }

  validation {
    condition     = var.state_db == null || try(var.state_db.allocated_storage >= 20, false)
    error_message = "state_db.allocated_storage must be at least 20 (GiB)."
  }
}

variable "redis_node_type" {
  type        = string
  description = "ElastiCache node type of the Redis replication group (the scheduler's broker, the jobs' channels, the API's rate limits)."
  default     = "cache.t4g.medium"

  validation {
    condition     = startswith(var.redis_node_type, "cache.")
    error_message = "redis_node_type must be an ElastiCache node type, e.g. cache.t4g.medium."
  }
}

variable "deletion_protection" {
  type        = bool
  description = "Protect the databases from deletion, and keep a final snapshot when they are destroyed."
  default     = true
}

variable "tenant_namespace_prefix" {
  type        = string
  description = "SPATE_K8S_NAMESPACE_PREFIX: a listed tenant's IAM role trusts the jobs' ServiceAccount in namespace <prefix>-<tenant id> only."
  default     = "spate-t"

  validation {
    condition     = can(regex("^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$", var.tenant_namespace_prefix))
    error_message = "tenant_namespace_prefix must match ^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$."
  }
}

variable "job_service_account" {
  type        = string
  description = "SPATE_K8S_SERVICE_ACCOUNT: the drivers' ServiceAccount the tenants' IAM roles trust."
  default     = "spate-job"

  validation {
    condition     = can(regex("^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", var.job_service_account))
    error_message = "job_service_account must be a DNS-1123 label."
  }
}

variable "tenants" {
  type        = set(string)
  description = "Tenant ids made ahead of their first job: each gets an IAM role for its jobs (its prefix tenants/<id>/ of the data bucket) and an EFS access point for its checkpoint folder."
  default     = []

  validation {
    condition     = alltrue([for tenant in var.tenants : can(regex("^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$", tenant))])
    error_message = "tenants must be tenant ids that are DNS labels of at most 32 characters (they are part of IAM role names)."
  }
}

variable "checkpoint_uid" {
  type        = number
  description = "POSIX user and group the checkpoint file system's access points write as: the image's user (10001 in infra/image/Dockerfile)."
  default     = 10001

  validation {
    condition     = var.checkpoint_uid >= 1 && floor(var.checkpoint_uid) == var.checkpoint_uid
    error_message = "checkpoint_uid must be a positive whole number."
  }
}

variable "db_password" {
  type        = string
  description = "Password of the user spate on the control-plane and state-store databases (it goes into SPATE_DATABASE_URL and SPATE_STATE_URL)."
  sensitive   = true

  validation {
    condition     = can(regex("^[A-Za-z0-9]{24,128}$", var.db_password))
    error_message = "db_password must be 24 to 128 letters and digits (it is written into URLs unescaped)."
  }
}

variable "redis_auth_token" {
  type        = string
  description = "AUTH token of the Redis replication group (it goes into SPATE_BROKER_URL and SPATE_REDIS_URL)."
  sensitive   = true

  validation {
    condition     = can(regex("^[A-Za-z0-9]{24,128}$", var.redis_auth_token))
    error_message = "redis_auth_token must be 24 to 128 letters and digits (it is written into URLs unescaped)."
  }
}
