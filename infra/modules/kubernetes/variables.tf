variable "namespace" {
  type        = string
  description = "Namespace of Spate's own processes: the API, the workers and beat."
  default     = "spate"

  validation {
    condition     = can(regex("^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", var.namespace))
    error_message = "namespace must be a DNS-1123 label: lower-case letters, digits and '-', at most 63 characters."
  }
}

variable "image" {
  type        = string
  description = "Container image with Spate installed at /opt/spate (built from infra/image/Dockerfile); used by the API, the workers, the migration Job and every job's driver and executors (SPATE_K8S_IMAGE)."

  validation {
    condition     = length(trimspace(var.image)) > 0 && !can(regex("\\s", var.image))
    error_message = "image must be an image reference without spaces, e.g. registry.example.internal/spate:0.1.0."
  }
}

variable "image_pull_policy" {
  type        = string
  description = "Pull policy of Spate's own containers."
  default     = "IfNotPresent"

  validation {
    condition     = contains(["Always", "IfNotPresent", "Never"], var.image_pull_policy)
    error_message = "image_pull_policy must be Always, IfNotPresent or Never."
  }
}

variable "api_replicas" {
  type        = number
  description = "Replicas of the API Deployment (uvicorn running spate.api.http.app:app_from_settings)."
  default     = 2

  validation {
    condition     = var.api_replicas >= 1 && floor(var.api_replicas) == var.api_replicas
    error_message = "api_replicas must be a whole number, at least 1."
  }
}

variable "worker_replicas" {
  type        = number
  description = "Replicas of the worker Deployment (`spate worker --no-beat`); beat is a Deployment of its own with one replica."
  default     = 2

  validation {
    condition     = var.worker_replicas >= 0 && floor(var.worker_replicas) == var.worker_replicas
    error_message = "worker_replicas must be a whole number, 0 or more."
  }
}

variable "worker_concurrency" {
  type        = number
  description = "Tasks each worker runs at once (`spate worker --concurrency`)."
  default     = 2

  validation {
    condition     = var.worker_concurrency >= 1 && var.worker_concurrency <= 64 && floor(var.worker_concurrency) == var.worker_concurrency
    error_message = "worker_concurrency must be a whole number from 1 to 64."
  }
}

variable "api_resources" {
  type = object({
    cpu_request    = string
    memory_request = string
    cpu_limit      = string
    memory_limit   = string
  })
  description = "CPU and memory requests and limits of each API pod."
  default = {
    cpu_request    = "500m"
    memory_request = "1Gi"
    cpu_limit      = "2"
    memory_limit   = "2Gi"
  }
}

variable "worker_resources" {
  type = object({
    cpu_request    = string
    memory_request = string
    cpu_limit      = string
    memory_limit   = string
  })
  description = "CPU and memory requests and limits of each worker and of beat (spark-submit runs in these pods)."
  default = {
    cpu_request    = "500m"
    memory_request = "1Gi"
    cpu_limit      = "2"
    memory_limit   = "3Gi"
  }
}

variable "database_url" {
  type        = string
  description = "SPATE_DATABASE_URL: the control-plane PostgreSQL, postgresql://user:password@host:port/database."
  sensitive   = true

  validation {
    condition     = can(regex("^postgresql://", var.database_url))
    error_message = "database_url must be a postgresql:// URL (SQLite does not serve several pods)."
  }
}

variable "broker_url" {
  type        = string
  description = "SPATE_BROKER_URL: the scheduler's Celery broker, redis:// or rediss:// (also the jobs' channel)."
  sensitive   = true

  validation {
    condition     = can(regex("^rediss?://", var.broker_url))
    error_message = "broker_url must be a redis:// or rediss:// URL."
  }
}

variable "redis_url" {
  type        = string
  description = "SPATE_REDIS_URL: Redis shared by the API pods for rate limits; null leaves it unset (limits per pod)."
  default     = null
  sensitive   = true

  validation {
    condition     = var.redis_url == null || can(regex("^rediss?://", var.redis_url))
    error_message = "redis_url must be a redis:// or rediss:// URL, or null."
  }
}

variable "state_url" {
  type        = string
  description = "SPATE_STATE_URL: the jobs' state store, postgresql://… or fdb://… (a cluster backend cannot use SQLite)."
  sensitive   = true

  validation {
    condition     = can(regex("^(postgresql|fdb)://", var.state_url))
    error_message = "state_url must be a postgresql:// or fdb:// URL."
  }
}

variable "platform_admin_key" {
  type        = string
  description = "SPATE_PLATFORM_ADMIN_KEY: the key that creates tenants (the API refuses a short or placeholder one)."
  sensitive   = true

  validation {
    condition     = length(var.platform_admin_key) >= 32
    error_message = "platform_admin_key must be at least 32 characters."
  }
}

variable "secret_key" {
  type        = string
  description = "SPATE_SECRET_KEY: the Fernet key (44 characters of URL-safe base64) encrypting connection secrets at rest; the same on every API and worker pod."
  sensitive   = true

  validation {
    condition     = can(regex("^[A-Za-z0-9_-]{43}=$", var.secret_key))
    error_message = "secret_key must be a Fernet key: 32 bytes in URL-safe base64 (44 characters ending in '=')."
  }
}

variable "settings" {
  type        = map(string)
  description = "Further SPATE_* settings for every Spate pod (see docs/configuration.md), e.g. { SPATE_QUOTA_PIPELINES = \"200\" }. Secrets do not belong here: this is a ConfigMap."
  default     = {}

  validation {
    condition     = alltrue([for name in keys(var.settings) : can(regex("^SPATE_[A-Z0-9_]+$", name))])
    error_message = "settings keys must be SPATE_* setting names in upper case."
  }

  validation {
    condition = length(setintersection(keys(var.settings), [
      "SPATE_DATABASE_URL", "SPATE_BROKER_URL", "SPATE_REDIS_URL", "SPATE_STATE_URL",
      "SPATE_PLATFORM_ADMIN_KEY", "SPATE_SECRET_KEY",
    ])) == 0
    error_message = "settings must not hold the URLs or keys: pass them as database_url, broker_url, redis_url, state_url, platform_admin_key and secret_key, which go into a Secret."
  }
}

variable "log_level" {
  type        = string
  description = "SPATE_LOG of Spate's processes (jobs inherit it)."
  default     = "INFO"

  validation {
    condition     = contains(["DEBUG", "INFO", "WARNING", "ERROR"], var.log_level)
    error_message = "log_level must be DEBUG, INFO, WARNING or ERROR."
  }
}

variable "tenant_namespace_prefix" {
  type        = string
  description = "SPATE_K8S_NAMESPACE_PREFIX: a tenant's jobs run in the namespace <prefix>-<tenant id>."
  default     = "spate-t"

  validation {
    condition     = can(regex("^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$", var.tenant_namespace_prefix))
    error_message = "tenant_namespace_prefix must match ^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$."
  }
}

variable "job_service_account" {
  type        = string
  description = "SPATE_K8S_SERVICE_ACCOUNT: the ServiceAccount of jobs' drivers in each tenant namespace."
  default     = "spate-job"

  validation {
    condition     = can(regex("^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", var.job_service_account))
    error_message = "job_service_account must be a DNS-1123 label."
  }
}

variable "worker_service_account_annotations" {
  type        = map(string)
  description = "Annotations of the API's and workers' ServiceAccounts, e.g. an IAM role for service accounts (eks.amazonaws.com/role-arn)."
  default     = {}
}

variable "job_cidrs" {
  type        = list(string)
  description = "SPATE_K8S_JOB_CIDRS: networks every job must reach, whatever its tenant (the state store, the job channel's Redis)."
  default     = []

  validation {
    condition     = alltrue([for cidr in var.job_cidrs : can(cidrhost(cidr, 0))])
    error_message = "job_cidrs must be CIDR blocks, e.g. 10.0.0.0/16."
  }
}

variable "egress_allow" {
  type        = list(string)
  description = "SPATE_EGRESS_ALLOW: destinations tenants' connectors may reach besides public addresses (CIDR, address[:port] or host[:port])."
  default     = []

  validation {
    condition     = alltrue([for entry in var.egress_allow : length(trimspace(entry)) > 0 && !strcontains(entry, ",")])
    error_message = "egress_allow entries must be non-empty and hold no comma (one destination each)."
  }
}

variable "tenant_cpu" {
  type        = string
  description = "SPATE_K8S_TENANT_CPU: CPU limit of a tenant namespace's ResourceQuota."
  default     = "8"

  validation {
    condition     = can(regex("^[0-9]+(\\.[0-9]+|m)?$", var.tenant_cpu))
    error_message = "tenant_cpu must be a Kubernetes CPU quantity, e.g. 8, 2.5 or 500m."
  }
}

variable "tenant_memory" {
  type        = string
  description = "SPATE_K8S_TENANT_MEMORY: memory limit of a tenant namespace's ResourceQuota."
  default     = "32Gi"

  validation {
    condition     = can(regex("^[0-9]+(Ki|Mi|Gi|Ti|k|M|G|T)?$", var.tenant_memory))
    error_message = "tenant_memory must be a Kubernetes memory quantity, e.g. 32Gi."
  }
}

variable "tenants" {
  type = map(object({
    checkpoint_volume_handle        = optional(string)
    job_service_account_annotations = optional(map(string), {})
  }))
  description = "Tenants whose namespaces are made ahead of their first job (the worker makes the others itself): the key is the tenant id; checkpoint_volume_handle is the CSI volume handle of that tenant's checkpoint folder (with checkpoint_volume set); job_service_account_annotations annotate its jobs' ServiceAccount, e.g. with the tenant's IAM role (eks.amazonaws.com/role-arn)."
  default     = {}

  validation {
    condition     = alltrue([for tenant in keys(var.tenants) : can(regex("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", tenant))])
    error_message = "tenants keys must be tenant ids that are DNS labels (lower-case letters, digits and '-')."
  }

  validation {
    condition     = alltrue([for tenant in keys(var.tenants) : length("${var.tenant_namespace_prefix}-${tenant}") <= 63])
    error_message = "tenants keys must be short enough for the namespace <tenant_namespace_prefix>-<tenant id> to be at most 63 characters."
  }
}

variable "checkpoint_volume" {
  type = object({
    csi_driver         = string
    root_volume_handle = string
    capacity           = optional(string, "100Gi")
  })
  description = "The ReadWriteMany file system holding Spark checkpoints (SPATE_K8S_CHECKPOINT_CLAIM): its root is mounted in the workers, each tenant's folder in that tenant's drivers. null keeps checkpoints inside the pods (lost when they go)."
  default     = null

  validation {
    condition     = var.checkpoint_volume == null || try(length(var.checkpoint_volume.csi_driver) > 0 && length(var.checkpoint_volume.root_volume_handle) > 0, false)
    error_message = "checkpoint_volume needs a csi_driver and a root_volume_handle."
  }
}

variable "fdb_cluster_file" {
  type        = string
  description = "Contents of a FoundationDB cluster file (the foundationdb module's cluster_file); kept in a ConfigMap and mounted at /etc/foundationdb/fdb.cluster in Spate's pods, for SPATE_STATE_URL=fdb:///etc/foundationdb/fdb.cluster. null: none."
  default     = null

  validation {
    condition     = var.fdb_cluster_file == null || can(regex("^[^:#\\s]+:[^@\\s]+@\\S+$", trimspace(var.fdb_cluster_file)))
    error_message = "fdb_cluster_file must be a cluster file: description:id@address:port[,address:port…]."
  }
}

variable "ingress" {
  type = object({
    host        = string
    class_name  = optional(string)
    tls_secret  = optional(string)
    annotations = optional(map(string), {})
  })
  description = "The Ingress in front of the API and console: host name, ingress class, TLS Secret (in namespace) and annotations. null: no Ingress (the Service only)."
  default     = null

  validation {
    condition     = var.ingress == null || try(can(regex("^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", var.ingress.host)), false)
    error_message = "ingress.host must be a DNS name in lower case."
  }
}
