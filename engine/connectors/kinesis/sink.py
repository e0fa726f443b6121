"""The ``kinesis`` sink: each epoch's records put into a stream with PutRecords.

Delivery: at least once. Kinesis has no idempotent or transactional producer,
so an epoch replayed after a crash (the engine rewrites the epoch it had not
committed) puts its records again: consumers may see duplicates, never gaps.

Records are encoded natively by Spark (:func:`.formats.encode_records`) with
their partition keys: the value of the ``key_field`` column (taken from the
encoded JSON record, so its text is what consumers see), else an MD5 hash of
the record, which spreads rows over the shards. Each Spark task puts its own
records (:func:`~.core.executor_writes.write_partitions`: no record passes
through the driver), in its order, in requests of at most 500 records and
5 MiB (or ``sink.max_records_per_batch`` / ``sink.max_bytes_per_batch``,
Arroyo's names); entries Kinesis rejects (throttled, internal errors) are sent
again with exponential backoff, in order, until they are all accepted or the
retries run out (the epoch then fails and is replayed). A keyed query's rows of
one key come from one task, so they reach their shard in order.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spate.engine.connectors import core
from spate.engine.connectors.core.executor_writes import write_partitions
from spate.engine.connectors.formats.records import (
    RAW_STRING,
    FormatSpec,
    encode_records,
    record_bytes,
)
from spate.engine.connectors.kinesis.client import KinesisEndpoint, connect, failure

log = logging.getLogger(__name__)

MAX_RECORDS_PER_REQUEST = 500
MAX_BYTES_PER_REQUEST = 5 << 20
MAX_BYTES_PER_RECORD = 1 << 20
#: Partition keys are 1 to 256 Unicode characters.
MAX_KEY_CHARS = 256
PUT_ATTEMPTS = 8
FIRST_BACKOFF_S = 0.1
MAX_BACKOFF_S = 5.0

Entry = dict[str, Any]


@dataclass(frozen=True)
class RequestLimits:
    """The most records and bytes (data and partition keys) one PutRecords request holds:
    ``sink.max_records_per_batch`` and ``sink.max_bytes_per_batch``."""

    records: int = MAX_RECORDS_PER_REQUEST
    bytes: int = MAX_BYTES_PER_REQUEST


@dataclass(eq=False)
class KinesisSink(core.Sink):
    """Puts every epoch's records into one Kinesis stream; marker None."""

    table: str
    endpoint: KinesisEndpoint
    boundary: core.Boundary
    spec: FormatSpec
    key_field: str | None
    limits: RequestLimits
    _opened: bool = field(default=False, init=False, repr=False)

    def open(self, marker: Any | None) -> None:
        del marker  # nothing to restore: a Kinesis stream cannot be rewound
        connect(self.endpoint, self.boundary)  # a bad profile or endpoint fails the start
        self._opened = True

    def write_epoch(self, epoch: int, df: DataFrame) -> None:
        if not self._opened:
            raise core.ConnectorError(f"kinesis sink '{self.table}' written before open()")
        # Binary records cannot be searched for the key: its column is selected beside them.
        keyed = self.spec.binary and self.key_field is not None
        records = encode_records(df, self.spec, self.key_field if keyed else None)
        putter = _TaskPutter(self.table, self.endpoint, self.boundary, self.limits)
        reports = write_partitions(records.select("record", self._partition_key().alias("key")),
                                   putter)  # a task's ConnectorError names the sink
        self.epoch_bytes = sum(int(report["bytes"]) for report in reports)
        log.debug("epoch put", extra={"table": self.table, "epoch": epoch,
                                      "records": sum(int(r["records"]) for r in reports)})

    def _partition_key(self) -> Column:
        record = F.col("record")
        empty = F.lit("").cast("binary") if self.spec.binary else F.lit("")
        key: Column = F.md5(F.coalesce(record, empty))
        if self.key_field is not None:
            if self.spec.binary:
                field = F.col("key")
            elif self.spec.kind == RAW_STRING:
                field = record
            elif self.spec.updating:
                field = F.coalesce(F.get_json_object(record, f"$.after.{self.key_field}"),
                                   F.get_json_object(record, f"$.before.{self.key_field}"))
            else:
                field = F.get_json_object(record, f"$.{self.key_field}")
            usable = field.isNotNull() & (F.length(field) > 0)
            key = F.when(usable & (F.length(field) <= MAX_KEY_CHARS), field) \
                .when(usable, F.sha2(field, 256)).otherwise(key)
        return key

    def close(self) -> None:
        self._opened = False


@dataclass(frozen=True)
class _TaskPutter:
    """Puts one task's records (picklable: it runs in the tasks)."""

    table: str
    endpoint: KinesisEndpoint = field(repr=False)  # may hold the profile's keys
    boundary: core.Boundary = field(repr=False)
    limits: RequestLimits

    def __call__(self, partition: int, rows: pa.Table) -> list[dict[str, Any]]:
        del partition  # a record's partition key says which shard takes it
        entries = _entries(rows, self.table)
        try:
            client = connect(self.endpoint, self.boundary)
            for request in request_batches(entries, self.limits):
                self._put(client, request)
        except Exception as error:  # noqa: BLE001 - boto3's errors, told without secrets
            raise failure(error, self.endpoint, f"kinesis sink '{self.table}'") from None
        return [{"bytes": sum(len(e["Data"]) for e in entries), "records": len(entries)}]

    def _put(self, client: Any, entries: list[Entry]) -> None:
        """Put ``entries`` until Kinesis accepted them all, retrying the rejected ones."""
        backoff_s = FIRST_BACKOFF_S
        for _ in range(PUT_ATTEMPTS):
            answer = client.put_records(StreamName=self.endpoint.stream_name, Records=entries)
            if not answer.get("FailedRecordCount"):
                return
            entries = [entry for entry, result in zip(entries, answer["Records"], strict=True)
                       if result.get("ErrorCode")]
            log.info("retrying rejected records", extra={"table": self.table,
                                                          "rejected": len(entries)})
            time.sleep(backoff_s)
            backoff_s = min(MAX_BACKOFF_S, backoff_s * 2)
        raise core.ConnectorError(f"kinesis sink '{self.table}': Kinesis kept rejecting "
                                  f"{len(entries)} records after {PUT_ATTEMPTS} attempts "
                                  "(throttled: the stream may need more shards)")


def _entries(table: pa.Table, name: str) -> list[Entry]:
    """PutRecords entries of an epoch's encoded records, in order."""
    entries: list[Entry] = []
    for record, key in zip(table.column("record").to_pylist(),
                           table.column("key").to_pylist(), strict=True):
        data = record_bytes(record)
        if len(data) + len(key.encode()) > MAX_BYTES_PER_RECORD:
            raise core.ConnectorError(f"kinesis sink '{name}': a record of {len(data)} bytes is "
                                      "over Kinesis's 1 MiB limit per record")
        entries.append({"Data": data, "PartitionKey": key})
    return entries


def request_batches(entries: list[Entry], limits: RequestLimits | None = None
                    ) -> Iterator[list[Entry]]:
    """``entries`` in consecutive requests within ``limits`` (Kinesis's by default)."""
    limits = limits or RequestLimits()
    request: list[Entry] = []
    size = 0
    for entry in entries:
        entry_size = len(entry["Data"]) + len(entry["PartitionKey"].encode())
        if request and (len(request) == limits.records
                        or size + entry_size > limits.bytes):
            yield request
            request, size = [], 0
        request.append(entry)
        size += entry_size
    if request:
        yield request
