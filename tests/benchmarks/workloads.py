"""The benchmark workloads, each run once and timed: Spate pipelines and the
same queries written natively in Spark Structured Streaming.

Both read the same Nexmark stream (Spate's ``nexmark`` data source with a fixed
seed, base time and batch size), so they see identical events in identical
micro-batches.  A run is timed from building the streaming query until it has
consumed all input (Spate: until the pipeline finished and flushed its windows;
native: ``trigger(availableNow=True)`` until it terminates).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from engine.connectors import CONNECTORS, HIDDEN_TIMESTAMP
from engine.planner import plan_pipeline
from engine.runtime.runner import PipelineRunner, RunOptions
from statestore import open_store

PARALLELISM = 2
#: Distinct grouping keys: few, so output stays small next to input at every width.
KEYS = 10


@dataclass(frozen=True)
class Stream:
    """A bounded Nexmark stream: ``events`` events, ``event_rate`` per second of event time."""

    events: int
    event_rate: int
    batch: int

    def table_sql(self) -> str:
        runtime = self.events / self.event_rate
        return (f"CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = "
                f"'{self.event_rate}', runtime = '{runtime}', rate_limited = 'false', "
                f"max_events_per_batch = '{self.batch}', "
                f"'nexmark.base_time_ms' = '1700000000000');\n"
                "CREATE TABLE out WITH (connector = 'blackhole');\n")


@dataclass(frozen=True)
class Timing:
    seconds: float
    events: int
    rows_in: int

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds


def hop_sql(stream: Stream, slide_s: int, width_s: int) -> str:
    return stream.table_sql() + f"""
INSERT INTO out
SELECT key, w.end AS window_end, n
FROM (SELECT bid.auction % {KEYS} AS key,
             HOP(INTERVAL '{slide_s}' SECOND, INTERVAL '{width_s}' SECOND) AS w, count(*) AS n
      FROM nexmark WHERE bid IS NOT NULL GROUP BY 1, 2);
"""


def stateless_sql(stream: Stream) -> str:
    return stream.table_sql() + """
INSERT INTO out
SELECT bid.auction AS auction, bid.price * 2 AS double_price, bid.bidder AS bidder
FROM nexmark WHERE bid IS NOT NULL AND bid.price > 1000;
"""


def run_spate(spark: SparkSession, sql: str, events: int) -> Timing:
    work = Path(tempfile.mkdtemp(prefix="spate-bench-"))
    store = open_store(f"sqlite:///{work / 'state.db'}")
    try:
        runner = PipelineRunner(plan_pipeline(sql), spark, store.pipeline("bench", "bench"),
                                RunOptions(parallelism=PARALLELISM,
                                           checkpoint_dir=str(work / "checkpoint")))
        started = time.perf_counter()
        assert runner.run(), "the benchmark pipeline did not finish"
        seconds = time.perf_counter() - started
        return Timing(seconds, events, runner.counters["rows_in"])
    finally:
        store.close()
        shutil.rmtree(work, ignore_errors=True)


def _nexmark(spark: SparkSession, stream: Stream) -> DataFrame:
    table = plan_pipeline(stateless_sql(stream)).tables["nexmark"]
    return CONNECTORS["nexmark"].read_stream(spark, table.config, PARALLELISM)


def native_hop(events: DataFrame, slide_s: int, width_s: int) -> DataFrame:
    """The HOP query in Spark's own API; the same 1 s watermark delay Spate defaults to."""
    return (events.where("bid IS NOT NULL")
            .withWatermark(HIDDEN_TIMESTAMP, "1 second")
            .groupBy((F.col("bid.auction") % KEYS).alias("key"),
                     F.window(HIDDEN_TIMESTAMP, f"{width_s} seconds", f"{slide_s} seconds"))
            .count())


def native_stateless(events: DataFrame) -> DataFrame:
    return (events.where("bid IS NOT NULL AND bid.price > 1000")
            .select(F.col("bid.auction").alias("auction"),
                    (F.col("bid.price") * 2).alias("double_price"),
                    F.col("bid.bidder").alias("bidder")))


def run_native(spark: SparkSession, stream: Stream, query: str,
               slide_s: int = 1, width_s: int = 1) -> Timing:
    work = Path(tempfile.mkdtemp(prefix="native-bench-"))
    try:
        started = time.perf_counter()
        source = _nexmark(spark, stream)
        frame = native_stateless(source) if query == "stateless" else \
            native_hop(source, slide_s, width_s)
        running = (frame.writeStream.format("noop").outputMode("append")
                   .option("checkpointLocation", str(work / "checkpoint"))
                   .trigger(availableNow=True).start())
        running.awaitTermination()
        seconds = time.perf_counter() - started
        rows_in = sum(p["numInputRows"] for p in running.recentProgress)
        return Timing(seconds, stream.events, rows_in)
    finally:
        shutil.rmtree(work, ignore_errors=True)
