"""``rabbitmq`` in ``mode = 'stream'``: a RabbitMQ stream source and sink (rstream).

Delivery guarantee: **exactly-once**, both ways.

Source: the Spate offset is the stream's own, ``{"offset": n}``: the next
message to read.  An epoch reads the offsets ``[start, end)``; a replay reads
the same messages again (``readBetweenOffsets``), so every message enters
Spate once.  ``source.offset`` says where a fresh pipeline starts: ``earliest``
(the first message the stream still holds) or ``latest`` (after its last one).
A message's event time is the broker's timestamp of its chunk.

Sink: publishes each record as an AMQP 1.0 message (one data section, as the
other stream clients write them) with publisher confirms, under a producer
name (``producer_name``, by default ``spate:<tenant>/<pipeline>/<table>``).  RabbitMQ
de-duplicates per producer name: it keeps the highest publishing id written
under the name, and drops (yet confirms) any message whose id is not above it.
The epoch is published by the Spark tasks, no record passing through the
driver: its records are spread over the sink's *writers* by a hash of their
bytes (a number fixed when the pipeline first opens the sink, the session's
parallelism, and kept in its marker), and writer ``w`` publishes its records
under a producer name of its own (the sink's for writer 0, ``<name>#<w>`` for
the others). A writer's record ``i`` of epoch ``e`` has the id
``(e + 1) * 2**32 + i``, and a writer's records are sorted first, so an epoch
replayed after a crash gives every writer the same records, in the same
order, with the same ids, and whatever the crashed attempt wrote is dropped.
Ids must only grow: a fresh pipeline (no committed epoch) refuses a producer
name that has already written past a first epoch, since its epochs would all
be dropped as duplicates. A marker without a writer count (an earlier version's)
means one writer, the sink's producer name.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.datasource import SimpleDataSourceStreamReader
from rstream import (
    AMQPMessage,
    ConfirmationStatus,
    Consumer,
    ConsumerOffsetSpecification,
    MessageContext,
    OffsetType,
    Producer,
    amqp_decoder,
)

from spate.engine.connectors import core
from spate.engine.connectors.core.arrow_batches import arrow_schema
from spate.engine.connectors.core.executor_writes import default_writers, write_partitions
from spate.engine.connectors.formats.records import encode_records, record_bytes
from spate.engine.connectors.rabbitmq.settings import (
    EARLIEST,
    PRODUCER_NAME,
    STREAM_NAME,
    TIMEOUT_S,
    MessageDecoder,
    RabbitSettings,
    shipped_settings,
)

SOURCE_NAME = "spate_rabbitmq_stream"
#: A message read: its offset, body, chunk timestamp (ms) and routing key (if any).
_Taken = tuple[int, bytes, int, str | None]
#: A record's publishing id is (epoch + 1) * 2**32 + its index in the epoch.
EPOCH_SHIFT = 32
#: Seconds a read waits for a first message, then for each next one.
_FIRST_WAIT_S = 0.2
_IDLE_S = 0.05
#: Message bytes per publish frame (rstream's frames are at most 1 MiB).
_FRAME_BYTES = 512 * 1024

R = TypeVar("R")


class PrivateLoop:
    """An asyncio loop on a daemon thread, so blocking callers can drive rstream."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True,
                                        name="spate-rabbitmq-stream")
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, R], timeout_s: float = TIMEOUT_S) -> R:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout_s)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


def client_options(settings: RabbitSettings) -> dict[str, Any]:
    """The connection arguments rstream's Consumer and Producer take."""
    return {"host": settings.address, "port": settings.port, "vhost": settings.virtual_host,
            "username": settings.username, "password": settings.password, "max_retries": 1}


async def open_client(client: Consumer | Producer, settings: RabbitSettings,
                      check_stream: bool = True) -> None:
    """Connect ``client`` and check the stream exists; raises :class:`ConnectorError`
    (and closes the client) when it cannot."""
    try:
        await asyncio.wait_for(client.start(), TIMEOUT_S)
        exists = not check_stream or await client.stream_exists(settings.stream or "")
    except Exception:  # noqa: BLE001 - refused, login, virtual host: one message for all
        await _close_quietly(client)
        raise settings.unreachable() from None
    if not exists:
        await _close_quietly(client)
        raise core.ConnectorError(f"rabbitmq table '{settings.table}': stream '{settings.stream}' "
                                  f"does not exist on {settings.host}:{settings.port} (virtual "
                                  f"host '{settings.virtual_host}'); create it first",
                                  option=STREAM_NAME.name)


async def _close_quietly(client: Consumer | Producer) -> None:
    try:
        await client.close()
    except Exception:  # noqa: BLE001, S110 - already failing: the first error is the one to show
        pass


class RabbitStreamDataSource(core.SpateDataSource):
    """Registered as ``spate_rabbitmq_stream``; see this module's docstring."""

    source_name = SOURCE_NAME

    def simpleStreamReader(self, schema: T.StructType) -> SimpleDataSourceStreamReader:
        return RabbitStreamReader(shipped_settings(self), schema,
                                  self.start_offset())


class RabbitStreamReader(SimpleDataSourceStreamReader):
    """Reads one stream in offset ranges; offsets ``{"offset": next offset}``."""

    def __init__(self, settings: RabbitSettings, schema: T.StructType,
                 start: dict[str, Any] | None = None) -> None:
        self.settings = settings
        self.start = start
        self.schema = schema
        self._loop: PrivateLoop | None = None
        self._consumer: Consumer | None = None

    def initialOffset(self) -> dict[str, Any]:
        return core.initial_offset(self.start, self._fresh_offset, self.settings.table)

    def _fresh_offset(self) -> dict[str, Any]:
        if self.settings.start == EARLIEST:
            return {"offset": 0}  # the broker starts at the first offset it still holds
        last = self._fetch(OffsetType.LAST, 0, 1 << 62, None)
        return {"offset": last[-1][0] + 1 if last else 0}

    def read(self, start: dict[str, Any]) -> tuple[Iterator[pa.RecordBatch], dict[str, Any]]:
        first = int(start["offset"])
        messages = self._fetch(OffsetType.OFFSET, first,
                               self.settings.max_messages_per_batch, None)
        end = {"offset": messages[-1][0] + 1 if messages else first}
        return self._batches(messages, first), end

    def readBetweenOffsets(self, start: dict[str, Any],
                           end: dict[str, Any]) -> Iterator[pa.RecordBatch]:
        first, stop = int(start["offset"]), int(end["offset"])
        try:
            messages = self._fetch(OffsetType.OFFSET, first, stop - first, stop)
        finally:
            self.stop()  # a replay may run on an executor, where nothing else stops it
        if stop > first and (not messages or messages[-1][0] != stop - 1):
            raise core.ConnectorError(
                f"rabbitmq source '{self.settings.table}': offsets {first} to {stop - 1} of "
                f"{self.settings.where()} cannot be read again (the stream no longer holds "
                "them: retention removed them?); the epoch cannot be replayed exactly",
                option=STREAM_NAME.name)
        return self._batches(messages, first)

    def has_message_at(self, offset: int) -> bool:
        """Whether the stream holds a message at ``offset`` or after it (then stops)."""
        try:
            return bool(self._fetch(OffsetType.OFFSET, offset, 1, None))
        finally:
            self.stop()

    def stop(self) -> None:
        if self._loop is not None:
            if self._consumer is not None:
                self._loop.run(self._consumer.close())
            self._loop.close()
        self._loop = self._consumer = None

    def _batches(self, messages: list[_Taken], first: int) -> Iterator[pa.RecordBatch]:
        decoder = MessageDecoder(self.settings, arrow_schema(self.schema))
        stamps = np.array([m[2] * 1000 for m in messages], dtype=np.int64)
        offset = messages[0][0] if messages else first
        return iter(decoder.batches([m[1] for m in messages], stamps, offset,
                                    [m[3] for m in messages]))

    def _fetch(self, kind: OffsetType, first: int, limit: int,
               stop: int | None) -> list[_Taken]:
        """``(offset, body, timestamp ms, routing key)`` of up to ``limit`` messages from ``first``
        (below ``stop`` when given, waiting for them), in offset order."""
        if self._loop is None:
            self._loop = PrivateLoop()
        try:
            return self._loop.run(self._subscribe_and_take(kind, first, limit, stop),
                                  TIMEOUT_S * 3)
        except core.ConnectorError:
            raise
        except Exception:  # noqa: BLE001 - a lost connection, a deleted stream: one message
            self.stop()
            raise self.settings.unreachable() from None

    async def _subscribe_and_take(self, kind: OffsetType, first: int, limit: int,
                                  stop: int | None) -> list[_Taken]:
        if self._consumer is None:
            consumer = Consumer(**client_options(self.settings))
            await open_client(consumer, self.settings)
            self._consumer = consumer
        taken: list[_Taken] = []
        arrived = asyncio.Event()

        def on_message(message: AMQPMessage, context: MessageContext) -> None:
            in_range = context.offset >= first and (stop is None or context.offset < stop)
            if in_range and len(taken) < limit:
                taken.append((context.offset, _body(message), context.timestamp,
                              _routing_key(message)))
                arrived.set()

        subscriber = await self._consumer.subscribe(
            self.settings.stream or "", on_message, decoder=amqp_decoder,
            offset_specification=ConsumerOffsetSpecification(
                kind, first if kind == OffsetType.OFFSET else None))
        try:
            await self._wait(taken, arrived, limit, stop)
        finally:
            await self._consumer.unsubscribe(subscriber)
        return taken

    @staticmethod
    async def _wait(taken: list[_Taken], arrived: asyncio.Event, limit: int,
                    stop: int | None) -> None:
        # A replay (``stop``) waits for its known range; a read ends when deliveries pause.
        wait_s = TIMEOUT_S if stop is not None else _FIRST_WAIT_S
        while len(taken) < limit and not (stop is not None and taken and taken[-1][0] >= stop - 1):
            arrived.clear()
            try:
                await asyncio.wait_for(arrived.wait(), wait_s)
            except TimeoutError:
                return
            if stop is None:
                wait_s = _IDLE_S


def _routing_key(message: AMQPMessage) -> str | None:
    """The routing key of a message an exchange routed to the stream (RabbitMQ keeps it in
    the ``x-routing-key`` message annotation); None for one published to the stream."""
    annotations = message.message_annotations or {}
    key = annotations.get(b"x-routing-key", annotations.get("x-routing-key"))
    if isinstance(key, bytes):
        return key.decode("utf-8", "replace")
    return None if key is None else str(key)


def _body(message: AMQPMessage) -> bytes:
    """The payload of an AMQP 1.0 message: its data section(s), or an AMQP value."""
    body = message.body
    if isinstance(body, bytes):
        return body
    if isinstance(body, list) and all(isinstance(part, bytes) for part in body):
        return b"".join(body)
    value = message.value if body is None else body
    return value if isinstance(value, bytes) else str(value).encode("utf-8")


class RabbitStreamSink(core.Sink):
    """Publishes epochs de-duplicated by publishing id, a writer per task; marker
    ``{"epoch": e, "writers": w}``."""

    def __init__(self, settings: RabbitSettings) -> None:
        self.settings = settings
        self._writers = 0  # none before open()

    @property
    def producer_name(self) -> str:
        """The option's, else one of the writing pipeline's own (two pipelines writing
        one stream never de-duplicate each other's messages)."""
        if self.settings.producer_name:
            return self.settings.producer_name
        owner = f"{self.pipeline}/" if self.pipeline else ""
        return f"spate:{owner}{self.settings.table}"

    def open(self, marker: Any | None) -> None:
        if marker is None:
            self._writers = default_writers()
        else:
            self._writers = int(marker.get("writers", 1))
        next_epoch = 0 if marker is None else int(marker["epoch"]) + 1
        written = asyncio.run(_last_publishing_ids(
            self.settings, [writer_name(self.producer_name, w) for w in range(self._writers)]))
        for name, last in written.items():
            if last >> EPOCH_SHIFT > next_epoch + 1:
                raise core.ConnectorError(
                    f"rabbitmq sink '{self.settings.table}': producer name '{name}' has "
                    f"already written epoch {(last >> EPOCH_SHIFT) - 1} to "
                    f"{self.settings.where()}, but this pipeline's next epoch is {next_epoch}: "
                    "its messages would be dropped as duplicates. Set option "
                    f"'{PRODUCER_NAME.name}' to a name no other pipeline (or earlier run of "
                    "this one) used", option=PRODUCER_NAME.name)

    def write_epoch(self, epoch: int, df: DataFrame) -> dict[str, int]:
        if not self._writers:
            raise core.ConnectorError(f"rabbitmq sink '{self.settings.table}' written before "
                                      f"open()")
        records = encode_records(df, self.settings.spec)
        # A record's writer: a function of its bytes alone, so a replay gives each writer
        # the very records it had.
        records = records.repartition(self._writers, *(F.col(c) for c in records.columns))
        reports = write_partitions(records, _TaskPublisher(self.settings, self.producer_name,
                                                           epoch))
        self.epoch_bytes = sum(int(report["bytes"]) for report in reports)
        return {"epoch": epoch, "writers": self._writers}

    def close(self) -> None:
        self._writers = 0


def writer_name(producer_name: str, writer: int) -> str:
    """The producer name writer ``writer`` publishes under."""
    return producer_name if writer == 0 else f"{producer_name}#{writer}"


async def _last_publishing_ids(settings: RabbitSettings, names: list[str]) -> dict[str, int]:
    """The highest publishing id the stream holds of each producer name."""
    producer = Producer(**client_options(settings))
    await open_client(producer, settings)
    try:
        client = await producer.default_client
        return {name: int(await client.query_publisher_sequence(settings.stream or "", name))
                for name in names}
    finally:
        await _close_quietly(producer)


@dataclass(frozen=True)
class _TaskPublisher:
    """Publishes one writer's records of an epoch (picklable: it runs in the tasks)."""

    settings: RabbitSettings
    producer_name: str
    epoch: int

    def __call__(self, partition: int, rows: pa.Table) -> list[dict[str, Any]]:
        # Sorted, a replayed epoch gives each record the id its first attempt gave it.
        bodies = sorted(record_bytes(record) for record in rows.column(0).to_pylist())
        try:
            asyncio.run(asyncio.wait_for(self._publish(writer_name(self.producer_name,
                                                                   partition), bodies),
                                         TIMEOUT_S * 6))
        except core.ConnectorError:
            raise
        except Exception:  # noqa: BLE001 - a lost connection, a deleted stream
            raise self.settings.unreachable() from None
        return [{"bytes": sum(len(body) for body in bodies)}]

    async def _publish(self, name: str, bodies: list[bytes]) -> None:
        settings, epoch = self.settings, self.epoch
        producer = Producer(**client_options(settings))
        await open_client(producer, settings)
        base = (epoch + 1) << EPOCH_SHIFT
        pending = set(range(base, base + len(bodies)))
        refused: list[ConfirmationStatus] = []
        confirmed = asyncio.Event()

        def on_confirm(status: ConfirmationStatus) -> None:
            pending.discard(status.message_id)
            if not status.is_confirmed:
                refused.append(status)
            if not pending:
                confirmed.set()

        try:
            for frame in _frames(bodies, base):
                await producer.send_batch(settings.stream or "", frame, publisher_name=name,
                                          on_publish_confirm=on_confirm)
            try:
                await asyncio.wait_for(confirmed.wait(), TIMEOUT_S * 5)
            except TimeoutError:
                raise core.ConnectorError(
                    f"rabbitmq sink '{settings.table}': epoch {epoch}: {len(pending)} "
                    f"messages were not confirmed by {settings.where()} in time") from None
        finally:
            await _close_quietly(producer)
        if refused:
            raise core.ConnectorError(f"rabbitmq sink '{settings.table}': epoch {epoch}: "
                                      f"{settings.where()} refused {len(refused)} messages "
                                      f"(response code {refused[0].response_code})")


def _frames(bodies: list[bytes], base: int) -> Iterator[list[AMQPMessage]]:
    """The messages of an epoch in publish frames of about :data:`_FRAME_BYTES`."""
    frame: list[AMQPMessage] = []
    size = 0
    for index, body in enumerate(bodies):
        message = AMQPMessage(body=body)
        message.publishing_id = base + index  # AMQPMessage's constructor cannot take it
        frame.append(message)
        size += len(body)
        if size >= _FRAME_BYTES:
            yield frame
            frame, size = [], 0
    if frame:
        yield frame
