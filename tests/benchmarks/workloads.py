"""The benchmark workloads, each run once and timed: Spate pipelines and the
same queries written natively in Spark Structured Streaming.

Both read the same Nexmark stream (Spate's ``nexmark`` events with a fixed seed,
base time and batch size; native Spark computes them with the same expressions over
the numbers of Spark's ``rate-micro-batch`` source), so they see identical events in
identical micro-batches.  A run is timed from building the streaming query until it
has consumed all input (Spate: until the pipeline finished and flushed its windows;
native: until its source's offset reached the last event).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from spate.engine.connectors import HIDDEN_TIMESTAMP
from spate.engine.connectors.generators.nexmark import events
from spate.engine.planner import plan_pipeline
from spate.engine.runtime.runner import PipelineRunner, RunOptions
from spate.engine.runtime.tasks import TaskStats
from spate.statestore import open_store, split_key_groups

PARALLELISM = 2
#: Where the benchmarks record their figures (``results.json``) and plots.
RESULTS_DIR = Path(__file__).resolve().parents[2] / "docs" / "benchmarks"
#: Distinct grouping keys of the HOP query (bid.auction modulo this): enough that
#: per-key work shows, as with real keys.
KEYS = 1_000
#: The event time of the first Nexmark event (2023-11-14T22:13:20Z).
BASE_TIME_MS = 1_700_000_000_000


@dataclass(frozen=True)
class Stream:
    """A bounded Nexmark stream: ``events`` events, ``event_rate`` per second of event time."""

    events: int
    event_rate: int
    batch: int

    def table_sql(self, out_path: Path | None = None, out_format: str = "json") -> str:
        """The ``nexmark`` source and the ``out`` sink: blackhole, or a file."""
        runtime = self.events / self.event_rate
        sink = "connector = 'blackhole'" if out_path is None else \
            f"connector = 'single_file', path = '{out_path}', format = '{out_format}', " \
            "type = 'sink'"
        return (f"CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = "
                f"'{self.event_rate}', runtime = '{runtime}', rate_limited = 'false', "
                f"max_events_per_batch = '{self.batch}', "
                f"'nexmark.base_time_ms' = '{BASE_TIME_MS}');\n"
                f"CREATE TABLE out WITH ({sink});\n")


@dataclass(frozen=True)
class Timing:
    seconds: float
    events: int
    rows_in: int

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds


def best_run(runs: list[Timing], events: int) -> Timing:
    """The fastest of ``runs``, each of which must have read all ``events``."""
    for run in runs:
        assert run.rows_in >= events, f"a run read {run.rows_in} of {events} events"
    return min(runs, key=lambda t: t.seconds)


def load_results() -> dict[str, Any]:
    path = RESULTS_DIR / "results.json"
    return json.loads(path.read_text()) if path.exists() else {}


def epoch_times(action: Callable[[int], Any], epochs: int, warm: int) -> list[float]:
    """Milliseconds each of ``epochs`` calls of ``action(epoch)`` took, after ``warm``
    calls not counted (epochs are numbered on from those)."""
    for epoch in range(warm):
        action(epoch)
    times = []
    for epoch in range(warm, warm + epochs):
        start = time.perf_counter()
        action(epoch)
        times.append((time.perf_counter() - start) * 1000)
    return times


def save_result(key: str, value: Any) -> None:
    """Record ``value`` under ``key`` in ``results.json``, keeping the other keys."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    results = load_results()
    results[key] = value
    (RESULTS_DIR / "results.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")


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


#: Width of the TUMBLE windows of the windowed Nexmark joins (q7, q8).
JOIN_WINDOW_S = 10
#: q5's HOP window: 10 s wide, every 2 s (the reference's).
HOT_WIDTH_S, HOT_SLIDE_S = 10, 2

#: Nexmark's three entity streams, with the columns the join queries read.
NEXMARK_VIEWS = """
CREATE VIEW persons AS
SELECT person.id AS id, person.name AS name, person.city AS city, person.state AS state
FROM nexmark WHERE person IS NOT NULL;
CREATE VIEW auctions AS
SELECT auction.id AS id, auction.seller AS seller, auction.category AS category,
       auction.datetime AS datetime, auction.expires AS expires
FROM nexmark WHERE auction IS NOT NULL;
CREATE VIEW bids AS
SELECT bid.auction AS auction, bid.bidder AS bidder, bid.price AS price, bid.datetime AS datetime
FROM nexmark WHERE bid IS NOT NULL;
"""

#: The Nexmark join queries in Spate's dialect (docs/sql/joins.md).  q3 is an updating
#: join (no windows); q4 aggregates an updating join twice (the join in a subquery of
#: its own, as when BENCHMARKS.md's figures were taken); q6 is the reference's form
#: (a window function over an unwindowed, updating input: Spate rejects it); q7 and q8
#: join two aggregates over the same TUMBLE.
NEXMARK_QUERIES = {
    "q3": """
INSERT INTO out
SELECT p.name, p.city, p.state, a.id
FROM auctions AS a JOIN persons AS p ON a.seller = p.id
WHERE a.category = 10 AND p.state IN ('OR', 'ID', 'CA');
""",
    "q4": """
INSERT INTO out
SELECT category, avg(final) AS avg_price
FROM (SELECT id, category, max(price) AS final
      FROM (SELECT a.id, a.category, b.price
            FROM auctions AS a JOIN bids AS b ON a.id = b.auction
            WHERE b.datetime BETWEEN a.datetime AND a.expires)
      GROUP BY id, category)
GROUP BY category;
""",
    # Hot items: the auctions with the most bids in each HOP window, ties included.
    "q5": f"""
INSERT INTO out
SELECT auction, num, window.end AS window_end
FROM (SELECT auction, num, window,
             RANK() OVER (PARTITION BY window ORDER BY num DESC) AS place
      FROM (SELECT auction, count(*) AS num,
                   HOP(INTERVAL '{HOT_SLIDE_S}' SECOND, INTERVAL '{HOT_WIDTH_S}' SECOND) AS window
            FROM bids GROUP BY 1, 3))
WHERE place = 1;
""",
    "q6": """
INSERT INTO out
SELECT seller, avg(final) OVER (PARTITION BY seller ORDER BY closed
                                ROWS BETWEEN 9 PRECEDING AND CURRENT ROW) AS avg_price
FROM (SELECT a.id, a.seller, max(b.price) AS final, max(b.datetime) AS closed
      FROM auctions AS a JOIN bids AS b ON a.id = b.auction
      WHERE b.datetime BETWEEN a.datetime AND a.expires
      GROUP BY a.id, a.seller);
""",
    "q7": f"""
INSERT INTO out
SELECT b.auction, b.price, b.bidder, b.window.end AS window_end
FROM (SELECT auction, bidder, price, TUMBLE(INTERVAL '{JOIN_WINDOW_S}' SECOND) AS window
      FROM bids GROUP BY 1, 2, 3, 4) AS b
JOIN (SELECT TUMBLE(INTERVAL '{JOIN_WINDOW_S}' SECOND) AS window, max(price) AS top
      FROM bids GROUP BY 1) AS m
ON b.price = m.top;
""",
    "q8": f"""
INSERT INTO out
SELECT p.id, p.name, p.window.start AS window_start
FROM (SELECT id, name, TUMBLE(INTERVAL '{JOIN_WINDOW_S}' SECOND) AS window
      FROM persons GROUP BY 1, 2, 3) AS p
JOIN (SELECT seller, TUMBLE(INTERVAL '{JOIN_WINDOW_S}' SECOND) AS window
      FROM auctions GROUP BY 1, 2) AS a
ON p.id = a.seller;
""",
}


def nexmark_sql(stream: Stream, query: str, out_path: Path | None = None,
                out_format: str = "json") -> str:
    """The Spate pipeline of Nexmark ``query`` (a key of :data:`NEXMARK_QUERIES`)."""
    return stream.table_sql(out_path, out_format) + NEXMARK_VIEWS + NEXMARK_QUERIES[query]


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
    """The stream's events in Spark alone: numbers ``batch`` a micro-batch from Spark's
    ``rate-micro-batch`` source, the ones past the last event dropped."""
    table = plan_pipeline(stateless_sql(stream)).tables["nexmark"]
    numbers = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", stream.batch)
               .option("numPartitions", PARALLELISM).load()
               .where(F.col("value") < stream.events)
               .select(F.col("value"), F.lit(False)))
    return events(numbers, table.config, PARALLELISM, BASE_TIME_MS * 1_000_000)


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


def _entities(events: DataFrame, kind: str, **columns: str) -> DataFrame:
    """One entity stream of Nexmark, its fields renamed, with the event time as ``ts``."""
    return events.where(f"{kind} IS NOT NULL").select(
        *(F.col(f"{kind}.{field}").alias(name) for name, field in columns.items()),
        F.col(HIDDEN_TIMESTAMP).alias("ts"))


def native_q3(events: DataFrame) -> DataFrame:
    """q3 as an unbounded stream-stream inner join: no watermark, so, as Spate's
    updating join, it never forgets a person or an auction (append mode)."""
    auctions = _entities(events, "auction", a_id="id", seller="seller", category="category")
    persons = _entities(events, "person", p_id="id", name="name", city="city", state="state")
    return (auctions.where("category = 10").drop("ts")
            .join(persons.where("state IN ('OR', 'ID', 'CA')").drop("ts"),
                  F.col("seller") == F.col("p_id"))
            .select("name", "city", "state", F.col("a_id").alias("id")))


def native_q7(events: DataFrame) -> DataFrame:
    """q7 as Spark writes it: the highest price per window (an append-mode windowed
    aggregate) joined back to the bids of that window on the price."""
    width = f"{JOIN_WINDOW_S} seconds"
    bids = (_entities(events, "bid", auction="auction", bidder="bidder", price="price")
            .withWatermark("ts", "1 second"))
    top = bids.groupBy(F.window("ts", width).alias("top_window")).agg(F.max("price").alias("top"))
    return (bids.withColumn("window", F.window("ts", width))
            .join(top, (F.col("window") == F.col("top_window")) & (F.col("price") == F.col("top")))
            .select("auction", "price", "bidder", F.col("window.end").alias("window_end")))


def native_q8(events: DataFrame) -> DataFrame:
    """q8 as the reference writes it: persons and sellers each grouped per window,
    then joined on the id and the window (append mode, 1 s watermark delays)."""
    width = f"{JOIN_WINDOW_S} seconds"
    persons = (_entities(events, "person", id="id", name="name")
               .withWatermark("ts", "1 second")
               .groupBy("id", "name", F.window("ts", width).alias("p_window")).count())
    sellers = (_entities(events, "auction", seller="seller")
               .withWatermark("ts", "1 second")
               .groupBy("seller", F.window("ts", width).alias("a_window")).count())
    return (persons.join(sellers, (F.col("id") == F.col("seller"))
                         & (F.col("p_window") == F.col("a_window")))
            .select("id", "name", F.col("p_window.start").alias("window_start")))


def native_q5_join(events: DataFrame) -> DataFrame:
    """q5 as a Spark user would try it (Spark has no ranking over a stream): each
    auction's bids per HOP window, joined with their maximum per window (an aggregate
    chained after the first).  Spark plans and runs it, and emits no row: the counts
    reach the join a micro-batch before their maximum does, already behind its
    watermark (BENCHMARKS.md)."""
    bids = _entities(events, "bid", auction="auction").withWatermark("ts", "1 second")
    counts = bids.groupBy("auction", F.window("ts", f"{HOT_WIDTH_S} seconds",
                                              f"{HOT_SLIDE_S} seconds")).count()
    top = counts.groupBy(F.col("window").alias("top_window")).agg(F.max("count").alias("top"))
    return (counts.join(top, (F.col("window") == F.col("top_window"))
                        & (F.col("count") >= F.col("top")))
            .select("auction", F.col("count").alias("num"),
                    F.col("window.end").alias("window_end")))


#: The Nexmark join queries native Spark can run with Spate's results (q4 and q6 it cannot).
NATIVE_QUERIES: dict[str, Callable[[DataFrame], DataFrame]] = {
    "q3": native_q3, "q7": native_q7, "q8": native_q8}


def run_native(spark: SparkSession, stream: Stream, query: str,
               slide_s: int = 1, width_s: int = 1) -> Timing:
    if query == "stateless":
        return run_native_query(spark, stream, native_stateless)
    return run_native_query(spark, stream, lambda events: native_hop(events, slide_s, width_s))


def _until_read(query: StreamingQuery, events: int) -> int:
    """Wait until ``query`` processed the batch after the one holding event ``events - 1``
    (it has none of them, but the watermark the last one advanced), stop it and return
    the events its batches held: its source never ends by itself."""
    processed: dict[int, int] = {}
    while True:
        for progress in query.recentProgress:
            source = progress["sources"][0]
            start, end = _offset(source["startOffset"]), _offset(source["endOffset"])
            processed[progress["batchId"]] = min(end, events) - min(start, events)
            if start >= events:
                query.stop()
                return sum(processed.values())
        failure = query.exception()
        if failure is not None:
            raise failure
        time.sleep(0.01)


def _offset(logged: Any) -> int:
    """The number of rows before a ``rate-micro-batch`` offset (as progress reports it)."""
    offset = json.loads(logged) if isinstance(logged, str) else logged
    return 0 if offset is None else int(offset["offset"])


def run_native_query(spark: SparkSession, stream: Stream,
                     build: Callable[[DataFrame], DataFrame],
                     collect: list[Row] | None = None, output_mode: str = "append") -> Timing:
    """Time ``build(nexmark stream)`` in ``output_mode`` to Spark's ``noop`` sink, or,
    with ``collect``, gather its rows there instead (to check them, not to time)."""
    work = Path(tempfile.mkdtemp(prefix="native-bench-"))
    try:
        started = time.perf_counter()
        writer = build(_nexmark(spark, stream)).writeStream.outputMode(output_mode)
        if collect is None:
            writer = writer.format("noop")
        else:
            writer = writer.foreachBatch(lambda batch, _: collect.extend(batch.collect()))
        running = writer.option("checkpointLocation", str(work / "checkpoint")).start()
        rows_in = _until_read(running, stream.events)
        seconds = time.perf_counter() - started
        return Timing(seconds, stream.events, rows_in)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def operator_seconds(work: Any, epochs: list[pa.Table], groups: int,
                     epoch_of: Callable[[int, list[range]], Any]) -> float:
    """Seconds per epoch of a range operator's ``work`` (a :class:`RangeWork`) over
    ``epochs`` of its input, without Spark: both key-group ranges of each epoch in
    turn, as two tasks would, state in an embedded SQLite store; ``epoch_of(number,
    ranges)`` gives each epoch's :class:`TaskEpoch`."""
    folder = Path(tempfile.mkdtemp(prefix="spate-operator-"))
    spent = 0.0
    with open_store(f"sqlite:///{folder / 'state.db'}") as store:
        state = store.pipeline("bench", "operator")
        ranges = split_key_groups(groups, 2)
        for number, rows in enumerate(epochs):
            state.begin_epoch(number, ranges)
            epoch = epoch_of(number, ranges)
            key_groups = rows.column("__kg").to_numpy()
            for owned in ranges:
                mine = rows.filter(pa.array((key_groups >= owned.start)
                                            & (key_groups < owned.stop)))
                writer = state.writer(number, owned)
                started = time.perf_counter()
                work(mine, state, writer, epoch, TaskStats())
                writer.commit()
                spent += time.perf_counter() - started
            state.commit_epoch(number, {})
    shutil.rmtree(folder, ignore_errors=True)
    return spent / len(epochs)
