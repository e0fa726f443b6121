"""Helpers of the delta and iceberg sink tests: their tables, an epoch's rows, read-back."""

from __future__ import annotations

import datetime as dt
import secrets
from decimal import Decimal
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from sqlalchemy import make_url

from spate.engine.connectors import ColumnDef

#: Columns of every test table: the types a lakehouse sink must carry over.
COLUMNS = (ColumnDef("id", T.LongType(), False), ColumnDef("name", T.StringType()),
           ColumnDef("at", T.TimestampType()), ColumnDef("price", T.DecimalType(10, 2)),
           ColumnDef("ok", T.BooleanType()))
PIPELINE = "acme/orders"


def rows(ids: range) -> list[tuple[Any, ...]]:
    return [(i, f"n{i}", dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=i),
             Decimal(i) / 4, i % 2 == 0) for i in ids]


def epoch_frame(spark: SparkSession, ids: range) -> DataFrame:
    schema = T.StructType([T.StructField(c.name, c.spark_type, True) for c in COLUMNS])
    return spark.createDataFrame(rows(ids), schema)


def ids_of(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def catalog_uri(database_url: str) -> str:
    """The catalog.uri of a throwaway database (postgresql+psycopg, no password)."""
    url = make_url(database_url).set(drivername="postgresql+psycopg")
    return url.render_as_string(hide_password=False)


def catalog_name() -> str:
    """A catalog of its own per run, so that reruns never meet an older table."""
    return f"spate_test_{secrets.token_hex(4)}"
