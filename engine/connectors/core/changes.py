"""Updating rows (docs/sql/updating.md) as changes: ``c``, ``u`` or ``d`` per row key and epoch.

Besides its columns an updating row carries :data:`RETRACT` (it withdraws a
row sent earlier) and :data:`ROW_KEY` (the key of the row it updates).  A
key's rows in one epoch are netted first: a row added and withdrawn again is
no change, so a key created and removed within one flush yields nothing, and a
chain of replacements leaves only the first old and the last new row.  A key
left with exactly one withdrawn and one added row is then an update (``u``);
otherwise each withdrawn row is a delete (``d``) and each added row a create
(``c``).  Rows without the hidden columns (append-only input) are creates.

Everything is native Spark: two aggregations over the epoch's rows, placed by
key in one shuffle; the order of changes across keys is not defined.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from cachetools import LRUCache, cached
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spate.engine.connectors.core.base import RETRACT, ROW_KEY

OP_CREATE = "c"
OP_UPDATE = "u"
OP_DELETE = "d"


def is_updating(frame: DataFrame) -> bool:
    """Whether ``frame`` holds updating rows (it has the :data:`RETRACT` column)."""
    return RETRACT in frame.columns


def data_columns(frame: DataFrame) -> list[str]:
    """The columns of ``frame`` but the hidden ones of updating rows."""
    return [name for name in frame.columns if name not in (RETRACT, ROW_KEY)]


@dataclass(frozen=True)
class _ChangeColumns:
    """The expressions :func:`change_records` applies to rows of one schema."""

    row: Column
    absent: Column
    updating: bool
    key: Column
    sign: Column
    old: Column
    new: Column
    records: Column


# Built once per schema: the expressions depend on nothing else, and building them
# costs JVM calls per column (an epoch of a wide updating sink spent most of its driver
# time here).  Expressions are not tied to a DataFrame, so any epoch's rows take them.
# Locked: a tenant's application runs pipelines in threads.
@cached(LRUCache(maxsize=256), key=lambda schema: schema.json(), lock=threading.Lock())
def _change_columns(schema: T.StructType) -> _ChangeColumns:
    names = [name for name in schema.names if name not in (RETRACT, ROW_KEY)]
    row = F.struct(*(F.col(f"`{name}`") for name in names))
    row_type = T.StructType([T.StructField(name, schema[name].dataType, schema[name].nullable)
                             for name in names])
    absent = F.lit(None).cast(row_type)
    old, new = F.col("old"), F.col("new")
    update = F.array(F.struct(old[0].alias("before"), new[0].alias("after"),
                              F.lit(OP_UPDATE).alias("op")))
    separate = F.concat(
        F.transform(old, lambda r: F.struct(r.alias("before"), absent.alias("after"),
                                            F.lit(OP_DELETE).alias("op"))),
        F.transform(new, lambda r: F.struct(absent.alias("before"), r.alias("after"),
                                            F.lit(OP_CREATE).alias("op"))))
    return _ChangeColumns(
        row=row, absent=absent, updating=RETRACT in schema.names,
        key=_key(ROW_KEY in schema.names), sign=_sign(),
        old=_images(withdrawn=True), new=_images(withdrawn=False),
        records=F.when((F.size(old) == 1) & (F.size(new) == 1), update)
             .otherwise(separate))


def change_records(frame: DataFrame) -> DataFrame:
    """One row per change: ``before`` and ``after`` (structs of the data columns,
    NULL when absent) and ``op`` (``c``, ``u`` or ``d``)."""
    columns = _change_columns(frame.schema)
    if not columns.updating:
        return frame.select(columns.absent.alias("before"), columns.row.alias("after"),
                            F.lit(OP_CREATE).alias("op"))
    # One shuffle: rows placed by key satisfy both aggregations (by key and row, then
    # by key), where Spark would otherwise shuffle for each.  The rows of an epoch hold
    # a key a few times at most, so the partial aggregation a shuffle by (key, row)
    # would allow saves nothing.
    net = (frame.select(columns.key.alias("key"), columns.row.alias("row"),
                        columns.sign.alias("n"))
           .repartition("key")
           .groupBy("key", "row").agg(F.sum("n").alias("n"))
           .where(F.col("n") != 0))
    per_key = net.groupBy("key").agg(columns.old.alias("old"), columns.new.alias("new"))
    return per_key.select(F.explode(columns.records).alias("change")).select("change.*")


def change_rows(frame: DataFrame) -> DataFrame:
    """The rows a preview shows: append-only rows as they are; updating rows as one
    row per change, ``op`` (``c``, ``u`` or ``d``) first, then the new values (``c``,
    ``u``) or the withdrawn ones (``d``).

    The column is ``op`` unless the query has one: then underscores go before it.
    """
    if not is_updating(frame):
        return frame
    names = data_columns(frame)
    op = "op"
    while op in names:
        op = f"_{op}"
    row = F.coalesce(F.col("after"), F.col("before"))
    return change_records(frame).select(F.col("op").alias(op),
                                        *(row.getField(n).alias(n) for n in names))


def _key(keyed: bool) -> Column:
    """The row key; a row without one (or rows without the column) is a key of its own."""
    own = F.concat(F.lit("\u0000"), F.monotonically_increasing_id().cast("string"))
    if not keyed:
        return own
    return F.coalesce(F.col(ROW_KEY), own)


def _sign() -> Column:
    """-1 for a withdrawn row, +1 for an added one (a NULL flag adds)."""
    return F.when(F.coalesce(F.col(RETRACT), F.lit(False)), -1).otherwise(1)


def _images(withdrawn: bool) -> Column:
    """A key's withdrawn (or added) rows, each repeated as often as its net count says."""
    count = (-F.col("n") if withdrawn else F.col("n")).cast("int")
    return F.flatten(F.collect_list(F.when(count > 0, F.array_repeat(F.col("row"), count))))
