"""Exactly once through kill -9, for every connector at once.

One ``spate run`` job reads every broker, a folder of files and a bounded Nexmark
stream, and writes files, S3, Delta, Iceberg and stateful windows
(:mod:`tests.engine.crash_feeds` lists its branches). It is killed with SIGKILL
at parallelism 1, once it has committed an epoch; more broker records and files
arrive while it is down; it is started at parallelism 3 and killed again; then
it is started at parallelism 2 and runs until every output is complete, and is
stopped cleanly. A job process starts a JVM, which is the expensive part, so one
job serves every connector; each connector still has its own test item, so a
failure names it.

What each output must hold:

* exactly-once brokers, the files' two sinks, Delta and Iceberg: every expected
  record exactly once;
* at-least-once brokers (rabbitmq queues, mqtt): every record, repeats only of
  records that were read before a kill, at most once more per kill and no more
  of them than two epochs read (the epochs in flight when the job died);
* the HOP and SESSION windows: exactly the output of an uninterrupted run of
  the same Nexmark stream (run in-process, on the shared SparkSession).
"""

from __future__ import annotations

import os
import random
import secrets
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis
from pyspark.sql import SparkSession

from spate.engine.connectors.filesystem.object_store import PENDING_DIR
from tests.conftest import ThrowawayPostgres
from tests.engine.connectors.filesystem.lakehouse_support import catalog_name, catalog_uri
from tests.engine.connectors.filesystem.s3_support import S3Server
from tests.engine.connectors.kafka.kafka_broker import Broker, kafka_broker
from tests.engine.connectors.kinesis.kinesis_support import KinesisServer, serve_kinesis
from tests.engine.connectors.rabbitmq.rabbitmq_support import AMQP_PORT, STREAM_PORT, port_answers
from tests.engine.crash_feeds import (
    AFTER,
    AUCTIONS,
    BEFORE,
    FILES_AFTER,
    FILES_BEFORE,
    KEPT,
    KEPT_FILE_IDS,
    NEXMARK_TABLE,
    WINDOWS,
    BrokerCase,
    FileFeed,
    Lakehouse,
    kafka_case,
    kinesis_case,
    mqtt_case,
    nats_case,
    rabbitmq_queue_case,
    rabbitmq_stream_case,
    records,
    redis_case,
    windows_sql,
)
from tests.engine.crash_support import committed, spate_run
from tests.engine.harness import read_lines, run_pipeline

__all__ = ["kafka_broker"]  # the fixture, imported to be found by pytest

#: Three job processes, each a JVM reading every broker. Alone the fixture takes about
#: 5 minutes; beside the suite's other worker in CI it has taken 21, so its waits follow
#: the job's progress rather than the clock, and its setup gets twice the suite's
#: per-test timeout.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]

BROKERS = ["kafka", "mqtt", "nats", "rabbitmq_queue", "rabbitmq_stream", "redis", "kinesis"]
#: A wait gives up once the job has committed no epoch for this long: a job that is
#: slow because the machine is busy still commits, one that is stuck does not.
STALL_S = 300.0


@dataclass
class CrashRun:
    """What the job wrote, and where the kills landed."""

    out: Path
    brokers: dict[str, BrokerCase]
    files: FileFeed
    lake: Lakehouse
    reference: Path
    #: per kill: the epoch committed when it landed, and whether the outputs were complete
    kills: list[tuple[int | None, bool]] = field(default_factory=list)
    stderr: str = ""
    #: when each run started, each epoch committed and each kill landed (seconds from
    #: the first start): in a failure's message, to tell a slow job from a stuck one
    timeline: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def mark(self, event: str) -> None:
        self.timeline.append(f"{time.monotonic() - self.started:6.1f}s {event}")

    def report(self) -> str:
        """What a failing test prints: the timeline, then the runs' last stderr."""
        return "\n".join(self.timeline) + "\n" + self.stderr


def _complete(run: CrashRun) -> bool:
    """Every output holds what it should (duplicates aside: the tests check those)."""
    return (all(set(case.ids(run.out)) >= set(KEPT) for case in run.brokers.values())
            and set(run.files.s3_ids()) >= set(KEPT_FILE_IDS)
            and set(run.files.local_ids()) >= set(KEPT_FILE_IDS)
            and set(run.lake.delta_ids()) >= set(AUCTIONS)
            and set(run.lake.iceberg_ids()) >= set(AUCTIONS)
            and all(read_lines(run.out / name) == read_lines(run.reference / name)
                    for name in ("windows.jsonl", "sessions.jsonl")))


def _wait(what: Callable[[], bool], process: subprocess.Popen[bytes], run: CrashRun,
          workdir: Path, interval_s: float = 0.2) -> None:
    """Until ``what()`` holds, the job exits, or it stalls: no new epoch for
    :data:`STALL_S`. Each commit is marked on the run's timeline."""
    last = committed(workdir)[0]
    deadline = time.monotonic() + STALL_S
    while not what() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(interval_s)
        epoch = committed(workdir)[0]
        if epoch != last:
            run.mark(f"epoch {epoch} committed")
            last, deadline = epoch, time.monotonic() + STALL_S


def _kill_after_a_commit(run: CrashRun, workdir: Path, parallelism: int,
                         chooser: random.Random) -> str:
    """Start the job, kill it at a random moment after it committed an epoch of its
    own; its stderr."""
    before = committed(workdir)[0]
    run.mark(f"start at parallelism {parallelism}")
    process = spate_run(workdir, parallelism)
    _wait(lambda: committed(workdir)[0] not in (None, before), process, run, workdir)
    time.sleep(chooser.uniform(0.0, 1.0))
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    _, stderr = process.communicate(timeout=60)
    run.kills.append((committed(workdir)[0], _complete(run)))
    run.mark(f"killed after epoch {run.kills[-1][0]}")
    return stderr.decode(errors="replace")


def _add_brokers(cases: dict[str, BrokerCase], broker: Broker, redis_url: str, prefix: str,
                 kinesis: KinesisServer) -> None:
    """Every broker's case, into ``cases`` as each is made (the caller cleans up)."""
    for port in (AMQP_PORT, STREAM_PORT):
        assert port_answers(port), f"RabbitMQ does not answer on port {port}: .ci/run " \
                                   "starts it with the rabbitmq_stream plugin"
    for make in (lambda: kafka_case(broker), mqtt_case, nats_case, rabbitmq_queue_case,
                 rabbitmq_stream_case, lambda: redis_case(redis_url, prefix),
                 lambda: kinesis_case(kinesis)):
        case = make()
        cases[case.name] = case


@pytest.fixture(scope="module")
def crash_run(kafka_broker: Broker, redis_url: str, spark: SparkSession,
              throwaway_postgres: ThrowawayPostgres,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[CrashRun]:
    workdir = tmp_path_factory.mktemp("crash")
    out, reference = workdir / "out", workdir / "reference"
    for folder in (out, reference, workdir / "reference-run", workdir / "in",
                   workdir / "files-out"):
        folder.mkdir()
    # The uninterrupted run of the stateful branch, in this process.
    run_pipeline(spark, windows_sql(reference), workdir / "reference-run",
                 parallelism=2)
    moto = serve_kinesis()  # moto's server speaks S3 and Kinesis alike
    prefix = f"spate-test-{secrets.token_hex(6)}:"
    brokers: dict[str, BrokerCase] = {}
    try:
        server = next(moto)
        _add_brokers(brokers, kafka_broker, redis_url, prefix, server)
        s3 = S3Server(server.url)
        run = CrashRun(out=out, brokers=brokers, reference=reference,
                       files=FileFeed(workdir / "in", workdir / "files-out", s3,
                                      s3.create_bucket()),
                       lake=Lakehouse(workdir / "delta", catalog_uri(throwaway_postgres.create()),
                                      catalog_name(), workdir / "warehouse"))
        (workdir / "pipeline.sql").write_text(
            "".join(case.sql(out) for case in brokers.values()) + run.files.sql()
            + NEXMARK_TABLE + WINDOWS.format(out=out)
            + run.lake.sql())
        for case in brokers.values():
            case.publish(records(range(BEFORE)))
        run.files.write(range(FILES_BEFORE))

        chooser = random.Random(20261128)
        stderr = _kill_after_a_commit(run, workdir, 1, chooser)
        for case in brokers.values():
            case.publish(records(range(BEFORE, BEFORE + AFTER)))
        run.files.write(range(FILES_BEFORE, FILES_BEFORE + FILES_AFTER))
        stderr += _kill_after_a_commit(run, workdir, 3, chooser)

        run.mark("start at parallelism 2")
        last = spate_run(workdir, parallelism=2)
        _wait(lambda: _complete(run), last, run, workdir,
              interval_s=1.0)  # reading every output costs
        run.mark(f"complete: {_complete(run)}")
        time.sleep(1.0)  # a duplicate would show up in the next epochs
        if last.poll() is None:
            last.send_signal(signal.SIGTERM)  # a clean stop: the file sinks hold commits only
        run.stderr = (stderr + last.communicate(timeout=120)[1].decode(errors="replace"))[-6000:]
        yield run
    finally:
        moto.close()
        client = redis.Redis.from_url(redis_url)
        keys = list(client.scan_iter(match=f"{prefix}*"))
        if keys:
            client.delete(*keys)
        client.close()
        for case in brokers.values():
            case.cleanup()


def test_both_kills_landed_mid_stream(crash_run: CrashRun) -> None:
    assert len(crash_run.kills) == 2
    for epoch, complete in crash_run.kills:
        assert epoch is not None and not complete, \
            f"a kill did not land mid-stream ({crash_run.kills}): {crash_run.report()}"


def _exactly_once(ids: list[int], expected: list[int], name: str, stderr: str) -> None:
    counts = Counter(ids)
    missing = sorted(set(expected) - set(counts))
    assert not missing, f"{name} lost {len(missing)} records, e.g. {missing[:5]}: {stderr}"
    assert set(counts) == set(expected), f"{name} holds records it should not"
    repeated = sorted(i for i, n in counts.items() if n > 1)
    assert not repeated, f"{name} wrote {len(repeated)} records twice, e.g. {repeated[:5]}"


@pytest.mark.parametrize("name", BROKERS)
def test_a_broker_source_through_two_kills(crash_run: CrashRun, name: str) -> None:
    case = crash_run.brokers[name]
    ids = case.ids(crash_run.out)
    if case.exactly_once:
        _exactly_once(ids, KEPT, name, crash_run.report())
        return
    counts = Counter(ids)
    assert set(counts) == set(KEPT), f"{name}: {sorted(set(KEPT) - set(counts))[:5]} " \
                                     f"missing: {crash_run.report()}"
    # At least once: only the epochs in flight at the kills come again, once per kill.
    repeated = {i: n for i, n in counts.items() if n > 1}
    assert max(repeated.values(), default=1) <= 1 + len(crash_run.kills), repeated
    assert case.batch is not None and len(repeated) <= case.batch * len(crash_run.kills), \
        len(repeated)


@pytest.mark.parametrize("sink", ["s3", "local"])
def test_the_files_sinks_hold_every_record_once(crash_run: CrashRun, sink: str) -> None:
    ids = crash_run.files.s3_ids() if sink == "s3" else crash_run.files.local_ids()
    _exactly_once(ids, KEPT_FILE_IDS, f"the {sink} files", crash_run.report())


def test_no_pending_file_is_visible_under_final_names(crash_run: CrashRun) -> None:
    assert all(k.startswith("out/part-") and k.endswith(".parquet")
               for k in crash_run.files.s3_names())
    assert all(n.startswith("part-") and n.endswith(".json") or n.startswith(PENDING_DIR)
               for n in crash_run.files.local_names())


@pytest.mark.parametrize("table", ["delta", "iceberg"])
def test_a_lakehouse_table_holds_every_record_once(crash_run: CrashRun, table: str) -> None:
    ids = crash_run.lake.delta_ids() if table == "delta" else crash_run.lake.iceberg_ids()
    _exactly_once(ids, AUCTIONS, table, crash_run.report())


@pytest.mark.parametrize("name", ["windows.jsonl", "sessions.jsonl"])
def test_stateful_windows_equal_the_uninterrupted_run(crash_run: CrashRun, name: str) -> None:
    expected = read_lines(crash_run.reference / name)
    assert expected, f"the uninterrupted run wrote no {name}"
    assert read_lines(crash_run.out / name) == expected, crash_run.report()
