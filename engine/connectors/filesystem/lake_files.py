"""The ``delta`` and ``iceberg`` sinks' data files, written by the Spark tasks.

Each task writes its rows of an epoch as Parquet files of the table's schema
(:class:`DataFiles`, through :func:`.core.executor_writes.write_partitions`) and
reports each file: its path under the table's folder, its size, its row count,
its partition values and its column statistics. The driver then commits the
reported files to the table in one commit (a Delta transaction, an Iceberg
append snapshot) that also names the epoch, so the files become visible
together or not at all. A file no commit names is never read: an attempt that
died before the commit leaves such files behind, as an aborted Spark write does.

Every file name holds a random part, so no write can replace a file a commit
already named (a fresh pipeline writing the same epoch numbers into a table an
earlier one wrote, a task retried after a crash).
"""

from __future__ import annotations

import datetime
import json
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import boto3
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from botocore import UNSIGNED
from botocore.config import Config

from spate.engine.connectors.core import aws

#: The folder name Hive, Spark and Delta give a null partition value.
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
#: The column numbering a task's rows while they are cut by partition.
_ROW = "__spate_row"


@dataclass(frozen=True)
class DataFiles:
    """Writes one task's rows of one epoch as Parquet files (picklable: it runs in the
    tasks).

    ``root`` is the table's folder: a local path, or ``s3://bucket/folder`` with
    ``storage`` holding the S3 settings (delta-rs's storage option names). Files go
    to ``root/<folder><partition directories>part-<epoch>-<task>-<random>.parquet``;
    the partition columns are in the directory names, not in the files.
    """

    root: str
    schema: pa.Schema
    epoch: int
    #: a folder under the root for every file ("data/" for Iceberg), or ""
    folder: str = ""
    partition_by: tuple[str, ...] = ()
    storage: Mapping[str, str] | None = field(default=None, repr=False)

    def __call__(self, partition: int, rows: pa.Table) -> list[dict[str, Any]]:
        if rows.schema != self.schema:
            rows = rows.cast(self.schema)
        folder = _Folder(self.root, self.storage)
        reports = []
        for values, piece in _partition_pieces(rows, self.partition_by):
            directory = "".join(f"{name}={_directory_name(value)}/"
                                for name, value in zip(self.partition_by, values, strict=True))
            name = (f"{self.folder}{directory}part-{self.epoch:010d}-{partition:03d}-"
                    f"{uuid.uuid4().hex}.parquet")
            data = piece.drop_columns(list(self.partition_by))
            sink = pa.BufferOutputStream()
            pq.write_table(data, sink, compression="snappy")
            payload = sink.getvalue().to_pybytes()
            folder.write(name, payload)
            reports.append({"path": name, "bytes": len(payload), "rows": piece.num_rows,
                            "partition": dict(zip(self.partition_by, values, strict=True)),
                            "stats": statistics(data)})
        return reports


class _Folder:
    """Where a task's files go: a local folder, or an S3 prefix (written with boto3,
    one PUT per file, with the table's own keys only)."""

    def __init__(self, root: str, storage: Mapping[str, str] | None) -> None:
        self.root = root.rstrip("/")
        self._s3: Any = None
        if storage is not None:
            key = storage.get("AWS_ACCESS_KEY_ID")
            session = boto3.Session(
                aws_access_key_id=key, aws_secret_access_key=storage.get("AWS_SECRET_ACCESS_KEY"),
                aws_session_token=storage.get("AWS_SESSION_TOKEN"),
                region_name=storage.get("AWS_REGION"), botocore_session=aws.isolated_session())
            config = Config(connect_timeout=aws.CONNECT_TIMEOUT_S,
                            read_timeout=aws.READ_TIMEOUT_S,
                            retries={"max_attempts": 3, "mode": "standard"},
                            s3={"addressing_style": "path"},
                            **({} if key is not None else {"signature_version": UNSIGNED}))
            self._s3 = session.client("s3", endpoint_url=storage["AWS_ENDPOINT_URL"],
                                      config=config)
            self.bucket, _, self.prefix = self.root.split("://", 1)[1].partition("/")

    def write(self, name: str, data: bytes) -> None:
        if self._s3 is None:
            path = os.path.join(self.root, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as out:
                out.write(data)
        else:
            key = f"{self.prefix}/{name}" if self.prefix else name
            self._s3.put_object(Bucket=self.bucket, Key=key, Body=data)


def _partition_pieces(rows: pa.Table, by: tuple[str, ...]
                      ) -> list[tuple[tuple[str | None, ...], pa.Table]]:
    """``rows`` cut by the values of the columns ``by``: each distinct combination's
    values (as Delta writes partition values) and rows."""
    if not by:
        return [((), rows)]
    positions = pa.array(range(rows.num_rows), pa.int64())
    groups = (rows.select(list(by)).append_column(_ROW, positions)
              .group_by(list(by), use_threads=False).aggregate([(_ROW, "list")]))
    members = groups.column(f"{_ROW}_list").combine_chunks()
    keys = groups.select(list(by)).to_pylist()  # one per partition, not per row
    return [(tuple(partition_value(key[name]) for name in by), rows.take(members[i].values))
            for i, key in enumerate(keys)]


def partition_value(value: Any) -> str | None:
    """A partition value as text, as Delta's log holds it (None: null)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.UTC).replace(tzinfo=None)
        return str(value.strftime("%Y-%m-%d %H:%M:%S.%f"))
    if isinstance(value, bytes):
        return value.decode("latin-1")
    return str(value)  # numbers, decimals, dates (ISO), text


def _directory_name(value: str | None) -> str:
    """A partition directory's value part: every character but letters, digits and
    ``_.-~`` escaped, as Delta writers name them."""
    return NULL_PARTITION if value is None else quote(value, safe="")


def statistics(table: pa.Table) -> str:
    """A Delta ``stats`` value for a file of ``table``: its row count, each column's
    null count, and the least and greatest value of its integer and date columns
    (exact for them; other types are left out, which only costs readers skipping)."""
    nulls = {name: table.column(name).null_count for name in table.column_names}
    least: dict[str, Any] = {}
    greatest: dict[str, Any] = {}
    for name in table.column_names:
        kind = table.schema.field(name).type
        if not (pa.types.is_integer(kind) or pa.types.is_date32(kind)):
            continue
        bounds = pc.min_max(table.column(name))
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        if low is None:
            continue
        least[name] = low.isoformat() if isinstance(low, datetime.date) else low
        greatest[name] = high.isoformat() if isinstance(high, datetime.date) else high
    return json.dumps({"numRecords": table.num_rows, "minValues": least,
                       "maxValues": greatest, "nullCount": nulls})
