"""Dead letters: records a source could not decode, kept for a sink table
(``bad_data = 'dead_letter'``, ``dead_letter.table``; docs/sql/connectors.md).

A reader emits each undecodable record as a control row of its own batch (so it
belongs to the epoch that read it, replayed with it), its control text
``dead:`` then JSON of the raw record (base64), the error and its position in
the source. The runner turns an epoch's dead-letter rows into rows of
:data:`DEAD_LETTER_SCHEMA` and writes them to the dead-letter table with the
epoch's other sink writes, under the same commit.

:class:`BadRecords` is the one place a reader's undecodable records meet the
table's ``bad_data``: fail naming the first, drop and count them, or hand them
over as dead letters; every message source uses it, and :meth:`BadRecords.batches`
yields a reader's decoded chunks with their dead letters.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spate.engine.connectors.core.arrow_batches import TIMESTAMP_US, control_batch
from spate.engine.connectors.core.base import (
    CONTROL_DROPPED_PREFIX,
    HIDDEN_COLUMNS,
    HIDDEN_CONTROL,
    ConnectorError,
)
from spate.engine.connectors.core.metadata import BAD_DATA, DEAD_LETTER_TABLE
from spate.engine.connectors.formats.records import DEAD_LETTER, FormatSpec

log = logging.getLogger(__name__)

#: Prefix of the control rows carrying a dead letter.
CONTROL_DEAD_PREFIX = "dead:"
#: The rows a dead-letter table receives.
DEAD_LETTER_SCHEMA = T.StructType([
    T.StructField("source", T.StringType()),
    T.StructField("record", T.BinaryType()),
    T.StructField("error", T.StringType()),
    T.StructField("position", T.StringType()),
    T.StructField("at", T.TimestampType()),
])
_PAYLOAD = T.StructType([T.StructField("record", T.StringType()),
                         T.StructField("error", T.StringType()),
                         T.StructField("position", T.StringType())])


def dead_letter_batch(schema: pa.Schema, partition: int,
                      letters: Sequence[tuple[bytes | None, str, str | None]]
                      ) -> pa.RecordBatch:
    """Control rows of ``letters``: (raw record, what is wrong, position in the source).

    Their timestamp is NULL like every control row's (no effect on watermarks); a
    dead letter's ``at`` is when its epoch wrote it."""
    length = len(letters)
    physical = [pa.nulls(length, f.type) for f in schema if f.name not in HIDDEN_COLUMNS]
    controls = [CONTROL_DEAD_PREFIX + json.dumps({
        "record": None if raw is None else base64.b64encode(raw).decode("ascii"),
        "error": error, "position": position}) for raw, error, position in letters]
    partitions = pa.array([partition] * length, pa.int32())
    stamps = pa.nulls(length, TIMESTAMP_US)
    return pa.RecordBatch.from_arrays(
        [*physical, partitions, stamps, pa.array(controls, pa.string())], schema=schema)


#: An undecodable record: its raw bytes (None: the message had none), what is wrong, and
#: where it is in its system (``partition 0 offset 17``).
Letter = tuple[bytes | None, str, str]


@dataclass(eq=False)
class BadRecords:
    """What one reader does with its undecodable records under the table's ``bad_data``.

    ``fail`` raises naming the first one; ``drop`` counts them for a ``dropped:N``
    control row :meth:`finish` yields; ``dead_letter`` turns them into dead-letter
    control rows of the reader's own partition. ``source`` names the table in
    messages (``kafka source 'orders'``); ``where`` places a record there, a template
    around its position (``in topic 'orders' at {position}``); ``fix`` is the advice
    before the bad_data options (``Fix the producer``).
    """

    spec: FormatSpec
    schema: pa.Schema
    partition: int
    source: str
    where: str = "at {position}"
    fix: str = "Fix the producer"
    #: records dropped since the last :meth:`finish`
    dropped: int = field(default=0, init=False)

    def handle(self, letters: Sequence[Letter]) -> pa.RecordBatch | None:
        """The dead-letter rows of ``letters`` (in source order), if the table keeps them;
        None when they were counted as dropped (or there are none)."""
        if not letters:
            return None
        if self.spec.dead_letter is not None:
            return dead_letter_batch(self.schema, self.partition, letters)
        if self.spec.skips_bad:
            self.dropped += len(letters)
            return None
        _, problem, position = letters[0]
        place = self.where.format(position=position)
        raise ConnectorError(
            f"{self.source}: bad record {place}: {problem}. {self.fix}, or set "
            f"{BAD_DATA.name} = 'drop' to skip undecodable records ('dead_letter' to keep them "
            "in a table)", option=BAD_DATA.name)

    def batches(self, chunks: Iterable[tuple[pa.RecordBatch | None, Sequence[Letter]]]
                ) -> Iterator[pa.RecordBatch]:
        """What a reader yields of its decoded ``chunks`` (data rows, undecodable records),
        in order: each chunk's dead letters (:meth:`handle`), then its rows, and last the
        ``dropped:N`` row (:meth:`finish`)."""
        for batch, letters in chunks:
            dead = self.handle(letters)
            if dead is not None:
                yield dead
            if batch is not None:
                yield batch
        dropped = self.finish()
        if dropped is not None:
            yield dropped

    def finish(self) -> pa.RecordBatch | None:
        """The ``dropped:N`` control row of the records dropped so far (then none), if any."""
        if not self.dropped:
            return None
        dropped, self.dropped = self.dropped, 0
        log.warning("dropped bad records", extra={"source": self.source, "dropped": dropped})
        return control_batch(self.schema, self.partition, f"{CONTROL_DROPPED_PREFIX}{dropped}")


def is_dead_letter() -> Column:
    """Whether a source row is a dead-letter control row."""
    return F.col(HIDDEN_CONTROL).startswith(CONTROL_DEAD_PREFIX)


def dead_letter_rows(frame: DataFrame, source: str) -> DataFrame:
    """The dead letters among ``frame``'s rows (a source's epoch) as DEAD_LETTER_SCHEMA."""
    payload = F.from_json(F.substring(F.col(HIDDEN_CONTROL), len(CONTROL_DEAD_PREFIX) + 1,
                                      1 << 30), _PAYLOAD)
    letters = frame.where(is_dead_letter()).select(payload.alias("p"))
    return letters.select(
        F.lit(source).alias("source"), F.unbase64(F.col("p.record")).alias("record"),
        F.col("p.error").alias("error"), F.col("p.position").alias("position"),
        F.current_timestamp().alias("at"))


def dead_letter_target(options: Mapping[str, str]) -> str | None:
    """The dead-letter table a source's options name, if its bad_data is dead_letter."""
    lowered = {key.lower(): value for key, value in options.items()}
    if (lowered.get(BAD_DATA.name) or "").strip().lower() != DEAD_LETTER:
        return None
    target = (lowered.get(DEAD_LETTER_TABLE.name) or "").strip()
    return target or None
