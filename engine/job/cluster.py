"""Which Spark master a job's driver uses, and whether its state store fits that master.

A job either builds its own session (``JobSpec.spark_master`` set, e.g.
``local[2]``) or runs as the application of ``spark-submit``, which has
already configured the master.  Either way the master is known before any
executor starts, so an embedded state store given to a cluster is refused
before Spark connects anywhere.
"""

from __future__ import annotations

from pyspark import SparkConf, SparkContext

from spate.engine.job.errors import JobRefusedError

#: The refusal a job reports for ``sqlite:`` state with a cluster master.
EMBEDDED_STATE_ON_CLUSTER = (
    "the embedded sqlite state store lives on one machine; a cluster's executors cannot "
    "reach it — use a postgresql:// or fdb:// state store (SPATE_STATE_URL)")


def is_distributed(master: str) -> bool:
    """Whether ``master`` runs executors beyond this machine (``spark://``, ``k8s://``, yarn)."""
    return not master.startswith("local")


def submitted_master() -> str:
    """The master ``spark-submit`` configured for this process.

    Connects to the driver JVM spark-submit started (it passes its gateway
    in the environment) without creating a SparkContext yet.
    """
    SparkContext._ensure_initialized()  # noqa: SLF001 - reads spark-submit's conf, no context
    master = SparkConf().get("spark.master", None)
    if not master:
        raise JobRefusedError(
            "the job spec names no Spark master and the job was not launched by spark-submit: "
            "set spark_master (e.g. local[2]) or run it as spark-submit's application")
    return str(master)


def check_state_reachable(master: str, state_url: str) -> None:
    """Refuse an embedded (sqlite) state store for a distributed master."""
    if is_distributed(master) and state_url.startswith("sqlite:"):
        raise JobRefusedError(EMBEDDED_STATE_ON_CLUSTER)
