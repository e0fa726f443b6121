"""Python UDFs of a pipeline (docs/udfs.md).

A tenant's file imports the decorators::

    from spate.engine.udf import udf, vectorized_udf, udaf

Spate reads the file's signatures without running it (:func:`load_udfs`),
type-checks calls at planning (:mod:`spate.engine.planner.functions`), and
registers the functions in the pipeline's SparkSession (:func:`register_udfs`),
whose executors run them.
"""

from spate.engine.udf.decorators import udaf, udf, vectorized_udf
from spate.engine.udf.errors import UdfDefinitionError, UdfError, UdfFailedError
from spate.engine.udf.loader import load_udf_files, load_udfs
from spate.engine.udf.session import failure_message, register_udfs
from spate.engine.udf.signatures import UdfFile, UdfRegistry, UdfSignature, ValueType

__all__ = [
    "UdfDefinitionError",
    "UdfError",
    "UdfFailedError",
    "UdfFile",
    "UdfRegistry",
    "UdfSignature",
    "ValueType",
    "failure_message",
    "load_udf_files",
    "load_udfs",
    "register_udfs",
    "udaf",
    "udf",
    "vectorized_udf",
]
