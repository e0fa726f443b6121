terraform {
  required_version = ">= 1.9.0"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 5.80"
    }
    kubernetes = {
      source  = "hashicorp/kubernetes"
      version = "~> 2.35"
    }
    random = {
      source  = "hashicorp/random"
      version = "~> 3.6"
    }
  }
}

provider "aws" {
  region = var.region

  default_tags {
    tags = { "spate/deployment" = var.name }
  }
}

# The cluster this configuration creates; the token comes from the AWS CLI.
provider "kubernetes" {
  host                   = module.aws.cluster_endpoint
  cluster_ca_certificate = module.aws.cluster_ca_certificate

  exec {
    api_version = "client.authentication.k8s.io/v1beta1"
    command     = "aws"
    args        = ["eks", "get-token", "--cluster-name", module.aws.cluster_name, "--region", var.region]
  }
}
