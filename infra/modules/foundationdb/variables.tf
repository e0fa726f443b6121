variable "name" {
  type        = string
  description = "Name of the FoundationDBCluster; the operator writes its cluster file to the ConfigMap <name>-config."
  default     = "spate-state"

  validation {
    condition     = can(regex("^[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?$", var.name))
    error_message = "name must be a DNS-1123 label of at most 42 characters (the operator appends suffixes)."
  }
}

variable "namespace" {
  type        = string
  description = "Namespace this module creates for the cluster's pods."
  default     = "spate-fdb"

  validation {
    condition     = can(regex("^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", var.namespace))
    error_message = "namespace must be a DNS-1123 label."
  }
}

variable "fdb_version" {
  type        = string
  description = "FoundationDB version of the cluster; 7.3.x, to match the client library Spate is built against (libfdb_c 7.3)."
  default     = "7.3.43"

  validation {
    condition     = can(regex("^7\\.3\\.[0-9]+$", var.fdb_version))
    error_message = "fdb_version must be a 7.3.x release: Spate's client library is 7.3."
  }
}

variable "redundancy_mode" {
  type        = string
  description = "FoundationDB redundancy mode: single (tests only), double or triple."
  default     = "double"

  validation {
    condition     = contains(["single", "double", "triple"], var.redundancy_mode)
    error_message = "redundancy_mode must be single, double or triple."
  }
}

variable "process_counts" {
  type = object({
    storage   = number
    log       = number
    stateless = optional(number, -1)
  })
  description = "Processes of each class; stateless -1 lets the operator choose."
  default = {
    storage = 3
    log     = 3
  }

  validation {
    condition     = var.process_counts.storage >= 1 && var.process_counts.log >= 1
    error_message = "process_counts needs at least one storage and one log process."
  }
}

variable "storage_size" {
  type        = string
  description = "Size of each process's volume claim."
  default     = "64Gi"

  validation {
    condition     = can(regex("^[0-9]+(Mi|Gi|Ti)$", var.storage_size))
    error_message = "storage_size must be a quantity in Mi, Gi or Ti, e.g. 64Gi."
  }
}

variable "storage_class" {
  type        = string
  description = "StorageClass of the processes' volume claims; null: the cluster's default."
  default     = null
}

variable "process_resources" {
  type = object({
    cpu    = string
    memory = string
  })
  description = "CPU and memory requested (and limited to) per FoundationDB process pod."
  default = {
    cpu    = "1"
    memory = "8Gi"
  }
}
