"""One timed benchmark run in a process of its own, for one Spark master.

A process's SparkSession has one master for its whole life, so the scaling
benchmark (:mod:`tests.benchmarks.test_scaling`) runs each (master, engine,
query) here (``CONF``: extra Spark settings as a JSON object)::

    python -m tests.benchmarks.scaling_job MASTER ENGINE QUERY EVENTS PARALLELISM STATE_URL [CONF]

``ENGINE`` is ``spate`` or ``native``; ``QUERY`` a key of :data:`QUERIES`.  The
process first warms the JVM and the Python workers with a small run of the
same query, then times one run of ``EVENTS`` events and prints one JSON line:
wall seconds, events read, the driver process's CPU seconds during the run
(the Python driver: Spate's epoch bookkeeping, planning of each epoch's jobs,
the commit), and for Spate the summed wall time of its epochs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spate.engine.connectors import HIDDEN_TIMESTAMP
from spate.engine.planner import plan_pipeline
from spate.engine.runtime.reports import EpochReport
from spate.engine.runtime.runner import PipelineRunner, RunOptions
from spate.engine.spark import build_spark
from spate.statestore import open_store
from tests.benchmarks.workloads import (
    Stream,
    hop_sql,
    native_hop,
    native_q7,
    nexmark_sql,
    run_native_query,
)

#: Keys of the updating aggregate: the last digits of a bid's price.
UPDATING_KEYS = 100_000


def updating_sql(stream: Stream) -> str:
    """An updating (unwindowed) aggregate over 100k keys."""
    return stream.table_sql() + f"""
INSERT INTO out
SELECT k, count(*) AS n, sum(price) AS total
FROM (SELECT bid.price % {UPDATING_KEYS} AS k, bid.price AS price
      FROM nexmark WHERE bid IS NOT NULL)
GROUP BY k;
"""


def native_updating(events: DataFrame) -> DataFrame:
    return (events.where("bid IS NOT NULL")
            .groupBy((F.col("bid.price") % UPDATING_KEYS).alias("k"))
            .agg(F.count(F.lit(1)).alias("n"), F.sum("bid.price").alias("total")))


#: Keys of the wide updating aggregate: an auction and a price (a bid's price takes
#: at most 65,536 values, so ``price % 100000`` above has at most that many keys).
WIDE_KEYS = 1_000_000


def wide_key(auction: str, price: str) -> str:
    return f"({auction} * 65536 + {price}) % {WIDE_KEYS}"


def wide_updating_sql(stream: Stream) -> str:
    """An updating aggregate over a key space of a million (auction and price)."""
    return stream.table_sql() + f"""
INSERT INTO out
SELECT k, count(*) AS n, sum(price) AS total, max(price) AS top
FROM (SELECT {wide_key('bid.auction', 'bid.price')} AS k, bid.price AS price
      FROM nexmark WHERE bid IS NOT NULL)
GROUP BY k;
"""


def native_wide_updating(events: DataFrame) -> DataFrame:
    return (events.where("bid IS NOT NULL")
            .groupBy(F.expr(wide_key("bid.auction", "bid.price")).alias("k"))
            .agg(F.count(F.lit(1)).alias("n"), F.sum("bid.price").alias("total"),
                 F.max("bid.price").alias("top")))


#: Keys of the session windows: a bid's bidder, folded (about one bid per key every 2 s).
SESSION_KEYS = 10_000
#: The sessions' gap: a key's bids less than a second apart share a session.
SESSION_GAP_S = 1


def session_sql(stream: Stream, out_path: Path | None = None, keys: int = SESSION_KEYS) -> str:
    """SESSION windows of each bidder's bids: count and total price (into ``out_path``
    as JSON lines; None: ``blackhole``)."""
    return stream.table_sql(out_path) + f"""
INSERT INTO out
SELECT k, s.end AS session_end, n, total
FROM (SELECT bid.bidder % {keys} AS k, SESSION(INTERVAL '{SESSION_GAP_S}' SECOND) AS s,
             count(*) AS n, sum(bid.price) AS total
      FROM nexmark WHERE bid IS NOT NULL GROUP BY 1, 2);
"""


def native_session(events: DataFrame, keys: int = SESSION_KEYS) -> DataFrame:
    """The same with Spark's ``session_window`` (append mode, the 1 s watermark delay
    Spate defaults to)."""
    return (events.where("bid IS NOT NULL")
            .withWatermark(HIDDEN_TIMESTAMP, "1 second")
            .groupBy((F.col("bid.bidder") % keys).alias("k"),
                     F.session_window(HIDDEN_TIMESTAMP, f"{SESSION_GAP_S} second").alias("s"))
            .agg(F.count(F.lit(1)).alias("n"), F.sum("bid.price").alias("total"))
            .select("k", F.col("s.end").alias("session_end"), "n", "total"))


@dataclass(frozen=True)
class Query:
    """A scaling workload: its event rate (per second of event time), its Spate SQL
    and its native form (None: Spark cannot run it)."""

    event_rate: int
    spate: Callable[[Stream], str]
    native: Callable[[DataFrame], DataFrame] | None
    #: Spark's output mode for the native form
    mode: str = "append"


QUERIES = {
    "hop60": Query(200, lambda s: hop_sql(s, 1, 60), lambda e: native_hop(e, 1, 60)),
    "q4": Query(5_000, lambda s: nexmark_sql(s, "q4"), None),
    "q7": Query(5_000, lambda s: nexmark_sql(s, "q7"), native_q7),
    "updating100k": Query(5_000, updating_sql, native_updating, mode="update"),
    "updating1m": Query(5_000, wide_updating_sql, native_wide_updating, mode="update"),
    "session10k": Query(5_000, session_sql, native_session),
}


def stream_of(query: Query, events: int, parallelism: int) -> Stream:
    """``events`` events in ten epochs (at least 10,000 events each)."""
    return Stream(events=events, event_rate=query.event_rate,
                  batch=max(10_000, events // 10 // parallelism * parallelism))


def run_spate(spark: SparkSession, query: Query, stream: Stream, parallelism: int,
              state_url: str) -> dict[str, float]:
    work = Path(tempfile.mkdtemp(prefix="spate-scaling-"))
    url = state_url.replace("{work}", str(work))
    reports: list[EpochReport] = []
    store = open_store(url)
    try:
        state = store.pipeline("bench", f"scaling-{time.time_ns()}")
        runner = PipelineRunner(plan_pipeline(query.spate(stream)), spark, state, RunOptions(
            parallelism=parallelism, checkpoint_dir=str(work / "checkpoint"),
            on_epoch=reports.append))
        cpu, started = time.process_time(), time.perf_counter()
        assert runner.run(), "the benchmark pipeline did not finish"
        seconds, cpu_s = time.perf_counter() - started, time.process_time() - cpu
        rows_in = runner.counters["rows_in"]
        state.drop()
        return {"seconds": seconds, "rows_in": rows_in, "driver_cpu_s": cpu_s,
                "epochs_s": sum(r.duration_s for r in reports), "epochs": len(reports)}
    finally:
        store.close()
        shutil.rmtree(work, ignore_errors=True)


def run_native(spark: SparkSession, query: Query, stream: Stream) -> dict[str, float]:
    assert query.native is not None
    native = query.native
    cpu = time.process_time()
    timing = run_native_query(spark, stream, native, output_mode=query.mode)
    return {"seconds": timing.seconds, "rows_in": timing.rows_in,
            "driver_cpu_s": time.process_time() - cpu}


def run_in_process(engine: str, query: str, events: int, master: str = "local[2]",
                   parallelism: int = 2) -> dict[str, Any]:
    """One run of this module in a process of its own (SQLite state); its JSON line."""
    command = [sys.executable, "-m", "tests.benchmarks.scaling_job", master, engine, query,
               str(events), str(parallelism), "sqlite:///{work}/state.db"]
    done = subprocess.run(command, cwd=Path(__file__).resolve().parents[2],
                          capture_output=True, text=True, timeout=1800,
                          env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1"))
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["rows_in"] >= events, f"{engine} {query} read too little: {result}"
    return result


def main(argv: list[str]) -> None:
    master, engine, name, events, parallelism, state_url = argv[:6]
    query = QUERIES[name]
    conf = {"spark.sql.shuffle.partitions": parallelism, "spark.default.parallelism": parallelism,
            **(json.loads(argv[6]) if len(argv) > 6 else {})}
    spark = build_spark(master, f"spate-scaling-{engine}-{name}", conf=conf)
    for size in (max(10_000, int(events) // 20), int(events)):  # a warm-up, then the timed run
        stream = stream_of(query, size, int(parallelism))
        result = (run_spate(spark, query, stream, int(parallelism), state_url)
                  if engine == "spate" else run_native(spark, query, stream))
    result["events"] = int(events)
    print(json.dumps(result))
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
