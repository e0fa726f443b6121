"""``rabbitmq`` (docs/sql/connectors.md): RabbitMQ queues and streams as sources and sinks.

``mode = 'stream'`` (the default, as Arroyo's RabbitMQ connector reads streams)
reads and writes a RabbitMQ stream over the stream protocol, exactly once
(:mod:`.streams`); ``mode = 'queue'`` consumes an AMQP 0-9-1 queue and
publishes to an exchange, at least once (:mod:`.queues`).  Options
are read by :mod:`.settings`; every connection goes to the address
the tenant's egress policy checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from rstream import Consumer

from spate.engine.connectors import core
from spate.engine.connectors.formats.records import (
    check_sink_schema,
    message_columns,
    source_schema,
)
from spate.engine.connectors.rabbitmq.queues import SOURCE_NAME as QUEUE_SOURCE
from spate.engine.connectors.rabbitmq.queues import (
    RabbitQueueSink,
    check_exchange,
    check_queue,
    connect,
)
from spate.engine.connectors.rabbitmq.settings import (
    EXCHANGE,
    HOST,
    MAX_MESSAGES_PER_BATCH,
    MODE,
    PASSWORD,
    PASSWORD_OPTION,
    PORT,
    PRODUCER_NAME,
    QUEUE,
    QUEUE_NAME,
    ROUTING_KEY,
    SOURCE_OFFSET,
    STREAM_NAME,
    USERNAME,
    VIRTUAL_HOST,
    RabbitSettings,
    read_settings,
)
from spate.engine.connectors.rabbitmq.streams import SOURCE_NAME as STREAM_SOURCE
from spate.engine.connectors.rabbitmq.streams import (
    PrivateLoop,
    RabbitStreamReader,
    RabbitStreamSink,
    client_options,
    open_client,
)


@core.register
class RabbitMQConnector(core.Connector):
    """RabbitMQ streams (exactly-once) and queues (at-least-once)."""

    name = "rabbitmq"
    roles = frozenset({core.SOURCE, core.SINK})
    options = (*core.TYPE, MODE, HOST, PORT, USERNAME, PASSWORD, VIRTUAL_HOST, STREAM_NAME,
               SOURCE_OFFSET, PRODUCER_NAME, QUEUE_NAME, EXCHANGE, ROUTING_KEY,
               MAX_MESSAGES_PER_BATCH,
               *core.FORMAT, *core.MESSAGE_RECORDS)
    examples = {
        core.SOURCE: ({"type": "source", "format": "json", "json.unstructured": "true",
                       "host": "h", "stream": "s"},
                      {"type": "source", "format": "json", "json.unstructured": "true",
                       "host": "h", "mode": "queue", "queue": "q"}),
        core.SINK: ({"type": "sink", "format": "json", "host": "h", "stream": "s"},
                    {"type": "sink", "format": "json", "host": "h", "mode": "queue",
                     "exchange": "e", "routing_key": "r"})}

    def _settings(self, table: core.TableConfig, resolve: bool = False) -> RabbitSettings:
        settings = read_settings(table, self.roles, resolve)
        self._columns(table, settings)  # checks them against the format
        return settings

    @staticmethod
    def _columns(table: core.TableConfig, settings: RabbitSettings) -> tuple[core.ColumnDef, ...]:
        return message_columns(table, settings.spec, settings.role)

    def metadata_fields(self, role: str) -> Mapping[str, tuple[T.DataType, ...]]:
        """The routing key a source's message was published with (stream messages carry
        it when they were routed to the stream by an exchange; else NULL)."""
        return {"routing_key": (T.StringType(),)} if role == core.SOURCE else {}

    def validate(self, table: core.TableConfig) -> tuple[core.ColumnDef, ...]:
        return self._columns(table, self._settings(table))

    def batch_limit(self, table: core.TableConfig) -> int | None:
        return self._settings(table).max_messages_per_batch

    def has_input_after(self, table: core.TableConfig, parallelism: int,
                        offset: Any) -> bool | None:
        """Queues: whether messages are ready; streams: whether a message is stored at
        the offset or after it."""
        del parallelism
        settings = self._settings(table, resolve=True)
        if settings.mode == QUEUE:
            connection = connect(settings)
            try:
                return check_queue(connection, settings) > 0
            finally:
                connection.close()
        reader = RabbitStreamReader(settings, T.StructType([]))
        return reader.has_message_at(int(offset["offset"]))

    def read_stream(self, spark: SparkSession, table: core.TableConfig,
                    parallelism: int) -> DataFrame:
        del parallelism  # one reader: a queue or a stream is read in order
        settings = self._settings(table, resolve=True)
        if settings.role != core.SOURCE:
            return super().read_stream(spark, table, parallelism=1)
        schema = source_schema(settings.spec, self._columns(table, settings))
        options = core.source_options(schema, settings.to_dict())
        options[PASSWORD_OPTION] = settings.password
        name = QUEUE_SOURCE if settings.mode == QUEUE else STREAM_SOURCE
        return core.load_stream(spark, name, options, table.primary_key)

    def create_sink(self, table: core.TableConfig, schema: T.StructType) -> core.Sink:
        settings = self._settings(table, resolve=True)
        if settings.role != core.SINK:
            return super().create_sink(table, schema)
        check_sink_schema(settings.spec, schema)
        if settings.mode == QUEUE:
            return RabbitQueueSink(settings, schema)
        return RabbitStreamSink(settings)

    def reach(self, options: Mapping[str, str], role: str | None, boundary: core.Boundary) -> str:
        """Connect to the broker; when the table names its queue (source) or stream,
        check it exists.  A connection profile may name neither: then only the login
        is checked."""
        role = role or options.get(core.TYPE_OPTION.name) or core.SOURCE
        named = {key.lower() for key in options}
        target = STREAM_NAME.name if options.get(MODE.name, MODE.default).lower() != QUEUE else (
            QUEUE_NAME.name if role == core.SOURCE else ROUTING_KEY.name)
        placeholder = {} if target in named else {target: "-"}
        values = {core.FORMAT_OPTION.name: "raw_string", **options, **placeholder,
                  core.TYPE_OPTION.name: role}
        table = core.TableConfig(name="reach", connector=self.name, role=role, options=values,
                                 columns=(), boundary=boundary)
        settings = self._settings(table, resolve=True)
        if settings.mode == QUEUE:
            return _reach_queue(settings, check=not placeholder)
        return _reach_stream(settings, check=not placeholder)


def _reach_queue(settings: RabbitSettings, check: bool) -> str:
    connection = connect(settings)
    try:
        reached = f"reached RabbitMQ at {settings.host}:{settings.port} (virtual host " \
                  f"'{settings.virtual_host}')"
        if check and settings.role == core.SOURCE:
            ready = check_queue(connection, settings)
            return f"{reached}: queue '{settings.queue}' exists ({ready} messages ready)"
        if settings.exchange:  # the default exchange always exists
            check_exchange(connection, settings)
            return f"{reached}: exchange '{settings.exchange}' exists"
        return reached
    finally:
        connection.close()


def _reach_stream(settings: RabbitSettings, check: bool) -> str:
    loop = PrivateLoop()
    consumer = Consumer(**client_options(settings))
    try:
        loop.run(open_client(consumer, settings, check_stream=check))
        loop.run(consumer.close())
    finally:
        loop.close()
    reached = f"reached RabbitMQ streams at {settings.host}:{settings.port} (virtual host " \
              f"'{settings.virtual_host}')"
    return f"{reached}: stream '{settings.stream}' exists" if check else reached
