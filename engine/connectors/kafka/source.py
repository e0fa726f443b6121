"""The ``kafka`` source as a Python streaming data source: exactly once.

Offsets are ``{"topic": T, "partitions": {"<id>": next_offset, ...}}``, one entry
per Kafka partition: the offset of the next record to read. Spark logs a
batch's end offset before reading it and the engine stores it with the epoch,
so a batch is a fixed offset range per partition, replayed identically after a
crash, and a pipeline resuming from its state store goes on where its last
committed epoch ended: every record is read exactly once. Spate never resumes
from a consumer group: with ``group_id`` the end offsets are committed to the
group after the epoch, for monitoring tools only.

``latestOffset`` reads each partition's high watermark (under
``read_committed``, the last stable offset: no open transaction is read into)
and admits at most ``max_records_per_batch`` offsets per batch, spread over the
partitions, so a backlog is read in several epochs. Partitions that appear
later are found there and read from their beginning.

Readers are Spark partitions: Kafka partition ``p`` is read by reader
``p mod readers`` (a reader may own several), which ``_spate_partition`` names.
Readers ``assign`` partitions (no group membership, no rebalance). Record
values are decoded by the table's format; the event time is the record's
timestamp.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any, cast

import numpy as np
import pyarrow as pa
from confluent_kafka import (
    OFFSET_INVALID,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)
from pyspark.sql import types as T
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit

from spate.engine.connectors import core
from spate.engine.connectors.core.arrow_batches import (
    arrow_schema,
    data_batch,
    timestamps_us,
)
from spate.engine.connectors.core.dead_letter import BadRecords, Letter
from spate.engine.connectors.formats.decoders import source_decoder
from spate.engine.connectors.formats.records import DEBEZIUM_JSON, FormatSpec
from spate.engine.connectors.kafka.client import (
    TOPIC,
    KafkaEndpoint,
    client_config,
    cluster_metadata,
    topic_partitions,
)
from spate.engine.python_workers import settle

log = logging.getLogger(__name__)

SOURCE_NAME = "spate_kafka"
#: The reader option holding the SASL password, apart from the settings (see connector.py).
PASSWORD_OPTION = "spate_kafka_sasl_password"
#: Records fetched per ``consume`` call and decoded per Arrow batch.
_FETCH_RECORDS = 10_000
#: Seconds a reader waits for records its range says are there.
_READ_TIMEOUT_S = 60.0
#: Consumer errors librdkafka recovers from by itself (a broker restarting, a slow link).
_PASSING_ERRORS = frozenset({KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN,
                             KafkaError._TIMED_OUT, KafkaError._RESOLVE})


class KafkaDataSource(core.SpateDataSource):
    """Registered as ``spate_kafka``; see :mod:`spate.engine.connectors.kafka.connector`."""

    source_name = SOURCE_NAME

    def streamReader(self, schema: T.StructType) -> DataSourceStreamReader:
        settings = self.settings()
        password = self.options.get(PASSWORD_OPTION)
        if password is not None:
            settings["endpoint"]["auth"]["sasl.password"] = password
        return KafkaStreamReader(settings, schema, self.start_offset())


def consumer_config(settings: dict[str, Any], what: str) -> dict[str, Any]:
    """A consumer of the source's cluster that only ever uses ``assign``, named
    ``spate-<what>-<table>`` to the brokers (their logs and quotas tell tables apart)."""
    endpoint = KafkaEndpoint.from_dict(settings["endpoint"])
    boundary = core.Boundary.from_dict(settings["boundary"])
    return client_config(endpoint, boundary, f"{what}-{settings['table']}", **{
        "group.id": settings["group_id"] or f"spate-{settings['table']}",
        "enable.auto.commit": False, "enable.auto.offset.store": False,
        "enable.partition.eof": True, "auto.offset.reset": "error",
        "isolation.level": settings["read_mode"]})


def advance(current: dict[int, int], high: dict[int, int], budget: int | None) -> dict[int, int]:
    """End offsets admitting at most ``budget`` offsets over all partitions, shared fairly."""
    end = dict(current)
    left = sum(max(0, high.get(p, o) - o) for p, o in end.items()) if budget is None else budget
    while left > 0:
        waiting = [p for p in sorted(end) if end[p] < high.get(p, end[p])]
        if not waiting:
            break
        share = max(1, left // len(waiting))
        for p in waiting:
            step = min(share, high[p] - end[p], left)
            end[p] += step
            left -= step
    return end


class KafkaStreamReader(DataSourceStreamReader):
    """Plans offset ranges on the driver; reads them on executors."""

    def __init__(self, settings: dict[str, Any], schema: T.StructType,
                 start: dict[str, Any] | None = None) -> None:
        self.settings = settings
        self.schema = schema
        self.topic: str = settings["topic"]
        self.table: str = settings["table"]
        self.start = start
        self._consumer: Consumer | None = None

    def _driver_consumer(self) -> Consumer:
        if self._consumer is None:
            endpoint = KafkaEndpoint.from_dict(self.settings["endpoint"])
            boundary = core.Boundary.from_dict(self.settings["boundary"])
            config = consumer_config(self.settings, "source")
            cluster_metadata(config, endpoint, boundary, f"kafka source '{self.table}'")
            self._consumer = Consumer(config)
        return self._consumer

    def _partitions(self) -> list[int]:
        endpoint = KafkaEndpoint.from_dict(self.settings["endpoint"])
        metadata = self._driver_consumer().list_topics(self.topic, timeout=10)
        return topic_partitions(metadata, self.topic, endpoint)

    def _watermarks(self, partition: int) -> tuple[int, int]:
        low, high = self._driver_consumer().get_watermark_offsets(
            TopicPartition(self.topic, partition), timeout=10)
        return int(low), int(high)

    def initialOffset(self) -> dict[str, Any]:
        offset = core.initial_offset(self.start, self._fresh_offset, self.table)
        if offset["topic"] != self.topic:
            raise core.ConnectorError(
                f"kafka source '{self.table}' now reads topic '{self.topic}' but its stored "
                f"offsets are of topic '{offset['topic']}'; drop the pipeline's state to start "
                "afresh", option=TOPIC.name)
        return offset

    def _fresh_offset(self) -> dict[str, Any]:
        partitions = self._partitions()
        start_from = self.settings["start_from"]
        if start_from == "group":
            offsets = self._group_offsets(partitions)
        else:
            index = 0 if start_from == "earliest" else 1
            offsets = {p: self._watermarks(p)[index] for p in partitions}
        return self._offset(offsets)

    def _group_offsets(self, partitions: list[int]) -> dict[int, int]:
        """The group's committed offsets; a partition it has none for starts at its beginning."""
        committed = self._driver_consumer().committed(
            [TopicPartition(self.topic, p) for p in partitions], timeout=10)
        return {tp.partition: tp.offset if tp.offset != OFFSET_INVALID and tp.offset >= 0
                else self._watermarks(tp.partition)[0] for tp in committed}

    def _offset(self, offsets: dict[int, int]) -> dict[str, Any]:
        return {"topic": self.topic, "partitions": {str(p): o for p, o in sorted(offsets.items())}}

    def getDefaultReadLimit(self) -> ReadLimit:
        return core.default_limit(self.settings["max_records_per_batch"])

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        current = {int(p): int(o) for p, o in start["partitions"].items()}
        for p in self._partitions():
            if p not in current:  # a new partition: read from its beginning
                current[p] = self._watermarks(p)[0]
        high = {p: self._watermarks(p)[1] for p in current}
        budget = core.max_rows(limit, self.settings["max_records_per_batch"])
        return self._offset(advance(current, high, budget))

    def records_after(self, offset: dict[str, Any]) -> int:
        """How many records the partitions hold past ``offset`` (a new partition's all):
        the run's backlog, no Spark involved."""
        current = {int(p): int(o) for p, o in offset["partitions"].items()}
        behind = 0
        for partition in self._partitions():
            low, high = self._watermarks(partition)
            behind += max(0, high - max(low, current.get(partition, low)))
        return behind

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        readers: int = self.settings["readers"]
        ranges: dict[int, list[list[int]]] = {}
        for key, stop in end["partitions"].items():
            first = start["partitions"].get(key)
            if first is not None and int(stop) > int(first):
                ranges.setdefault(int(key) % readers, []).append([int(key), int(first),
                                                                  int(stop)])
        return [InputPartition({"reader": r, "ranges": ranges[r]}) for r in sorted(ranges)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        settle()
        reader = _RangeReader(self.settings, self.schema, partition.value["reader"])
        try:
            for kafka_partition, first, stop in partition.value["ranges"]:
                yield from reader.read(kafka_partition, first, stop)
        finally:
            reader.close()

    def commit(self, end: dict[str, Any]) -> None:
        """After the epoch: its end offsets to ``group_id`` (monitoring only), if set."""
        if not self.settings["group_id"]:
            return
        offsets = [TopicPartition(self.topic, int(p), int(o))
                   for p, o in end["partitions"].items()]
        try:
            self._driver_consumer().commit(offsets=offsets, asynchronous=False)
        except KafkaException as error:
            log.warning("could not commit offsets to the consumer group",
                        extra={"table": self.table, "error": str(error)})

    def stop(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


class _RangeReader:
    """Reads and decodes offset ranges of Kafka partitions for one reader."""

    def __init__(self, settings: dict[str, Any], schema: T.StructType, reader: int) -> None:
        self.settings = settings
        self.table: str = settings["table"]
        self.topic: str = settings["topic"]
        self.reader = reader
        self.spec = FormatSpec(**settings["format"])
        self.arrow_schema = arrow_schema(schema)
        self.metadata: dict[str, str] = settings.get("metadata") or {}
        decoded = core.decoded_schema(self.arrow_schema, self.metadata)
        self.decoder = source_decoder(decoded, self.spec, settings["not_null"])
        self.bad = BadRecords(self.spec, self.arrow_schema, reader,
                              f"kafka source '{self.table}'",
                              f"in topic '{self.topic}' at {{position}}")
        # librdkafka's own fetch.wait.max.ms: a broker answers as soon as a range's records
        # are there (fetch.min.bytes is 1); a shorter wait made tansu answer with a trickle
        # of records per fetch (10,000 records took 8-25 s instead of 0.1-0.3 s).
        self.consumer = Consumer(consumer_config(settings, "source"))

    def read(self, partition: int, first: int, stop: int) -> Iterator[pa.RecordBatch]:
        decoded = (self._decode(records) for records in self._fetch(partition, first, stop))
        yield from self.bad.batches((batch, _letters(bad)) for batch, bad in decoded)

    def _fetch(self, partition: int, first: int, stop: int) -> Iterator[list[Message]]:
        """The records of ``[first, stop)`` (aborted ones and markers excluded), in chunks."""
        self.consumer.assign([TopicPartition(self.topic, partition, first)])
        deadline = time.monotonic() + _READ_TIMEOUT_S
        done = False
        while not done:
            if time.monotonic() > deadline:
                raise core.ConnectorError(f"kafka source '{self.table}': partition {partition} of "
                                          f"topic '{self.topic}' did not deliver offsets {first} "
                                          f"to {stop} within {_READ_TIMEOUT_S:.0f} s")
            chunk: list[Message] = []
            # consume() waits for as many records as asked: ask for no more than are left.
            wanted = min(_FETCH_RECORDS, max(1, stop - max(first, self._position(partition))))
            for message in self.consumer.consume(wanted, timeout=0.5):
                error = message.error()
                if error is not None:
                    done = done or self._at_end(error, message, partition, stop)
                elif (offset := message.offset() or 0) < stop:
                    chunk.append(message)
                    done = done or offset == stop - 1
                else:
                    done = True
            done = done or self._position(partition) >= stop
            if chunk:
                deadline = time.monotonic() + _READ_TIMEOUT_S
                yield chunk
        self.consumer.unassign()

    def _at_end(self, error: KafkaError, message: Message, partition: int, stop: int) -> bool:
        if error.code() == KafkaError._PARTITION_EOF:
            return (message.offset() or 0) >= stop
        if error.code() in _PASSING_ERRORS:  # librdkafka reconnects; the deadline bounds it
            log.info("kafka consumer error, retrying", extra={"table": self.table,
                                                             "error": error.str()})
            return False
        if error.code() == KafkaError._AUTO_OFFSET_RESET:
            raise core.ConnectorError(f"kafka source '{self.table}': offsets of partition "
                                      f"{partition} of topic '{self.topic}' it has yet to read "
                                      f"were deleted (retention); drop the pipeline's state to "
                                      f"start afresh, accepting the loss")
        raise core.ConnectorError(f"kafka source '{self.table}': reading topic '{self.topic}' "
                                  f"failed: {error.str()}")

    def _position(self, partition: int) -> int:
        position = self.consumer.position([TopicPartition(self.topic, partition)])[0].offset
        return int(position) if position >= 0 else -1

    def _decode(self, records: list[Message]) -> tuple[pa.RecordBatch | None,
                                                       list[tuple[Message, str]]]:
        usable, bad = self._usable(records)
        stamps = np.array([_timestamp_us(m) for m in usable], dtype=np.int64)
        if self.spec.kind == DEBEZIUM_JSON:
            columns, rows_at, problems = self._decode_runs(usable, stamps)
        else:
            columns, rows_at, problems = self._decode_all(usable)
        bad += [(usable[i], problem) for i, problem in problems]
        if not columns or len(columns[0]) == 0:
            return None, bad
        times = pa.array(stamps[rows_at], pa.int64())
        if self.metadata:
            columns = core.merge_physical(self.arrow_schema, columns,
                                          self._metadata(usable, stamps, rows_at))
        return data_batch(self.arrow_schema, columns, self.reader, times), bad

    def _metadata(self, records: list[Message], stamps: np.ndarray,
                  rows_at: np.ndarray) -> dict[str, pa.Array]:
        """The metadata columns of the rows decoded from ``records`` (row i from record
        ``rows_at[i]``), one array per column."""
        take = pa.array(rows_at, pa.int64())
        arrays: dict[str, pa.Array] = {}
        for column, key in self.metadata.items():
            if key == "offset_id":
                array = pa.array(np.array([m.offset() or 0 for m in records], np.int64))
            elif key == "partition":
                array = pa.array(np.array([m.partition() or 0 for m in records], np.int32))
            elif key == "topic":
                array = pa.array([m.topic() for m in records], pa.string())
            elif key == "timestamp":
                array = timestamps_us(stamps)
            elif key == "key":
                keys = [m.key() for m in records]
                field_type = self.arrow_schema.field(column).type
                array = core.utf8(keys) if pa.types.is_string(field_type) else pa.array(
                    keys, pa.binary())
            else:  # headers
                array = core.headers_array([_headers(m) for m in records])
            arrays[column] = array.take(take)
        return arrays

    def _usable(self, records: list[Message]) -> tuple[list[Message], list[tuple[Message, str]]]:
        """Records with a value to decode; tombstones are bad (debezium_json: skipped)."""
        usable: list[Message] = []
        bad: list[tuple[Message, str]] = []
        for message in records:
            value = message.value()
            if value is None and self.spec.kind == DEBEZIUM_JSON:
                continue  # Debezium follows a delete with a tombstone for compaction
            if value is None:
                bad.append((message, "the record has no value (a tombstone)"))
            elif not self.spec.opaque and not value.strip():
                bad.append((message, "the value is empty"))
            else:
                usable.append(message)
        return usable, bad

    def _lines(self, records: list[Message]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The values as one buffer with starts and lengths, the decoders' input; a JSON line
        break can only be whitespace, so it becomes a space."""
        values = [m.value() or b"" for m in records]
        if not self.spec.opaque:
            values = [v.replace(b"\r", b" ").replace(b"\n", b" ") for v in values]
        lengths = np.array([len(v) for v in values], dtype=np.int64)
        starts = np.zeros(len(values), dtype=np.int64)
        if len(values):
            np.cumsum(lengths[:-1] + 1, out=starts[1:])
        buf = np.frombuffer(b"\n".join(values), dtype=np.uint8)
        return buf, starts, lengths

    def _decode_all(self, records: list[Message]) -> tuple[list[pa.Array], np.ndarray,
                                                           list[tuple[int, str]]]:
        """One row per good record: the rows' record indices come from the decoder."""
        decoded = self.decoder.decode(*self._lines(records))
        if decoded.lines is not None:
            rows_at = decoded.lines
        else:
            bad_lines = {i for i, _ in decoded.bad}
            rows_at = np.array([i for i in range(len(records)) if i not in bad_lines], np.int64)
        return decoded.columns, rows_at, decoded.bad

    def _decode_runs(self, records: list[Message], stamps: np.ndarray
                     ) -> tuple[list[pa.Array], np.ndarray, list[tuple[int, str]]]:
        """Change envelopes unroll into one or two rows: decode runs of records with the same
        timestamp, whose rows all take it."""
        parts: list[list[pa.Array]] = []
        rows_at: list[np.ndarray] = []
        bad: list[tuple[int, str]] = []
        edges = np.flatnonzero(np.diff(stamps)) + 1 if len(stamps) else np.zeros(0, np.int64)
        for run in np.split(np.arange(len(records)), edges):
            if not len(run):
                continue
            decoded = self.decoder.decode(*self._lines([records[i] for i in run]))
            bad += [(int(run[i]), problem) for i, problem in decoded.bad]
            if decoded.num_rows:
                parts.append(decoded.columns)
                rows_at.append(np.full(decoded.num_rows, run[0], dtype=np.int64))
        if not parts:
            return [], np.zeros(0, np.int64), bad
        columns = [pa.concat_arrays([part[i] for part in parts]) for i in range(len(parts[0]))]
        return columns, np.concatenate(rows_at), bad

    def close(self) -> None:
        self.consumer.close()


def _letters(bad: list[tuple[Message, str]]) -> list[Letter]:
    """The dead letters of undecodable records (with what is wrong), in offset order."""
    ordered = sorted(bad, key=lambda item: item[0].offset() or 0)
    return [(m.value(), problem, f"partition {m.partition()} offset {m.offset()}")
            for m, problem in ordered]


def _headers(message: Message) -> list[tuple[str, bytes | None]]:
    """A record's headers in order (confluent-kafka gives a list of pairs, or None)."""
    headers = cast(list[tuple[str, bytes | None]] | None, message.headers())
    return list(headers or [])


def _timestamp_us(message: Message) -> int:
    kind, millis = message.timestamp()
    if kind == TIMESTAMP_NOT_AVAILABLE:
        return time.time_ns() // 1000
    return int(millis) * 1000
