"""The ``delta`` sink against real Delta tables on the local filesystem."""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import boto3
import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from spate.engine.connectors import CONNECTORS, ConnectorError
from spate.engine.connectors.core.boundary import Boundary
from spate.engine.connectors.filesystem.delta import DeltaSink
from tests.engine.connectors.filesystem.lakehouse_support import (
    COLUMNS,
    PIPELINE,
    epoch_frame,
    ids_of,
    rows,
)
from tests.engine.connectors.kinesis.kinesis_support import (
    KEY_ID,
    REGION,
    SECRET,
    KinesisServer,
    serve_kinesis,
)
from tests.engine.connectors.support import make_table

pytestmark = [pytest.mark.e2e, pytest.mark.spark]


def _sink(path: Path | str, **options: str) -> DeltaSink:
    table = make_table("delta", "sink", COLUMNS, name="orders", path=str(path), **options)
    sink = CONNECTORS["delta"].create_sink(table, None)  # type: ignore[arg-type]
    assert isinstance(sink, DeltaSink)
    sink.pipeline = PIPELINE
    return sink


def test_epochs_appended_once_even_when_replayed(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "orders"
    sink = _sink(path, **{"partitioning.fields": "ok"})
    sink.open(None)
    first = sink.write_epoch(1, epoch_frame(spark, range(0, 50)))
    second = sink.write_epoch(2, epoch_frame(spark, range(50, 120)))
    empty = sink.write_epoch(3, epoch_frame(spark, range(0)))
    sink.close()
    assert first["epoch"] == 1 and second["version"] == first["version"] + 1
    assert empty["version"] == second["version"], "an empty epoch commits nothing"
    table = DeltaTable(str(path))
    assert table.transaction_version(sink.app_id) == 2
    assert sink.app_id == "spate-acme/orders/orders"
    assert table.metadata().partition_columns == ["ok"]

    # A crash after Delta's commit of epoch 2 but before the engine's: reopened at
    # epoch 1's marker, the engine replays 2 (skipped) then writes 3.
    again = _sink(path, **{"partitioning.fields": "ok"})
    again.open(first)
    replay = again.write_epoch(2, epoch_frame(spark, range(50, 120)))
    assert replay["version"] == second["version"] and again.epoch_bytes == 0
    again.write_epoch(3, epoch_frame(spark, range(120, 130)))
    again.close()

    back = DeltaTable(str(path)).to_pyarrow_table()
    assert ids_of(back) == list(range(130))
    expected = {r[0]: r for r in rows(range(130))}
    for row in back.to_pylist():
        want = expected[row["id"]]
        assert (row["name"], row["at"], row["price"], row["ok"]) == want[1:]


def test_a_fresh_pipeline_ignores_an_older_pipelines_epochs(spark: SparkSession,
                                                            tmp_path: Path) -> None:
    path = tmp_path / "t"
    old = _sink(path)
    old.open(None)
    old.write_epoch(5, epoch_frame(spark, range(3)))
    old.close()
    fresh = _sink(path)
    fresh.open(None)
    fresh.write_epoch(1, epoch_frame(spark, range(3, 5)))
    fresh.close()
    assert ids_of(DeltaTable(str(path)).to_pyarrow_table()) == list(range(5))


def test_each_task_writes_its_own_files_under_escaped_partition_folders(
        spark: SparkSession, tmp_path: Path) -> None:
    awkward = ["a b:c/d%e", None, "plain", "ünï"]
    data = [(i, awkward[i % 4], dt.datetime(2024, 1, 1, 0, 0, i % 3, 250_000, tzinfo=dt.UTC),
             Decimal(i), i % 2 == 0) for i in range(40)]
    frame = spark.createDataFrame(data, epoch_frame(spark, range(0)).schema).repartition(3)
    path = tmp_path / "parts"
    sink = _sink(path, **{"partitioning.fields": "name,at"})
    sink.open(None)
    sink.write_epoch(1, frame)
    sink.close()

    table = DeltaTable(str(path))
    adds = pa.table(table.get_add_actions(flatten=True)).to_pylist()
    writers = {Path(add["path"]).name.split("-")[2] for add in adds}
    assert writers == {"000", "001", "002"}, "each of the three tasks wrote its own files"
    assert sum(add["num_records"] for add in adds) == 40
    assert sink.epoch_bytes == sum(add["size_bytes"] for add in adds)
    assert {add["partition.name"] for add in adds} == set(awkward)
    back = sorted(table.to_pyarrow_table().to_pylist(), key=lambda row: row["id"])
    assert [(r["id"], r["name"], r["at"], r["price"], r["ok"]) for r in back] == data
    picked = table.to_pyarrow_table(filters=[("name", "=", "a b:c/d%e")])
    assert sorted(picked.column("id").to_pylist()) == list(range(0, 40, 4))
    assert (path / "name=a%20b%3Ac%2Fd%25e").is_dir()


def test_options_and_table_mismatches_are_actionable(tmp_path: Path) -> None:
    connector = CONNECTORS["delta"]
    with pytest.raises(ConnectorError) as error:
        connector.validate(make_table("delta", "sink", COLUMNS, path=str(tmp_path / "a"),
                                      **{"partitioning.fields": "nope"}))
    assert error.value.option == "partitioning.fields"
    with pytest.raises(ConnectorError) as error:
        connector.validate(make_table("delta", "sink", (), path=str(tmp_path / "a")))
    assert "columns declared" in str(error.value)
    with pytest.raises(ConnectorError) as error:
        connector.validate(make_table("delta", "source", COLUMNS, path=str(tmp_path / "a")))
    boundary = Boundary(storage_root=str(tmp_path))
    with pytest.raises(ConnectorError) as error:
        connector.reach({"path": "/etc"}, None, boundary)
    assert error.value.option == "path"
    assert "first write creates it" in connector.reach({"path": "lake/t"}, None, boundary)


@pytest.fixture(scope="module")
def s3_server() -> Iterator[KinesisServer]:
    """moto's server (it speaks S3 too), with a bucket ``lake``."""
    for server in serve_kinesis():
        boto3.client("s3", endpoint_url=server.url, aws_access_key_id=KEY_ID,
                     aws_secret_access_key=SECRET, region_name=REGION).create_bucket(
                         Bucket="lake")
        yield server


def test_a_table_on_s3_with_credentials_from_the_options(spark: SparkSession,
                                                         s3_server: KinesisServer) -> None:
    path = f"s3://lake/orders-{secrets.token_hex(4)}"
    s3 = {"endpoint_url": s3_server.url, "aws_region": REGION, "aws_access_key_id": KEY_ID,
          "aws_secret_access_key": SECRET}
    sink = _sink(path, **s3)
    sink.open(None)
    first = sink.write_epoch(1, epoch_frame(spark, range(0, 20)))
    sink.write_epoch(2, epoch_frame(spark, range(20, 30)))
    sink.close()
    again = _sink(path, **s3)
    again.open(first)
    again.write_epoch(2, epoch_frame(spark, range(20, 30)))  # already there: skipped
    again.close()
    storage = {"AWS_ENDPOINT_URL": s3_server.url, "AWS_REGION": REGION,
               "AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET,
               "AWS_ALLOW_HTTP": "true"}
    assert ids_of(DeltaTable(path, storage_options=storage).to_pyarrow_table()) == \
        list(range(30))
    reached = CONNECTORS["delta"].reach({"path": path, **s3}, None, Boundary())
    assert "version" in reached and SECRET not in reached
    with pytest.raises(ConnectorError) as error:
        CONNECTORS["delta"].validate(make_table("delta", "sink", COLUMNS, path="lake/t",
                                                endpoint_url=s3_server.url))
    assert error.value.option == "endpoint_url"
