"""What the scheduler needs to know about its deployment, as plain values.

``spate.api.worker`` builds a :class:`SchedulerConfig` from the ``SPATE_*``
settings; tests build one directly. Paths are made absolute once here, so a
job process started in another directory sees the same files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, get_args

from spate.engine.connectors.core.egress import Endpoint
from spate.engine.defaults import DEFAULT_EPOCH_MAX_DELAY_MS, DEFAULT_STATE_URL
from spate.scheduler.autoscale import COOLDOWN_S
from spate.scheduler.errors import ConfigurationError

#: The cluster backends, by name: each is a module of ``scheduler/backends/`` whose
#: :class:`~spate.scheduler.backends.base.ClusterBackend` subclass has that ``name``.
BackendName = Literal["local", "standalone", "kubernetes"]
BACKENDS: tuple[BackendName, ...] = get_args(BackendName)
#: The name of the cluster ``spark_master`` points at when ``spark_clusters`` does not name it.
DEFAULT_CLUSTER = "default"
#: What a cluster's name may be (it becomes a folder name and a word in messages).
CLUSTER_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
#: The folder, under a tenant's checkpoint folder, of checkpoints on non-default clusters.
CLUSTERS_FOLDER = "clusters"


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
    state_url: str = DEFAULT_STATE_URL
    cluster_backend: BackendName = "local"
    #: Spark master for ``local`` jobs (default ``local[2]``) or the standalone
    #: master (``spark://host:port``; for ``standalone`` it or ``spark_clusters`` is needed).
    spark_master: str | None = None
    #: Named standalone clusters a pipeline can run on and move between (name → master).
    #: The default cluster is the one whose master is ``spark_master`` (``default`` when
    #: none is), or the first named when ``spark_master`` is unset.
    spark_clusters: dict[str, str] = field(default_factory=dict)
    restart_budget: int = 3
    restart_backoff_s: float = 2.0
    restart_backoff_max_s: float = 60.0
    reconcile_interval_s: float = 5.0
    #: How often the meter reads the compute units (see scheduler/metering.py).
    meter_interval_s: float = 15.0
    heartbeat_timeout_s: float = 60.0
    #: A job asked to stop that is still alive after this long is killed.
    stop_timeout_s: float = 120.0
    #: A killed job's process still alive after this long: its whole compute unit is killed.
    kill_timeout_s: float = 30.0
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

    # -- tenants' warm applications (see scheduler/applications.py) ------------------
    #: Run a tenant's jobs as queries of one warm Spark application of that tenant
    #: (local backend); False: every job starts its own.
    applications: bool = False
    #: A job of a parallelism above this gets an application of its own.
    application_max_parallelism: int = 4
    #: Seconds an application with no job waits before it exits.
    application_idle_exit_s: float = 60.0
    #: An application's memory limit (its sandbox's) and CPU cores.
    application_memory_mb: int = 4096
    application_cpu_cores: float = 2.0
    #: A pipeline with no input for this long stops until input is due (None: never).
    idle_stop_s: float | None = None
    #: Admission control: at most this many jobs start at once (launched or placed, their
    #: query not yet running); more wait in ``created``/``restarting`` (0: no limit).
    max_starting_jobs: int = 0
    #: Rate-adaptive epochs: the longest wait for more input (ms; 0: back to back).
    epoch_max_delay_ms: int = DEFAULT_EPOCH_MAX_DELAY_MS
    #: The autoscaler's least time between two decisions for one pipeline.
    autoscale_cooldown_s: float = COOLDOWN_S

    def __post_init__(self) -> None:
        if self.cluster_backend not in BACKENDS:
            raise ConfigurationError(f"unknown cluster backend {self.cluster_backend!r}; use "
                                     f"one of {', '.join(BACKENDS)}")
        check_clusters(self.cluster_backend, self.spark_master, self.spark_clusters)
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

    @property
    def clusters(self) -> dict[str, str | None]:
        """Every Spark cluster a job may run on: name → master, the default first."""
        return cluster_masters(self.spark_master, self.spark_clusters)

    @property
    def default_cluster(self) -> str:
        """The cluster of a pipeline that was never moved."""
        return next(iter(self.clusters))

    def cluster_master(self, cluster: str | None) -> str | None:
        """The master of ``cluster`` (None: the default cluster's)."""
        clusters = self.clusters
        name = cluster or self.default_cluster
        if name not in clusters:
            raise ConfigurationError(
                f"Spark cluster '{name}' is not configured (known clusters: "
                f"{', '.join(clusters)}); move the pipeline to one of them, or add it to "
                "SPATE_SPARK_CLUSTERS")
        return clusters[name]

    def checkpoint_dir(self, tenant_id: str, pipeline_id: str) -> Path:
        return self.tenant_checkpoint_dir(tenant_id) / pipeline_id

    def cluster_checkpoint_dir(self, tenant_id: str, pipeline_id: str,
                               cluster: str | None) -> Path:
        """Where a job of ``pipeline_id`` on ``cluster`` keeps its Spark checkpoint.

        Jobs on the default cluster use the pipeline's own folder (as before
        clusters had names); a job on another cluster uses
        ``<tenant>/clusters/<cluster>/<pipeline>``, so no cluster ever resumes
        from another cluster's offsets.
        """
        if cluster is None or cluster == self.default_cluster:
            return self.checkpoint_dir(tenant_id, pipeline_id)
        return self.tenant_checkpoint_dir(tenant_id) / CLUSTERS_FOLDER / cluster / pipeline_id

    def tenant_checkpoint_dir(self, tenant_id: str) -> Path:
        root = self.checkpoint_root or self.data_dir / "checkpoints"
        return root / tenant_id

    def storage_root(self, tenant_id: str) -> Path:
        """Where the tenant's file paths resolve."""
        return (self.tenant_storage or self.data_dir / "tenants") / tenant_id


def parse_clusters(text: str) -> dict[str, str]:
    """``name=master,name=master`` (SPATE_SPARK_CLUSTERS) as a dict, in the order given."""
    clusters: dict[str, str] = {}
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        name, equals, master = (part.strip() for part in entry.partition("="))
        if not equals or not master or not CLUSTER_NAME.match(name):
            raise ConfigurationError(
                f"Spark cluster '{entry}' is not name=master (a name is lower-case letters, "
                "digits, - and _, starting with a letter), e.g. a=spark://host:7077")
        if name in clusters:
            raise ConfigurationError(f"Spark cluster '{name}' is named twice")
        clusters[name] = master
    return clusters


def cluster_masters(spark_master: str | None,
                    spark_clusters: dict[str, str]) -> dict[str, str | None]:
    """Every cluster by name, the default first: the named one whose master is
    ``spark_master``, else ``default`` for ``spark_master`` (when set, or when nothing
    is named), else the first named."""
    for name, master in spark_clusters.items():
        if master == spark_master:
            return {name: master, **spark_clusters}
    if spark_master is not None or not spark_clusters:
        return {DEFAULT_CLUSTER: spark_master, **spark_clusters}
    return dict(spark_clusters)


def check_clusters(backend: str, spark_master: str | None,
                   spark_clusters: dict[str, str]) -> None:
    """Refuse masters and names that do not fit ``backend``."""
    if spark_clusters and backend != "standalone":
        raise ConfigurationError("SPATE_SPARK_CLUSTERS names standalone clusters: set "
                                 "SPATE_CLUSTER_BACKEND=standalone, or leave it unset")
    if backend != "standalone":
        return
    if spark_master is None and not spark_clusters:
        raise ConfigurationError("the standalone backend needs SPATE_SPARK_MASTER set to "
                                 "the cluster's master, spark://host:port (or "
                                 "SPATE_SPARK_CLUSTERS naming clusters)")
    masters = ([spark_master] if spark_master is not None else []) + list(
        spark_clusters.values())
    for master in masters:
        if not master.startswith("spark://"):
            raise ConfigurationError(f"the standalone backend needs spark://host:port "
                                     f"masters; '{master}' is not one")
    if DEFAULT_CLUSTER in spark_clusters and spark_master not in (
            None, spark_clusters[DEFAULT_CLUSTER]):
        raise ConfigurationError(f"SPATE_SPARK_CLUSTERS names a cluster '{DEFAULT_CLUSTER}' "
                                 "with another master than SPATE_SPARK_MASTER's; rename it")


def absolute_sqlite_url(url: str) -> str:
    """``sqlite:///relative.db`` made absolute against the current directory."""
    if not url.startswith("sqlite:///") or url.startswith("sqlite:////"):
        return url
    return "sqlite:///" + str(Path(url.removeprefix("sqlite:///")).resolve())
