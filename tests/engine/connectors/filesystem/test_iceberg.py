"""The ``iceberg`` sink against a real SQL catalog on PostgreSQL and a local warehouse."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyspark.sql import SparkSession

from spate.engine.connectors import CONNECTORS, ConnectorError
from spate.engine.connectors.core.boundary import Boundary
from spate.engine.connectors.filesystem.iceberg import APP_ID_PROPERTY, EPOCH_PROPERTY, IcebergSink
from tests.conftest import ThrowawayPostgres
from tests.engine.connectors.filesystem.lakehouse_support import (
    COLUMNS,
    PIPELINE,
    catalog_name,
    catalog_uri,
    epoch_frame,
    ids_of,
    rows,
)
from tests.engine.connectors.support import make_table

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def catalog_database(throwaway_postgres: ThrowawayPostgres) -> str:
    return catalog_uri(throwaway_postgres.create())


def _options(uri: str, warehouse: Path, name: str) -> dict[str, str]:
    return {"catalog.uri": uri, "catalog.name": name, "catalog.warehouse": str(warehouse),
            "namespace": "sales", "table_name": "orders"}


def _sink(options: dict[str, str]) -> IcebergSink:
    table = make_table("iceberg", "sink", COLUMNS, name="orders", **options)
    sink = CONNECTORS["iceberg"].create_sink(table, None)  # type: ignore[arg-type]
    assert isinstance(sink, IcebergSink)
    sink.pipeline = PIPELINE
    return sink


def _read(options: dict[str, str]) -> tuple[list[int], list[dict[str, str]], list[dict]]:
    catalog = SqlCatalog(options["catalog.name"], uri=options["catalog.uri"],
                         warehouse="file://" + options["catalog.warehouse"])
    try:
        table = catalog.load_table(("sales", "orders"))
        data = table.scan().to_arrow()
        summaries = [dict(s.summary.additional_properties) for s in table.snapshots()
                     if s.summary is not None]
        return ids_of(data), summaries, data.to_pylist()
    finally:
        catalog.engine.dispose()


def _epoch_files(options: dict[str, str], epoch: int) -> list[tuple[str, int]]:
    """The table's data files (name, bytes) of ``epoch``, as their names say."""
    catalog = SqlCatalog(options["catalog.name"], uri=options["catalog.uri"],
                         warehouse="file://" + options["catalog.warehouse"])
    try:
        files = catalog.load_table(("sales", "orders")).inspect.files().to_pylist()
        return [(Path(f["file_path"]).name, f["file_size_in_bytes"]) for f in files
                if Path(f["file_path"]).name.startswith(f"part-{epoch:010d}-")]
    finally:
        catalog.engine.dispose()


def test_epochs_appended_once_even_when_replayed(spark: SparkSession, tmp_path: Path,
                                                 catalog_database: str) -> None:
    options = _options(catalog_database, tmp_path / "warehouse", catalog_name())
    sink = _sink(options)
    sink.open(None)
    first = sink.write_epoch(1, epoch_frame(spark, range(0, 50)))
    # Three tasks each write their own data file; one snapshot adds them all.
    second = sink.write_epoch(2, epoch_frame(spark, range(50, 120)).repartition(3))
    assert sink.epoch_bytes is not None and sink.epoch_bytes > 0  # the Parquet files' sizes
    written = _epoch_files(options, 2)
    assert sink.epoch_bytes == sum(size for _, size in written)
    assert sorted(name.split("-")[2] for name, _ in written) == ["000", "001", "002"]
    empty = sink.write_epoch(3, epoch_frame(spark, range(0)))
    sink.close()
    assert empty["snapshot"] == second["snapshot"] != first["snapshot"]

    # A crash after the catalog's commit of epoch 2 but before the engine's.
    again = _sink(options)
    again.open(first)
    replay = again.write_epoch(2, epoch_frame(spark, range(50, 120)))
    assert replay["snapshot"] == second["snapshot"] and again.epoch_bytes == 0
    again.write_epoch(3, epoch_frame(spark, range(120, 130)))
    again.close()

    ids, summaries, data = _read(options)
    assert ids == list(range(130))
    assert [(s[APP_ID_PROPERTY], s[EPOCH_PROPERTY]) for s in summaries] == \
        [("spate-acme/orders/orders", "1"), ("spate-acme/orders/orders", "2"),
         ("spate-acme/orders/orders", "3")]
    expected = {r[0]: r for r in rows(range(130))}
    for row in data:
        assert (row["name"], row["at"], row["price"], row["ok"]) == expected[row["id"]][1:]


def test_another_writer_between_epochs_is_walked_past(spark: SparkSession, tmp_path: Path,
                                                      catalog_database: str) -> None:
    options = _options(catalog_database, tmp_path / "warehouse", catalog_name())
    ours = _sink(options)
    ours.open(None)
    marker = ours.write_epoch(7, epoch_frame(spark, range(0, 5)))
    other = _sink(options)
    other.pipeline = "acme/other"
    other.open(None)
    other.write_epoch(1, epoch_frame(spark, range(5, 8)))
    other.close()
    ours.close()
    again = _sink(options)
    again.open(marker)
    again.write_epoch(7, epoch_frame(spark, range(0, 5)))  # already there: skipped
    again.write_epoch(8, epoch_frame(spark, range(8, 9)))
    again.close()
    assert _read(options)[0] == list(range(9))


def test_options_are_checked_and_the_password_kept_out_of_messages(tmp_path: Path) -> None:
    connector = CONNECTORS["iceberg"]
    base = _options("postgresql+psycopg://postgres@127.0.0.1:5432/test", tmp_path, "c")
    with pytest.raises(ConnectorError) as error:
        connector.validate(make_table("iceberg", "sink", COLUMNS, **(
            base | {"catalog.uri": "postgresql://u:hunter2@127.0.0.1/test"})))
    assert error.value.option == "catalog.uri" and "hunter2" not in str(error.value)
    with pytest.raises(ConnectorError) as error:
        connector.validate(make_table("iceberg", "sink", COLUMNS, **(
            base | {"catalog.uri": "mysql://u@127.0.0.1/test"})))
    assert error.value.option == "catalog.uri"
    with pytest.raises(ConnectorError) as error:
        connector.validate(make_table("iceberg", "sink", COLUMNS, **(
            base | {"table_name": "a.b"})))
    assert error.value.option == "table_name"
    boundary = Boundary(storage_root=str(tmp_path))
    with pytest.raises(ConnectorError) as error:
        connector.reach(base | {"catalog.warehouse": "/etc"}, None, boundary)
    assert error.value.option == "catalog.warehouse"
    with pytest.raises(ConnectorError) as error:
        connector.reach(base | {"catalog.uri": "postgresql+psycopg://nobody_zq@127.0.0.1:5432/test",
                                "catalog.password": "hunter2", "catalog.warehouse": "w"},
                        None, boundary)
    assert "hunter2" not in str(error.value)
    assert "table sales.orders" in connector.reach(base | {"catalog.warehouse": "w"}, None,
                                                   boundary)
