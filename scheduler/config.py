"""What the scheduler needs to know about its deployment, as plain values.

``spate.api.worker`` builds a :class:`SchedulerConfig` from the ``SPATE_*``
settings; tests build one directly. Paths are made absolute once here, so a
job process started in another directory sees the same files.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from spate.engine.connectors.egress import Endpoint
from spate.scheduler.errors import ConfigurationError

BACKENDS = ("local", "standalone", "kubernetes")


@dataclass(frozen=True)
class KubernetesConfig:
    """Where and as whom a job's driver pod runs."""

    api_server: str = "https://kubernetes.default.svc"
    #: A tenant's jobs run in the namespace ``<prefix>-<tenant id>``.
    namespace_prefix: str = "spate-t"
    image: str = "spate:latest"
    service_account: str = "spate-job"
    #: Networks jobs must reach whatever the tenant: the state store, the channel's Redis.
    job_cidrs: tuple[str, ...] = ()
    #: A tenant namespace's ResourceQuota: CPU and memory limits, and pods.
    tenant_cpu: str = "8"
    tenant_memory: str = "32Gi"
    tenant_pods: int = 50
    #: A ReadWriteMany claim mounted at the checkpoint root in driver pods (and,
    #: at the same path, in the worker's pod, so the scheduler can remove a
    #: checkpoint); None keeps checkpoints in the pod (lost when it goes).
    checkpoint_claim: str | None = None
    #: Redis the driver pods publish their events to (``redis://host:port/db``).
    channel_redis_url: str | None = None


@dataclass(frozen=True)
class SchedulerConfig:
    """Deployment settings of the scheduler."""

    data_dir: Path = Path(".spate")
    state_url: str = "sqlite:///.spate/state.db"
    cluster_backend: str = "local"
    #: Spark master for ``local`` jobs (default ``local[2]``) or the standalone
    #: master (``spark://host:port``, required for ``standalone``).
    spark_master: str | None = None
    restart_budget: int = 3
    restart_backoff_s: float = 2.0
    restart_backoff_max_s: float = 60.0
    reconcile_interval_s: float = 5.0
    heartbeat_timeout_s: float = 60.0
    #: A job asked to stop that is still alive after this long is killed.
    stop_timeout_s: float = 120.0
    #: Where Spark checkpoints go (default ``<data_dir>/checkpoints``).
    checkpoint_root: Path | None = None
    kubernetes: KubernetesConfig = field(default_factory=KubernetesConfig)
    #: pipeline.update-aggregate-flush-interval of every job (ms; 0: every epoch)
    update_flush_interval_ms: int = 1000
    #: Extra Spark settings every job gets.
    spark_conf: dict[str, str] = field(default_factory=dict)

    # -- the tenant boundary (see scheduler/tenants.py and scheduler/sandbox/) ------
    #: Run every job in its tenant's sandbox (local and standalone backends).
    sandbox: bool = False
    #: Folder holding each tenant's storage root (default ``<data_dir>/tenants``).
    tenant_storage: Path | None = None
    #: A tenant's OS user is this plus its number (allocated by the control store).
    sandbox_uid_base: int = 2_000_000
    #: A job's memory limit: this much plus ``job_memory_per_task_mb`` per task.
    job_memory_mb: int = 2048
    job_memory_per_task_mb: int = 512
    #: Destinations the operator lets tenants' connectors reach (CIDR, host[:port]).
    egress_allow: tuple[str, ...] = ()
    #: The control plane's own endpoints, refused to tenants even when allow-listed.
    control_plane: tuple[Endpoint, ...] = ()
    #: Derives each tenant's state-store password (PostgreSQL); keep it secret.
    state_role_secret: bytes = field(default=b"", repr=False)

    def __post_init__(self) -> None:
        if self.cluster_backend not in BACKENDS:
            raise ConfigurationError(f"unknown cluster backend {self.cluster_backend!r}; use "
                                     f"one of {', '.join(BACKENDS)}")
        if self.cluster_backend == "standalone" and not (
                self.spark_master or "").startswith("spark://"):
            raise ConfigurationError("the standalone backend needs SPATE_SPARK_MASTER set to "
                                     "the cluster's master, spark://host:port")
        if self.restart_budget < 0 or self.restart_backoff_s < 0:
            raise ConfigurationError("restart_budget and restart_backoff_s must be >= 0")

    def resolved(self) -> SchedulerConfig:
        """This config with absolute paths and an absolute SQLite state URL."""
        data_dir = self.data_dir.expanduser().resolve()
        root = (self.checkpoint_root or data_dir / "checkpoints").expanduser()
        storage = (self.tenant_storage or data_dir / "tenants").expanduser()
        return replace(self, data_dir=data_dir, checkpoint_root=root.resolve(),
                       tenant_storage=storage.resolve(),
                       state_url=absolute_sqlite_url(self.state_url))

    @property
    def jobs_dir(self) -> Path:
        return self.data_dir / "jobs"

    def checkpoint_dir(self, tenant_id: str, pipeline_id: str) -> Path:
        return self.tenant_checkpoint_dir(tenant_id) / pipeline_id

    def tenant_checkpoint_dir(self, tenant_id: str) -> Path:
        root = self.checkpoint_root or self.data_dir / "checkpoints"
        return root / tenant_id

    def storage_root(self, tenant_id: str) -> Path:
        """Where the tenant's file paths resolve."""
        return (self.tenant_storage or self.data_dir / "tenants") / tenant_id


def absolute_sqlite_url(url: str) -> str:
    """``sqlite:///relative.db`` made absolute against the current directory."""
    if not url.startswith("sqlite:///") or url.startswith("sqlite:////"):
        return url
    return "sqlite:///" + str(Path(url.removeprefix("sqlite:///")).resolve())
