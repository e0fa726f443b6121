"""Line framing and record decoding (json, raw_string) without Spark."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import types as T

from spate.engine.connectors.core.arrow_batches import arrow_schema, join_lines
from spate.engine.connectors.formats import decoders
from spate.engine.connectors.formats.decoders import (
    Decoded,
    RecordDecoder,
    parse_rfc3339,
    split_lines,
)
from spate.engine.connectors.formats.records import FormatSpec
from spate.engine.connectors.single_file.source import scan_lines

UTC = dt.UTC


def _decode(lines: list[bytes] | bytes, fields: list[T.StructField], **spec: Any) -> Decoded:
    data = lines if isinstance(lines, bytes) else b"\n".join(lines) + b"\n"
    schema = arrow_schema(T.StructType(fields))
    schema = pa.schema([f.with_nullable(fields[i].nullable) for i, f in enumerate(schema)])
    decoder = RecordDecoder(schema, FormatSpec(**{"kind": "json", **spec}))
    return decoder.decode(*split_lines(data))


def _rows(decoded: Decoded, fields: list[T.StructField]) -> list[dict[str, Any]]:
    return pa.Table.from_arrays(decoded.columns, names=[f.name for f in fields]).to_pylist()


def test_split_lines_handles_crlf_and_unterminated_last_line() -> None:
    buf, starts, lengths = split_lines(b"a\r\n\nbc\nlast")
    assert [bytes(buf[s:s + n]) for s, n in zip(starts, lengths, strict=True)] == \
        [b"a", b"", b"bc", b"last"]
    assert len(split_lines(b"")[1]) == 0
    assert len(split_lines(b"x\n")[1]) == 1


def test_scan_lines_limits_and_eof(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_bytes(b"a\nbb\nccc\ntail")
    assert scan_lines(str(path), 0, 2) == (2, 5, False)
    assert scan_lines(str(path), 5, 1) == (1, 9, False)
    assert scan_lines(str(path), 9, 10) == (1, 13, True)
    assert scan_lines(str(path), 0, None) == (4, 13, True)
    path.write_bytes(b"a\nb\n")
    assert scan_lines(str(path), 0, 2) == (2, 4, True)
    assert scan_lines(str(path), 4, 2) == (0, 4, True)


FIELDS = [T.StructField("id", T.LongType(), False), T.StructField("name", T.StringType()),
          T.StructField("ts", T.TimestampType())]


def test_json_good_block_with_blank_lines_and_extra_fields() -> None:
    decoded = _decode([b'{"id": 1, "name": "a", "ts": "2024-01-01T00:00:00Z", "x": [1]}', b"",
                       b'  ', b'{"id": 2}\r'], FIELDS)
    assert decoded.bad == []
    assert _rows(decoded, FIELDS) == [
        {"id": 1, "name": "a", "ts": dt.datetime(2024, 1, 1, tzinfo=UTC)},
        {"id": 2, "name": None, "ts": None}]


def test_json_bad_lines_are_isolated_with_reasons() -> None:
    lines = [b'{"id": %d}' % i for i in range(40)]
    lines[3] = b'{"id": "three"}'
    lines[17] = b'{"id": 17'
    lines[30] = b'{"id": 30} {"id": 31}'
    lines[35] = b'{"name": "no id"}'
    lines[38] = b'{"id": 38, "ts": "not a time"}'
    decoded = _decode(lines, FIELDS)
    assert [index for index, _ in decoded.bad] == [3, 17, 30, 35, 38]
    reasons = dict(decoded.bad)
    assert "exactly one JSON object" in reasons[30]
    assert "'id' is NOT NULL" in reasons[35]
    assert "'ts'" in reasons[38] and "not a time" in reasons[38]
    assert [row["id"] for row in _rows(decoded, FIELDS)] == \
        [i for i in range(40) if i not in (3, 17, 30, 35, 38)]


@pytest.mark.parametrize("text, expected", [
    ("2024-01-01T00:00:00Z", dt.datetime(2024, 1, 1, tzinfo=UTC)),
    ("2024-01-01T02:00:00.5+02:00", dt.datetime(2024, 1, 1, 0, 0, 0, 500000, tzinfo=UTC)),
    ("2024-01-01 00:00:00", dt.datetime(2024, 1, 1, tzinfo=UTC)),
    ("2024-01-01t00:00:00.123456789z", dt.datetime(2024, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)),
    ("2024-01-01", dt.datetime(2024, 1, 1, tzinfo=UTC)),
])
def test_rfc3339_variants(text: str, expected: dt.datetime) -> None:
    decoded = _decode([b'{"id": 1, "ts": "%s"}' % text.encode()], FIELDS)
    assert decoded.bad == []
    assert _rows(decoded, FIELDS)[0]["ts"] == expected


@st.composite
def _timestamp_text(draw: st.DrawFn) -> tuple[str, dt.datetime]:
    """An RFC 3339 timestamp in one of the forms Spate reads, and the instant it names."""
    wall = draw(st.datetimes(min_value=dt.datetime(1900, 1, 1),
                             max_value=dt.datetime(2200, 1, 1)))
    if draw(st.booleans()) and not wall.microsecond:  # date only: midnight UTC
        day = wall.replace(hour=0, minute=0, second=0)
        return day.strftime("%Y-%m-%d"), day.replace(tzinfo=UTC)
    digits = draw(st.integers(0, 9))
    micros = f"{wall.microsecond:06d}"
    fraction = (micros + "".join(draw(st.lists(st.sampled_from("0123456789"),
                                               min_size=3, max_size=3))))[:digits]
    wall = wall.replace(microsecond=int((fraction + "000000")[:6]))
    text = wall.strftime(f"%Y-%m-%d{draw(st.sampled_from('Tt '))}%H:%M:%S")
    text += f".{fraction}" if fraction else ""
    zone = draw(st.sampled_from(["", "Z", "z", "+hh:mm", "-hh:mm", "+hhmm", "-hh"]))
    minutes = draw(st.integers(0, 14 * 60)) if "hh" in zone else 0
    if zone == "-hh":
        minutes -= minutes % 60
    sign = -1 if zone.startswith("-") else 1
    text += zone.replace("hh", f"{minutes // 60:02d}").replace("mm", f"{minutes % 60:02d}")
    return text, wall.replace(tzinfo=UTC) - sign * dt.timedelta(minutes=minutes)


@given(st.lists(_timestamp_text(), min_size=1, max_size=6))
@settings(max_examples=400, deadline=None)
def test_rfc3339_batches_read_the_instants_they_name(
        drawn: list[tuple[str, dt.datetime]]) -> None:
    """Whether pyarrow's own parser takes the batch whole (all of one common form, as
    small batches often are) or it is normalised first, each value is the instant it
    names, truncated to microseconds."""
    texts = pa.array([text for text, _ in drawn], pa.string())
    assert parse_rfc3339(texts).to_pylist() == [instant for _, instant in drawn]


@pytest.mark.parametrize("texts", [
    ["2024-01-01T00:00:00.5Z", "2024-01-01 01:00:00+01:00"],  # all with a zone
    ["2024-01-01T00:00:00.5", "2024-01-01"],                   # all without one
])
def test_a_batch_of_one_common_form_skips_the_normalising(
        texts: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Such a batch is read by pyarrow's own parser, never by the regular expressions
    (about 0.5 µs a value); other batches still are (the property test above)."""
    def normalising(strings: pa.Array) -> pa.Array:
        raise AssertionError(f"normalised {strings}")

    monkeypatch.setattr(decoders, "_parse_normalised", normalising)
    read = parse_rfc3339(pa.array(texts, pa.string())).to_pylist()
    assert read[0] == dt.datetime(2024, 1, 1, 0, 0, 0, 500000, tzinfo=UTC)
    assert read[1] == dt.datetime(2024, 1, 1, tzinfo=UTC)
    with pytest.raises(AssertionError, match="normalised"):  # mixed forms: normalised
        parse_rfc3339(pa.array(texts[:1] + ["2024-01-01t00:00:00"], pa.string()))


def test_unix_millis_and_nested_types() -> None:
    inner = T.StructType([T.StructField("at", T.TimestampType()),
                          T.StructField("tags", T.ArrayType(T.StringType()))])
    fields = [T.StructField("ts", T.TimestampType()), T.StructField("s", inner),
              T.StructField("stamps", T.ArrayType(T.TimestampType())),
              T.StructField("d", T.DecimalType(10, 2)), T.StructField("day", T.DateType()),
              T.StructField("b", T.BinaryType())]
    decoded = _decode([b'{"ts": 1704067200123, "s": {"at": 0, "tags": ["x"]}, '
                       b'"stamps": [1000, null], "d": 1.25, "day": 86400000, "b": "YWI="}',
                       b'{"s": null}'], fields, timestamp_format="unix_millis")
    assert decoded.bad == []
    first, second = _rows(decoded, fields)
    assert first["ts"] == dt.datetime(2024, 1, 1, 0, 0, 0, 123000, tzinfo=UTC)
    assert first["s"] == {"at": dt.datetime(1970, 1, 1, tzinfo=UTC), "tags": ["x"]}
    assert first["stamps"] == [dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC), None]
    assert str(first["d"]) == "1.25" and first["day"] == dt.date(1970, 1, 2)
    assert first["b"] == b"ab"
    assert second["s"] is None
    rfc = _decode([b'{"ts": 1704067200123}'], FIELDS[2:])
    assert [index for index, _ in rfc.bad] == [0]  # a number is no rfc3339 timestamp


def test_raw_string_keeps_lines_and_flags_invalid_utf8() -> None:
    fields = [T.StructField("value", T.StringType())]
    decoded = _decode(b"plain\n\n{not json}\r\n\xff\xfe\nlast", fields, kind="raw_string")
    assert _rows(decoded, fields) == [{"value": "plain"}, {"value": ""},
                                      {"value": "{not json}"}, {"value": "last"}]
    assert [(index, "UTF-8" in reason) for index, reason in decoded.bad] == [(3, True)]


def test_truncation_by_framing_max_length() -> None:
    fields = [T.StructField("value", T.StringType())]
    decoded = _decode(b"abcdef\nab\n", fields, kind="raw_string", max_line_bytes=3)
    assert _rows(decoded, fields) == [{"value": "abc"}, {"value": "ab"}]


def test_unstructured_json_validates_each_record() -> None:
    fields = [T.StructField("value", T.StringType())]
    decoded = _decode([b'{"a": {"b": 1}}', b"[1, 2]", b"{oops", b"  "], fields,
                      unstructured=True)
    assert _rows(decoded, fields) == [{"value": '{"a": {"b": 1}}'}, {"value": "[1, 2]"}]
    assert [index for index, _ in decoded.bad] == [2]


def test_join_lines_terminates_each_record() -> None:
    assert join_lines(pa.chunked_array([["a", None], ["é"]])) == "a\n\né\n".encode()
    assert join_lines(pa.array([], pa.string())) == b""


def test_large_block_with_one_bad_line_decodes_the_rest_in_bulk() -> None:
    lines = [b'{"id": %d, "name": "n"}' % i for i in range(20_000)]
    lines[12_345] = b'{"id": 1.5}'
    decoded = _decode(lines, FIELDS)
    assert [index for index, _ in decoded.bad] == [12_345]
    assert decoded.num_rows == 19_999
    ids = np.asarray(decoded.columns[0])
    assert ids[12_345] == 12_346


def test_values_of_another_json_type_are_coerced_to_the_declared_one() -> None:
    fields = [T.StructField("t", T.StringType()), T.StructField("n", T.LongType()),
              T.StructField("f", T.DoubleType()), T.StructField("b", T.BooleanType()),
              T.StructField("d", T.DecimalType(10, 2)), T.StructField("o", T.StringType())]
    decoded = _decode([b'{"t": 3, "n": "7", "f": "2.5", "b": "TRUE", "d": 1.5, "o": {"a": 1}}',
                       b'{"t": 4.5, "n": 8.0, "f": 3, "b": false, "d": "2.25", "o": [1, true]}',
                       b'{"t": "x", "n": 9, "f": 1.0, "b": true, "d": 3, "o": null}'], fields)
    assert decoded.bad == []
    assert _rows(decoded, fields) == [
        {"t": "3", "n": 7, "f": 2.5, "b": True, "d": Decimal("1.50"), "o": '{"a":1}'},
        {"t": "4.5", "n": 8, "f": 3.0, "b": False, "d": Decimal("2.25"), "o": "[1,true]"},
        {"t": "x", "n": 9, "f": 1.0, "b": True, "d": Decimal("3.00"), "o": None}]


def test_a_value_no_coercion_fits_is_a_bad_record_naming_its_field() -> None:
    fields = [T.StructField("n", T.LongType()), T.StructField("s", T.StructType(
        [T.StructField("b", T.BooleanType())]))]
    decoded = _decode([b'{"n": 1, "s": {"b": true}}', b'{"n": "seven", "s": {"b": true}}',
                       b'{"n": 2.5, "s": {"b": true}}', b'{"n": 3, "s": {"b": 1}}'], fields)
    assert [(line, message.split(":")[0]) for line, message in decoded.bad] == [
        (1, "field 'n'"), (2, "field 'n'"), (3, "field 's.b'")]
    assert _rows(decoded, fields) == [{"n": 1, "s": {"b": True}}]


def test_debezium_bytes_decimals_also_take_plain_numbers() -> None:
    fields = [T.StructField("id", T.LongType(), False), T.StructField("d", T.DecimalType(6, 2))]
    schema = arrow_schema(T.StructType(fields))
    schema = pa.schema([schema.field(0).with_nullable(False), schema.field(1),
                        pa.field("_spate_retract", pa.bool_())])
    decoder = RecordDecoder(schema, FormatSpec(kind="debezium_json",
                                               decimal_encoding="bytes"))
    data = (b'{"before": null, "after": {"id": 1, "d": "AJY="}, "op": "c"}\n'
            b'{"before": null, "after": {"id": 2, "d": 12.34}, "op": "c"}\n')
    decoded = decoder.decode(*split_lines(data))
    assert decoded.bad == []
    assert decoded.columns[1].to_pylist() == [Decimal("1.50"), Decimal("12.34")]
