"""Cluster backends: where a job's process runs and how to watch and kill it.

``local`` runs the job process on the worker's machine, ``standalone``
submits it to a Spark standalone cluster (driver on the worker's machine),
``kubernetes`` submits it in cluster mode (driver in a pod). Pick one with
:func:`create_backend`.

A backend is a module of this package with a :class:`ClusterBackend` subclass whose
``name`` (its own, not inherited) is one of :data:`~spate.scheduler.config.BACKENDS`:
:func:`backend_classes` finds it by importing the package's modules, so the names are
the only list of backends.
"""

from __future__ import annotations

import importlib
import pkgutil

from spate.scheduler.backends.base import ClusterBackend
from spate.scheduler.config import BACKENDS, SchedulerConfig
from spate.scheduler.errors import ConfigurationError


def backend_classes() -> dict[str, type[ClusterBackend]]:
    """Every backend class by its name (the package's modules imported)."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    found: dict[str, type[ClusterBackend]] = {}
    pending = ClusterBackend.__subclasses__()
    while pending:
        subclass = pending.pop()
        pending.extend(subclass.__subclasses__())
        name = vars(subclass).get("name")  # its own, not one it inherits
        if name in BACKENDS:
            found[name] = subclass
    return found


def create_backend(config: SchedulerConfig) -> ClusterBackend:
    """The backend ``config.cluster_backend`` names, configured by ``config``."""
    backend_class = backend_classes().get(config.cluster_backend)
    if backend_class is None:
        raise ConfigurationError(f"unknown cluster backend {config.cluster_backend!r}; use "
                                 f"one of {', '.join(BACKENDS)}")
    return backend_class(config)


__all__ = ["ClusterBackend", "backend_classes", "create_backend"]
