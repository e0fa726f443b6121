"""The ``kafka`` sink: each epoch's records, exactly once (default) or at least once.

An epoch's records are encoded by Spark (:func:`~.formats.encode_records`) and
produced on the executors: each Spark task produces its own rows with a
producer of its own (:func:`~.core.executor_writes.write_partitions`), so no
record passes through the driver.

``exactly_once``: the epoch's records are spread over the sink's *writers*, a
number fixed when the pipeline first opens the sink (the topic's partitions,
at most the session's parallelism) and kept in its marker. A record's writer is
a hash of its bytes and key, so a replayed epoch gives each writer the very
records it had. Writer ``w`` produces its records in one Kafka transaction with
the transactional id ``spate-<tenant>/<pipeline>/<table>-<topic>/w<w>``
(``client_configs`` cannot change it), which also commits, through
``send_offsets_to_transaction``, the epoch's number as the offset (``epoch +
1``) of partition 0 of the topic for the consumer group named like the
transactional id: a writer's records of an epoch and the epoch's number
become visible together or not at all. Before it produces, a writer reads that
offset and skips an epoch Kafka holds already. The engine commits the epoch
(with this sink's marker) after ``write_epoch`` returns, so:

- a crash before a writer's Kafka commit: the open transaction is aborted by
  the next ``init_transactions`` of its id (each writer's, and the driver's at
  ``open``, which fences any older instance of the pipeline still writing);
  the engine replays the epoch, and the writer writes it;
- a crash after some writers' Kafka commits and before the engine's commit
  (or a Spark task retried after its commit): the engine replays the epoch,
  and the writers that hold it skip it, so nothing is written twice.

A fresh pipeline (no marker) sets its writers' groups back to no epoch at
``open``: what Kafka holds is of an earlier pipeline of the same name. So the
one window where a record can be written twice is a crash between Kafka's and
the engine's commit of a new pipeline's very first epoch.

A marker written before the writers (``{"epoch": n}``, one transaction per
epoch from the driver) is honoured: the epoch that transaction's group says
Kafka holds is skipped whole.

Readers see the output exactly once with ``isolation.level=read_committed``.

``at_least_once``: each task produces its rows and flushes, without a
transaction; a replayed epoch is written again.
"""

from __future__ import annotations

import json
import logging
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import (
    Consumer,
    KafkaException,
    Producer,
    TopicPartition,
)
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spate.engine.connectors import core
from spate.engine.connectors.core.executor_writes import default_writers, write_partitions
from spate.engine.connectors.formats.records import FormatSpec, encode_records
from spate.engine.connectors.kafka.client import (
    CONNECT_TIMEOUT_S,
    KafkaEndpoint,
    client_config,
    cluster_metadata,
    topic_partitions,
)

log = logging.getLogger(__name__)

#: Seconds a transaction's commit (or a flush) may take.
_COMMIT_TIMEOUT_S = 60.0
#: librdkafka settings of a producer, never of the consumer that reads a writer's group.
_PRODUCER_ONLY = ("transactional.id", "enable.idempotence")


#: A Python worker's transactional producers and their groups' consumers, by
#: transactional id: an epoch's writer reuses the one the worker made for an earlier
#: epoch (``init_transactions`` and the connections once per worker, not per epoch).
#: Each entry also holds the settings it was made with; an entry is taken out while
#: in use and put back only after a clean commit.
_WRITERS: dict[str, tuple[str, Producer, Consumer]] = {}


def writer_id(base: str, writer: int) -> str:
    """The transactional id (and consumer group) of ``base``'s writer ``writer``."""
    return f"{base}/w{writer}"


def _group_consumer(config: dict[str, Any], group: str) -> Consumer:
    """A consumer of ``group``, never joined: reads its offset, names the group to
    ``send_offsets_to_transaction``."""
    return Consumer({key: value for key, value in config.items() if key not in _PRODUCER_ONLY}
                    | {"group.id": group, "isolation.level": "read_committed",
                       "enable.auto.commit": False})


def _epoch_of(group: Consumer, topic: str) -> int:
    """The last epoch ``group`` says Kafka holds (-1: none)."""
    committed = group.committed([TopicPartition(topic, 0)], timeout=CONNECT_TIMEOUT_S)
    offset = int(committed[0].offset)
    return offset - 1 if offset > 0 else -1


def _close(producer: Producer, group: Consumer) -> None:
    """Let go of a writer's clients (a transaction left open is aborted by the next
    ``init_transactions`` of its id)."""
    group.close()
    del producer  # librdkafka's handle goes with the object


def _record_bytes(rows: pa.Table, column: str) -> int:
    """The bytes of ``column``'s values (UTF-8 for text), NULLs counting none."""
    lengths = pc.binary_length(rows.column(column))
    return int(pc.sum(lengths).as_py() or 0)


@dataclass(frozen=True)
class _EpochWriter:
    """Produces one task's records of an epoch (a
    :class:`~.core.executor_writes.PartitionWriter`; picklable)."""

    #: the sink's name in messages (``kafka sink 'out'``) and its cluster's
    what: str
    shown: str
    topic: str
    #: the producers' librdkafka settings, without a transactional id
    config: dict[str, Any] = field(repr=False)
    epoch: int
    keyed: bool
    #: exactly_once: the writers' transactional ids are ``writer_id(base, partition)``
    base_id: str | None

    def __call__(self, partition: int, rows: pa.Table) -> list[dict[str, Any]]:
        values = rows.column("record").to_pylist()
        keys = rows.column("key").to_pylist() if self.keyed else None
        written = _record_bytes(rows, "record") + (_record_bytes(rows, "key") if self.keyed
                                                   else 0)
        if self.base_id is None:
            try:
                self._produce(Producer(self.config), values, keys)
            except KafkaException as failure:
                raise self._failed(partition, failure) from None
            return [{"writer": partition, "bytes": written}]
        transactional_id = writer_id(self.base_id, partition)
        settings = json.dumps(self.config, sort_keys=True, default=str)
        kept = _WRITERS.pop(transactional_id, None)
        if kept is not None and kept[0] != settings:
            _close(kept[1], kept[2])
            kept = None
        if kept is not None:
            try:  # another worker may have taken the id over since (fencing this one)
                skipped = self._transaction(kept[1], kept[2], values, keys)
            except Exception:  # noqa: BLE001 (a fenced producer fails in many ways)
                # Nothing of it committed, or the group says so: write afresh.
                _close(kept[1], kept[2])
            else:
                _WRITERS[transactional_id] = kept
                return [{"writer": partition, "bytes": 0 if skipped else written}]
        producer = Producer(self.config | {"transactional.id": transactional_id})
        group = _group_consumer(self.config, transactional_id)
        try:
            producer.init_transactions(CONNECT_TIMEOUT_S)  # fences any attempt before this one
            skipped = self._transaction(producer, group, values, keys)
        except KafkaException as failure:
            if failure.args[0].txn_requires_abort():
                producer.abort_transaction(_COMMIT_TIMEOUT_S)
            _close(producer, group)
            raise self._failed(partition, failure) from None
        except BaseException:
            _close(producer, group)
            raise
        _WRITERS[transactional_id] = (settings, producer, group)
        return [{"writer": partition, "bytes": 0 if skipped else written}]

    def _transaction(self, producer: Producer, group: Consumer, values: list[Any],
                     keys: list[Any] | None) -> bool:
        """Produce the records in one transaction that also commits the epoch to the
        writer's group; True: skipped, the group holds the epoch already (a retried task,
        a replayed epoch)."""
        if _epoch_of(group, self.topic) >= self.epoch:
            return True
        producer.begin_transaction()
        try:
            self._produce(producer, values, keys)
            marker = [TopicPartition(self.topic, 0, self.epoch + 1, f"spate epoch {self.epoch}")]
            producer.send_offsets_to_transaction(marker, group.consumer_group_metadata(),
                                                 _COMMIT_TIMEOUT_S)
            producer.commit_transaction(_COMMIT_TIMEOUT_S)
        except core.ConnectorError:  # a record refused: nothing of the epoch commits
            producer.abort_transaction(_COMMIT_TIMEOUT_S)
            raise
        return False

    def _failed(self, partition: int, failure: KafkaException) -> core.ConnectorError:
        return core.ConnectorError(
            f"{self.what}: writer {partition} could not write epoch {self.epoch} to the "
            f"Kafka cluster at {self.shown}: {failure.args[0].str()}")

    def _produce(self, producer: Producer, values: list[Any], keys: list[Any] | None) -> None:
        """Hand every record to ``producer`` (NULL records: tombstones) and flush; raise
        if any was refused."""
        failures: list[str] = []

        def delivered(error: Any, message: Any) -> None:
            del message
            if error is not None:
                failures.append(str(error))

        for index, value in enumerate(values):
            key = None if keys is None else keys[index]
            while True:
                try:
                    producer.produce(self.topic, value, key, on_delivery=delivered)
                    break
                except BufferError:  # the local queue is full: let it drain
                    producer.poll(0.1)
            producer.poll(0)
        if producer.flush(_COMMIT_TIMEOUT_S) > 0:
            raise core.ConnectorError(
                f"{self.what}: records were not delivered to the Kafka cluster at "
                f"{self.shown} within {_COMMIT_TIMEOUT_S:.0f} s")
        if failures:
            raise core.ConnectorError(f"{self.what}: Kafka did not take the epoch's records: "
                                      f"{failures[0]}")


@dataclass(eq=False)
class KafkaSink(core.Sink):
    """Produces an epoch's records into ``topic`` on the executors; marker ``{"epoch": n,
    "writers": w}`` (``exactly_once``) or None."""

    table: str
    topic: str
    endpoint: KafkaEndpoint
    boundary: core.Boundary
    spec: FormatSpec
    _: KW_ONLY
    exactly_once: bool
    key_field: str | None
    #: the producers' settings, checked and resolved at ``open`` (None: not open)
    _config: dict[str, Any] | None = field(default=None, init=False, repr=False)
    #: exactly_once: how many writers (transactions) an epoch's records are spread over
    _writers: int = field(default=1, init=False, repr=False)
    #: the last epoch Kafka held at ``open`` (exactly_once), from the writers' groups
    _written_epoch: int = field(default=-1, init=False, repr=False)
    #: the last epoch a marker from before the writers says Kafka holds: skipped whole
    _legacy_epoch: int = field(default=-1, init=False, repr=False)

    @property
    def epoch_in_kafka(self) -> int:
        """The last epoch any writer held when the sink opened (exactly_once; -1: none
        or at_least_once)."""
        return max(self._written_epoch, self._legacy_epoch)

    @property
    def writers(self) -> int:
        """How many transactions an epoch's records are spread over (exactly_once)."""
        return self._writers

    @property
    def transactional_id(self) -> str:
        """One per pipeline and sink table (and topic), stable across restarts: writer
        ``w``'s id is :func:`writer_id` of it."""
        owner = f"{self.pipeline}/" if self.pipeline else ""
        return f"spate-{owner}{self.table}-{self.topic}"

    def _what(self) -> str:
        return f"kafka sink '{self.table}'"

    def open(self, marker: Any | None) -> None:
        config = client_config(self.endpoint, self.boundary, f"sink-{self.table}",
                               **{"enable.idempotence": True})
        metadata = cluster_metadata(config, self.endpoint, self.boundary, self._what(),
                                    self.topic)
        partitions = topic_partitions(metadata, self.topic, self.endpoint)
        if self.exactly_once:
            if marker is not None and "writers" in marker:
                self._writers = int(marker["writers"])
            else:
                self._writers = max(1, min(len(partitions), default_writers()))
            if marker is not None and "writers" not in marker:
                self._legacy_epoch = self._fence(config, self.transactional_id, reset=False)
            epochs = [self._fence(config, writer_id(self.transactional_id, w),
                                  reset=marker is None) for w in range(self._writers)]
            self._written_epoch = max(epochs)
        self._config = config
        log.info("kafka sink opened", extra={"table": self.table, "topic": self.topic,
                                             "marker": marker, "writers": self._writers,
                                             "epoch_in_kafka": self.epoch_in_kafka})

    def _fence(self, config: dict[str, Any], transactional_id: str, reset: bool) -> int:
        """Fence every older producer of ``transactional_id`` (aborting its open
        transaction); return the last epoch its group says Kafka holds, after setting
        it back to none if ``reset``."""
        producer = Producer(config | {"transactional.id": transactional_id})
        group = _group_consumer(config, transactional_id)
        try:
            producer.init_transactions(CONNECT_TIMEOUT_S)
            if reset:
                group.commit(offsets=[TopicPartition(self.topic, 0, 0)], asynchronous=False)
                return -1
            return _epoch_of(group, self.topic)
        except KafkaException as failure:
            raise core.ConnectorError(
                f"{self._what()}: could not take over its transactions on the Kafka cluster "
                f"at {self.endpoint.shown}: {failure.args[0].str()}") from None
        finally:
            group.close()
            producer.flush(CONNECT_TIMEOUT_S)

    def write_epoch(self, epoch: int, df: DataFrame) -> dict[str, int] | None:
        if self._config is None:
            raise core.ConnectorError(f"{self._what()} written before open()")
        if self.exactly_once and epoch <= self._legacy_epoch:
            log.info("epoch already in Kafka: skipped", extra={"table": self.table,
                                                              "epoch": epoch})
            self.epoch_bytes = 0
            return self._marker(epoch)
        records = encode_records(df, self.spec, self.key_field)
        if self.exactly_once:  # a record's writer: a function of the record alone
            records = records.repartition(self._writers, *[F.col(c) for c in records.columns])
        writer = _EpochWriter(self._what(), self.endpoint.shown, self.topic, self._config, epoch,
                              self.key_field is not None,
                              self.transactional_id if self.exactly_once else None)
        reports = write_partitions(records, writer)  # a task's ConnectorError names the sink
        self.epoch_bytes = sum(int(report["bytes"]) for report in reports)
        return self._marker(epoch) if self.exactly_once else None

    def _marker(self, epoch: int) -> dict[str, int]:
        return {"epoch": epoch, "writers": self._writers}

    def close(self) -> None:
        self._config = None
