"""The ``nats`` sources as Python streaming data sources (one reader, partition 0).

- ``spate_nats_jetstream``: exactly-once. Offsets are ``{"sequence": N}``, the
  last stream sequence consumed; ``latestOffset`` asks the stream for its last
  sequence (at most ``max_messages_per_batch`` sequences ahead) and ``read``
  fetches ``(start, end]`` on an executor (:func:`.nats_jetstream.read_range`),
  so a replayed batch, or a pipeline resumed from its state store, reads the
  same messages. Event time is the message's stream timestamp.
- ``spate_nats_core``: at-most-once. A subscription held by the driver's
  reader buffers what it receives; each batch hands over what has arrived
  (offsets ``{"received": N}`` count messages handed over). Messages published
  while no pipeline subscribes, or received but not yet committed when the
  job stops, are lost. Event time is the time the message was received.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.datasource import (
    DataSourceStreamReader,
    InputPartition,
    SimpleDataSourceStreamReader,
)
from pyspark.sql.streaming.datasource import ReadLimit

from spate.engine.connectors import core
from spate.engine.connectors.core.dead_letter import BadRecords
from spate.engine.connectors.nats.client import (
    TIMEOUT_S,
    ConnectSettings,
    connect,
    connect_error,
    run_sync,
)
from spate.engine.connectors.nats.decode import MessageDecoder
from spate.engine.connectors.nats.jetstream import (
    StreamMessage,
    jetstream_error,
    last_sequence,
    read_range,
)
from spate.engine.python_workers import settle

JETSTREAM_SOURCE = "spate_nats_jetstream"
CORE_SOURCE = "spate_nats_core"
#: The reader option carrying ``auth.password``, outside the settings JSON: Spark
#: redacts the values of options whose name says "password" where it shows them.
PASSWORD_OPTION = "spate_nats_password"
DELIVER_ALL = "all"
DELIVER_NEW = "new"
DELIVER_BY_START_SEQUENCE = "by_start_sequence"


class _NatsDataSource(core.SpateDataSource):
    def nats_settings(self) -> dict[str, Any]:
        """The settings, the password put back into the connection's."""
        settings = self.settings()
        if PASSWORD_OPTION in self.options:
            settings["connect"]["password"] = self.options[PASSWORD_OPTION]
        return settings


class NatsJetStreamDataSource(_NatsDataSource):
    """Registered as ``spate_nats_jetstream``."""

    source_name = JETSTREAM_SOURCE

    def streamReader(self, schema: T.StructType) -> DataSourceStreamReader:
        return JetStreamReader(self.nats_settings(), schema, self.start_offset())


class NatsCoreDataSource(_NatsDataSource):
    """Registered as ``spate_nats_core``."""

    source_name = CORE_SOURCE

    def simpleStreamReader(self, schema: T.StructType) -> SimpleDataSourceStreamReader:
        return CoreReader(self.nats_settings(), schema, self.start_offset())


def _what(settings: dict[str, Any]) -> str:
    return f"nats source '{settings['table']}'"


def _bad_records(settings: dict[str, Any], decoder: MessageDecoder, where: str
                 ) -> BadRecords:
    return BadRecords(decoder.spec, decoder.arrow_schema, 0, _what(settings), where,
                      "Fix the record")


class JetStreamReader(DataSourceStreamReader):
    """Reads a JetStream stream by sequence ranges."""

    def __init__(self, settings: dict[str, Any], schema: T.StructType,
                 start: dict[str, Any] | None = None) -> None:
        self.settings = settings
        self.schema = schema
        self.connect = ConnectSettings.from_dict(settings["connect"])
        self.stream: str = settings["stream"]
        self.max_messages: int = settings["max_messages_per_batch"]
        #: the offset a resumed pipeline starts at (from its state store); None: fresh
        self.start = start

    def _call(self, operation: Any) -> Any:
        """Run ``operation(client)`` on a fresh connection, with clear errors."""
        async def session() -> Any:
            client = await connect(self.connect, _what(self.settings))
            try:
                return await operation(client)
            finally:
                await client.close()
        try:
            return run_sync(session())
        except core.ConnectorError:
            raise
        except (TimeoutError, OSError) as error:
            raise connect_error(self.connect, _what(self.settings), error) from None
        except Exception as error:  # nats-py's own errors: named, never a credential
            raise jetstream_error(_what(self.settings), self.stream, error) from None

    def initialOffset(self) -> dict[str, Any]:
        return core.initial_offset(self.start, self._fresh_offset, self.settings["table"])

    def _fresh_offset(self) -> dict[str, Any]:
        policy = self.settings["deliver_policy"]
        if policy == DELIVER_NEW:
            return {"sequence": self._call(lambda c: last_sequence(c, self.stream))}
        if policy == DELIVER_BY_START_SEQUENCE:
            return {"sequence": int(self.settings["start_sequence"]) - 1}
        return {"sequence": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        return core.default_limit(self.max_messages)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        last = int(self._call(lambda c: last_sequence(c, self.stream)))
        most = core.max_rows(limit, self.max_messages)
        end = last if most is None else min(last, start["sequence"] + most)
        return {"sequence": max(end, start["sequence"])}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        if start == end:
            return []
        return [InputPartition({"start": start["sequence"], "end": end["sequence"]})]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        settle()
        start, end = partition.value["start"], partition.value["end"]
        messages: list[StreamMessage] = self._call(
            lambda c: read_range(c, self.stream, self.settings["filter_subject"], start, end))
        decoder = MessageDecoder(self.settings, self.schema)
        decoded = decoder.decode([m.data for m in messages], [m.timestamp_us for m in messages],
                                 [m.subject for m in messages])
        bad = _bad_records(self.settings, decoder, f"in stream '{self.stream}' at {{position}}")
        dead = bad.handle([(messages[i].data, problem, f"sequence {messages[i].sequence}")
                           for i, problem in decoded.bad])
        for batch in (dead, decoded.batch, bad.finish()):
            if batch is not None:
                yield batch


class CoreSubscription:
    """A core-subject subscription receiving into memory on a thread of its own."""

    def __init__(self, connect_settings: ConnectSettings, subject: str, what: str) -> None:
        self.connect = connect_settings
        self.subject = subject
        self.what = what
        self._received: list[tuple[bytes, int, str]] = []
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._failure: core.ConnectorError | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name=f"nats-{subject}", daemon=True)
        self._thread.start()
        if not self._ready.wait(3 * TIMEOUT_S):
            raise core.ConnectorError(f"{what}: subscribing to '{subject}' timed out")
        self._raise_failure()

    def take(self) -> list[tuple[bytes, int, str]]:
        """The messages (payload, received µs) received since the last call."""
        self._raise_failure()
        with self._lock:
            received, self._received = self._received, []
        return received

    def close(self) -> None:
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(TIMEOUT_S)

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    def _run(self) -> None:
        try:
            asyncio.run(self._subscribe())
        except core.ConnectorError as error:
            self._failure = error
        except Exception as error:  # noqa: BLE001 - reported by the next take()
            self._failure = core.ConnectorError(f"{self.what}: the subscription to "
                                                f"'{self.subject}' failed ({type(error).__name__})")
        finally:
            self._ready.set()

    async def _subscribe(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        client = await connect(self.connect, self.what)
        try:
            await client.subscribe(self.subject, cb=self._on_message)
            await client.flush(int(TIMEOUT_S))  # the server knows the subscription from now on
            self._ready.set()
            while not self._stopping.is_set():
                if client.is_closed:
                    raise core.ConnectorError(f"{self.what}: lost the connection to NATS at "
                                              f"{self.connect.shown}; messages published since "
                                              "are lost (core NATS is at-most-once)")
                await asyncio.sleep(0.2)
        finally:
            await client.close()

    async def _on_message(self, message: Any) -> None:
        with self._lock:
            self._received.append((bytes(message.data), time.time_ns() // 1000,
                                   str(message.subject)))


class CoreReader(SimpleDataSourceStreamReader):
    """Hands each batch the messages its subscription received since the last one."""

    def __init__(self, settings: dict[str, Any], schema: T.StructType,
                 start: dict[str, Any] | None = None) -> None:
        self.settings = settings
        self.schema = schema
        self.start = start
        self._subscription: CoreSubscription | None = None

    def __getstate__(self) -> dict[str, Any]:
        # A copy sent to an executor (a replay) has nothing to hand over.
        return {**self.__dict__, "_subscription": None}

    def _subscribed(self) -> CoreSubscription:
        if self._subscription is None:
            self._subscription = CoreSubscription(
                ConnectSettings.from_dict(self.settings["connect"]),
                self.settings["subject"], _what(self.settings))
        return self._subscription

    def initialOffset(self) -> dict[str, Any]:
        self._subscribed()  # subscribe now: messages count from the query's start
        return core.initial_offset(self.start, lambda: {"received": 0}, self.settings["table"])

    def read(self, start: dict[str, Any]) -> tuple[Iterator[tuple[Any, ...]], dict[str, Any]]:
        received = self._subscribed().take()
        end = {"received": int(start["received"]) + len(received)}
        return iter(self._rows(received, int(start["received"]) + 1)), end

    def readBetweenOffsets(self, start: dict[str, Any],
                           end: dict[str, Any]) -> Iterator[tuple[Any, ...]]:
        """A batch replayed after a restart: its messages are gone (at-most-once)."""
        del start, end
        return iter([])

    def _rows(self, received: list[tuple[bytes, int, str]],
              number: int) -> list[tuple[Any, ...]]:
        """Rows of the messages ``received``, numbered ``number`` on (their count in the
        offsets)."""
        if not received:
            return []
        decoder = MessageDecoder(self.settings, self.schema)
        decoded = decoder.decode([m[0] for m in received], [m[1] for m in received],
                                 [m[2] for m in received])
        bad = _bad_records(self.settings, decoder, "in {position}")
        dead = bad.handle([(received[i][0], problem,
                            f"message {number + i} on subject '{received[i][2]}'")
                           for i, problem in decoded.bad])
        batches = [b for b in (dead, decoded.batch, bad.finish()) if b is not None]
        names = self.schema.names
        return [tuple(row[name] for name in names)
                for batch in batches for row in batch.to_pylist()]

    def stop(self) -> None:
        if self._subscription is not None:
            self._subscription.close()
