"""The callables Spark runs on executors, called directly: the NULL rule, value
checks against the signature, and failures that name the UDF and its traceback."""

from __future__ import annotations

import textwrap
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

import pyarrow as pa
import pytest

from spate.engine.udf import UdfFailedError, UdfRegistry, load_udfs
from spate.engine.udf.execution import aggregate_call, conform, scalar_call, vectorized_call
from spate.engine.udf.signatures import ValueType

SOURCE = textwrap.dedent("""\
    from datetime import datetime, timedelta
    from typing import Optional
    import pyarrow as pa
    import pyarrow.compute as pc
    from spate.engine.udf import udaf, udf, vectorized_udf

    @udf
    def ratio(a: int, b: Optional[int]) -> Optional[float]:
        if b is None:
            return -1.0
        return helper(a, b)

    def helper(a, b):
        return a / b

    @udf
    def label(n: int) -> str:
        return None if n == 0 else n

    @udf
    def later(t: datetime) -> datetime:
        return t + timedelta(hours=1)

    @udf
    def total(xs: list[Optional[int]]) -> int:
        return sum(x or 0 for x in xs)

    @vectorized_udf(args=[float], returns=float)
    def halved(x: pa.Array) -> pa.Array:
        return pc.divide(x, 2)

    @vectorized_udf(args=[float], returns=float)
    def short(x: pa.Array) -> pa.Array:
        return x[:1]

    @udaf
    def weighted(values: list[float], weights: list[Optional[int]]) -> float:
        return sum(v * (w or 1) for v, w in zip(values, weights))
    """)


@pytest.fixture(scope="module")
def registry() -> UdfRegistry:
    return load_udfs(SOURCE, "tenant/udfs.py")


def scalar(registry: UdfRegistry, name: str) -> object:
    signature = registry.get(name)
    assert signature is not None
    return scalar_call(registry.file(signature), signature)


def test_plain_parameter_skips_nulls_and_optional_receives_none(registry: UdfRegistry) -> None:
    ratio = scalar(registry, "ratio")
    assert ratio(7, 2) == 3.5  # type: ignore[operator]
    assert ratio(None, 2) is None  # type: ignore[operator]
    assert ratio(7, None) == -1.0  # type: ignore[operator]


def test_a_raising_udf_names_itself_and_its_traceback(registry: UdfRegistry) -> None:
    with pytest.raises(UdfFailedError) as caught:
        scalar(registry, "ratio")(1, 0)  # type: ignore[operator]
    lines = str(caught.value).splitlines()
    assert lines[0] == "UDF 'ratio' failed: ZeroDivisionError: division by zero"
    # The frames in the UDF file, innermost last, with their source lines.
    assert lines[1:5] == ['  File "tenant/udfs.py", line 11, in ratio',
                          "    return helper(a, b)",
                          '  File "tenant/udfs.py", line 14, in helper',
                          "    return a / b"]


def test_results_are_checked_against_the_declared_type(registry: UdfRegistry) -> None:
    label = scalar(registry, "label")
    with pytest.raises(UdfFailedError, match=r"UDF 'label' returned int 3, but it is "
                                             r"declared to return str"):
        label(3)  # type: ignore[operator]
    with pytest.raises(UdfFailedError, match=r"returned NULL \(None\), but it is declared "
                                             r"to return str"):
        label(0)  # type: ignore[operator]


def test_arguments_of_another_type_are_refused(registry: UdfRegistry) -> None:
    with pytest.raises(UdfFailedError, match="parameter 'a' is declared int but received "
                                             "str 'x'; cast the argument in SQL"):
        scalar(registry, "ratio")("x", 1)  # type: ignore[operator]


@pytest.fixture
def local_time_zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process in a time zone other than UTC (as an executor may be)."""
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("local_time_zone")
def test_timestamps_are_utc_inside_the_udf(registry: UdfRegistry) -> None:
    later = scalar(registry, "later")
    seven_utc = datetime(2024, 1, 1, 7, 0, tzinfo=UTC)
    # Spark hands over naive datetimes in the worker's local time; the UDF sees naive
    # UTC ones and may return naive ones, read as UTC.
    naive_local = seven_utc.astimezone().replace(tzinfo=None)
    aware = seven_utc.astimezone(timezone(timedelta(hours=5)))
    for given in (naive_local, aware):
        assert later(given) == datetime(2024, 1, 1, 8, 0, tzinfo=UTC)  # type: ignore[operator]


def test_list_arguments_keep_null_elements_when_declared_optional(
        registry: UdfRegistry) -> None:
    assert scalar(registry, "total")([1, None, 2]) == 3  # type: ignore[operator]


def test_vectorized_gets_arrays_and_must_return_one_value_per_row(
        registry: UdfRegistry) -> None:
    halved, short = (vectorized_call(registry.files[0], registry.functions[n])
                     for n in ("halved", "short"))
    assert halved(pa.array([1.0, None, 3.0])).to_pylist() == [0.5, None, 1.5]
    with pytest.raises(UdfFailedError, match="returned 1 values for a batch of 2 rows"):
        short(pa.array([1.0, 2.0]))


def test_vectorized_arguments_widen_to_the_declared_type_or_are_refused(
        registry: UdfRegistry) -> None:
    halved = vectorized_call(registry.files[0], registry.functions["halved"])
    assert halved(pa.array([3, None], pa.int32())).to_pylist() == [1.5, None]
    with pytest.raises(UdfFailedError, match="parameter 'x' is declared DOUBLE but received "
                                             "an array of string"):
        halved(pa.array(["1"]))


def test_aggregate_skips_rows_with_null_in_a_plain_parameter(registry: UdfRegistry) -> None:
    weighted = aggregate_call(registry.files[0], registry.functions["weighted"])
    rows = [(1.0, 2), (None, 5), (3.0, None), (0.5, 4)]
    assert weighted(rows) == 1.0 * 2 + 3.0 + 0.5 * 4
    assert weighted([]) == 0


@pytest.mark.parametrize(("value", "declared", "expected"), [
    (3, ValueType("float"), 3.0),
    (Decimal("1.5"), ValueType("float"), 1.5),
    (3, ValueType("Decimal"), Decimal(3)),
    (bytearray(b"ab"), ValueType("bytes"), b"ab"),
    ([1, 2], ValueType("list", element=ValueType("int")), [1, 2]),
])
def test_conform_widens_like_sql(value: object, declared: ValueType, expected: object) -> None:
    assert conform(value, declared, incoming=True) == expected


@pytest.mark.parametrize(("value", "declared"), [
    (True, ValueType("int")),
    (1.5, ValueType("int")),
    (datetime(2024, 1, 1), ValueType("date")),
    ([1, None], ValueType("list", element=ValueType("int"))),
    ("1", ValueType("list", element=ValueType("str"))),
])
def test_conform_refuses_other_types(value: object, declared: ValueType) -> None:
    with pytest.raises(TypeError):
        conform(value, declared, incoming=False)


def test_a_file_failing_at_import_fails_the_call() -> None:
    broken = load_udfs("from spate.engine.udf import udf\nimport no_such_module_here\n\n"
                       "@udf\ndef f(x: int) -> int:\n    return x\n", "broken.py")
    with pytest.raises(UdfFailedError) as caught:
        scalar(broken, "f")(1)  # type: ignore[operator]
    assert str(caught.value).startswith("loading broken.py failed: ModuleNotFoundError: "
                                        "No module named 'no_such_module_here'")
    assert 'File "broken.py", line 2, in <module>' in str(caught.value)
