"""The ``kinesis`` source as a Python streaming data source.

Delivery: exactly once into Spate. Offsets (:mod:`.shards`) hold the
last sequence number read of every shard. On the driver, ``latestOffset``
lists the shards and reads each readable one ahead (at most
``MAX_RECORDS_PER_SHARD`` records) to find where the batch ends; the readers
then read exactly ``(start, end]`` of their shards again with
``AFTER_SEQUENCE_NUMBER``. A batch is therefore a pure function of its two
offsets, and a replayed epoch, or a pipeline resumed from the offsets
committed with its last epoch, reads the very same records (as long as they
are still within the stream's retention).

Shards are dealt to ``parallelism`` readers by a hash of their id, so a shard
keeps its reader as the stream is resharded. Event time is each record's
``ApproximateArrivalTimestamp``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit

from spate.engine.connectors import core
from spate.engine.connectors.core.arrow_batches import (
    arrow_schema,
    data_batch,
    timestamps_us,
)
from spate.engine.connectors.core.dead_letter import BadRecords
from spate.engine.connectors.formats.decoders import Decoded, source_decoder
from spate.engine.connectors.formats.records import FormatSpec
from spate.engine.connectors.kinesis.client import KinesisEndpoint, connect, failure
from spate.engine.connectors.kinesis.shards import (
    MAX_RECORDS_PER_CALL,
    find_end,
    list_shards,
    readable_shards,
    reader_of,
    shard_iterator,
)
from spate.engine.python_workers import settle

SOURCE_NAME = "spate_kinesis"
#: The reader option carrying the credentials' secret parts: apart from the settings,
#: under a name ``spark.redaction.regex`` matches wherever Spark prints options.
SECRET_OPTION = "spate_kinesis_secret"
SECRET_FIELDS = ("secret_access_key", "session_token")
#: Records one batch reads from one shard at most.
MAX_RECORDS_PER_SHARD = 10_000


class KinesisDataSource(core.SpateDataSource):
    """Registered as ``spate_kinesis``; see :mod:`spate.engine.connectors.kinesis.connector`."""

    source_name = SOURCE_NAME

    def streamReader(self, schema: T.StructType) -> DataSourceStreamReader:
        settings = self.settings()
        settings["endpoint"] |= json.loads(self.options[SECRET_OPTION])
        return KinesisStreamReader(settings, schema, self.start_offset())


@dataclass(frozen=True)
class _Shard:
    """One shard's part of a batch: the records after ``after`` up to ``until``."""

    shard_id: str
    after: str | None
    until: str


class KinesisStreamReader(DataSourceStreamReader):
    """Finds batch ends on the driver; reads shard ranges on the executors."""

    def __init__(self, settings: dict[str, Any], schema: T.StructType,
                 start: dict[str, Any] | None = None) -> None:
        self.settings = settings
        self.schema = schema
        self.endpoint = KinesisEndpoint.from_dict(settings["endpoint"])
        self.boundary = core.Boundary.from_dict(settings["boundary"])
        self.start = start
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = connect(self.endpoint, self.boundary)
        return self._client

    def __getstate__(self) -> dict[str, Any]:
        """Shipped to executors without the driver's client (it cannot be pickled)."""
        return {**self.__dict__, "_client": None}

    def initialOffset(self) -> dict[str, Any]:
        def fresh() -> dict[str, Any]:
            latest = self.settings["offset"] == "latest"
            return {"shards": {}, "start_ms": time.time_ns() // 1_000_000 if latest else None}

        return core.initial_offset(self.start, fresh, self.settings["table"])

    def getDefaultReadLimit(self) -> ReadLimit:
        return core.default_limit(None)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        try:
            return self._latest(start, core.max_rows(limit, None))
        except Exception as error:  # noqa: BLE001 - boto3's errors, told without secrets
            raise failure(error, self.endpoint,
                          f"kinesis source '{self.settings['table']}'") from None

    def _latest(self, start: dict[str, Any], total: int | None) -> dict[str, Any]:
        stream = self.endpoint.stream_name
        read: dict[str, str | None] = dict(start["shards"])
        shards = list_shards(self.client, stream)
        readable = readable_shards(shards, read)
        per_shard = MAX_RECORDS_PER_SHARD
        if total is not None and readable:
            per_shard = max(1, min(per_shard, total // len(readable)))
        for info in readable:
            read[info.shard_id] = find_end(self.client, stream, info, read.get(info.shard_id),
                                           start["start_ms"], per_shard)
        return {"shards": read, "start_ms": start["start_ms"]}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        readers = int(self.settings["readers"])
        work: dict[int, list[list[Any]]] = {}
        for shard_id, until in sorted(end["shards"].items()):
            after = start["shards"].get(shard_id)
            if until is not None and until != after:
                work.setdefault(reader_of(shard_id, readers), []).append(
                    [shard_id, after, until])
        return [InputPartition({"reader": reader, "shards": shards,
                                "start_ms": start["start_ms"]})
                for reader, shards in sorted(work.items())]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        settle()
        value = partition.value
        shards = [_Shard(*item) for item in value["shards"]]
        yield from _PartitionReader(self.settings, self.schema, value["reader"]).read(
            shards, value["start_ms"])

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to acknowledge: the epoch's offsets are the state store's."""
        del end


class _PartitionReader:
    """Reads and decodes one reader's shard ranges of a batch."""

    def __init__(self, settings: dict[str, Any], schema: T.StructType, reader: int) -> None:
        self.table: str = settings["table"]
        self.endpoint = KinesisEndpoint.from_dict(settings["endpoint"])
        self.client = connect(self.endpoint, core.Boundary.from_dict(settings["boundary"]))
        self.spec = FormatSpec(**settings["format"])
        self.reader = reader
        self.arrow_schema = arrow_schema(schema)
        self.metadata: dict[str, str] = settings.get("metadata") or {}
        decoded = core.decoded_schema(self.arrow_schema, self.metadata)
        self.decoder = source_decoder(decoded, self.spec, settings["not_null"])
        self.bad = BadRecords(self.spec, self.arrow_schema, reader,
                              f"kinesis source '{self.table}'",
                              f"in stream '{self.endpoint.stream_name}' at {{position}}")

    def read(self, shards: list[_Shard], start_ms: int | None) -> Iterator[pa.RecordBatch]:
        for shard in shards:
            try:
                records = self._fetch(shard, start_ms)
            except Exception as error:  # noqa: BLE001 - boto3's errors, told without secrets
                raise failure(error, self.endpoint, f"kinesis source '{self.table}'") from None
            for run in _same_arrival_runs(records):
                yield from self._decode(shard.shard_id, run)
        dropped = self.bad.finish()
        if dropped is not None:
            yield dropped

    def _fetch(self, shard: _Shard, start_ms: int | None) -> list[dict[str, Any]]:
        """The records of ``(after, until]``, exactly those Kinesis had when the batch
        was planned."""
        stream = self.endpoint.stream_name
        iterator: str | None = shard_iterator(self.client, stream, shard.shard_id,
                                              shard.after, start_ms)
        until = int(shard.until)
        records: list[dict[str, Any]] = []
        while iterator is not None:
            page = self.client.get_records(ShardIterator=iterator, Limit=MAX_RECORDS_PER_CALL)
            records.extend(r for r in page["Records"] if int(r["SequenceNumber"]) <= until)
            if records and int(records[-1]["SequenceNumber"]) >= until:
                return _arrived_since(records, start_ms if shard.after is None else None)
            iterator = page.get("NextShardIterator")
            if not page["Records"] and page.get("MillisBehindLatest", 0) == 0:
                break
        if iterator is None:  # the shard ended: ``until`` was its ending sequence number
            return _arrived_since(records, start_ms if shard.after is None else None)
        raise core.ConnectorError(
            f"kinesis source '{self.table}': shard {shard.shard_id} no longer holds the "
            f"records up to sequence number {shard.until} this batch was planned with (they "
            "expired from the stream's retention, or the stream was recreated); the "
            "pipeline cannot resume exactly where it stopped. Drop its state to start "
            "afresh")

    def _decode(self, shard_id: str, run: list[dict[str, Any]]) -> Iterator[pa.RecordBatch]:
        """One run of records arriving in the same millisecond: its dead letters (if any)
        and its batch."""
        data = [_one_line(r["Data"], self.spec) for r in run]
        lengths = np.array([len(d) for d in data], dtype=np.int64)
        starts = np.concatenate(([0], np.cumsum(lengths + 1)[:-1])).astype(np.int64)
        buf = np.frombuffer(b"\n".join(data) + b"\n", dtype=np.uint8)
        decoded = self.decoder.decode(buf, starts, lengths)
        dead = self.bad.handle([(run[i]["Data"], problem,
                                 f"shard {shard_id} sequence {run[i]['SequenceNumber']}")
                                for i, problem in decoded.bad])
        if dead is not None:
            yield dead
        if not decoded.num_rows:
            return
        arrival_us = int(run[0]["ApproximateArrivalTimestamp"].timestamp() * 1_000_000)
        stamps = timestamps_us(np.full(decoded.num_rows, arrival_us, dtype=np.int64))
        columns = decoded.columns
        if self.metadata:
            columns = core.merge_physical(self.arrow_schema, columns,
                                          self._metadata(shard_id, run, decoded))
        yield data_batch(self.arrow_schema, columns, self.reader, stamps)

    def _metadata(self, shard_id: str, run: list[dict[str, Any]],
                  decoded: Decoded) -> dict[str, pa.Array]:
        """The metadata columns of the rows ``run`` decoded into, one array per column."""
        if decoded.lines is not None:
            rows_at = [int(i) for i in decoded.lines]
        else:
            bad = {i for i, _ in decoded.bad}
            rows_at = [i for i in range(len(run)) if i not in bad]
        arrays: dict[str, pa.Array] = {}
        for column, key in self.metadata.items():
            if key == "shard_id":
                arrays[column] = pa.array([shard_id] * len(rows_at), pa.string())
            else:  # sequence_number, partition_key
                field = "SequenceNumber" if key == "sequence_number" else "PartitionKey"
                arrays[column] = pa.array([str(run[i][field]) for i in rows_at], pa.string())
        return arrays


def _one_line(data: bytes, spec: FormatSpec) -> bytes:
    """A record as one line for the decoders: line breaks in a JSON record are
    whitespace (JSON strings cannot hold raw ones); raw strings keep theirs."""
    if spec.opaque:
        return data
    return data.replace(b"\r", b" ").replace(b"\n", b" ")


def _arrived_since(records: list[dict[str, Any]], start_ms: int | None
                   ) -> list[dict[str, Any]]:
    """Records a ``latest`` source reads from a shard's first batch: those that arrived
    at or after it started (servers whose AT_TIMESTAMP is coarse may return earlier ones;
    moto's returns the whole shard)."""
    if start_ms is None:
        return records
    return [r for r in records
            if r["ApproximateArrivalTimestamp"].timestamp() * 1000 >= start_ms]


def _same_arrival_runs(records: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """Consecutive records with the same arrival time (their rows share an event time)."""
    run: list[dict[str, Any]] = []
    for record in records:
        if run and record["ApproximateArrivalTimestamp"] != run[0][
                "ApproximateArrivalTimestamp"]:
            yield run
            run = []
        run.append(record)
    if run:
        yield run
