"""Decoding newline-framed records into Arrow columns (runs on executors).

``debezium_json`` envelopes are unrolled into updating rows: ``c``/``r`` add
``after``; ``u`` withdraws ``before`` and adds ``after``; ``d`` withdraws
``before`` (docs/sql/updating.md); a :data:`RETRACT` column says which rows withdraw.

Lines are given as a byte buffer plus per-line ``starts`` and ``lengths`` (line
terminators excluded), so framing, truncation and decoding stay vectorised.
A block that fails to decode is bisected until every bad line is isolated: good
lines still decode in bulk and each bad line gets its own precise message.
"""

from __future__ import annotations

import base64
import binascii
import decimal
import functools
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from spate.engine.connectors.core.arrow_batches import TIMESTAMP_US, gather
from spate.engine.connectors.core.base import HIDDEN_COLUMNS, RETRACT
from spate.engine.connectors.formats.avro import AvroDecoder
from spate.engine.connectors.formats.protobuf import ProtobufDecoder
from spate.engine.connectors.formats.records import (
    AVRO,
    DEBEZIUM_JSON,
    DECIMAL_BYTES,
    PROTOBUF,
    RAW_BYTES,
    RAW_STRING,
    UNIX_MILLIS,
    FormatSpec,
)

_WHITESPACE = np.zeros(256, dtype=bool)
_WHITESPACE[[9, 10, 13, 32]] = True
_MS_PER_DAY = 86_400_000
_NS_PER_US = 1000
_ARROW_ROW = re.compile(r"\.?\s+in row \d+\s*$")
#: debezium_json ops that add ``after`` / withdraw ``before``.
_ADDING_OPS = ("c", "r", "u")
_WITHDRAWING_OPS = ("u", "d")
_KNOWN_OPS = ("c", "r", "u", "d")


@functools.cache
def _op_set(ops: tuple[str, ...]) -> pa.Array:
    """``ops`` as an Arrow array, built on first use: building one from Python values
    imports pandas, which a process that only plans a source's batches never needs."""
    return pa.array(ops, pa.string())


#: pyarrow.json's words for a value of another JSON type than its column's.
_TYPE_CONFLICTS = ("changed from", "Failed to convert JSON")


class RecordError(ValueError):
    """One record (or a block holding it) does not decode; the message says why."""


@dataclass
class Decoded:
    """Decoded good records, in line order, and the bad ones by line index."""

    columns: list[pa.Array]
    #: (index of the line in the decoded block, what is wrong), in line order
    bad: list[tuple[int, str]] = field(default_factory=list)
    #: index in the block of each decoded row's line, when a decoder tracks it
    lines: np.ndarray | None = None

    @property
    def num_rows(self) -> int:
        return len(self.columns[0]) if self.columns else 0


def split_lines(data: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(buffer, starts, lengths)`` of the ``\\n``-separated lines of ``data``.

    A final line without a terminator counts; a trailing ``\\r`` (CRLF files) is
    not part of a line.
    """
    buf = np.frombuffer(data, dtype=np.uint8)
    newlines = np.flatnonzero(buf == 10)
    starts = np.concatenate(([0], newlines + 1)).astype(np.int64)
    ends = np.concatenate((newlines, [len(buf)])).astype(np.int64)
    if ends[-1] == starts[-1]:  # nothing after the last terminator
        starts, ends = starts[:-1], ends[:-1]
    if len(ends):
        carriage = (ends > starts) & (buf[np.maximum(ends - 1, 0)] == 13)
        ends = ends - carriage
    return buf, starts, ends - starts


def _binary_array(data: np.ndarray, offsets: np.ndarray) -> pa.Array:
    count = len(offsets) - 1
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), count, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def source_decoder(stream: pa.Schema, spec: FormatSpec,
                   not_null: Iterable[str]) -> RecordDecoder:
    """The decoder of a source's records: ``stream`` (its Arrow schema, hidden columns
    last) less the hidden columns, with the ``not_null`` columns required in every
    record."""
    required = set(not_null)
    physical = list(stream)[: len(stream) - len(HIDDEN_COLUMNS)]
    return RecordDecoder(pa.schema([f.with_nullable(f.name not in required) for f in physical]),
                         spec)


class RecordDecoder:
    """Decodes one block of lines into the physical columns of a table.

    For debezium_json, ``schema`` is the physical columns then :data:`RETRACT`
    (what :func:`spate.engine.connectors.formats.records.source_schema` puts before the
    hidden columns), and a ``u`` record decodes into two rows.
    """

    def __init__(self, schema: pa.Schema, spec: FormatSpec) -> None:
        self.schema = schema
        self.spec = spec
        self._binary: AvroDecoder | ProtobufDecoder | None = None
        self._decode_lines = self._pick_decoder()

    def _pick_decoder(self) -> Callable[[np.ndarray, np.ndarray, np.ndarray], Decoded]:
        if self.spec.kind == RAW_STRING:
            return self._raw_string
        if self.spec.kind == RAW_BYTES:
            return self._raw_bytes
        if self.spec.kind == AVRO:
            return self._avro
        if self.spec.kind == PROTOBUF:
            return self._protobuf
        if self.spec.unstructured:
            return self._unstructured
        if self.spec.kind == DEBEZIUM_JSON:
            return _ChangeBlockDecoder(self.schema, self.spec).decode
        return _JsonBlockDecoder(self.schema, self.spec).decode

    def decode(self, buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> Decoded:
        if self.spec.max_line_bytes is not None:
            lengths = np.minimum(lengths, self.spec.max_line_bytes)
        return self._decode_lines(buf, starts, lengths)

    def _raw_string(self, buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> Decoded:
        data, offsets = gather(buf, starts, lengths, terminate=False)
        binary = _binary_array(data, offsets)
        try:
            values = binary.cast(pa.large_string()).cast(pa.string())
            return Decoded([values])
        except pa.ArrowInvalid:
            return _per_line_utf8(binary)

    def _raw_bytes(self, buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> Decoded:
        data, offsets = gather(buf, starts, lengths, terminate=False)
        return Decoded([_binary_array(data, offsets).cast(pa.binary())])

    def _avro(self, buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> Decoded:
        if self._binary is None:
            writer = None if self.spec.avro_schema is None else json.loads(self.spec.avro_schema)
            self._binary = AvroDecoder(self.schema, writer, self.spec.confluent_wire,
                                       self.spec.registry)
        return self._binary_records(buf, starts, lengths)

    def _protobuf(self, buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> Decoded:
        if self._binary is None:
            descriptor = base64.b64decode(self.spec.descriptor or "")
            self._binary = ProtobufDecoder(self.schema, descriptor, self.spec.message_name or "",
                                           self.spec.confluent_wire)
        return self._binary_records(buf, starts, lengths)

    def _binary_records(self, buf: np.ndarray, starts: np.ndarray,
                        lengths: np.ndarray) -> Decoded:
        assert self._binary is not None
        raw = buf.tobytes()
        values = [raw[s:s + n] for s, n in zip(starts.tolist(), lengths.tolist(), strict=True)]
        columns, good, bad = self._binary.decode(values)
        columns, good_lines, missing = _drop_missing(self.schema, columns,
                                                     np.asarray(good, np.int64))
        return Decoded(columns, sorted(bad + missing), good_lines)

    def _unstructured(self, buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> Decoded:
        keep = np.flatnonzero(nonblank(buf, starts, lengths))
        data, offsets = gather(buf, starts[keep], lengths[keep], terminate=False)
        good: list[str] = []
        bad: list[tuple[int, str]] = []
        raw = data.tobytes()
        for i, line_index in enumerate(keep.tolist()):
            text = raw[offsets[i]:offsets[i + 1]]
            try:
                decoded = text.decode("utf-8")
                json.loads(decoded)
            except (UnicodeDecodeError, ValueError) as error:
                bad.append((line_index, f"not valid JSON: {error}"))
                continue
            good.append(decoded)
        return Decoded([pa.array(good, pa.string())], bad)


def _drop_missing(schema: pa.Schema, columns: list[pa.Array], good: np.ndarray
                  ) -> tuple[list[pa.Array], np.ndarray, list[tuple[int, str]]]:
    """Rows with NULL in a NOT NULL column are bad records."""
    missing = np.zeros(len(good), dtype=bool)
    bad: list[tuple[int, str]] = []
    for i, f in enumerate(schema):
        if f.nullable or not len(good):
            continue
        nulls = np.asarray(columns[i].is_null(), dtype=bool)
        for row in np.flatnonzero(nulls & ~missing).tolist():
            bad.append((int(good[row]), f"column '{f.name}' is NOT NULL but the record has "
                                        "no value for it"))
        missing |= nulls
    if not missing.any():
        return columns, good, []
    keep = pa.array(~missing)
    return [c.filter(keep) for c in columns], good[~missing], bad


def _per_line_utf8(binary: pa.Array) -> Decoded:
    good: list[str] = []
    bad: list[tuple[int, str]] = []
    for index, value in enumerate(binary.to_pylist()):
        try:
            good.append(value.decode("utf-8"))
        except UnicodeDecodeError as error:
            bad.append((index, f"not valid UTF-8 ({error.reason} at byte {error.start})"))
    return Decoded([pa.array(good, pa.string())], bad)


def nonblank(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Boolean mask of lines holding anything but JSON whitespace."""
    if len(buf) == 0:
        return np.zeros(len(starts), dtype=bool)
    first = buf[np.minimum(starts, len(buf) - 1)]
    solid: np.ndarray = (lengths > 0) & ~_WHITESPACE[first]
    # Lines starting with whitespace are rare: look at those one by one.
    for line in np.flatnonzero(~solid & (lengths > 0)).tolist():
        text = buf[starts[line]:starts[line] + lengths[line]]
        solid[line] = not _WHITESPACE[text].all()
    return solid


class _JsonBlockDecoder:
    """JSON lines -> Arrow via pyarrow.json, bisecting failed blocks to find bad lines."""

    def __init__(self, schema: pa.Schema, spec: FormatSpec) -> None:
        self.schema = schema
        self.millis = spec.timestamp_format == UNIX_MILLIS
        #: debezium_json takes a number in a TIMESTAMP field as nanoseconds since the
        #: epoch, as Arroyo's reader does (the unit Arroyo keeps timestamps in); its
        #: sinks still write milliseconds (docs/sql/updating.md#timestamps)
        self.timestamp_nanos = self.millis and spec.kind == DEBEZIUM_JSON
        self.decimal_bytes = spec.decimal_encoding == DECIMAL_BYTES
        self.wire = pa.schema([pa.field(f.name, self._wire_type(f.type), True) for f in schema])
        self.parse_options = pa_json.ParseOptions(
            explicit_schema=self.wire, unexpected_field_behavior="ignore")
        self.required = [i for i, f in enumerate(schema) if not f.nullable]

    def decode(self, buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> Decoded:
        keep = np.flatnonzero(nonblank(buf, starts, lengths))
        tables, good_parts, bad = self._decode_range(buf, starts, lengths, keep)
        if tables:
            table = pa.concat_tables(tables).combine_chunks()
            columns = [table.column(i).combine_chunks() for i in range(table.num_columns)]
        else:
            columns = [pa.array([], f.type) for f in self.schema]
        good = np.concatenate(good_parts) if good_parts else np.zeros(0, np.int64)
        columns, good, missing = self._drop_missing_required(columns, good)
        return Decoded(columns, sorted(bad + missing), good)

    def _decode_range(self, buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
                      lines: np.ndarray) -> tuple[list[pa.Table], list[np.ndarray],
                                                  list[tuple[int, str]]]:
        if len(lines) == 0:
            return [], [], []
        try:
            return [self._decode_exact(buf, starts[lines], lengths[lines])], [lines], []
        except RecordError as error:
            if len(lines) == 1:
                return [], [], [(int(lines[0]), str(error))]
        middle = len(lines) // 2
        left = self._decode_range(buf, starts, lengths, lines[:middle])
        right = self._decode_range(buf, starts, lengths, lines[middle:])
        return left[0] + right[0], left[1] + right[1], left[2] + right[2]

    def _decode_exact(self, buf: np.ndarray, starts: np.ndarray,
                      lengths: np.ndarray) -> pa.Table:
        data, _ = gather(buf, starts, lengths, terminate=True)
        block = max(int(lengths.max()) + 2, 1 << 20)
        try:
            table = pa_json.read_json(
                pa.BufferReader(pa.py_buffer(data)),
                read_options=pa_json.ReadOptions(block_size=block, use_threads=False),
                parse_options=self.parse_options)
        except pa.ArrowInvalid as error:
            if not any(conflict in str(error) for conflict in _TYPE_CONFLICTS):
                raise RecordError(_first_line(error)) from None
            # A value of another JSON type than its column's (a number for TEXT, "7" for
            # BIGINT): coerce it as the declared type says, line by line.
            table = self._decode_coercing(data.tobytes())
        if table.num_rows != len(starts):
            raise RecordError("a line must hold exactly one JSON object")
        return pa.table([self._convert(table.column(i).combine_chunks(), f.type, f.name)
                         for i, f in enumerate(self.schema)], schema=self.schema)

    def _decode_coercing(self, data: bytes) -> pa.Table:
        """The block parsed by Python's json, each value coerced to its column's type."""
        rows = []
        for line in data.splitlines():
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as error:
                raise RecordError(f"not valid JSON: {error}") from None
            if not isinstance(record, dict):
                raise RecordError("a line must hold exactly one JSON object")
            rows.append({f.name: coerce_json(record.get(f.name), w.type, f.type, f.name)
                         for f, w in zip(self.schema, self.wire, strict=True)})
        return pa.Table.from_pylist(rows, schema=self.wire)

    def _drop_missing_required(
        self, columns: list[pa.Array], good: np.ndarray
    ) -> tuple[list[pa.Array], np.ndarray, list[tuple[int, str]]]:
        if not self.required or not len(good):
            return columns, good, []
        missing = np.zeros(len(good), dtype=bool)
        names: dict[int, str] = {}
        for i in self.required:
            nulls = np.asarray(columns[i].is_null())
            for row in np.flatnonzero(nulls & ~missing).tolist():
                names[row] = self.schema.field(i).name
            missing |= nulls
        if not missing.any():
            return columns, good, []
        bad = [(int(good[row]), f"column '{name}' is NOT NULL but the record has no value "
                                f"for it") for row, name in names.items()]
        keep = pa.array(~missing)
        return [c.filter(keep) for c in columns], good[~missing], bad

    # -- wire types: what pyarrow.json parses before Spate's own conversions --------

    def _wire_type(self, target: pa.DataType) -> pa.DataType:
        if pa.types.is_timestamp(target) or pa.types.is_date(target):
            return pa.int64() if self.millis else pa.string()
        if pa.types.is_binary(target) or (pa.types.is_decimal(target) and self.decimal_bytes):
            return pa.string()
        if pa.types.is_list(target):
            return pa.list_(pa.field(target.value_field.name,
                                     self._wire_type(target.value_type), True))
        if pa.types.is_struct(target):
            return pa.struct([pa.field(f.name, self._wire_type(f.type), True) for f in target])
        return target

    def _convert(self, array: pa.Array, target: pa.DataType, path: str) -> pa.Array:
        if array.type == target:
            return array
        try:
            return self._convert_unchecked(array, target, path)
        except (pa.ArrowInvalid, ValueError, binascii.Error) as error:
            if isinstance(error, RecordError):
                raise
            raise RecordError(f"field '{path}': {_first_line(error)}") from None

    def _convert_unchecked(self, array: pa.Array, target: pa.DataType, path: str) -> pa.Array:
        if pa.types.is_timestamp(target):
            if self.timestamp_nanos:
                return _floor_micros(array).cast(TIMESTAMP_US)
            if self.millis:
                return pc.multiply_checked(array, 1000).cast(TIMESTAMP_US)
            return parse_rfc3339(array)
        if pa.types.is_date(target):
            if self.millis:
                return pc.floor(pc.divide(array.cast(pa.float64()), _MS_PER_DAY)).cast(
                    pa.int32()).cast(pa.date32())
            return array.cast(pa.date32())
        if pa.types.is_binary(target):
            return pa.array([None if v is None else base64.b64decode(v, validate=True)
                             for v in array.to_pylist()], pa.binary())
        if pa.types.is_decimal(target):  # bytes encoding: base64 of the unscaled value
            return pa.array([None if v is None else _unscaled(v, target.scale)
                             for v in array.to_pylist()], target)
        if pa.types.is_list(target):
            values = self._convert(array.values, target.value_type, f"{path}[]")
            return pa.ListArray.from_arrays(array.offsets, values, type=target,
                                            mask=array.is_null())
        if pa.types.is_struct(target):
            children = [self._convert(array.field(i), f.type, f"{path}.{f.name}")
                        for i, f in enumerate(target)]
            return pa.StructArray.from_arrays(children, fields=list(target),
                                              mask=array.is_null())
        return array.cast(target)


def _floor_micros(nanos: pa.Array) -> pa.Array:
    """Nanoseconds (int64) as whole microseconds, rounded down (Spark keeps µs)."""
    truncated = pc.divide(nanos, _NS_PER_US)  # integer division: toward zero
    negative_rest = pc.less(pc.subtract(nanos, pc.multiply(truncated, _NS_PER_US)), 0)
    return pc.if_else(negative_rest, pc.subtract(truncated, 1), truncated)


def coerce_json(value: Any, wire: pa.DataType, target: pa.DataType, path: str) -> Any:
    """``value`` (as ``json`` parsed it) as a value of ``wire``, the type the reader
    parses a column of ``target`` as: numbers and booleans into text as their JSON
    text, numeric text into numbers, a JSON number into a Debezium ``bytes`` decimal.
    Anything else that does not fit is a :class:`RecordError` naming the field."""
    if value is None:
        return None
    try:
        return _coerce(value, wire, target, path)
    except RecordError:
        raise  # a nested field's own message
    except (ValueError, ArithmeticError, TypeError):
        shown = json.dumps(value)[:60]
        raise RecordError(f"field '{path}': {shown} is not a {target}") from None


def _coerce(value: Any, wire: pa.DataType, target: pa.DataType, path: str) -> Any:
    if pa.types.is_struct(wire):
        if not isinstance(value, dict):
            raise TypeError("not an object")
        return {f.name: coerce_json(value.get(f.name), f.type, t.type, f"{path}.{f.name}")
                for f, t in zip(wire, target, strict=True)}
    if pa.types.is_list(wire):
        if not isinstance(value, list):
            raise TypeError("not an array")
        return [coerce_json(v, wire.value_type, target.value_type, f"{path}[]") for v in value]
    if pa.types.is_string(wire) or pa.types.is_large_string(wire):
        if isinstance(value, str):
            return value
        if pa.types.is_decimal(target) and isinstance(value, int | float):
            return _unscaled_base64(decimal.Decimal(str(value)), target.scale)
        return json.dumps(value, separators=(",", ":"))  # 3 -> "3", true -> "true"
    if isinstance(value, bool) and not pa.types.is_boolean(wire):
        raise TypeError("a boolean")
    if pa.types.is_integer(wire):
        if isinstance(value, float) and not value.is_integer():
            raise ValueError("not a whole number")
        return int(value.strip()) if isinstance(value, str) else int(value)
    if pa.types.is_floating(wire):
        return float(value)
    if pa.types.is_decimal(wire):
        return decimal.Decimal(str(value).strip())
    if pa.types.is_boolean(wire):
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        if not isinstance(value, bool):
            raise TypeError("not a boolean")
    return value


def _unscaled_base64(value: decimal.Decimal, scale: int) -> str:
    """A number in Debezium's ``bytes`` decimal encoding (for a JSON number given there)."""
    unscaled = int(value.scaleb(scale).to_integral_exact())
    size = max(1, (unscaled.bit_length() + 8) // 8)
    return base64.b64encode(unscaled.to_bytes(size, "big", signed=True)).decode()


def _unscaled(encoded: str, scale: int) -> decimal.Decimal:
    """Debezium's decimal: base64 of the unscaled value in big-endian two's complement."""
    unscaled = int.from_bytes(base64.b64decode(encoded, validate=True), "big", signed=True)
    return decimal.Decimal(f"{unscaled}E-{scale}")  # exact, whatever the digits


class _ChangeBlockDecoder:
    """debezium_json envelopes -> updating rows (the physical columns, then RETRACT)."""

    def __init__(self, schema: pa.Schema, spec: FormatSpec) -> None:
        assert schema.names[-1] == RETRACT, "a change decoder's schema ends with RETRACT"
        self.physical = pa.schema(list(schema)[:-1])
        image = pa.struct([f.with_nullable(True) for f in self.physical])
        envelope = pa.schema([pa.field("before", image), pa.field("after", image),
                              pa.field("op", pa.string())])
        self.envelopes = _JsonBlockDecoder(envelope, spec)
        self.required = [i for i, f in enumerate(self.physical) if not f.nullable]

    def decode(self, buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> Decoded:
        decoded = self.envelopes.decode(buf, starts, lengths)
        lines = decoded.lines if decoded.lines is not None else np.zeros(0, np.int64)
        before, after, op = decoded.columns
        adds = np.asarray(pc.fill_null(pc.is_in(op, _op_set(_ADDING_OPS)), False))
        withdraws = np.asarray(pc.fill_null(pc.is_in(op, _op_set(_WITHDRAWING_OPS)), False))
        olds, news = before.flatten(), after.flatten()
        problems = self._problems(op, adds, withdraws, before, after, olds, news)
        bad = [(int(lines[row]), problem) for row, problem in problems.items()]
        good = np.ones(len(op), dtype=bool)
        good[list(problems)] = False
        return Decoded(self._unroll(olds, news, adds & good, withdraws & good),
                       sorted(decoded.bad + bad))

    def _problems(self, op: pa.Array, adds: np.ndarray, withdraws: np.ndarray,
                  before: pa.Array, after: pa.Array, olds: list[pa.Array],
                  news: list[pa.Array]) -> dict[int, str]:
        """What is wrong with each bad envelope, by row (the first problem found)."""
        problems: dict[int, str] = {}
        known = np.asarray(pc.fill_null(pc.is_in(op, _op_set(_KNOWN_OPS)), False))
        for row in np.flatnonzero(~known).tolist():
            value = op[row].as_py()
            problems[row] = ("the record has no 'op'" if value is None else
                             f"unknown op '{value}' (debezium_json ops are 'c', 'r', 'u', 'd')")
        checks = [(adds, after, news, "after"), (withdraws, before, olds, "before")]
        for used, image, fields, name in checks:
            for row in np.flatnonzero(used & np.asarray(image.is_null())).tolist():
                problems.setdefault(row, f"a '{op[row].as_py()}' record needs '{name}'"
                                         f"{' (the old row)' if name == 'before' else ''}")
            for i in self.required:
                for row in np.flatnonzero(used & np.asarray(fields[i].is_null())).tolist():
                    problems.setdefault(row, f"column '{self.physical.field(i).name}' is NOT "
                                             f"NULL (or in the PRIMARY KEY) but '{name}' has no "
                                             "value for it")
        return dict(sorted(problems.items()))

    def _unroll(self, olds: list[pa.Array], news: list[pa.Array], adds: np.ndarray,
                withdraws: np.ndarray) -> list[pa.Array]:
        """Per envelope in order: the withdrawn row (if any), then the added row (if any)."""
        counts = adds.astype(np.int64) + withdraws
        envelope = np.repeat(np.arange(len(counts)), counts)
        first = np.cumsum(counts) - counts
        position = np.arange(len(envelope)) - np.repeat(first, counts)
        retract = withdraws[envelope] & (position == 0)
        taken = pa.array(envelope + np.where(retract, 0, len(counts)))
        columns = [pa.concat_arrays([old, new]).take(taken)
                   for old, new in zip(olds, news, strict=True)]
        return [*columns, pa.array(retract, pa.bool_())]


#: A timestamp without a zone: what pyarrow reads zone-less strings as.
_NAIVE_US = pa.timestamp("us")


def parse_rfc3339(strings: pa.Array) -> pa.Array:
    """RFC 3339 timestamps (also ``T``/space, no zone = UTC, date only, ns digits) -> µs UTC."""
    # Most batches are all of one common form, which pyarrow's own parser reads as it
    # is, 20 times faster than the normalising below (its regular expressions cost
    # about 0.5 µs a value): all with a zone (``Z`` or an offset), or all without one
    # (UTC wall time).  What either cast reads, it reads as the normalising would; a
    # batch neither takes whole (lower-case letters, nanoseconds, mixed forms, bad
    # values) is normalised.
    try:
        return strings.cast(TIMESTAMP_US)
    except pa.ArrowInvalid:
        pass
    try:
        return strings.cast(_NAIVE_US).cast(TIMESTAMP_US)
    except pa.ArrowInvalid:
        pass
    return _parse_normalised(strings)


def _parse_normalised(strings: pa.Array) -> pa.Array:
    """:func:`parse_rfc3339` of any batch: each value rewritten to ``YYYY-MM-DDTHH:MM:SS
    [.ffffff]`` and a zone (``Z`` where it had none), then cast."""
    text = pc.utf8_upper(strings)
    text = pc.replace_substring_regex(text, r"^(\d{4}-\d{2}-\d{2})$", r"\1T00:00:00")
    text = pc.replace_substring_regex(text, r"(\.\d{6})\d+", r"\1")
    zoned = pc.match_substring_regex(text, r"(Z|[+-]\d{2}(:?\d{2})?)$")
    text = pc.if_else(zoned, text, pc.binary_join_element_wise(text, "Z", ""))
    try:
        return text.cast(TIMESTAMP_US)
    except pa.ArrowInvalid:
        if len(strings) == 1:
            raise ValueError(f"cannot parse {strings[0].as_py()!r} as an RFC 3339 "
                             "timestamp") from None
        raise


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    line = text.splitlines()[0] if text else type(error).__name__
    # pyarrow numbers rows within the block it was given, not lines of the file.
    return _ARROW_ROW.sub("", line)
