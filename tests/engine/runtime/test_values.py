"""Values between Arrow and operator state: msgpack-able, exact where kept as they are."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa

from spate.engine.runtime.values import from_python, to_python
from spate.statestore.encoding import decode, encode

UTC = dt.UTC


def test_nested_values_become_plain_and_come_back() -> None:
    kind = pa.list_(pa.struct([pa.field("at", pa.timestamp("us", tz="UTC")),
                               pa.field("day", pa.date32()),
                               pa.field("price", pa.decimal128(20, 0))]))
    rows = [[{"at": dt.datetime(2024, 1, 1, 0, 0, 0, 123457, tzinfo=UTC),
              "day": dt.date(1969, 12, 31), "price": Decimal(2**64 - 1)},
             {"at": None, "day": None, "price": None}], None, []]
    plain = to_python(pa.array(rows, kind), exact=True)
    assert plain[0][0] == {"at": 1704067200123457, "day": -1, "price": "18446744073709551615"}
    assert decode(encode(plain)) == plain  # what state holds
    assert from_python(plain, kind).to_pylist() == rows


def test_decimals_are_floats_unless_exact() -> None:
    column = pa.array([[Decimal("1.500"), None]], pa.list_(pa.decimal128(10, 3)))
    assert to_python(column) == [[1.5, None]]
    assert to_python(column, exact=True) == [["1.500", None]]
    # a float from state comes back at the DECIMAL's scale
    assert from_python([[1.5, 0.1 + 0.2]], column.type).to_pylist() == \
        [[Decimal("1.500"), Decimal("0.300")]]
    assert to_python(pa.array([Decimal("2.25")], pa.decimal128(5, 2))) == [2.25]
    assert from_python([2.25], pa.decimal128(5, 2)).type == pa.float64()


def test_naive_timestamps_are_utc() -> None:
    kind = pa.list_(pa.timestamp("us"))
    rows = [[dt.datetime(1969, 12, 31, 23, 59, 59, 999999)]]
    assert to_python(pa.array(rows, kind)) == [[-1]]
    assert from_python([[-1]], kind).to_pylist() == rows


def test_a_struct_given_as_its_fields_values_is_rebuilt_field_by_field() -> None:
    # An aggregate UDF's row comes back as a tuple; its timestamp field still converts.
    kind = pa.struct([("n", pa.int64()), ("at", pa.timestamp("us", tz="UTC"))])
    column = from_python([(1, 5), {"n": 2, "at": None}, None], kind)
    assert column.to_pylist()[0]["n"] == 1
    assert column.field("at")[0].value == 5
    assert column.to_pylist()[1] == {"n": 2, "at": None} and column[2].as_py() is None
