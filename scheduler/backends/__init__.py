"""Cluster backends: where a job's process runs and how to watch and kill it.

``local`` runs the job process on the worker's machine, ``standalone``
submits it to a Spark standalone cluster (driver on the worker's machine),
``kubernetes`` submits it in cluster mode (driver in a pod). Pick one with
:func:`create_backend`.
"""

from __future__ import annotations

from spate.scheduler.backends.base import ClusterBackend
from spate.scheduler.backends.kubernetes import KubernetesBackend
from spate.scheduler.backends.local import LocalBackend
from spate.scheduler.backends.standalone import StandaloneBackend
from spate.scheduler.config import SchedulerConfig
from spate.scheduler.errors import ConfigurationError

_BACKENDS: dict[str, type[ClusterBackend]] = {
    "local": LocalBackend, "standalone": StandaloneBackend, "kubernetes": KubernetesBackend,
}


def create_backend(config: SchedulerConfig) -> ClusterBackend:
    """The backend ``config.cluster_backend`` names, configured by ``config``."""
    try:
        backend_class = _BACKENDS[config.cluster_backend]
    except KeyError:
        raise ConfigurationError(f"unknown cluster backend {config.cluster_backend!r}") from None
    return backend_class(config)


__all__ = ["ClusterBackend", "KubernetesBackend", "LocalBackend", "StandaloneBackend",
           "create_backend"]
