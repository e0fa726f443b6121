"""The lakehouse sinks' data files as a task writes them: partitions and statistics."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from spate.engine.connectors.filesystem.lake_files import DataFiles, partition_value, statistics


def test_partition_values_are_written_as_delta_logs_hold_them() -> None:
    assert partition_value(None) is None
    assert partition_value(True) == "true"
    assert partition_value(7) == "7"
    assert partition_value(Decimal("1.50")) == "1.50"
    assert partition_value(dt.date(2024, 2, 3)) == "2024-02-03"
    at = dt.datetime(2024, 2, 3, 4, 5, 6, 7, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert partition_value(at) == "2024-02-03 02:05:06.000007"


def test_statistics_bound_integers_and_dates_and_count_nulls() -> None:
    table = pa.table({"n": pa.array([3, None, -2], pa.int64()),
                      "d": pa.array([dt.date(2024, 1, 2), dt.date(2023, 5, 6), None]),
                      "f": pa.array([1.5, float("nan"), None]),
                      "e": pa.array([None, None, None], pa.int32())})
    stats = json.loads(statistics(table))
    assert stats == {"numRecords": 3, "minValues": {"n": -2, "d": "2023-05-06"},
                     "maxValues": {"n": 3, "d": "2024-01-02"},
                     "nullCount": {"n": 1, "d": 1, "f": 1, "e": 3}}


def test_every_row_lands_in_one_file_per_partition_nan_and_null_included(
        tmp_path: Path) -> None:
    schema = pa.schema([("k", pa.float64()), ("v", pa.int64())])
    rows = pa.table({"k": [1.0, float("nan"), None, 1.0, float("nan")], "v": [1, 2, 3, 4, 5]},
                    schema=schema)
    reports = DataFiles(str(tmp_path), schema, 4, partition_by=("k",))(2, rows)
    found = {}
    for report in reports:
        assert report["path"].split("/")[1].startswith("part-0000000004-002-")
        data = pq.read_table(tmp_path / report["path"])
        assert data.column_names == ["v"] and data.num_rows == report["rows"]
        assert (tmp_path / report["path"]).stat().st_size == report["bytes"]
        found[report["partition"]["k"]] = sorted(data.column("v").to_pylist())
    assert found == {"1.0": [1, 4], "nan": [2, 5], None: [3]}
