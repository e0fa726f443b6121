"""How a UDF is called on an executor.

Spark pickles the callables built here (they hold the source text of the
UDF's file and its signature) and runs them in its Python workers.  The first call in a
worker runs the UDF file as a module, once; later calls reuse it.  Around the
tenant's function the callables apply the NULL rule, check and convert values
against the signature, and turn any exception into a :class:`UdfFailedError`
that names the UDF and carries the last frames of its traceback.
"""

from __future__ import annotations

import hashlib
import linecache
import sys
import traceback
import types
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any, cast

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_type

from spate.engine.udf.errors import UdfFailedError
from spate.engine.udf.signatures import LIST, Param, UdfFile, UdfSignature, ValueType

#: Frames of the UDF file kept in a failure message.
TRACEBACK_FRAMES = 5

_MODULES: dict[str, types.ModuleType] = {}


def load_function(file: UdfFile, signature: UdfSignature) -> Callable[..., Any]:
    """The tenant's function (running its UDF file first, once per worker process)."""
    digest = hashlib.sha256(f"{file.filename}\0{file.source}".encode()).hexdigest()[:16]
    module = _MODULES.get(digest)
    if module is None:
        module = types.ModuleType(f"spate_udfs_{digest}")
        module.__file__ = file.filename
        # Dataclasses and typing look their module up in sys.modules; tracebacks
        # read the lines from linecache, as the file itself is not on the executor.
        sys.modules[module.__name__] = module
        linecache.cache[file.filename] = (len(file.source), None, file.source.splitlines(True),
                                          file.filename)
        try:
            exec(compile(file.source, file.filename, "exec"), module.__dict__)
        except Exception as error:
            del sys.modules[module.__name__]
            raise UdfFailedError(_failure(f"loading {file.filename} failed", error,
                                          file.filename)) from None
        _MODULES[digest] = module
    function = getattr(module, signature.function, None)
    if not callable(function):
        raise UdfFailedError(f"UDF '{signature.name}': {file.filename} defines no "
                             f"function '{signature.function}' when run")
    return cast(Callable[..., Any], function)


def scalar_call(file: UdfFile, signature: UdfSignature) -> Callable[..., Any]:
    """The per-row callable: a NULL for a plain ``T`` parameter makes the result NULL."""

    def call(*args: Any) -> Any:
        if any(value is None and not param.type.nullable
               for value, param in zip(args, signature.params, strict=True)):
            return None
        values = [_argument(signature, param.name, param.type, value)
                  for value, param in zip(args, signature.params, strict=True)]
        return _invoke(file, signature, values)

    return call


def aggregate_call(file: UdfFile, signature: UdfSignature) -> Callable[..., Any]:
    """The callable that applies an aggregate UDF to a window's collected rows.

    Each row holds one value per argument; a row with a NULL for a plain
    ``list[T]`` parameter is skipped, as SQL aggregates skip NULLs.
    """

    def call(rows: Sequence[Sequence[Any]] | None) -> Any:
        columns: list[list[Any]] = [[] for _ in signature.params]
        for row in rows or ():
            values = tuple(row)
            if any(value is None and not param.type.nullable
                   for value, param in zip(values, signature.params, strict=True)):
                continue
            for column, value, param in zip(columns, values, signature.params, strict=True):
                column.append(_argument(signature, param.name, param.type, value))
        return _invoke(file, signature, columns)

    return call


def vectorized_call(file: UdfFile, signature: UdfSignature) -> Callable[..., Any]:
    """The per-batch callable: Arrow arrays in, one array of the same length out.

    Arrays arrive as Spark typed the argument; one of a type the parameter
    accepts (an integer array for ``float``) is cast to the declared type.
    """
    declared = [to_arrow_type(p.type.spark) for p in signature.params]
    result_type = to_arrow_type(signature.returns.spark)

    def call(*arrays: pa.Array) -> pa.Array:
        function = load_function(file, signature)
        inputs = [_array_argument(signature, param, array, kind)
                  for param, array, kind in zip(signature.params, arrays, declared, strict=True)]
        try:
            result = function(*inputs)
        except Exception as error:
            raise UdfFailedError(_failure(f"UDF '{signature.name}' failed", error,
                                          file.filename)) from None
        if isinstance(result, pa.ChunkedArray):
            result = result.combine_chunks()
        if not isinstance(result, pa.Array):
            raise UdfFailedError(f"UDF '{signature.name}' returned {type(result).__name__}; "
                                 "a vectorized UDF must return a pyarrow Array")
        if len(result) != len(arrays[0]):
            raise UdfFailedError(f"UDF '{signature.name}' returned {len(result)} values for "
                                 f"a batch of {len(arrays[0])} rows; return one per row")
        if result.type == result_type:
            return result
        try:
            return result.cast(result_type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
            raise UdfFailedError(f"UDF '{signature.name}' returned an array of "
                                 f"{result.type}, not convertible to its declared "
                                 f"{signature.returns.sql}: {error}") from None

    return call


def _array_argument(signature: UdfSignature, param: Param, array: pa.Array,
                    declared: pa.DataType) -> pa.Array:
    if array.type == declared:
        return array
    given = _arrow_value_type(array.type)
    if given is None or not param.type.accepts(given):
        raise UdfFailedError(f"UDF '{signature.name}': parameter '{param.name}' is declared "
                             f"{param.type.sql} but received an array of {array.type}; cast "
                             "the argument in SQL")
    return array.cast(declared)


_ARROW_FAMILIES: tuple[tuple[Callable[[pa.DataType], bool], str], ...] = (
    (pa.types.is_boolean, "bool"), (pa.types.is_integer, "int"),
    (pa.types.is_floating, "float"), (pa.types.is_decimal, "Decimal"),
    (pa.types.is_string, "str"), (pa.types.is_large_string, "str"),
    (pa.types.is_binary, "bytes"), (pa.types.is_large_binary, "bytes"),
    (pa.types.is_timestamp, "datetime"), (pa.types.is_date, "date"),
)


def _arrow_value_type(kind: pa.DataType) -> ValueType | None:
    """The UDF value type of an Arrow type (None: no UDF type holds it)."""
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        element = _arrow_value_type(kind.value_type)
        return None if element is None else ValueType(LIST, True, element)
    for test, python in _ARROW_FAMILIES:
        if test(kind):
            return ValueType(python, True)
    return None


def _invoke(file: UdfFile, signature: UdfSignature, values: list[Any]) -> Any:
    function = load_function(file, signature)
    try:
        result = function(*values)
    except Exception as error:
        raise UdfFailedError(_failure(f"UDF '{signature.name}' failed", error,
                                      file.filename)) from None
    try:
        return conform(result, signature.returns, incoming=False)
    except TypeError as mismatch:
        raise UdfFailedError(f"UDF '{signature.name}' returned {mismatch}, but it is "
                             f"declared to return {signature.returns.hint()}") from None


def _argument(signature: UdfSignature, name: str, declared: ValueType, value: Any) -> Any:
    try:
        return conform(value, declared, incoming=True)
    except TypeError as mismatch:
        raise UdfFailedError(f"UDF '{signature.name}': parameter '{name}' is declared "
                             f"{declared.hint()} but received {mismatch}; cast the "
                             "argument in SQL") from None


def _failure(headline: str, error: BaseException, filename: str) -> str:
    """``headline: Type: message`` and the last frames of the traceback in ``filename``."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == filename]
    lines = [f"{headline}: {''.join(traceback.format_exception_only(error)).strip()}"]
    for frame in frames[-TRACEBACK_FRAMES:]:
        lines.append(f'  File "{frame.filename}", line {frame.lineno}, in {frame.name}')
        if frame.line:
            lines.append(f"    {frame.line.strip()}")
    return "\n".join(lines)


# -- values -------------------------------------------------------------------------------


def conform(value: Any, declared: ValueType, *, incoming: bool) -> Any:
    """``value`` as the Python type ``declared`` names; TypeError describing a mismatch.

    ``incoming`` values come from Spark, outgoing ones from the tenant's code.
    Spark hands timestamps over as naive datetimes in the worker's local time
    and reads naive ones back the same way, while SQL TIMESTAMPs are UTC, so
    the UDF sees naive UTC datetimes and may return naive (UTC) or aware ones.
    """
    if value is None:
        if declared.nullable:
            return None
        raise TypeError("NULL (None)")
    if declared.element is not None:
        if not isinstance(value, list | tuple):
            raise TypeError(_shown(value))
        return [conform(item, declared.element, incoming=incoming) for item in value]
    converted = _CONVERTERS[declared.python](value, incoming)
    if converted is _MISMATCH:
        raise TypeError(_shown(value))
    return converted


_MISMATCH = object()


def _to_float(value: Any, _incoming: bool) -> Any:
    if isinstance(value, float):
        return value
    if isinstance(value, int | Decimal) and not isinstance(value, bool):
        return float(value)
    return _MISMATCH


def _to_decimal(value: Any, _incoming: bool) -> Any:
    if isinstance(value, Decimal):
        return value
    return Decimal(value) if isinstance(value, int) and not isinstance(value, bool) else _MISMATCH


def _to_datetime(value: Any, incoming: bool) -> Any:
    if not isinstance(value, datetime):
        return _MISMATCH
    if incoming:  # naive local (or aware) -> naive UTC
        return value.astimezone(UTC).replace(tzinfo=None)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def _exactly(*kinds: type, exclude: tuple[type, ...] = ()) -> Callable[[Any, bool], Any]:
    def convert(value: Any, _incoming: bool) -> Any:
        return value if isinstance(value, kinds) and not isinstance(value, exclude) else _MISMATCH
    return convert


_CONVERTERS: dict[str, Callable[[Any, bool], Any]] = {
    "bool": _exactly(bool),
    "int": _exactly(int, exclude=(bool,)),
    "float": _to_float,
    "Decimal": _to_decimal,
    "str": _exactly(str),
    "bytes": lambda value, _incoming: bytes(value) if isinstance(
        value, bytes | bytearray) else _MISMATCH,
    "datetime": _to_datetime,
    "date": _exactly(date, exclude=(datetime,)),
}


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60] + '...' if len(text) > 60 else text}"
