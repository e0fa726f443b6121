"""Registers a pipeline's UDFs in its SparkSession, and reads UDF failures back.

Every UDF becomes a temporary Spark function of its SQL name:

* scalar — a Python UDF over :func:`~spate.engine.udf.execution.scalar_call`;
* vectorized — an Arrow UDF (``pyspark.sql.functions.arrow_udf``): Spark
  hands each call a batch as one ``pyarrow.Array`` per argument;
* aggregate — a Python UDF over the window's collected argument rows
  (``ARRAY<STRUCT<a0, ...>>``), applied in the query's output SQL when the
  window fires (the window operator collects and stores the rows).

The session remembers which names Spate registered (a session setting), so
a name that Spark already knows as a built-in is refused, while the same
pipeline's UDFs can be registered again (a restarted run, the tests'
shared session).
"""

from __future__ import annotations

import warnings
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.functions import udf as python_udf
from pyspark.sql.pandas.functions import ArrowUDFType, arrow_udf

from spate.engine.udf.errors import UdfDefinitionError
from spate.engine.udf.execution import aggregate_call, scalar_call, vectorized_call
from spate.engine.udf.signatures import (
    AGGREGATE,
    SCALAR,
    VECTORIZED,
    UdfFile,
    UdfRegistry,
    UdfSignature,
)

#: Session setting listing the function names Spate registered (comma-separated).
REGISTERED_CONF = "spate.udf.registered"
_FAILURE_MARKER = "UdfFailedError: "


def register_udfs(spark: SparkSession, registry: UdfRegistry) -> None:
    """Register every UDF of ``registry`` in ``spark`` (before the query starts)."""
    registered = set(filter(None, (spark.conf.get(REGISTERED_CONF, "") or "").split(",")))
    for signature in registry:
        if signature.name not in registered and spark.catalog.functionExists(signature.name):
            raise UdfDefinitionError(
                f"UDF '{signature.name}' has the name of a Spark built-in function; "
                "rename it", signature.filename, signature.line, signature.column)
        spark.udf.register(signature.name, spark_function(registry.file(signature), signature))
        registered.add(signature.name)
    spark.conf.set(REGISTERED_CONF, ",".join(sorted(registered)))


def spark_function(file: UdfFile, signature: UdfSignature) -> Any:
    """The Spark user-defined function that runs ``signature``'s UDF from ``file`` (only
    that file travels to the executors with it)."""
    returns = signature.returns.spark
    with warnings.catch_warnings():
        # PySpark would infer the UDF type from type hints; Spate states it instead.
        warnings.simplefilter("ignore", UserWarning)
        if signature.kind == SCALAR:
            return python_udf(scalar_call(file, signature), returns)
        if signature.kind == AGGREGATE:
            return python_udf(aggregate_call(file, signature), returns)
        assert signature.kind == VECTORIZED
        return arrow_udf(vectorized_call(file, signature), returns, ArrowUDFType.SCALAR)


def failure_message(error_text: str) -> str | None:
    """The message of a UDF failure inside a Spark error's text (None if it holds none).

    Its first line names the UDF and the error; the lines after it are the
    last frames of the Python traceback in the UDF file.
    """
    start = error_text.find(_FAILURE_MARKER)
    if start < 0:
        return None
    lines = error_text[start + len(_FAILURE_MARKER):].splitlines()
    kept = [lines[0]]
    for line in lines[1:]:
        if not line.startswith("  "):
            break
        kept.append(line)
    return "\n".join(kept)
