"""Decoding NATS messages into a source's Arrow batches: one message is one record.

The whole read is decoded as one block with the table's format (the shared
decoders); when that cannot map rows back to their messages (a bad record, a
blank message, a debezium_json update that unrolls into two rows) the
messages are decoded one at a time, so each row keeps its message's event
time and each bad record is named by its message.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import types as T

from spate.engine.connectors import core
from spate.engine.connectors.core.arrow_batches import arrow_schema, data_batch, timestamps_us
from spate.engine.connectors.formats.decoders import Decoded, RecordDecoder
from spate.engine.connectors.formats.records import FormatSpec

_HIDDEN_COUNT = 3


@dataclass
class DecodedMessages:
    """The data rows of some messages, and the bad ones by message index."""

    batch: pa.RecordBatch | None
    bad: list[tuple[int, str]]


class MessageDecoder:
    """Decodes message payloads into batches of a source's stream schema."""

    def __init__(self, settings: dict[str, Any], schema: T.StructType) -> None:
        self.spec = FormatSpec(**settings["format"])
        self.arrow_schema = arrow_schema(schema)
        required = set(settings["not_null"])
        self.metadata: dict[str, str] = settings.get("metadata") or {}
        fields = [f for f in list(self.arrow_schema)[:len(self.arrow_schema) - _HIDDEN_COUNT]
                  if f.name not in self.metadata]
        self.record_schema = pa.schema([f.with_nullable(f.name not in required)
                                        for f in fields])
        self.decoder = RecordDecoder(self.record_schema, self.spec)
        # The JSON decoders read newline-separated records; raw_string and
        # json.unstructured take each message's bytes as they are.
        self.one_line = not self.spec.opaque and not self.spec.unstructured

    def decode(self, payloads: Sequence[bytes], stamps_us: Sequence[int],
               subjects: Sequence[str] = ()) -> DecodedMessages:
        """Rows of ``payloads`` (event times ``stamps_us``, subjects ``subjects``) and their
        bad records."""
        records, bad = self._records(payloads)
        rows_of = np.arange(len(payloads))
        decoded = None if bad else self._decode_block(records)
        if decoded is None or decoded.bad or decoded.num_rows != len(payloads):
            columns, rows_of, more_bad = self._one_by_one(records)
            bad = sorted(bad + more_bad)
        else:
            columns = decoded.columns
        if len(rows_of) == 0:
            return DecodedMessages(None, bad)
        stamps = timestamps_us(np.asarray(stamps_us, dtype=np.int64)[rows_of])
        if self.metadata:  # 'subject'
            of_rows = pa.array(list(subjects), pa.string()).take(pa.array(rows_of, pa.int64()))
            columns = core.merge_physical(self.arrow_schema, columns,
                                          dict.fromkeys(self.metadata, of_rows))
        return DecodedMessages(data_batch(self.arrow_schema, columns, 0, stamps), bad)

    def _records(self, payloads: Sequence[bytes]) -> tuple[list[bytes | None],
                                                           list[tuple[int, str]]]:
        """Each payload as one line; None where it cannot be one (a bad record)."""
        records: list[bytes | None] = []
        bad: list[tuple[int, str]] = []
        for index, payload in enumerate(payloads):
            if not self.one_line or (b"\n" not in payload and b"\r" not in payload):
                records.append(payload)
                continue
            try:  # in valid JSON a line break is whitespace between tokens
                json.loads(payload.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as error:
                bad.append((index, f"not valid JSON: {error}"))
                records.append(None)
                continue
            records.append(payload.replace(b"\r", b" ").replace(b"\n", b" "))
        return records, bad

    def _decode_block(self, records: Sequence[bytes | None]) -> Decoded:
        lines = [record or b"" for record in records]
        lengths = np.array([len(line) for line in lines], dtype=np.int64)
        starts = np.zeros(len(lines), dtype=np.int64)
        if len(lines) > 1:
            np.cumsum(lengths[:-1] + 1, out=starts[1:])
        buf = np.frombuffer(b"\n".join(lines), dtype=np.uint8)
        return self.decoder.decode(buf, starts, lengths)

    def _one_by_one(self, records: Sequence[bytes | None]) -> tuple[list[pa.Array], np.ndarray,
                                                                    list[tuple[int, str]]]:
        parts: list[list[pa.Array]] = []
        rows_of: list[int] = []
        bad: list[tuple[int, str]] = []
        for index, record in enumerate(records):
            if record is None:
                continue
            decoded = self._decode_block([record])
            if decoded.bad:
                bad.append((index, decoded.bad[0][1]))
            elif decoded.num_rows:
                parts.append(decoded.columns)
                rows_of.extend([index] * decoded.num_rows)
        columns = [pa.concat_arrays([part[i] for part in parts]) if parts
                   else pa.array([], field.type)
                   for i, field in enumerate(self.record_schema)]
        return columns, np.asarray(rows_of, dtype=np.int64), bad
