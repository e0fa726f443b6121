"""The ``standalone`` backend: ``spark-submit`` to a Spark standalone cluster, client mode.

The driver (``engine/job/main.py`` as the application file) runs in the
spark-submit process on the worker's machine, so its channel is a file in the
job directory and its liveness is that process's; executors run on the
cluster's workers. Spate's ``engine`` and ``statestore`` packages travel to
the executors as a zip (``--py-files``, see :mod:`.packaging`); the workers
need a Python with Spate's dependencies at the path ``spark.pyspark.python``
names (the worker's own interpreter path, by default). State must be in a
remote store (PostgreSQL, FoundationDB): the job refuses SQLite state on a
cluster, and that failure is what the job row shows. A deployment may name
several clusters (``SchedulerConfig.spark_clusters``): each job goes to the
master of the cluster its spec names, and its handle records which.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyspark

from spate import engine
from spate.engine.job.nofollow import create_new
from spate.engine.job.spec import JobSpec
from spate.scheduler.backends import process
from spate.scheduler.backends.base import ClusterBackend
from spate.scheduler.backends.local import job_environment
from spate.scheduler.backends.packaging import package_zip
from spate.scheduler.sandbox.unit import ComputeUnit, exit_reason, release

SPARK_HOME = Path(pyspark.__file__).resolve().parent
JOB_APPLICATION = Path(engine.__file__).resolve().parent / "job" / "main.py"
LOG4J_CONFIG = Path(engine.__file__).resolve().parent / "log4j2.properties"


def spark_submit() -> Path:
    """The spark-submit script the pyspark distribution ships."""
    return SPARK_HOME / "bin" / "spark-submit"


def conf_arguments(conf: dict[str, str]) -> list[str]:
    """``--conf key=value`` for each setting, in a stable order."""
    arguments = []
    for key, value in sorted(conf.items()):
        arguments += ["--conf", f"{key}={value}"]
    return arguments


class StandaloneBackend(ClusterBackend):
    """Jobs as spark-submit processes against the ``spark://host:port`` of their cluster."""

    name = "standalone"

    runs_here = True  # the driver: executors run on the cluster's workers

    def command(self, spec: JobSpec, spec_path: Path, py_files: Path) -> list[str]:
        """The spark-submit command line that runs ``spec``."""
        conf = {
            "spark.pyspark.python": sys.executable,
            "spark.pyspark.driver.python": sys.executable,
            # One core per task: the job takes as many cores as its parallelism, so
            # several jobs share a cluster.
            "spark.cores.max": str(spec.parallelism),
            "spark.executor.cores": "1",
            **self.config.spark_conf, **spec.spark_conf,
        }
        return [str(spark_submit()), "--master", str(self.config.cluster_master(spec.cluster)),
                "--deploy-mode", "client", "--name", f"spate-{spec.job_id}",
                "--py-files", str(py_files),
                "--driver-java-options", f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()}",
                *conf_arguments(conf), str(JOB_APPLICATION), "--consume", str(spec_path)]

    def submit(self, spec: JobSpec, spec_path: Path, log_path: Path, attempt: int,
               unit: ComputeUnit | None = None) -> dict[str, Any]:
        py_files = package_zip(self.config.data_dir / "artifacts")
        if unit is None:
            env = job_environment({"SPARK_HOME": str(SPARK_HOME)})
            handle = process.launch(self.command(spec, spec_path, py_files), env,
                                    spec_path.parent, log_path)
            return {**handle, **self._placement(spec)}
        # The driver runs in the tenant's unit, which sees its job folder, not the server's
        # artifacts: the zip goes along in the job folder (a new file: the folder is the
        # tenant's user's, and a link it planted under the zip's name is not followed).
        shipped = spec_path.parent / py_files.name
        with py_files.open("rb") as source, os.fdopen(create_new(shipped, 0o644), "wb") as copy:
            shutil.copyfileobj(source, copy)
        command = self.command(spec, spec_path, shipped)
        sandboxed, env = unit.command(command, {"SPARK_HOME": str(SPARK_HOME)})
        handle = process.launch(sandboxed, env, spec_path.parent, log_path, unit.user.uid)
        return {**handle, **self._placement(spec), "unit": unit.handle()}

    def _placement(self, spec: JobSpec) -> dict[str, Any]:
        """The cluster the job was submitted to, for its handle."""
        return {"master": self.config.cluster_master(spec.cluster),
                "cluster": spec.cluster or self.config.default_cluster}

    def is_alive(self, handle: dict[str, Any]) -> bool | None:
        return process.is_alive(handle)

    def orphans(self, active: Callable[[str], bool]) -> list[str]:
        """Drivers run here (client mode): their processes are swept as local jobs'."""
        return process.orphan_jobs(self.config.jobs_dir, active)

    def kill(self, handle: dict[str, Any]) -> None:
        process.kill(handle)
        self.release(handle)

    def exit_reason(self, handle: dict[str, Any]) -> str | None:
        return exit_reason(handle["unit"]) if "unit" in handle else None

    def release(self, handle: dict[str, Any]) -> None:
        if "unit" in handle:
            release(handle["unit"])
