variable "region" {
  type        = string
  description = "AWS region to deploy into."

  validation {
    condition     = can(regex("^[a-z]{2}(-[a-z]+)+-[0-9]$", var.region))
    error_message = "region must be an AWS region name, e.g. eu-west-1."
  }
}

variable "name" {
  type        = string
  description = "Name of the deployment (prefix of the AWS resources, name of the EKS cluster)."
  default     = "spate"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{1,22}[a-z0-9]$", var.name))
    error_message = "name must be 3 to 24 characters: lower-case letters, digits and '-', starting with a letter."
  }
}

variable "image" {
  type        = string
  description = "Spate's image, built from infra/image/Dockerfile and pushed to a registry the nodes can pull from (e.g. ECR)."

  validation {
    condition     = length(trimspace(var.image)) > 0
    error_message = "image must be an image reference."
  }
}

variable "cluster_endpoint_public_access_cidrs" {
  type        = list(string)
  description = "Networks allowed to reach the EKS API server (where Terraform and operators run); empty: private endpoint only, so Terraform must run inside the VPC."
  default     = []

  validation {
    condition     = alltrue([for cidr in var.cluster_endpoint_public_access_cidrs : can(cidrhost(cidr, 0))])
    error_message = "cluster_endpoint_public_access_cidrs must be CIDR blocks."
  }
}

variable "ingress_host" {
  type        = string
  description = "Host name of the API and console behind the Ingress; null: no Ingress."
  default     = null
}

variable "ingress_class_name" {
  type        = string
  description = "IngressClass that serves the Ingress (e.g. alb with the AWS Load Balancer Controller)."
  default     = "alb"
}

variable "tenants" {
  type        = set(string)
  description = "Tenant ids made ahead of their first job: an IAM role, a checkpoint folder and a namespace each."
  default     = []
}

variable "state_store" {
  type        = string
  description = "Backend of the state store: postgresql (an RDS instance) or foundationdb (a cluster through the FoundationDB operator, which must already run in the EKS cluster)."
  default     = "postgresql"

  validation {
    condition     = contains(["postgresql", "foundationdb"], var.state_store)
    error_message = "state_store must be postgresql or foundationdb."
  }
}
