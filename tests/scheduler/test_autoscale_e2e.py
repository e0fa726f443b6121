"""Autoscaling end to end: a pipeline reading a Kafka topic with ``autoscale`` on meets a
backlog, the scheduler raises its parallelism from what the run measures (its backlog,
its busy ratio), the backlog is read faster at the higher parallelism, the parallelism
returns to the minimum once the backlog is read, and the output is exactly once.

The burst is the topic's records waiting when the pipeline starts (``earliest``): the
lag is there from the first epoch. It is 24,000 records, not millions: the test broker
(tansu) takes one record per produce request (its high watermark counts a batch as one
offset), some 5,000 records a second here. Each row's work is made heavy instead (a
SHA-256 of a 350 KB string, in Spark's own expressions), so reading the
burst at parallelism 1 takes about a minute: worth scaling.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from spate.api.models import Pipeline
from spate.scheduler.sandbox.unit import sandbox_problem
from tests.engine.connectors.kafka.kafka_broker import Broker, json_records
from tests.engine.connectors.kafka.kafka_broker import kafka_broker as kafka_broker  # noqa: F401
from tests.scheduler.conftest import running_scheduler
from tests.scheduler.harness import Harness, written_lines

pytestmark = [pytest.mark.e2e, pytest.mark.spark]

RECORDS = 24_000
PARTITIONS = 4
#: How many times a row's text is repeated before it is hashed: the row's work.
WORK = 25_000


#: A shorter cooldown than the default: the way down comes sooner, as a deployment's would
#: with SPATE_AUTOSCALE_COOLDOWN_S set.
COOLDOWN_S = 25.0


@pytest.fixture(scope="module")
def autoscaled(tmp_path_factory: pytest.TempPathFactory, redis_url: str, redis_prefix: str,
               control_url: str) -> Iterator[Harness]:
    # The broker plays the tenant's own Kafka: the policy allow-lists loopback for it.
    with running_scheduler(tmp_path_factory.mktemp("spate-autoscale"), redis_url,
                           redis_prefix, control_url, sandbox=sandbox_problem() is None,
                           applications=True, egress_allow=("127.0.0.1",),
                           autoscale_cooldown_s=COOLDOWN_S) as running:
        yield running


def _burst(broker: Broker, topic: str) -> None:
    """RECORDS records, spread over the partitions, each partition by a producer of its own."""
    def produce(partition: int) -> None:
        ids = range(partition, RECORDS, PARTITIONS)
        values = json_records([{"id": i, "pad": f"row {i:08d} "} for i in ids])
        broker.produce(topic, [(partition, value, 1_700_000_000_000 + i)
                               for i, value in zip(ids, values, strict=True)])
    producers = [threading.Thread(target=produce, args=(p,)) for p in range(PARTITIONS)]
    for producer in producers:
        producer.start()
    for producer in producers:
        producer.join()


def _sql(broker: Broker, topic: str) -> str:
    return f"""
CREATE TABLE burst (id BIGINT, pad TEXT) WITH (connector = 'kafka', type = 'source',
    bootstrap_servers = '{broker.address}', topic = '{topic}', format = 'json',
    'source.offset' = 'earliest', max_records_per_batch = '1000');
CREATE TABLE out WITH (connector = 'single_file', path = 'burst.jsonl', format = 'json',
    type = 'sink');
INSERT INTO out SELECT id, sha256(repeat(pad, {WORK})) AS digest FROM burst;
"""


class Watch:
    """Samples the pipeline's parallelism and its running job's figures every 0.5 s."""

    def __init__(self, harness: Harness, pipeline_id: str) -> None:
        self.harness, self.pipeline_id = harness, pipeline_id
        #: (seconds since the watch began, the pipeline's parallelism)
        self.parallelism: list[tuple[float, int]] = []
        #: rows read per second by the running job's epochs, by the job's parallelism
        self.rates: dict[int, list[float]] = {}
        self.backlogs: list[int] = []
        #: every epoch seen: (seconds, parallelism, rows in, busy ratio, backlog)
        self.epochs: list[tuple[float, int, Any, Any, Any]] = []
        self._seen: set[tuple[str, int]] = set()
        self.started = time.monotonic()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stopped.wait(0.5):
            with self.harness.database.sessions() as session:
                pipeline = session.get(Pipeline, self.pipeline_id)
                assert pipeline is not None
                self.parallelism.append((time.monotonic() - self.started,
                                         pipeline.parallelism))
            for job in self.harness.jobs(self.pipeline_id):
                metrics = job.metrics if isinstance(job.metrics, dict) else {}
                epoch = metrics.get("epoch")
                if job.state != "running" or not isinstance(epoch, int) \
                        or (job.id, epoch) in self._seen:
                    continue
                self._seen.add((job.id, epoch))
                self.epochs.append((round(time.monotonic() - self.started, 1), job.parallelism,
                                    metrics.get("rows_in"), metrics.get("busy_ratio"),
                                    metrics.get("backlog")))
                if isinstance(metrics.get("backlog"), int):
                    self.backlogs.append(metrics["backlog"])
                rate, rows = metrics.get("rows_in_per_s"), metrics.get("rows_in") or 0
                if isinstance(rate, int | float) and rows >= 1_000:  # a full epoch's
                    self.rates.setdefault(job.parallelism, []).append(float(rate))

    def first_at(self, parallelism: int, after_s: float = 0.0) -> float | None:
        return next((t for t, p in self.parallelism if p == parallelism and t >= after_s),
                    None)


def test_a_backlog_scales_the_pipeline_up_and_back_down_exactly_once(
        autoscaled: Harness, kafka_broker: Broker) -> None:  # noqa: F811
    topic = kafka_broker.create_topic(PARTITIONS)
    _burst(kafka_broker, topic)
    pipeline = autoscaled.add_pipeline(_sql(kafka_broker, topic), autoscale_min=1,
                                       autoscale_max=2)
    watch = Watch(autoscaled, pipeline)
    try:
        first = autoscaled.wait_for_job(pipeline, ("running",), index=0, timeout_s=180)
        running_at = time.monotonic() - watch.started
        up = autoscaled.wait_for("the parallelism to rise",
                                 lambda: watch.first_at(2), timeout_s=120)
        # It rose within wait_for's bound; how soon (printed below) is the autoscale
        # benchmark's to measure, not a test's: this machine's load moves it by seconds.
        out = autoscaled.output(pipeline, "burst.jsonl")

        def read() -> list[int]:
            lines = written_lines(out)
            return [json.loads(line)["id"] for line in lines]

        autoscaled.wait_for("the burst to be read", lambda: len(read()) >= RECORDS,
                            timeout_s=300)
        down = autoscaled.wait_for("the parallelism to return to the minimum",
                                   lambda: watch.first_at(1, after_s=up),
                                   timeout_s=COOLDOWN_S + 120)
    finally:
        watch.stop()
    ids = read()
    assert len(ids) == RECORDS and sorted(ids) == list(range(RECORDS)), "exactly once"
    jobs = autoscaled.jobs(pipeline)
    assert jobs[0].id == first.id and [job.parallelism for job in jobs[:2]] == [1, 2]

    def reasons() -> list[str]:
        return [message for job in autoscaled.jobs(pipeline)
                for _, message in autoscaled.history(job.id) if message.startswith("autoscale:")]

    # Each decision, with its reason, is an event of the job it stopped (and of the next).
    assert any("1 → 2" in reason and ("rows behind" in reason or "busy" in reason)
               for reason in reasons()), reasons()
    autoscaled.wait_for("the way down in the jobs' events", lambda: any(
        "2 → 1" in reason and "nothing left to read" in reason for reason in reasons()))
    assert max(watch.backlogs, default=0) >= 1_000, "the run reported its backlog"
    at_one, at_two = (statistics.median(watch.rates.get(p) or [0.0]) for p in (1, 2))
    ratio = at_two / at_one if at_one else float("nan")
    print(f"[autoscale] up {up - running_at:.1f} s after the lag appeared; "
          f"{at_one:,.0f} rows/s at 1, {at_two:,.0f} rows/s at 2 ({ratio:.2f}x); "
          f"down {down - up:.0f} s after going up; at {datetime.now(UTC):%H:%M:%S}")
    assert at_two > at_one, f"parallelism 2 read {ratio:.2f}x as fast as parallelism 1"
