# Spate's cloud dependencies on AWS: the network, the EKS cluster and its
# identities for service accounts, RDS PostgreSQL for the control plane and
# the state store, ElastiCache Redis, S3 for the object-storage connectors and
# EFS for Spark checkpoints.

data "aws_availability_zones" "available" {
  state = "available"
}

data "aws_partition" "current" {}

locals {
  azs          = slice(data.aws_availability_zones.available.names, 0, var.availability_zone_count)
  partition    = data.aws_partition.current.partition
  cluster_name = var.name
  tags         = merge(var.tags, { "spate/deployment" = var.name })

  # /20-sized slices of the VPC block (for a /16): public 0-2, private 4-6, data 8-10.
  public_cidrs  = [for index, az in local.azs : cidrsubnet(var.vpc_cidr, 4, index)]
  private_cidrs = [for index, az in local.azs : cidrsubnet(var.vpc_cidr, 4, index + 4)]
  data_cidrs    = [for index, az in local.azs : cidrsubnet(var.vpc_cidr, 4, index + 8)]

  databases = merge(
    { control = var.control_db },
    var.state_db == null ? {} : { state = var.state_db },
  )

  oidc_issuer = replace(aws_eks_cluster.main.identity[0].oidc[0].issuer, "https://", "")
}

# -- network --------------------------------------------------------------------

resource "aws_vpc" "main" {
  cidr_block           = var.vpc_cidr
  enable_dns_hostnames = true
  enable_dns_support   = true
  tags                 = merge(local.tags, { Name = var.name })
}

resource "aws_internet_gateway" "main" {
  vpc_id = aws_vpc.main.id
  tags   = merge(local.tags, { Name = var.name })
}

resource "aws_subnet" "public" {
  count = length(local.azs)

  vpc_id                  = aws_vpc.main.id
  availability_zone       = local.azs[count.index]
  cidr_block              = local.public_cidrs[count.index]
  map_public_ip_on_launch = false
  tags = merge(local.tags, {
    Name                     = "${var.name}-public-${local.azs[count.index]}"
    "kubernetes.io/role/elb" = "1"
  })
}

resource "aws_subnet" "private" {
  count = length(local.azs)

  vpc_id            = aws_vpc.main.id
  availability_zone = local.azs[count.index]
  cidr_block        = local.private_cidrs[count.index]
  tags = merge(local.tags, {
    Name                              = "${var.name}-private-${local.azs[count.index]}"
    "kubernetes.io/role/internal-elb" = "1"
  })
}

resource "aws_subnet" "data" {
  count = length(local.azs)

  vpc_id            = aws_vpc.main.id
  availability_zone = local.azs[count.index]
  cidr_block        = local.data_cidrs[count.index]
  tags              = merge(local.tags, { Name = "${var.name}-data-${local.azs[count.index]}" })
}

resource "aws_eip" "nat" {
  domain = "vpc"
  tags   = merge(local.tags, { Name = "${var.name}-nat" })
}

resource "aws_nat_gateway" "main" {
  allocation_id = aws_eip.nat.id
  subnet_id     = aws_subnet.public[0].id
  tags          = merge(local.tags, { Name = var.name })

  depends_on = [aws_internet_gateway.main]
}

resource "aws_route_table" "public" {
  vpc_id = aws_vpc.main.id
  tags   = merge(local.tags, { Name = "${var.name}-public" })

  route {
    cidr_block = "0.0.0.0/0"
    gateway_id = aws_internet_gateway.main.id
  }
}

resource "aws_route_table" "private" {
  vpc_id = aws_vpc.main.id
  tags   = merge(local.tags, { Name = "${var.name}-private" })

  route {
    cidr_block     = "0.0.0.0/0"
    nat_gateway_id = aws_nat_gateway.main.id
  }
}

resource "aws_route_table_association" "public" {
  count = length(local.azs)

  subnet_id      = aws_subnet.public[count.index].id
  route_table_id = aws_route_table.public.id
}

resource "aws_route_table_association" "private" {
  count = length(local.azs)

  subnet_id      = aws_subnet.private[count.index].id
  route_table_id = aws_route_table.private.id
}

# The data subnets have no route out of the VPC.
resource "aws_route_table" "data" {
  vpc_id = aws_vpc.main.id
  tags   = merge(local.tags, { Name = "${var.name}-data" })
}

resource "aws_route_table_association" "data" {
  count = length(local.azs)

  subnet_id      = aws_subnet.data[count.index].id
  route_table_id = aws_route_table.data.id
}

# -- EKS ------------------------------------------------------------------------

data "aws_iam_policy_document" "eks_assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["eks.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "cluster" {
  name               = "${var.name}-eks-cluster"
  assume_role_policy = data.aws_iam_policy_document.eks_assume.json
  tags               = local.tags
}

resource "aws_iam_role_policy_attachment" "cluster" {
  role       = aws_iam_role.cluster.name
  policy_arn = "arn:${local.partition}:iam::aws:policy/AmazonEKSClusterPolicy"
}

resource "aws_eks_cluster" "main" {
  name     = local.cluster_name
  role_arn = aws_iam_role.cluster.arn
  version  = var.kubernetes_version
  tags     = local.tags

  vpc_config {
    subnet_ids              = concat(aws_subnet.private[*].id, aws_subnet.public[*].id)
    endpoint_private_access = true
    endpoint_public_access  = length(var.cluster_endpoint_public_access_cidrs) > 0
    public_access_cidrs     = length(var.cluster_endpoint_public_access_cidrs) > 0 ? var.cluster_endpoint_public_access_cidrs : null
  }

  access_config {
    authentication_mode                         = "API"
    bootstrap_cluster_creator_admin_permissions = true
  }

  enabled_cluster_log_types = ["api", "audit", "authenticator"]

  depends_on = [aws_iam_role_policy_attachment.cluster]
}

data "aws_iam_policy_document" "node_assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["ec2.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "node" {
  name               = "${var.name}-eks-node"
  assume_role_policy = data.aws_iam_policy_document.node_assume.json
  tags               = local.tags
}

resource "aws_iam_role_policy_attachment" "node" {
  for_each = toset(["AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryReadOnly"])

  role       = aws_iam_role.node.name
  policy_arn = "arn:${local.partition}:iam::aws:policy/${each.value}"
}

resource "aws_eks_node_group" "main" {
  cluster_name    = aws_eks_cluster.main.name
  node_group_name = "${var.name}-main"
  node_role_arn   = aws_iam_role.node.arn
  subnet_ids      = aws_subnet.private[*].id
  instance_types  = var.node_group.instance_types
  disk_size       = var.node_group.disk_size_gb
  tags            = local.tags

  scaling_config {
    min_size     = var.node_group.min_size
    max_size     = var.node_group.max_size
    desired_size = var.node_group.desired_size
  }

  update_config {
    max_unavailable = 1
  }

  lifecycle {
    ignore_changes = [scaling_config[0].desired_size]
  }

  depends_on = [aws_iam_role_policy_attachment.node]
}

# Tenants' NetworkPolicies are only enforced when the VPC CNI runs its
# network policy agent.
resource "aws_eks_addon" "vpc_cni" {
  cluster_name                = aws_eks_cluster.main.name
  addon_name                  = "vpc-cni"
  resolve_conflicts_on_create = "OVERWRITE"
  resolve_conflicts_on_update = "OVERWRITE"
  configuration_values        = jsonencode({ enableNetworkPolicy = "true" })
  tags                        = local.tags
}

resource "aws_eks_addon" "efs_csi" {
  cluster_name             = aws_eks_cluster.main.name
  addon_name               = "aws-efs-csi-driver"
  service_account_role_arn = aws_iam_role.efs_csi.arn
  tags                     = local.tags

  depends_on = [aws_eks_node_group.main]
}

# -- IAM roles for service accounts -------------------------------------------------

resource "aws_iam_openid_connect_provider" "eks" {
  # IAM trusts the EKS issuer's certificate authority itself: no thumbprint needed.
  url            = aws_eks_cluster.main.identity[0].oidc[0].issuer
  client_id_list = ["sts.amazonaws.com"]
  tags           = local.tags
}

# Who may take each role: ServiceAccounts by namespace and name.
locals {
  service_account_roles = merge(
    { efscsi = ["system:serviceaccount:kube-system:efs-csi-controller-sa", "system:serviceaccount:kube-system:efs-csi-node-sa"] },
    { for tenant in var.tenants : "tenant-${tenant}" => ["system:serviceaccount:${var.tenant_namespace_prefix}-${tenant}:${var.job_service_account}"] },
  )
}

data "aws_iam_policy_document" "irsa_assume" {
  for_each = local.service_account_roles

  statement {
    actions = ["sts:AssumeRoleWithWebIdentity"]

    principals {
      type        = "Federated"
      identifiers = [aws_iam_openid_connect_provider.eks.arn]
    }

    condition {
      test     = "StringEquals"
      variable = "${local.oidc_issuer}:aud"
      values   = ["sts.amazonaws.com"]
    }

    condition {
      test     = "StringEquals"
      variable = "${local.oidc_issuer}:sub"
      values   = each.value
    }
  }
}

resource "aws_iam_role" "efs_csi" {
  name               = "${var.name}-efs-csi"
  assume_role_policy = data.aws_iam_policy_document.irsa_assume["efscsi"].json
  tags               = local.tags
}

resource "aws_iam_role_policy_attachment" "efs_csi" {
  role       = aws_iam_role.efs_csi.name
  policy_arn = "arn:${local.partition}:iam::aws:policy/service-role/AmazonEFSCSIDriverPolicy"
}

# A role per listed tenant, taken by the jobs' ServiceAccount in that tenant's
# namespace only: its jobs reach tenants/<tenant id>/ of the data bucket (the
# object-storage connectors) and nothing of another tenant's. A tenant not
# listed has no AWS identity at all.
resource "aws_iam_role" "tenant" {
  for_each = var.tenants

  name               = "${var.name}-t-${each.value}"
  assume_role_policy = data.aws_iam_policy_document.irsa_assume["tenant-${each.value}"].json
  tags               = merge(local.tags, { "spate/tenant" = each.value })
}

data "aws_iam_policy_document" "tenant_data" {
  for_each = var.tenants

  statement {
    actions   = ["s3:ListBucket"]
    resources = [aws_s3_bucket.data.arn]
    condition {
      test     = "StringLike"
      variable = "s3:prefix"
      values   = ["tenants/${each.value}/", "tenants/${each.value}/*"]
    }
  }

  statement {
    actions   = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"]
    resources = ["${aws_s3_bucket.data.arn}/tenants/${each.value}/*"]
  }
}

resource "aws_iam_role_policy" "tenant_data" {
  for_each = var.tenants

  name   = "data-bucket"
  role   = aws_iam_role.tenant[each.key].id
  policy = data.aws_iam_policy_document.tenant_data[each.key].json
}

# -- security groups --------------------------------------------------------------

resource "aws_security_group" "data" {
  for_each = { postgres = 5432, redis = 6379, efs = 2049 }

  name        = "${var.name}-${each.key}"
  description = "Spate ${each.key}: reachable from the EKS nodes and pods only"
  vpc_id      = aws_vpc.main.id
  tags        = merge(local.tags, { Name = "${var.name}-${each.key}" })

  ingress {
    description = "${each.key} from the private subnets (nodes and pods)"
    from_port   = each.value
    to_port     = each.value
    protocol    = "tcp"
    cidr_blocks = local.private_cidrs
  }
}

# -- PostgreSQL ---------------------------------------------------------------------

resource "aws_db_subnet_group" "main" {
  name       = var.name
  subnet_ids = aws_subnet.data[*].id
  tags       = local.tags
}

resource "aws_db_instance" "db" {
  for_each = local.databases

  identifier                = "${var.name}-${each.key}"
  engine                    = "postgres"
  engine_version            = var.postgres_version
  instance_class            = each.value.instance_class
  allocated_storage         = each.value.allocated_storage
  max_allocated_storage     = each.value.allocated_storage * 4
  storage_type              = "gp3"
  storage_encrypted         = true
  db_name                   = each.key == "control" ? "spate" : "spate_state"
  username                  = "spate"
  password                  = var.db_password
  multi_az                  = each.value.multi_az
  db_subnet_group_name      = aws_db_subnet_group.main.name
  vpc_security_group_ids    = [aws_security_group.data["postgres"].id]
  publicly_accessible       = false
  backup_retention_period   = 7
  deletion_protection       = var.deletion_protection
  skip_final_snapshot       = !var.deletion_protection
  final_snapshot_identifier = var.deletion_protection ? "${var.name}-${each.key}-final" : null
  apply_immediately         = false
  tags                      = local.tags
}

# -- Redis ----------------------------------------------------------------------------

resource "aws_elasticache_subnet_group" "main" {
  name       = var.name
  subnet_ids = aws_subnet.data[*].id
  tags       = local.tags
}

resource "aws_elasticache_replication_group" "redis" {
  replication_group_id       = var.name
  description                = "Spate: the scheduler's broker, jobs' channels, rate limits"
  engine                     = "redis"
  engine_version             = "7.1"
  node_type                  = var.redis_node_type
  num_cache_clusters         = 2
  automatic_failover_enabled = true
  multi_az_enabled           = true
  port                       = 6379
  subnet_group_name          = aws_elasticache_subnet_group.main.name
  security_group_ids         = [aws_security_group.data["redis"].id]
  at_rest_encryption_enabled = true
  transit_encryption_enabled = true
  auth_token                 = var.redis_auth_token
  tags                       = local.tags
}

# -- S3 ---------------------------------------------------------------------------------

resource "aws_s3_bucket" "data" {
  bucket_prefix = "${var.name}-data-"
  tags          = local.tags
}

resource "aws_s3_bucket_public_access_block" "data" {
  bucket                  = aws_s3_bucket.data.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_ownership_controls" "data" {
  bucket = aws_s3_bucket.data.id
  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "data" {
  bucket = aws_s3_bucket.data.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm = "aws:kms"
    }
  }
}

resource "aws_s3_bucket_versioning" "data" {
  bucket = aws_s3_bucket.data.id
  versioning_configuration {
    status = "Enabled"
  }
}

# -- EFS: Spark checkpoints ---------------------------------------------------------------

# Spark's checkpoint folder needs a file system that renames atomically, so
# checkpoints live on EFS (ReadWriteMany), not on S3.
resource "aws_efs_file_system" "checkpoints" {
  creation_token   = "${var.name}-checkpoints"
  encrypted        = true
  performance_mode = "generalPurpose"
  throughput_mode  = "elastic"
  tags             = merge(local.tags, { Name = "${var.name}-checkpoints" })
}

resource "aws_efs_mount_target" "checkpoints" {
  count = length(local.azs)

  file_system_id  = aws_efs_file_system.checkpoints.id
  subnet_id       = aws_subnet.private[count.index].id
  security_groups = [aws_security_group.data["efs"].id]
}

# The root of the checkpoint tree (the workers') and one folder per tenant
# (that tenant's drivers see only their own).
resource "aws_efs_access_point" "checkpoints" {
  for_each = merge({ "" = "/checkpoints" }, { for tenant in var.tenants : tenant => "/checkpoints/${tenant}" })

  file_system_id = aws_efs_file_system.checkpoints.id
  tags           = merge(local.tags, { Name = each.key == "" ? "${var.name}-checkpoints" : "${var.name}-checkpoints-${each.key}" })

  posix_user {
    uid = var.checkpoint_uid
    gid = var.checkpoint_uid
  }

  root_directory {
    path = each.value
    creation_info {
      owner_uid   = var.checkpoint_uid
      owner_gid   = var.checkpoint_uid
      permissions = "0750"
    }
  }
}
