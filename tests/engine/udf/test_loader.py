"""Reading a UDF file's signatures from its source: type hints to SQL types, the
three kinds, and located errors for files that cannot be used."""

from __future__ import annotations

import pickle
import textwrap

import pytest
from pyspark.sql import types as T

from spate.engine.udf import UdfDefinitionError, UdfFile, load_udf_files, load_udfs
from spate.engine.udf.signatures import AGGREGATE, SCALAR, VECTORIZED

HEADER = """\
from __future__ import annotations
import datetime as dt
import typing
from datetime import date, datetime
from decimal import Decimal
from typing import List, Optional, Union
import pyarrow as pa
from spate.engine.udf import udaf, udf, vectorized_udf
"""


def load(body: str) -> object:
    return load_udfs(HEADER + textwrap.dedent(body), "udfs.py")


@pytest.mark.parametrize(("hint", "spark", "sql", "nullable"), [
    ("bool", T.BooleanType(), "BOOLEAN", False),
    ("int", T.LongType(), "BIGINT", False),
    ("float", T.DoubleType(), "DOUBLE", False),
    ("str", T.StringType(), "TEXT", False),
    ("bytes", T.BinaryType(), "BYTEA", False),
    ("Decimal", T.DecimalType(38, 10), "DECIMAL", False),
    ("datetime", T.TimestampType(), "TIMESTAMP", False),
    ("dt.datetime", T.TimestampType(), "TIMESTAMP", False),
    ("date", T.DateType(), "DATE", False),
    ("Optional[int]", T.LongType(), "BIGINT", True),
    ("typing.Optional[str]", T.StringType(), "TEXT", True),
    ("float | None", T.DoubleType(), "DOUBLE", True),
    ("None | float", T.DoubleType(), "DOUBLE", True),
    ("Union[bytes, None]", T.BinaryType(), "BYTEA", True),
    ("'Optional[int]'", T.LongType(), "BIGINT", True),
    ("list[int]", T.ArrayType(T.LongType()), "BIGINT[]", False),
    ("List[Optional[str]]", T.ArrayType(T.StringType()), "TEXT[]", False),
    ("Optional[list[list[float]]]", T.ArrayType(T.ArrayType(T.DoubleType())), "DOUBLE[][]",
     True),
])
def test_type_hints_map_to_spark_and_sql_types(hint: str, spark: T.DataType, sql: str,
                                               nullable: bool) -> None:
    registry = load(f"""
        @udf
        def f(x: {hint}) -> {hint}:
            return x
        """)
    (signature,) = registry
    for value in (signature.params[0].type, signature.returns):
        assert value.spark == spark
        assert value.sql == sql
        assert value.nullable is nullable


def test_three_kinds_with_their_signatures() -> None:
    registry = load("""
        @udf
        def Ratio(a: int, b: Optional[int]) -> Optional[float]:
            return None if b is None else a / b

        def helper(x):  # not a UDF: no decorator
            return x

        @vectorized_udf(args=[float, list[int]], returns=str)
        def label(x: pa.Array, ys: pa.Array) -> pa.Array:
            return x

        @udaf
        def spread(values: list[float], weights: list[Optional[int]]) -> float:
            return max(values) - min(values)
        """)
    assert sorted(registry.functions) == ["label", "ratio", "spread"]
    ratio = registry.get("RATIO")
    assert ratio is not None and ratio.kind == SCALAR and ratio.function == "Ratio"
    assert ratio.describe() == "ratio(a: int, b: Optional[int]) -> Optional[float]"
    assert (ratio.line, ratio.column) == (11, 5)
    label = registry.get("label")
    assert label is not None and label.kind == VECTORIZED
    # Arrow arrays may hold NULLs: every vectorized type is nullable.
    assert [p.type.sql for p in label.params] == ["DOUBLE", "BIGINT[]"]
    assert all(p.type.nullable for p in label.params) and label.returns.nullable
    spread = registry.get("spread")
    assert spread is not None and spread.kind == AGGREGATE
    assert [(p.type.sql, p.type.nullable) for p in spread.params] == [
        ("DOUBLE", False), ("BIGINT", True)]
    assert spread.describe() == ("spread(values: list[float], weights: list[Optional[int]]) "
                                 "-> float")


def test_registry_pickles_for_executors() -> None:
    registry = load("""
        @udf
        def twice(x: int) -> int:
            return 2 * x
        """)
    assert pickle.loads(pickle.dumps(registry)) == registry


def file_of(name: str, body: str) -> UdfFile:
    return UdfFile(f"{name}.py", HEADER + textwrap.dedent(body))


def test_several_files_make_one_registry_each_udf_knowing_its_file() -> None:
    registry = load_udf_files([
        file_of("twice", """
            @udf
            def twice(x: int) -> int:
                return 2 * x
            """),
        file_of("total", """
            def _helper(xs: list[int]) -> int:
                return sum(xs)

            @udaf
            def total(xs: list[int]) -> int:
                return _helper(xs)
            """)])
    assert [f.filename for f in registry.files] == ["twice.py", "total.py"]
    twice, total = registry.get("twice"), registry.get("total")
    assert twice is not None and total is not None
    assert (twice.filename, total.filename) == ("twice.py", "total.py")
    assert registry.file(total) is registry.files[1]
    assert (total.line, total.column) == (HEADER.count("\n") + 6, 5)
    assert pickle.loads(pickle.dumps(registry)) == registry


def test_a_name_declared_in_two_files_is_an_error_at_the_second() -> None:
    body = """
        @udf
        def Twice(x: int) -> int:
            return 2 * x
        """
    with pytest.raises(UdfDefinitionError) as caught:
        load_udf_files([file_of("a", body), file_of("b", body.replace("Twice", "twice"))])
    error = caught.value
    assert (error.filename, error.line, error.column) == ("b.py", HEADER.count("\n") + 3, 5)
    assert error.message == ("UDF 'twice' is also defined in a.py (line "
                             f"{HEADER.count(chr(10)) + 3}); a name may be declared once")
    with pytest.raises(UdfDefinitionError, match="two UDF files have this name"):
        load_udf_files([file_of("a", body), file_of("a", body)])


def test_decorators_leave_functions_callable() -> None:
    namespace: dict[str, object] = {}
    exec(HEADER + textwrap.dedent("""
        @udf
        def twice(x: int) -> int:
            return 2 * x

        @vectorized_udf(args=[int], returns=int)
        def same(x: pa.Array) -> pa.Array:
            return x

        @udaf
        def total(xs: list[int]) -> int:
            return sum(xs)
        """), namespace)
    assert namespace["twice"](4) == 8  # type: ignore[operator]
    assert namespace["total"]([1, 2]) == 3  # type: ignore[operator]
    assert namespace["same"].__spate_udf__ == "vectorized"  # type: ignore[attr-defined]


def test_the_file_is_not_run() -> None:
    registry = load("""
        raise SystemExit("planning must not run tenant code")

        @udf
        def one(x: int) -> int:
            return 1
        """)
    assert list(registry.functions) == ["one"]


# Each case: the body after HEADER (8 lines), the error's line and column, a fragment.
ERRORS = [
    ("@udf\ndef f(x: int) -> int:\n    return (x\n", 11, 12, "syntax error"),
    ("def f(x: int) -> int:\n    return x\n", 1, 1, "declares no UDF"),
    ("@udf\ndef f(x) -> int:\n    return x\n", 10, 7, "parameter 'x' of UDF 'f' has no type hint"),
    ("@udf\ndef f(x: int):\n    return x\n", 10, 5, "no return type hint"),
    ("@udf\ndef f(x: dict[str, int]) -> int:\n    return 1\n", 10, 10,
     "unsupported type hint 'dict[str, int]'"),
    ("@udf\ndef f(x: list) -> int:\n    return 1\n", 10, 10, "needs its element type"),
    ("@udf\ndef f(x: int | str) -> int:\n    return 1\n", 10, 10, "Optional[T]"),
    ("@udf\ndef f(*xs: int) -> int:\n    return 1\n", 10, 5, "only have positional parameters"),
    ("@udf\ndef f(x: int = 1) -> int:\n    return 1\n", 10, 16, "cannot have defaults"),
    ("@udf\ndef f(x: int) -> int:\n    return 1\n@udf\ndef F(x: int) -> int:\n    return 1\n",
     13, 5, "UDF 'f' is defined twice (first at line 10)"),
    ("@udf()\ndef f(x: int) -> int:\n    return 1\n", 9, 2, "without parentheses"),
    ("@udf\nasync def f(x: int) -> int:\n    return 1\n", 10, 11, "is async"),
    ("@vectorized_udf\ndef f(x: pa.Array) -> pa.Array:\n    return x\n", 9, 2,
     "@vectorized_udf(args=[T, ...], returns=T)"),
    ("@vectorized_udf(args=[int, int], returns=int)\ndef f(x: pa.Array) -> pa.Array:\n"
     "    return x\n", 9, 22, "lists 2 type(s) but 'f' has 1 parameter(s)"),
    ("@vectorized_udf(args=[int], returns=int)\ndef f(x: int) -> pa.Array:\n    return x\n",
     10, 10, "hint its parameters and result as pa.Array"),
    ("@udaf\ndef f(x: float) -> float:\n    return x\n", 10, 7, "must be list[T]"),
    ("@udaf\ndef f() -> float:\n    return 1.0\n", 10, 5, "at least one list[T] parameter"),
]


@pytest.mark.parametrize(("body", "line", "column", "fragment"), ERRORS)
def test_located_errors(body: str, line: int, column: int, fragment: str) -> None:
    with pytest.raises(UdfDefinitionError) as caught:
        load(body)
    assert fragment in caught.value.message
    assert (caught.value.line, caught.value.column) == (line, column), caught.value
    assert str(caught.value).startswith(f"udfs.py:{line}:{column}: ")


def test_decorator_that_is_not_imported_is_named() -> None:
    with pytest.raises(UdfDefinitionError,
                       match="add 'from spate.engine.udf import udaf'") as caught:
        load_udfs("@udaf\ndef f(xs: list[int]) -> int:\n    return 0\n", "u.py")
    assert (caught.value.line, caught.value.column) == (1, 2)
