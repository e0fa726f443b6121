"""What a JSON source's decoding costs a Python worker per line, and the RFC 3339
timestamps' share of it.

``SPATE_BENCHMARK=1 python -m pytest tests/benchmarks/test_json_decode.py -s``

The lines of the JSON windows benchmark (``{"k", "v", "ts"}``, ``ts`` an RFC 3339
string with a ``Z``), 250,000 to a block as ``single_file`` hands an epoch to a
reader: the whole decoding (``RecordDecoder``: pyarrow's JSON reader, then Spate's
conversions), and the timestamp column alone through :func:`parse_rfc3339` (which
reads a batch of one common form with pyarrow's own parser) and through the
normalising it falls back to.  Best of 5 each.  Written to ``results.json`` under
``json_decode``; nothing is asserted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest

from spate.engine.connectors.formats.decoders import (
    RecordDecoder,
    _parse_normalised,
    parse_rfc3339,
    split_lines,
)
from spate.engine.connectors.formats.records import FormatSpec
from tests.benchmarks.workloads import save_result

pytestmark = pytest.mark.benchmark

LINES = 250_000
ROUNDS = 5
SCHEMA = pa.schema([pa.field("k", pa.int64()), pa.field("v", pa.int64()),
                    pa.field("ts", pa.timestamp("us", tz="UTC"), nullable=False)])


def _best_ms(work: Callable[[], object]) -> float:
    times = []
    for _ in range(ROUNDS):
        began = time.perf_counter()
        work()
        times.append(time.perf_counter() - began)
    return round(min(times) * 1000, 1)


def test_json_decode() -> None:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    stamps = [(start + timedelta(milliseconds=3 * n)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
              for n in range(LINES)]
    data = "".join(f'{{"k":{n % 1000},"v":{n % 97},"ts":"{ts}"}}\n'
                   for n, ts in enumerate(stamps)).encode()
    decoder = RecordDecoder(SCHEMA, FormatSpec(kind="json"))
    lines = split_lines(data)
    assert decoder.decode(*lines).columns[2].null_count == 0
    texts = pa.array(stamps, pa.string())
    figures = {"lines": LINES,
               "decode_ms": _best_ms(lambda: decoder.decode(*lines)),
               "timestamps_ms": _best_ms(lambda: parse_rfc3339(texts)),
               "timestamps_normalised_ms": _best_ms(lambda: _parse_normalised(texts))}
    figures["decode_us_per_line"] = round(figures["decode_ms"] * 1000 / LINES, 2)
    print(f"\ndecoding {LINES:,} JSON lines: {figures}")
    save_result("json_decode", figures)
