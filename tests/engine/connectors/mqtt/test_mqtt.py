"""The ``mqtt`` connector against the real Mosquitto on 127.0.0.1:1883.

Every test uses its own topic (a uuid), and every source's persistent session
is removed from the broker afterwards.
"""

from __future__ import annotations

import json
import re
import shutil
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from pyspark.sql import SparkSession
from pyspark.sql import types as T
from pyspark.sql.streaming.datasource import ReadAllAvailable

from spate.engine.connectors import CONNECTORS, ColumnDef, ConnectorError, TableConfig
from spate.engine.connectors.core.boundary import UNCONFINED, Boundary
from spate.engine.connectors.core.egress import EgressPolicy
from spate.engine.connectors.formats.records import source_schema
from spate.engine.connectors.mqtt.client import BrokerSettings, close, connect, subscribe
from spate.engine.connectors.mqtt.connector import parse_table
from spate.engine.connectors.mqtt.source import MqttStreamReader
from spate.engine.runtime.failures import root_message
from tests.engine.connectors.support import make_table
from tests.engine.harness import read_lines, run_pipeline

URL = "tcp://127.0.0.1:1883"
BROKER = BrokerSettings("127.0.0.1", 1883)
COLUMNS = (ColumnDef("id", T.LongType()), ColumnDef("name", T.StringType()))


@pytest.fixture
def topic() -> str:
    return f"spate-test/{uuid.uuid4().hex}"


@pytest.fixture
def prefix() -> Iterator[str]:
    """A client_prefix of the test's own; the sessions it made are removed afterwards."""
    name = f"t{uuid.uuid4().hex[:8]}"
    yield name
    _drop_sessions(name)


_SESSIONS: list[str] = []


def _drop_sessions(prefix: str) -> None:
    for client_id in [c for c in _SESSIONS if c.startswith(prefix)]:
        close(connect(BROKER, client_id, what="cleanup", persistent=False))
        _SESSIONS.remove(client_id)


def _source(topic: str, prefix: str, columns: tuple[ColumnDef, ...] = COLUMNS,
            **options: Any) -> TableConfig:
    values = {"format": "json", **options}
    table = make_table("mqtt", "source", columns, name="src", url=URL, topic=topic,
                       type="source", client_prefix=prefix, **values)
    _SESSIONS.append(parse_table(table).client_id)
    return table


def _create_session(table: TableConfig) -> None:
    """Open the source's session on the broker before its pipeline first runs, so that
    what a test publishes next is kept for it (a fresh subscription sees nothing older)."""
    parsed = parse_table(table)
    client = connect(BROKER, parsed.client_id, what="test", persistent=True, manual_ack=True)
    subscribe(client, BROKER, parsed.topic, parsed.qos, "test")
    close(client)


def _publish(topic: str, payloads: Sequence[str | bytes], qos: int = 1) -> None:
    client = paho.Client(CallbackAPIVersion.VERSION2, protocol=paho.MQTTv5)
    client.connect("127.0.0.1", 1883)
    client.loop_start()
    try:
        for info in [client.publish(topic, p, qos=qos) for p in payloads]:
            info.wait_for_publish(5)
    finally:
        client.disconnect()
        client.loop_stop()


def _records(first: int, last: int) -> list[str]:
    return [json.dumps({"id": i, "name": f"n{i}"}) for i in range(first, last)]


def _written(first: int, last: int) -> list[str]:
    """The lines a json file sink writes for :func:`_records` ``(first, last)``."""
    return sorted(json.dumps({"id": i, "name": f"n{i}"}, separators=(",", ":"))
                  for i in range(first, last))


def _lines_reach(path: Path, count: int) -> Callable[[], bool]:
    """Whether ``count`` different lines arrived: a source delivers at least once, so
    repeats of a replayed epoch must not end the wait before the last records came."""
    return lambda: len(set(read_lines(path))) >= count


# -- options ---------------------------------------------------------------------


@pytest.mark.parametrize(("options", "option", "words"), [
    ({"url": None}, "url", "needs option 'url'"),
    ({"url": "http://127.0.0.1"}, "url", "tcp://host[:port]"),
    ({"url": "tcp://user:hunter2@127.0.0.1"}, "url", "options 'username' and 'password'"),
    ({"url": "ssl://127.0.0.1:8883"}, "url", "not supported yet"),
    ({"tls.ca": "ca.pem"}, "tls.ca", "not supported yet"),
    ({"topic": None}, "topic", "needs option 'topic'"),
    ({"topic": "a/b#"}, "topic", "not a valid topic filter"),
    ({"topic": "a/#/b"}, "topic", "not a valid topic filter"),
    ({"qos": "3"}, "qos", "must be one of"),
    ({"qos": "2"}, "qos", "not supported yet"),
    ({"retain": "true"}, "retain", "sinks only"),
    ({"max_packet_size": "0"}, "max_packet_size", "at least 1"),
    ({"max_messages_per_batch": "x"}, "max_messages_per_batch", "integer"),
    ({"bad_data": "skip"}, "bad_data", "must be one of"),
    ({"client_id": "x"}, "client_id", "unknown option"),
    ({"framing": "newline"}, "framing", "not supported yet"),
])
def test_source_options_are_checked(options: dict[str, str | None], option: str,
                                    words: str) -> None:
    values = {"url": URL, "topic": "a/+/c", "format": "json", "type": "source", **options}
    table = TableConfig("src", "mqtt", "source",
                        {k: v for k, v in values.items() if v is not None}, COLUMNS)
    with pytest.raises(ConnectorError, match=re.escape(words)) as caught:
        CONNECTORS["mqtt"].validate(table)
    assert caught.value.option == option
    assert "hunter2" not in str(caught.value)


@pytest.mark.parametrize(("options", "option", "words"), [
    ({"topic": "a/+"}, "topic", "wildcard"),
    ({"topic": "a/#"}, "topic", "wildcard"),
    ({"bad_data": "drop"}, "bad_data", "sources only"),
    ({"max_messages_per_batch": "5"}, "max_messages_per_batch", "sources only"),
    ({"retain": "maybe"}, "retain", "true or false"),
    ({"format": None}, "format", "needs option 'format'"),
])
def test_sink_options_are_checked(options: dict[str, str | None], option: str,
                                  words: str) -> None:
    values = {"url": URL, "topic": "a/b", "format": "json", "type": "sink", **options}
    table = TableConfig("out", "mqtt", "sink",
                        {k: v for k, v in values.items() if v is not None}, COLUMNS)
    with pytest.raises(ConnectorError, match=re.escape(words)) as caught:
        CONNECTORS["mqtt"].validate(table)
    assert caught.value.option == option


def test_the_password_is_a_secret_option() -> None:
    specs = {spec.name: spec for spec in CONNECTORS["mqtt"].options}
    assert specs["password"].secret
    assert not specs["username"].secret and not specs["topic"].secret


def test_a_raw_string_source_defaults_to_one_value_column(topic: str) -> None:
    table = make_table("mqtt", "source", url="mqtt://127.0.0.1", topic=topic,
                       format="raw_string", type="source")
    assert [c.name for c in CONNECTORS["mqtt"].validate(table)] == ["value"]


# -- reach ------------------------------------------------------------------------


def test_reach_connects_to_the_broker() -> None:
    message = CONNECTORS["mqtt"].reach({"url": URL, "username": "spate"}, None, UNCONFINED)
    assert message == "connected to the MQTT broker 127.0.0.1:1883 as user 'spate'"


def test_reach_names_the_address_it_could_not_reach_but_no_password() -> None:
    options = {"url": "tcp://127.0.0.1:1", "username": "u", "password": "hunter2"}
    with pytest.raises(ConnectorError, match="127.0.0.1:1") as caught:
        CONNECTORS["mqtt"].reach(options, "source", UNCONFINED)
    assert "hunter2" not in str(caught.value)


def test_reach_goes_through_the_egress_policy() -> None:
    refused = Boundary(egress=EgressPolicy())
    with pytest.raises(ConnectorError, match="egress policy"):
        CONNECTORS["mqtt"].reach({"url": URL}, "sink", refused)
    allowed = Boundary(egress=EgressPolicy.from_config(["127.0.0.1"], ()))
    reached = CONNECTORS["mqtt"].reach({"url": URL}, "sink", allowed)
    assert reached == "connected to the MQTT broker 127.0.0.1:1883"
    with pytest.raises(ConnectorError, match="could not connect to 127.0.0.1:1 "):
        CONNECTORS["mqtt"].reach({"url": "tcp://127.0.0.1:1"}, "sink", allowed)


# -- the reader, against the broker ------------------------------------------------------


def _reader(table: TableConfig) -> MqttStreamReader:
    parsed = parse_table(table)
    settings = {"table": table.name, "broker": parsed.broker.to_dict(), "topic": parsed.topic,
                "qos": parsed.qos, "client_id": parsed.client_id,
                "format": parsed.spec.to_dict(), "max_messages_per_batch": 100,
                "not_null": []}
    return MqttStreamReader(settings, source_schema(parsed.spec, parsed.columns))


def _wait_for(reader: MqttStreamReader, start: dict[str, Any], count: int) -> dict[str, Any]:
    deadline = time.monotonic() + 10
    end: dict[str, Any] = reader.latestOffset(start, ReadAllAvailable())
    while end["messages"] - start["messages"] < count and time.monotonic() < deadline:
        time.sleep(0.05)
        end = reader.latestOffset(start, ReadAllAvailable())
    return end


def _ids(reader: MqttStreamReader, start: dict[str, Any], end: dict[str, Any]) -> list[int]:
    ids: list[int] = []
    for partition in reader.partitions(start, end):
        for batch in reader.read(partition):
            ids.extend(batch.column("id").to_pylist())
    return ids


def test_an_unacknowledged_batch_is_redelivered_to_a_restarted_reader(topic: str,
                                                                       prefix: str) -> None:
    """A batch Spark logged but whose epoch never committed: the restarted reader
    rebuilds it from the broker's redelivery, then acknowledges it on commit."""
    table = _source(topic, prefix)
    _create_session(table)
    _publish(topic, _records(0, 3))
    crashed = _reader(table)
    start = crashed.initialOffset()
    end = _wait_for(crashed, start, 3)
    assert end == {"messages": 3} and _ids(crashed, start, end) == [0, 1, 2]
    crashed.stop()  # no commit: a crash before the epoch committed

    resumed = _reader(table)
    assert _ids(resumed, start, end) == [0, 1, 2]  # replayed without latestOffset
    resumed.commit(end)
    _publish(topic, _records(3, 4))
    assert _ids(resumed, end, _wait_for(resumed, end, 1)) == [3]
    resumed.commit({"messages": 4})
    resumed.stop()

    after = _reader(table)  # everything was acknowledged: nothing comes again
    assert after.latestOffset({"messages": 4}, ReadAllAvailable()) == {"messages": 4}
    time.sleep(0.3)
    assert after.latestOffset({"messages": 4}, ReadAllAvailable()) == {"messages": 4}
    after.stop()


def test_messages_hold_newlines_and_raw_strings_keep_them(topic: str, prefix: str) -> None:
    table = _source(topic, prefix, columns=(), format="raw_string")
    _create_session(table)
    _publish(topic, ["one\ntwo", "", "three"])
    reader = _reader(table)
    start = reader.initialOffset()
    end = _wait_for(reader, start, 3)
    values = [v for p in reader.partitions(start, end) for b in reader.read(p)
              for v in b.column("value").to_pylist()]
    assert values == ["one\ntwo", "", "three"]
    reader.stop()
    pretty = _source(topic + "/json", prefix)
    _create_session(pretty)
    _publish(topic + "/json", ['{\n  "id": 7,\n  "name": "x"\n}'])
    reader = _reader(pretty)
    start = reader.initialOffset()
    assert _ids(reader, start, _wait_for(reader, start, 1)) == [7]
    reader.stop()


# -- pipelines ----------------------------------------------------------------------


def _source_sql(topic: str, prefix: str, extra: str = "") -> str:
    return (f"CREATE TABLE src (id BIGINT, name TEXT) WITH (connector = 'mqtt', url = '{URL}', "
            f"topic = '{topic}', format = 'json', type = 'source', "
            f"client_prefix = '{prefix}'{extra});\n")


def _file_sink_sql(out: Path) -> str:
    return (f"CREATE TABLE out WITH (connector = 'single_file', path = '{out}', "
            "format = 'json', type = 'sink');\nINSERT INTO out SELECT id, name FROM src;\n")


@pytest.mark.spark
def test_a_source_pipeline_stops_and_resumes_without_loss(spark: SparkSession, topic: str,
                                                          prefix: str,
                                                          tmp_path: Path) -> None:
    """Messages published before, while stopped and after the resume all arrive; bad
    ones are dropped and counted.  At-least-once: the epoch committed right before the
    stop may be delivered again (its acknowledgements go out when Spark plans the next
    batch, which a stop can pre-empt), nothing else."""
    out = tmp_path / "out.jsonl"
    sql = _source_sql(topic, prefix, ", bad_data = 'drop'") + _file_sink_sql(out)
    # The session run_pipeline's runner opens: its tenant and pipeline's own.
    source = replace(_source(topic, prefix, bad_data="drop"), owner="default/test")
    _SESSIONS.append(parse_table(source).client_id)
    _create_session(source)
    _publish(topic, [*_records(0, 2), "not json", '{"id": "x"}', *_records(2, 5)])
    counters = run_pipeline(spark, sql, tmp_path, stop_when=_lines_reach(out, 5),
                            timeout_s=60)
    assert read_lines(out) == _written(0, 5)
    assert counters["rows_dropped"] == 2

    _publish(topic, _records(5, 12))  # while the pipeline is stopped
    shutil.rmtree(tmp_path / "checkpoint")  # resume from the state store's offsets
    threading.Timer(1.0, _publish, (topic, _records(12, 15))).start()  # and while it runs
    run_pipeline(spark, sql, tmp_path, stop_when=_lines_reach(out, 15), timeout_s=60)
    time.sleep(0.5)  # nothing more may come
    lines = Counter(read_lines(out))
    assert sorted(lines) == _written(0, 15)
    assert {line for line, seen in lines.items() if seen > 1} <= set(_written(0, 5))
    assert max(lines.values()) <= 2


def test_a_bad_record_fails_a_strict_source_naming_its_topic(topic: str, prefix: str) -> None:
    table = _source(topic, prefix)
    _create_session(table)
    _publish(topic, [*_records(0, 1), '{"id": [1]}'])
    reader = _reader(table)
    start = reader.initialOffset()
    end = _wait_for(reader, start, 2)
    with pytest.raises(ConnectorError, match=re.escape(
            f"bad record in message 2 on topic '{topic}'")) as caught:
        _ids(reader, start, end)
    assert caught.value.option == "bad_data"
    reader.stop()


@contextmanager
def _listening(topic: str, qos: int) -> Iterator[list[tuple[bytes, int, bool]]]:
    """A subscriber of ``topic`` while the block runs: the messages it received
    (payload, QoS, retain flag), growing as they arrive."""
    received: list[tuple[bytes, int, bool]] = []
    listener = paho.Client(CallbackAPIVersion.VERSION2, protocol=paho.MQTTv5)
    listener.on_message = lambda _c, _u, m: received.append((bytes(m.payload), m.qos, m.retain))
    listener.connect("127.0.0.1", 1883)
    listener.loop_start()
    try:
        subscribe(listener, BROKER, topic, qos, "test")
        yield received
    finally:
        listener.disconnect()
        listener.loop_stop()


def _until_received(received: list[Any], count: int, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while len(received) < count and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.mark.spark
def test_a_sink_pipeline_publishes_every_row(spark: SparkSession, topic: str,
                                             tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    data.write_text("".join(line + "\n" for line in _records(0, 4)))
    with _listening(topic, 2) as received:
        sql = (f"CREATE TABLE src (id BIGINT, name TEXT) WITH (connector = 'single_file', "
               f"path = '{data}', format = 'json', type = 'source');\n"
               f"CREATE TABLE out WITH (connector = 'mqtt', url = '{URL}', topic = '{topic}', "
               "format = 'json', type = 'sink', qos = '2');\n"
               "INSERT INTO out SELECT id * 10 AS id, name FROM src;\n")
        run_pipeline(spark, sql, tmp_path)
        _until_received(received, 4)
    assert sorted((json.loads(p) for p, _, _ in received), key=lambda r: r["id"]) == [
        {"id": i * 10, "name": f"n{i}"} for i in range(4)]
    assert {(qos, retain) for _, qos, retain in received} == {(2, False)}


def _sink(topic: str, **options: str) -> Any:
    table = make_table("mqtt", "sink", COLUMNS, url=URL, topic=topic, format="json", type="sink",
                       **options)
    return CONNECTORS["mqtt"].create_sink(table, T.StructType(
        [T.StructField(c.name, c.spark_type) for c in COLUMNS]))


@pytest.mark.spark
def test_each_task_publishes_its_rows_in_order(spark: SparkSession, topic: str) -> None:
    """An epoch of four partitions: every row arrives once, each partition's rows in the
    partition's order, and the epoch's bytes are those of every message.  Fewer rows than
    the broker queues for a subscriber (Mosquitto's ``max_queued_messages``, 1,000): a
    listener that falls behind on a busy machine would otherwise lose some."""
    sink = _sink(topic, qos="1")
    with _listening(topic, 1) as received:
        sink.open(None)
        rows = spark.range(0, 800, numPartitions=4).selectExpr("id", "concat('n', id) AS name")
        sink.write_epoch(0, rows)
        sink.close()
        _until_received(received, 800)
    ids = [json.loads(p)["id"] for p, _, _ in received]
    assert sorted(ids) == list(range(800))
    for part in range(4):  # spark.range gives partition p the ids [200p, 200p + 200)
        mine = [i for i in ids if i // 200 == part]
        assert mine == sorted(mine), part
    assert sink.epoch_bytes == sum(len(p) for p, _, _ in received)


@pytest.mark.spark
def test_a_record_over_max_packet_size_fails_the_epoch_naming_the_option(
        spark: SparkSession, topic: str) -> None:
    sink = _sink(topic, max_packet_size="64")
    sink.open(None)
    rows = spark.range(0, 3).selectExpr("id", "repeat('x', id * 50) AS name")
    with pytest.raises(Exception) as caught:
        sink.write_epoch(0, rows)
    sink.close()
    assert "exceeds max_packet_size (64)" in root_message(caught.value)


def test_a_confined_source_is_refused_a_loopback_broker(topic: str) -> None:
    table = replace(make_table("mqtt", "source", COLUMNS, url=URL, topic=topic,
                               format="json", type="source"),
                    boundary=Boundary(egress=EgressPolicy()))
    with pytest.raises(ConnectorError, match="egress policy") as caught:
        CONNECTORS["mqtt"].validate(table)
    assert caught.value.option == "url"


def test_a_confined_source_reads_from_an_allowed_broker(topic: str, prefix: str) -> None:
    allowed = Boundary(egress=EgressPolicy.from_config(["127.0.0.1:1883"], ()))
    table = replace(_source(topic, prefix), boundary=allowed)
    _create_session(table)
    _publish(topic, _records(0, 2))
    reader = _reader(table)
    start = reader.initialOffset()
    assert _ids(reader, start, _wait_for(reader, start, 2)) == [0, 1]
    reader.stop()


def test_each_reading_pipeline_has_a_session_of_its_own() -> None:
    table = _source("sensors/+", "spate")
    ids = {owner: parse_table(replace(table, owner=owner)).client_id
           for owner in ("t1/p1", "t1/p2", "t2/p1")}
    assert len(set(ids.values())) == 3, "two pipelines (or tenants) would share a session"
    assert parse_table(replace(table, owner="t1/p1")).client_id == ids["t1/p1"], \
        "a pipeline's session must survive its restarts"
