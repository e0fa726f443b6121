"""SQL column types (docs/sql/types.md) to Spark types."""

from __future__ import annotations

from typing import Any

from pyspark.sql import types as T
from sqlglot import exp

DType = exp.DataType.Type

_SCALARS: dict[Any, T.DataType] = {  # keys: exp.DataType.Type members
    DType.BOOLEAN: T.BooleanType(),
    DType.TINYINT: T.ByteType(),
    DType.SMALLINT: T.ShortType(),
    DType.INT: T.IntegerType(),
    DType.BIGINT: T.LongType(),
    DType.UTINYINT: T.ShortType(),
    DType.USMALLINT: T.IntegerType(),
    DType.UINT: T.LongType(),
    DType.UBIGINT: T.DecimalType(20, 0),
    DType.FLOAT: T.FloatType(),
    DType.DOUBLE: T.DoubleType(),
    DType.TEXT: T.StringType(),
    DType.VARCHAR: T.StringType(),
    DType.CHAR: T.StringType(),
    DType.NVARCHAR: T.StringType(),
    DType.JSON: T.StringType(),
    DType.JSONB: T.StringType(),
    DType.VARBINARY: T.BinaryType(),
    DType.BINARY: T.BinaryType(),
    # TIMESTAMP has no zone in SQL; Spate reads Spark's TimestampType in UTC.
    DType.TIMESTAMP: T.TimestampType(),
    DType.DATETIME: T.TimestampType(),
    DType.TIMESTAMPNTZ: T.TimestampType(),
    DType.DATE: T.DateType(),
    DType.TIME: T.StringType(),
    DType.INTERVAL: T.DayTimeIntervalType(),
}


class UnsupportedTypeError(ValueError):
    """A column type Spate cannot map; carries the offending node."""

    def __init__(self, node: exp.DataType) -> None:
        super().__init__(f"unsupported column type {node.sql()}")
        self.node = node


def spark_type(node: exp.DataType) -> T.DataType:
    """The Spark type for a SQL type node; raises :class:`UnsupportedTypeError`."""
    kind = node.this
    if kind == DType.DECIMAL:
        params = [int(p.name) for p in node.expressions]
        precision = params[0] if params else 38
        scale = params[1] if len(params) > 1 else (0 if params else 10)
        return T.DecimalType(precision, scale)
    if kind == DType.ARRAY:
        (inner,) = node.expressions
        return T.ArrayType(spark_type(inner), containsNull=True)
    if kind == DType.STRUCT:
        fields = []
        for field in node.expressions:
            if not isinstance(field, exp.ColumnDef) or not isinstance(field.kind, exp.DataType):
                raise UnsupportedTypeError(node)
            fields.append(T.StructField(field.name, spark_type(field.kind), nullable=True))
        return T.StructType(fields)
    if kind in _SCALARS:
        return _SCALARS[kind]
    raise UnsupportedTypeError(node)
