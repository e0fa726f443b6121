"""The ``kafka`` sink: each epoch's records, exactly once (default) or at least once.

An epoch's records are encoded by Spark (:func:`~.formats.encode_records`),
collected to the driver and produced there by one producer per sink.

``exactly_once``: one Kafka transaction per epoch, with the transactional id
``spate-<tenant>/<pipeline>/<table>-<topic>`` (``client_configs`` cannot change it). Opening the
sink calls ``init_transactions``, which fences any older instance of the
pipeline still writing and aborts its open transaction. Each transaction also
commits, through ``send_offsets_to_transaction``, the epoch's number as the
offset (``epoch + 1``) of partition 0 of the topic for the consumer group named
like the transactional id: the epoch and its records become visible together
or not at all. The engine commits the epoch (with this sink's marker) after
``write_epoch`` returns, so:

- a crash before the Kafka commit: the open transaction is aborted by the
  next ``init_transactions``; the engine replays the epoch, which is written;
- a crash between the Kafka commit and the engine's commit: the engine
  replays the epoch, the group's offset says it is in Kafka already, and it
  is skipped, so nothing is written twice.

A fresh pipeline (no marker) ignores the epoch Kafka holds, which is of an
earlier pipeline of the same name: so the one window where a record can be
written twice is a crash between Kafka's and the engine's commit of a new
pipeline's very first epoch.

Readers see the output exactly once with ``isolation.level=read_committed``.

``at_least_once``: records are produced and flushed without a transaction; a
replayed epoch is written again.
"""

from __future__ import annotations

import logging
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from confluent_kafka import (
    Consumer,
    KafkaException,
    Producer,
    TopicPartition,
)
from pyspark.sql import DataFrame

from spate.engine.connectors import core
from spate.engine.connectors.formats.records import FormatSpec, encode_records, record_bytes
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


@dataclass(eq=False)
class KafkaSink(core.Sink):
    """Produces an epoch's records into ``topic``; marker ``{"epoch": n}`` or None."""

    table: str
    topic: str
    endpoint: KafkaEndpoint
    boundary: core.Boundary
    spec: FormatSpec
    _: KW_ONLY
    exactly_once: bool
    key_field: str | None
    _producer: Producer | None = field(default=None, init=False, repr=False)
    #: a consumer of the sink's group, never joined: reads its offset, names it to
    #: send_offsets_to_transaction
    _group: Consumer | None = field(default=None, init=False, repr=False)
    #: the last epoch Kafka holds (exactly_once), from the consumer group's offset
    _written_epoch: int = field(default=-1, init=False, repr=False)

    @property
    def epoch_in_kafka(self) -> int:
        """The last epoch Kafka holds (exactly_once; -1: none or at_least_once)."""
        return self._written_epoch

    @property
    def transactional_id(self) -> str:
        """One per pipeline and sink table (and topic), stable across restarts."""
        owner = f"{self.pipeline}/" if self.pipeline else ""
        return f"spate-{owner}{self.table}-{self.topic}"

    def _what(self) -> str:
        return f"kafka sink '{self.table}'"

    def open(self, marker: Any | None) -> None:
        settings: dict[str, Any] = {"enable.idempotence": True}
        if self.exactly_once:
            settings["transactional.id"] = self.transactional_id
        config = client_config(self.endpoint, self.boundary, f"sink-{self.table}", **settings)
        metadata = cluster_metadata(config, self.endpoint, self.boundary, self._what(),
                                    self.topic)
        topic_partitions(metadata, self.topic, self.endpoint)
        self._producer = Producer(config)
        if self.exactly_once:
            self._run(lambda p: p.init_transactions(CONNECT_TIMEOUT_S), "init_transactions")
            in_kafka = self._epoch_in_kafka(config)
            # A fresh pipeline (no marker) starts its epochs afresh: what Kafka holds is of
            # an earlier pipeline of the same name, not to be skipped.
            self._written_epoch = in_kafka if marker is not None else -1
        log.info("kafka sink opened", extra={"table": self.table, "topic": self.topic,
                                             "marker": marker,
                                             "epoch_in_kafka": self._written_epoch})

    def _epoch_in_kafka(self, config: dict[str, Any]) -> int:
        """The last epoch a committed transaction wrote (-1: none)."""
        self._group = Consumer({key: value for key, value in config.items()
                                if key not in ("transactional.id", "enable.idempotence")}
                               | {"group.id": self.transactional_id,
                                  "isolation.level": "read_committed"})
        try:
            committed = self._group.committed([TopicPartition(self.topic, 0)],
                                              timeout=CONNECT_TIMEOUT_S)
        except KafkaException:
            raise core.ConnectorError(f"{self._what()}: could not read its last epoch from the "
                                      f"Kafka cluster at {self.endpoint.shown}") from None
        offset = int(committed[0].offset)
        return offset - 1 if offset > 0 else -1

    def write_epoch(self, epoch: int, df: DataFrame) -> dict[str, int] | None:
        producer = self._require_open()
        if self.exactly_once and epoch <= self._written_epoch:
            log.info("epoch already in Kafka: skipped", extra={"table": self.table,
                                                              "epoch": epoch})
            self.epoch_bytes = 0
            return {"epoch": epoch}
        rows = encode_records(df, self.spec, self.key_field).collect()
        if self.exactly_once:
            self._run(lambda p: p.begin_transaction(), "begin_transaction")
        self.epoch_bytes = self._produce(producer, rows)
        if not self.exactly_once:
            self._flush(producer)
            return None
        assert self._group is not None
        group = self._group.consumer_group_metadata()
        marker = [TopicPartition(self.topic, 0, epoch + 1, f"spate epoch {epoch}")]
        self._run(lambda p: p.send_offsets_to_transaction(marker, group, _COMMIT_TIMEOUT_S),
                  "send_offsets_to_transaction")
        self._run(lambda p: p.commit_transaction(_COMMIT_TIMEOUT_S), "commit_transaction")
        self._written_epoch = epoch
        return {"epoch": epoch}

    def _produce(self, producer: Producer, rows: list[Any]) -> int:
        written = 0
        failures: list[str] = []

        def delivered(error: Any, message: Any) -> None:
            if error is not None:
                failures.append(str(error))

        for row in rows:
            value = None if row["record"] is None else record_bytes(row["record"])
            key = row["key"].encode("utf-8") if self.key_field and row["key"] is not None \
                else None
            written += len(value or b"") + len(key or b"")
            while True:
                try:
                    producer.produce(self.topic, value, key, on_delivery=delivered)
                    break
                except BufferError:  # the local queue is full: let it drain
                    producer.poll(0.1)
            producer.poll(0)
        self._flush(producer)
        if failures:
            raise core.ConnectorError(f"{self._what()}: Kafka did not take the epoch's records: "
                                      f"{failures[0]}")
        return written

    def _flush(self, producer: Producer) -> None:
        if producer.flush(_COMMIT_TIMEOUT_S) > 0:
            raise core.ConnectorError(f"{self._what()}: records were not delivered to the Kafka "
                                      f"cluster at {self.endpoint.shown} within "
                                      f"{_COMMIT_TIMEOUT_S:.0f} s")

    def _run(self, call: Any, name: str) -> None:
        """A transactional call; an error aborts the transaction when Kafka allows it."""
        producer = self._require_open()
        try:
            call(producer)
        except KafkaException as failure:
            error = failure.args[0]
            if error.txn_requires_abort():
                producer.abort_transaction(_COMMIT_TIMEOUT_S)
            raise core.ConnectorError(f"{self._what()}: {name} failed on the Kafka cluster at "
                                      f"{self.endpoint.shown}: {error.str()}") from None

    def _require_open(self) -> Producer:
        if self._producer is None:
            raise core.ConnectorError(f"{self._what()} written before open()")
        return self._producer

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(CONNECT_TIMEOUT_S)
            self._producer = None
        if self._group is not None:
            self._group.close()
            self._group = None
