"""What push sources share (``mqtt``, ``websocket``, ``sse``, ``polling_http``): their
system sends, Spark plans batches as offset ranges.

A :class:`Receiver` runs in the driver's reader process (a subscription, an HTTP
feed) and keeps what arrived in a :class:`~.numbered.NumberedBuffer`.  The offset is
``{"messages": n}`` (plus what a source resumes from, e.g. an SSE cursor): how many
messages were handed to batches so far.  :class:`PushReader` is the pyspark stream
reader over a receiver: ``latestOffset`` releases what Spark has committed and
admits waiting messages into the next batch, ``partitions`` puts a batch's payloads
into one partition, and ``read`` decodes them on an executor with a
:class:`PushDecoder`, whole batches at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit

from spate.engine.connectors.core.arrow_batches import arrow_schema, data_batch
from spate.engine.connectors.core.base import ConnectorError
from spate.engine.connectors.core.dead_letter import BadRecords
from spate.engine.connectors.core.metadata_columns import decoded_schema, merge_physical
from spate.engine.connectors.core.numbered import NumberedBuffer
from spate.engine.connectors.core.streaming import default_limit, initial_offset, max_rows
from spate.engine.connectors.formats.decoders import source_decoder
from spate.engine.connectors.formats.records import FormatSpec
from spate.engine.python_workers import settle

#: JSON whitespace for the line breaks inside a JSON message (records are lines).
_LINE_BREAKS = bytes.maketrans(b"\r\n", b"  ")


class Message(Protocol):
    """What a received message has, whatever else its system gives it."""

    @property
    def payload(self) -> bytes: ...

    @property
    def arrival_us(self) -> int: ...


M = TypeVar("M", bound=Message)


class Receiver(Generic[M]):
    """Messages a source received, numbered into batches until their epoch commits.

    A subclass receives (on its own thread or its client's) and calls :meth:`receive`;
    a failure it cannot recover from goes in :attr:`failure` and fails the query at the
    next batch.
    """

    #: whether the system sends a replayed batch's messages again after a restart
    #: (a persistent MQTT session, an SSE stream resumed from its cursor)
    redelivers = False

    def __init__(self) -> None:
        self.messages: NumberedBuffer[M] = NumberedBuffer()
        self.failure: ConnectorError | None = None

    def receive(self, message: M) -> None:
        self.messages.put(message)

    def check(self) -> None:
        """Raise the failure that stopped this receiver, if one did."""
        if self.failure is not None:
            raise self.failure

    def admit(self, after: int, most: int | None) -> list[M]:
        """Number waiting messages from ``after + 1`` (at most ``most``) into a batch."""
        return self.messages.admit(after, most)

    def batch(self, first: int, last: int) -> list[M]:
        """The messages numbered ``first + 1 .. last``.  A batch replayed from Spark's
        checkpoint after a restart: a system that redelivers sends it again (waited for
        up to :data:`~.numbered.REPLAY_WAIT_S`); another has lost it (empty)."""
        return self.messages.batch(first, last, redelivered=self.redelivers,
                                   check=self.check)

    def release_through(self, number: int) -> None:
        """Let go of the messages numbered up to ``number``: their epochs committed."""
        self.released(self.messages.release_through(number))

    def released(self, messages: list[M]) -> None:
        """What the system is told of committed messages (an MQTT ack); nothing by default."""

    def close(self) -> None:
        raise NotImplementedError


class PushReader(DataSourceStreamReader, Generic[M]):
    """The stream reader of a push source over its :class:`Receiver`.

    Spark pickles the reader to ship ``read`` to executors: the receiver, opened on
    first use in the driver's reader process, is never part of that.
    """

    def __init__(self, settings: dict[str, Any], schema: T.StructType,
                 start: dict[str, Any] | None = None) -> None:
        self.settings = settings
        self.schema = schema
        #: the offset a resumed pipeline starts at (from its state store); None: the start
        self.start = start
        self._receiver: Receiver[M] | None = None

    # -- what a source says ---------------------------------------------------------

    def open_receiver(self, start: dict[str, Any]) -> Receiver[M]:
        """Start receiving, resuming from ``start`` where the system can."""
        raise NotImplementedError

    def offset_after(self, start: dict[str, Any], admitted: list[M]) -> dict[str, Any]:
        """The offset after ``start`` and the messages ``admitted`` to its batch."""
        return {"messages": int(start["messages"]) + len(admitted)}

    def partition_of(self, messages: list[M], number: int) -> InputPartition:
        """A batch's messages, numbered from ``number``, as ``read`` gets them."""
        return InputPartition(([m.payload for m in messages],
                               [m.arrival_us for m in messages], number))

    def decode(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        raise NotImplementedError

    # -- pyspark's stream reader ------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_receiver": None}

    def initialOffset(self) -> dict[str, Any]:
        return initial_offset(self.start, lambda: self.offset_after({"messages": 0}, []),
                              self.settings["table"])

    def getDefaultReadLimit(self) -> ReadLimit:
        return default_limit(self.settings["max_messages_per_batch"])

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        receiver = self._opened(start)
        first = int(start["messages"])
        receiver.release_through(first)  # Spark plans from here: those committed
        return self.offset_after(start, receiver.admit(first, max_rows(limit, None)))

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        first, last = int(start["messages"]), int(end["messages"])
        if first == last:
            return []
        messages = self._opened(start).batch(first, last)
        return [self.partition_of(messages, first + 1)] if messages else []

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        settle()
        yield from self.decode(partition)

    def commit(self, end: dict[str, Any]) -> None:
        if self._receiver is not None:
            self._receiver.release_through(int(end["messages"]))

    def stop(self) -> None:
        if self._receiver is not None:
            self._receiver.close()
            self._receiver = None

    def _opened(self, start: dict[str, Any]) -> Receiver[M]:
        if self._receiver is None:
            self._receiver = self.open_receiver(start)
        self._receiver.check()
        return self._receiver


class PushDecoder:
    """Decodes one batch's payloads (one record each) into Arrow batches, on an executor:
    one decoder call for the batch, bad records by the table's ``bad_data`` policy."""

    def __init__(self, settings: Mapping[str, Any], schema: T.StructType, what: str,
                 fix: str) -> None:
        """``what`` names the source in messages; ``fix`` says who can fix a bad record
        ("Fix the publisher")."""
        self.spec = FormatSpec(**settings["format"])
        self.arrow_schema = arrow_schema(schema)
        self.metadata: dict[str, str] = settings.get("metadata") or {}
        decoded = decoded_schema(self.arrow_schema, self.metadata)
        self.decoder = source_decoder(decoded, self.spec, settings["not_null"])
        self.bad = BadRecords(self.spec, self.arrow_schema, 0, what, "in {position}", fix)

    def decode(self, payloads: list[bytes], arrivals: list[int],
               position: Callable[[int], str],
               metadata: Mapping[str, list[str]] | None = None) -> Iterator[pa.RecordBatch]:
        """Rows of ``payloads``; ``position(i)`` says where message ``i`` was (for a bad
        record's message); ``metadata``: each metadata key's values, one per message."""
        raw = payloads
        if not self.spec.opaque:
            payloads = [p.translate(_LINE_BREAKS) for p in payloads]
        lengths = np.array([len(p) for p in payloads], dtype=np.int64)
        starts = np.zeros(len(payloads), dtype=np.int64)
        np.cumsum(lengths[:-1] + 1, out=starts[1:])
        buf = np.frombuffer(b"\n".join(payloads) + b"\n", dtype=np.uint8)
        decoded = self.decoder.decode(buf, starts, lengths)
        dead = self.bad.handle([(raw[i], problem, position(i)) for i, problem in decoded.bad])
        if dead is not None:
            yield dead
        if decoded.num_rows:
            stamps = _event_times(decoded.lines, arrivals, decoded.num_rows)
            columns = decoded.columns
            if self.metadata and metadata:
                rows_at = decoded.lines if decoded.lines is not None else np.array(
                    sorted(set(range(len(payloads))) - {i for i, _ in decoded.bad}), np.int64)
                taken = pa.array(rows_at, pa.int64())
                columns = merge_physical(self.arrow_schema, columns, {
                    column: pa.array(metadata[key], pa.string()).take(taken)
                    for column, key in self.metadata.items()})
            yield data_batch(self.arrow_schema, columns, 0, stamps)
        dropped = self.bad.finish()
        if dropped is not None:
            yield dropped


def _event_times(lines: np.ndarray | None, arrivals: list[int], rows: int) -> pa.Array:
    """Each row's arrival time (µs) where it is known which message made the row (the
    decoder says, or every message made one row); otherwise the batch's latest arrival."""
    times = np.asarray(arrivals, dtype=np.int64)
    if lines is not None and len(lines) == rows:
        return pa.array(times[lines], pa.int64())
    if lines is None and len(times) == rows:
        return pa.array(times, pa.int64())
    return pa.array(np.full(rows, times.max(), dtype=np.int64), pa.int64())
