"""The rabbitmq connector against the real broker: options, the queue and stream
readers and sinks, bad data, /test's reach, and pipelines that stop and resume."""

from __future__ import annotations

import json
from contextlib import closing
from dataclasses import replace
from pathlib import Path
from typing import Any

import pika
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from spate.engine.connectors import CONNECTORS, ColumnDef, ConnectorError, TableConfig
from spate.engine.connectors.core.base import HIDDEN_CONTROL
from spate.engine.connectors.core.boundary import Boundary
from spate.engine.connectors.core.egress import EgressPolicy
from spate.engine.connectors.formats.records import source_schema
from spate.engine.connectors.rabbitmq.queues import RabbitQueueReader
from spate.engine.connectors.rabbitmq.settings import read_settings
from spate.engine.connectors.rabbitmq.streams import RabbitStreamReader, RabbitStreamSink
from spate.engine.planner import plan_pipeline
from spate.engine.planner.errors import PlanningError
from spate.engine.runtime.failures import root_message
from spate.engine.runtime.reports import EpochReport
from tests.engine.connectors.rabbitmq.rabbitmq_support import (
    drain_queue,
    output_stream,
    publish_to_queue,
    publish_to_stream,
    queue_name,
    read_stream,
    ready_messages,
    stream_name,
)
from tests.engine.connectors.support import make_table
from tests.engine.harness import read_lines, run_pipeline

__all__ = ["output_stream", "queue_name", "stream_name"]  # fixtures

COLUMNS = (ColumnDef("id", T.LongType(), False), ColumnDef("item", T.StringType()))
RABBITMQ = CONNECTORS["rabbitmq"]


def _table(role: str = "source", columns: tuple[ColumnDef, ...] = COLUMNS,
           **options: Any) -> TableConfig:
    values = {"type": role, "host": "127.0.0.1", "format": "json"} | options
    return make_table("rabbitmq", role, columns, **values)


def _records(*ids: int) -> list[bytes]:
    return [json.dumps({"id": i, "item": f"item-{i}"}).encode() for i in ids]


def _rows(batches: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """Data rows (id, item) and control values of a reader's batches."""
    table = pa.Table.from_batches(list(batches)) if batches else None
    rows = table.to_pylist() if table is not None else []
    data = [{"id": r["id"], "item": r["item"]} for r in rows if r[HIDDEN_CONTROL] is None]
    return data, [r[HIDDEN_CONTROL] for r in rows if r[HIDDEN_CONTROL] is not None]


def _queue_reader(queue: str, **options: Any) -> RabbitQueueReader:
    table = _table(mode="queue", queue=queue, **options)
    settings = read_settings(table, RABBITMQ.roles)
    return RabbitQueueReader(settings, source_schema(settings.spec, COLUMNS))


def _stream_reader(stream: str, **options: Any) -> RabbitStreamReader:
    table = _table(stream=stream, **options)
    settings = read_settings(table, RABBITMQ.roles)
    return RabbitStreamReader(settings, source_schema(settings.spec, COLUMNS))


# -- options -------------------------------------------------------------------------


@pytest.mark.parametrize(("options", "option", "words"), [
    ({"host": None}, "host", "needs option 'host'"),
    ({"mode": "topic"}, "mode", "'queue', 'stream'"),
    ({"mode": "queue"}, "queue", "needs option 'queue'"),
    ({"stream": "s", "queue": "q"}, "queue", "mode 'queue' only"),
    ({"stream": "s", "source.offset": "middle"}, "source.offset", "'earliest', 'latest'"),
    ({"stream": "s", "port": "70000"}, "port", "at most 65535"),
    ({"stream": "s", "max_messages_per_batch": "0"}, "max_messages_per_batch", "at least 1"),
    ({"stream": "s", "tls_config.ca_path": "x"}, "tls_config.ca_path", "not supported yet"),
    ({"stream": "s", "load_balancer_mode": "true"}, "load_balancer_mode", "not supported yet"),
    ({"stream": "s", "producer_name": "p"}, "producer_name", "sinks only"),
    ({"stream": "s", "colour": "red"}, "colour", "unknown option"),
    ({"stream": "s", "format": None}, "format", "needs option 'format'"),
])
def test_source_options_are_checked(options: dict[str, Any], option: str, words: str) -> None:
    values = {k: v for k, v in ({"stream": None} | options).items() if v is not None}
    table = _table(**values)
    if options.get("host", "") is None:
        table = replace(table, options={k: v for k, v in table.options.items() if k != "host"})
    if options.get("format", "") is None:
        table = replace(table, options={k: v for k, v in table.options.items()
                                        if k != "format"})
    with pytest.raises(ConnectorError) as caught:
        RABBITMQ.validate(table)
    assert caught.value.option == option
    assert words in str(caught.value)


@pytest.mark.parametrize(("options", "option"), [
    ({"mode": "queue"}, "routing_key"),
    ({"mode": "queue", "routing_key": "k", "queue": "q"}, "queue"),
    ({"stream": "s", "source.offset": "earliest"}, "source.offset"),
    ({"stream": "s", "bad_data": "drop"}, "bad_data"),
    ({"stream": "s", "max_messages_per_batch": "5"}, "max_messages_per_batch"),
])
def test_sink_options_are_checked(options: dict[str, Any], option: str) -> None:
    with pytest.raises(ConnectorError) as caught:
        RABBITMQ.validate(_table("sink", **options))
    assert caught.value.option == option


def test_password_is_a_secret_option() -> None:
    secrets = {spec.name for spec in RABBITMQ.options if spec.secret}
    assert secrets == {"password", "schema_registry.api_key", "schema_registry.api_secret"}


# -- queue source ----------------------------------------------------------------------


def test_queue_messages_are_acknowledged_only_after_their_batch(queue_name: str) -> None:
    publish_to_queue(queue_name, _records(1, 2, 3))
    reader = _queue_reader(queue_name, max_messages_per_batch=2)
    start = reader.initialOffset()
    batches, end = reader.read(start)
    assert end == {"delivered": 2}
    assert [r["id"] for r in _rows(batches)[0]] == [1, 2]
    reader.stop()  # a crash before the epoch committed: nothing was acknowledged
    assert ready_messages(queue_name) == 3

    reader = _queue_reader(queue_name, max_messages_per_batch=2)
    batches, end = reader.read(start)
    assert [r["id"] for r in _rows(batches)[0]] == [1, 2]  # redelivered
    batches, after = reader.read(end)  # asked for the next batch: the first committed
    assert [r["id"] for r in _rows(batches)[0]] == [3]
    reader.commit(after)
    reader.stop()
    assert ready_messages(queue_name) == 0


def test_queue_bad_data_drop_counts_and_fail_names_the_message(queue_name: str) -> None:
    publish_to_queue(queue_name, [*_records(1), b"{not json", b"", *_records(2)])
    reader = _queue_reader(queue_name, bad_data="drop")
    batches, end = reader.read(reader.initialOffset())
    assert _rows(batches) == ([{"id": 1, "item": "item-1"}, {"id": 2, "item": "item-2"}],
                              ["dropped:2"])
    reader.stop()  # not acknowledged: back in the queue

    reader = _queue_reader(queue_name)
    with pytest.raises(ConnectorError) as caught:
        reader.read(reader.initialOffset())
    reader.stop()
    assert caught.value.option == "bad_data"
    assert f"queue '{queue_name}' on 127.0.0.1:5672 at message 2" in str(caught.value)


def test_a_missing_queue_is_named(queue_name: str) -> None:
    reader = _queue_reader(queue_name + "-missing")
    with pytest.raises(ConnectorError) as caught:
        reader.read(reader.initialOffset())
    assert caught.value.option == "queue"
    assert "does not exist" in str(caught.value)


# -- stream source ---------------------------------------------------------------------


def test_stream_offsets_replay_the_same_messages(stream_name: str) -> None:
    publish_to_stream(stream_name, _records(1, 2, 3))
    latest = _stream_reader(stream_name)
    assert latest.initialOffset() == {"offset": 3}
    latest.stop()

    reader = _stream_reader(stream_name, **{"source.offset": "earliest",
                                            "max_messages_per_batch": 2})
    start = reader.initialOffset()
    batches, end = reader.read(start)
    assert end == {"offset": 2}
    first = _rows(batches)
    assert [r["id"] for r in first[0]] == [1, 2]
    assert _rows(reader.readBetweenOffsets(start, end)) == first
    batches, last = reader.read(end)
    assert [r["id"] for r in _rows(batches)[0]] == [3]
    assert reader.read(last)[1] == last  # nothing new
    reader.stop()


def test_stream_bad_data_names_the_offset(stream_name: str) -> None:
    publish_to_stream(stream_name, [*_records(1), b"[1, 2]", *_records(2)])
    reader = _stream_reader(stream_name, **{"source.offset": "earliest", "bad_data": "drop"})
    batches, _ = reader.read(reader.initialOffset())
    assert _rows(batches) == ([{"id": 1, "item": "item-1"}, {"id": 2, "item": "item-2"}],
                              ["dropped:1"])
    reader.stop()
    reader = _stream_reader(stream_name, **{"source.offset": "earliest"})
    with pytest.raises(ConnectorError) as caught:
        reader.read(reader.initialOffset())
    reader.stop()
    assert caught.value.option == "bad_data"
    assert f"stream '{stream_name}' on 127.0.0.1:5552 at offset 1" in str(caught.value)


def test_idle_sources_are_watched_without_spark(queue_name: str, stream_name: str) -> None:
    queue, stream = _table(mode="queue", queue=queue_name), _table(stream=stream_name)
    assert RABBITMQ.has_input_after(queue, 1, {"delivered": 0}) is False
    assert RABBITMQ.has_input_after(stream, 1, {"offset": 0}) is False
    publish_to_queue(queue_name, _records(1))
    publish_to_stream(stream_name, _records(1))
    assert RABBITMQ.has_input_after(queue, 1, {"delivered": 0}) is True
    assert RABBITMQ.has_input_after(stream, 1, {"offset": 0}) is True
    assert RABBITMQ.has_input_after(stream, 1, {"offset": 1}) is False


# -- stream sink -----------------------------------------------------------------------


def test_stream_sink_drops_a_replayed_epoch(spark: SparkSession, stream_name: str) -> None:
    schema = T.StructType([T.StructField("id", T.LongType()), T.StructField("item",
                                                                          T.StringType())])

    def frame(*ids: int) -> Any:
        return spark.createDataFrame([(i, f"item-{i}") for i in ids], schema)

    table = _table("sink", (), stream=stream_name, producer_name=f"{stream_name}-p")
    sink = RABBITMQ.create_sink(table, schema)
    assert isinstance(sink, RabbitStreamSink)
    sink.open(None)
    first = sink.write_epoch(0, frame(1, 2))
    assert first == {"epoch": 0, "writers": 2}  # the session's parallelism: two tasks
    sink.write_epoch(1, frame(3, 4, 5, 6))
    sink.close()
    # A crash after epoch 1 was published, before it committed: it is written again.
    sink = RABBITMQ.create_sink(table, schema)
    sink.open(first)
    second = sink.write_epoch(1, frame(6, 5, 4, 3))
    # A crash half-way through epoch 2 (each writer's first records in sorted order
    # went out, 9 the last of its writer's).
    sink.write_epoch(2, frame(7, 8))
    sink.close()
    sink = RABBITMQ.create_sink(table, schema)
    sink.open(second)
    sink.write_epoch(2, frame(9, 8, 7))
    sink.close()
    ids = [json.loads(body)["id"] for body in read_stream(stream_name, expected=9)]
    assert sorted(ids) == list(range(1, 10))
    # A marker of an earlier version (no writer count): one writer, the sink's name.
    sink = RABBITMQ.create_sink(table, schema)
    sink.open({"epoch": 2})
    assert sink.write_epoch(3, frame(10)) == {"epoch": 3, "writers": 1}
    sink.close()
    ids = [json.loads(body)["id"] for body in read_stream(stream_name, expected=10)]
    assert sorted(ids) == list(range(1, 11))

    # The same producer name in a pipeline started afresh would have every epoch dropped.
    sink = RABBITMQ.create_sink(table, schema)
    with pytest.raises(ConnectorError) as caught:
        sink.open(None)
    sink.close()
    assert caught.value.option == "producer_name"


# -- reach -----------------------------------------------------------------------------


def _confined(allow: str | None = "127.0.0.1") -> Boundary:
    return Boundary(egress=EgressPolicy.from_config([allow] if allow else [], ()))


def test_reach_names_the_queue_and_the_stream(queue_name: str, stream_name: str) -> None:
    publish_to_queue(queue_name, _records(1))
    reached = RABBITMQ.reach({"host": "127.0.0.1", "mode": "queue", "queue": queue_name},
                             "source", _confined())
    assert reached == ("reached RabbitMQ at 127.0.0.1:5672 (virtual host '/'): queue "
                       f"'{queue_name}' exists (1 messages ready)")
    sink = {"host": "127.0.0.1", "mode": "queue", "routing_key": queue_name}
    assert RABBITMQ.reach(sink | {"exchange": "amq.topic"}, "sink", _confined()) == (
        "reached RabbitMQ at 127.0.0.1:5672 (virtual host '/'): exchange 'amq.topic' exists")
    with pytest.raises(ConnectorError) as caught:
        RABBITMQ.reach(sink | {"exchange": f"{queue_name}-x"}, "sink", _confined())
    assert caught.value.option == "exchange"
    reached = RABBITMQ.reach({"host": "127.0.0.1", "stream": stream_name}, None, _confined())
    assert str(reached).endswith(f"stream '{stream_name}' exists")
    assert str(RABBITMQ.reach({"host": "127.0.0.1"}, None, _confined())).startswith(
        "reached RabbitMQ streams at 127.0.0.1:5552 (virtual host '/')")
    with pytest.raises(ConnectorError) as caught:
        RABBITMQ.reach({"host": "127.0.0.1", "stream": stream_name + "-x"}, "sink", _confined())
    assert caught.value.option == "stream"


def test_reach_failures_name_host_and_port_but_no_secret(queue_name: str) -> None:
    options = {"host": "127.0.0.1", "mode": "queue", "queue": queue_name,
               "password": "s3cret-pw"}
    with pytest.raises(ConnectorError) as caught:
        RABBITMQ.reach(options, "source", _confined())
    assert "127.0.0.1:5672" in str(caught.value) and "s3cret-pw" not in str(caught.value)
    with pytest.raises(ConnectorError) as caught:
        RABBITMQ.reach(options | {"port": "5999"}, "source", _confined())
    assert "127.0.0.1:5999" in str(caught.value)
    with pytest.raises(ConnectorError) as caught:
        RABBITMQ.reach(options, "source", _confined(allow=None))
    assert "egress policy" in str(caught.value)


# -- pipelines -------------------------------------------------------------------------


def _ids(path: Path) -> list[int]:
    return sorted(json.loads(line)["id"] for line in read_lines(path))


def test_queue_pipeline_stops_and_resumes_without_loss(spark: SparkSession, tmp_path: Path,
                                                        queue_name: str) -> None:
    out = tmp_path / "out.jsonl"
    sql = f"""
        CREATE TABLE orders (id BIGINT NOT NULL, item TEXT) WITH (
            connector = 'rabbitmq', type = 'source', mode = 'queue', host = '127.0.0.1',
            queue = '{queue_name}', format = 'json', max_messages_per_batch = 10);
        CREATE TABLE copied WITH (connector = 'single_file', type = 'sink', path = '{out}',
            format = 'json');
        INSERT INTO copied SELECT id, upper(item) AS item FROM orders;
    """
    publish_to_queue(queue_name, _records(*range(1, 6)))
    run_pipeline(spark, sql, tmp_path / "work", stop_when=lambda: set(_ids(out)) >= {1, 2, 3, 4, 5},
                 timeout_s=60)
    publish_to_queue(queue_name, _records(*range(6, 11)))
    run_pipeline(spark, sql, tmp_path / "work",
                 stop_when=lambda: set(_ids(out)) == set(range(1, 11)), timeout_s=60)
    ids = _ids(out)
    assert sorted(set(ids)) == list(range(1, 11))  # nothing lost
    assert read_lines(out)[0] == '{"id":1,"item":"ITEM-1"}'
    # At-least-once: only the messages of an epoch not yet acknowledged when the first
    # run stopped can come again.
    assert len(ids) - len(set(ids)) <= 5


def test_stream_pipeline_resumes_exactly_once(spark: SparkSession, tmp_path: Path,
                                              stream_name: str, output_stream: str) -> None:
    sql = f"""
        CREATE TABLE orders (id BIGINT NOT NULL, item TEXT) WITH (
            connector = 'rabbitmq', type = 'source', host = '127.0.0.1',
            stream = '{stream_name}', 'source.offset' = 'earliest', format = 'json',
            max_messages_per_batch = 10);
        CREATE TABLE copied WITH (connector = 'rabbitmq', type = 'sink', host = '127.0.0.1',
            stream = '{output_stream}', producer_name = '{output_stream}', format = 'json');
        INSERT INTO copied SELECT id, upper(item) AS item FROM orders;
    """
    reports: list[EpochReport] = []

    def rows_in() -> int:
        return sum(report.rows_in for report in reports)

    publish_to_stream(stream_name, _records(*range(1, 6)))
    run_pipeline(spark, sql, tmp_path / "work", reports=reports, stop_when=lambda: rows_in() >= 5,
                 timeout_s=60)
    publish_to_stream(stream_name, _records(*range(6, 9)))
    run_pipeline(spark, sql, tmp_path / "work", reports=reports, stop_when=lambda: rows_in() >= 8,
                 timeout_s=60)
    # each message once, across the restart
    assert read_stream(output_stream, expected=8) == [
        json.dumps({"id": i, "item": f"ITEM-{i}"}, separators=(",", ":")).encode()
        for i in range(1, 9)]


# -- queue sink ------------------------------------------------------------------------


def test_queue_sink_publishes_confirmed_messages(spark: SparkSession, queue_name: str) -> None:
    schema = T.StructType([T.StructField("value", T.StringType())])
    table = _table("sink", (), mode="queue", routing_key=queue_name, format="raw_string")
    sink = RABBITMQ.create_sink(table, schema)
    sink.open(None)
    sink.write_epoch(0, spark.createDataFrame([("a",), ("b\nc",)], schema))
    sink.write_epoch(1, spark.createDataFrame([("d",)], schema))
    assert sink.epoch_bytes == 1
    sink.close()
    assert sorted(drain_queue(queue_name)) == [b"a", b"b\nc", b"d"]

    unroutable = replace(table, options={**table.options, "routing_key": queue_name + "-x"})
    sink = RABBITMQ.create_sink(unroutable, schema)
    sink.open(None)
    with pytest.raises(Exception) as caught:  # raised in a task: Spark wraps it
        sink.write_epoch(0, spark.createDataFrame([("a",)], schema))
    sink.close()
    message = root_message(caught.value)
    assert message.startswith(f"rabbitmq sink '{table.name}': epoch 0: no queue takes")
    assert message.endswith("bind a queue to it")


def test_the_password_stays_out_of_the_plan(spark: SparkSession, stream_name: str) -> None:
    table = _table(stream=stream_name, password="guest", username="guest")
    frame = RABBITMQ.read_stream(spark, table, 1)
    plan = frame._jdf.queryExecution().toString()
    assert "spate_password" in plan and '"password"' not in plan
    assert "guest" not in plan.replace('"username": "guest"', "")


def test_a_stream_sinks_default_producer_name_is_its_pipelines_own() -> None:
    schema = T.StructType([T.StructField("id", T.LongType()),
                           T.StructField("item", T.StringType())])
    names = []
    for pipeline in ("t1/p1", "t1/p2", "t2/p1"):
        sink = RABBITMQ.create_sink(_table("sink", (), stream="orders"), schema)
        sink.pipeline = pipeline
        names.append(sink.producer_name)  # type: ignore[attr-defined]
    assert len(set(names)) == 3, f"pipelines would drop each other's messages: {names}"
    named = RABBITMQ.create_sink(_table("sink", (), stream="orders", producer_name="mine"), schema)
    named.pipeline = "t1/p1"
    assert named.producer_name == "mine"  # type: ignore[attr-defined]


# -- metadata --------------------------------------------------------------------------


def _with_routing_key(**options: Any) -> tuple[Any, T.StructType]:
    """Settings and stream schema of a source declaring `rk TEXT METADATA FROM
    'routing_key'` after its data columns."""
    columns = (*COLUMNS, ColumnDef("rk", T.StringType()))
    table = replace(_table(columns=columns, **options), metadata={"rk": "routing_key"})
    settings = RABBITMQ._settings(table)  # type: ignore[attr-defined]
    columns = RABBITMQ._columns(table, settings)  # type: ignore[attr-defined]
    return settings, source_schema(settings.spec, columns)


def test_routing_key_metadata_of_queue_and_stream_messages(queue_name: str,
                                                           stream_name: str) -> None:
    exchange = f"{queue_name}-x"
    with closing(pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1"))) as amqp:
        channel = amqp.channel()
        channel.confirm_delivery()
        channel.exchange_declare(exchange, "topic", auto_delete=True)
        channel.queue_bind(queue_name, exchange, "orders.*")
        channel.queue_declare(stream_name, passive=True)  # a stream is a queue to AMQP too
        for key, record in zip(("orders.eu", "orders.us"), _records(1, 2), strict=True):
            channel.basic_publish(exchange, key, record)
        channel.basic_publish("", stream_name, _records(3)[0])  # routed by the default exchange
    publish_to_stream(stream_name, _records(4))  # the stream protocol: no routing key

    settings, schema = _with_routing_key(mode="queue", queue=queue_name)
    queue = RabbitQueueReader(settings, schema)
    batches, end = queue.read(queue.initialOffset())
    queue.commit(end)
    queue.stop()
    rows = pa.Table.from_batches(list(batches)).to_pylist()
    assert [(r["id"], r["rk"]) for r in rows] == [(1, "orders.eu"), (2, "orders.us")]

    settings, schema = _with_routing_key(stream=stream_name, **{"source.offset": "earliest"})
    stream = RabbitStreamReader(settings, schema)
    batches, _ = stream.read(stream.initialOffset())
    stream.stop()
    rows = pa.Table.from_batches(list(batches)).to_pylist()
    assert [(r["id"], r["rk"]) for r in rows] == [(3, stream_name), (4, None)]


def test_routing_key_metadata_is_planned_for_sources_only() -> None:
    source = ("CREATE TABLE q (id BIGINT, rk TEXT METADATA FROM 'routing_key') WITH ("
              "connector = 'rabbitmq', type = 'source', mode = 'queue', host = 'h', "
              "queue = 'q', format = 'json');\n")
    sink = ("CREATE TABLE o WITH (connector = 'rabbitmq', type = 'sink', mode = 'queue', "
            "host = 'h', routing_key = 'o', format = 'json');\n")
    plan = plan_pipeline(source + sink + "INSERT INTO o SELECT id, rk FROM q;\n")
    assert plan.tables["q"].config.metadata == {"rk": "routing_key"}
    with pytest.raises(PlanningError, match="unknown metadata 'key'.*'routing_key'"):
        plan_pipeline(source.replace("'routing_key'", "'key'") + sink
                      + "INSERT INTO o SELECT id, rk FROM q;\n")
