"""The nats connector against the real NATS server (JetStream) on 127.0.0.1:4222: option
validation, reading sequence ranges, bad data, the JetStream sink's de-duplication of a
replayed epoch, and reach() through the egress policy."""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import socket
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from spate.engine.connectors import (
    CONNECTOR_OPTIONS,
    CONNECTORS,
    HIDDEN_CONTROL,
    HIDDEN_TIMESTAMP,
    ColumnDef,
    ConnectorError,
    TableConfig,
)
from spate.engine.connectors.core.boundary import Boundary
from spate.engine.connectors.core.egress import EgressPolicy, literal_address
from spate.engine.connectors.nats.connector import message_ids
from spate.engine.connectors.nats.source import JetStreamReader, NatsJetStreamDataSource
from spate.engine.runtime.failures import root_message
from tests.engine.connectors.nats.nats_support import (
    SERVERS,
    TestStream,
    js_stream,
    publish,
    stream_payloads,
)
from tests.engine.connectors.support import make_table
from tests.ports import free_port

__all__ = ["js_stream"]  # the fixture, imported to be used here

COLUMNS = (ColumnDef("id", T.LongType(), False), ColumnDef("name", T.StringType()))
NATS = CONNECTORS["nats"]


def _source(stream: TestStream | None = None, columns: tuple[ColumnDef, ...] = COLUMNS,
            **options: Any) -> TableConfig:
    where = {"nats__stream": stream.name} if stream is not None else {}
    return make_table("nats", "source", columns, name="events", type="source",
                      servers=SERVERS, **({"format": "json"} | where | options))


def _reader(table: TableConfig) -> JetStreamReader:
    name, options = NATS.reader_options(table)
    source = NatsJetStreamDataSource(options)
    reader = source.streamReader(source.schema())
    assert isinstance(reader, JetStreamReader)
    return reader


def _read_all(reader: JetStreamReader, limit: Any) -> list[list[dict[str, Any]]]:
    """Drive the reader as Spark does; one list of rows per batch."""
    batches, start = [], reader.initialOffset()
    while (end := reader.latestOffset(start, limit)) != start:
        rows: list[dict[str, Any]] = []
        for partition in reader.partitions(start, end):
            for batch in reader.read(partition):
                rows.extend(pa.Table.from_batches([batch]).to_pylist())
        batches.append(rows)
        start = end
    return batches


def _records(count: int, first: int = 0) -> list[bytes]:
    return [json.dumps({"id": i, "name": f"n{i}"}).encode() for i in range(first, first + count)]


# -- options ------------------------------------------------------------------------


@pytest.mark.parametrize(("options", "option", "words"), [
    ({"servers": None}, "servers", "needs option 'servers'"),
    ({"servers": "tls://h:4222"}, "servers", "not supported yet"),
    ({"servers": "nats://u:pw@h:4222"}, "servers", "must not hold credentials"),
    ({"servers": "nats://h:99999"}, "servers", "is not nats://host:port"),
    ({"servers": "nats://h:4222,"}, "servers", "empty entry"),
    ({"nats__subject": "s"}, "nats.stream", "exactly one of"),
    ({"nats__stream": None}, "nats.stream", "exactly one of"),
    ({"nats__stream": "a.b"}, "nats.stream", "names a stream"),
    ({"auth__type": "jwt"}, "auth.type", "not supported yet"),
    ({"auth__type": "token"}, "auth.type", "must be one of"),
    ({"auth__username": "u"}, "auth.username", "needs 'auth.type' = 'credentials'"),
    ({"auth__type": "credentials", "auth__username": "u"}, "auth.password",
     "needs option 'auth.password'"),
    ({"nats__consumer__deliver_policy": "last"}, "nats.consumer.deliver_policy",
     "not supported yet"),
    ({"nats__consumer__deliver_policy": "by_start_sequence"}, "nats.consumer.start_sequence",
     "goes with"),
    ({"nats__consumer__start_sequence": "3"}, "nats.consumer.start_sequence", "goes with"),
    ({"nats__consumer__start_sequence": "0",
      "nats__consumer__deliver_policy": "by_start_sequence"}, "nats.consumer.start_sequence",
     "at least 1"),
    ({"nats__consumer__ack_policy": "explicit"}, "nats.consumer.ack_policy",
     "not supported yet"),
    ({"nats__consumer__filter_subjects": "a.x,a.y"}, "nats.consumer.filter_subjects",
     "more than one subject"),
    ({"framing": "newline"}, "framing", "not supported yet"),
    ({"max_messages_per_batch": "0"}, "max_messages_per_batch", "at least 1"),
    ({"format": "yaml"}, "format", "unknown format"),
    ({"colour": "red"}, "colour", "unknown option 'colour'"),
])
def test_bad_source_options_name_the_option(options: dict[str, str | None], option: str,
                                            words: str) -> None:
    base = {"servers": SERVERS, "nats__stream": "S", "format": "json"}
    merged = {k: v for k, v in (base | options).items() if v is not None}
    table = make_table("nats", "source", COLUMNS, type="source", **merged)
    with pytest.raises(ConnectorError, match=words) as caught:
        NATS.validate(table)
    assert caught.value.option == option


def test_core_sources_and_sinks_refuse_the_jetstream_source_options() -> None:
    core = _source(nats__subject="s", nats__consumer__deliver_policy="new")
    with pytest.raises(ConnectorError, match="JetStream sources") as caught:
        NATS.validate(core)
    assert caught.value.option == "nats.consumer.deliver_policy"
    sink = make_table("nats", "sink", (), type="sink", servers=SERVERS, format="json")
    with pytest.raises(ConnectorError, match="needs option 'nats.subject'"):
        NATS.validate(sink)
    with pytest.raises(ConnectorError, match="applies to sources only"):
        NATS.validate(replace(sink, options={**sink.options, "nats.subject": "s",
                                             "bad_data": "drop"}))


def test_listed_options_are_known_and_the_password_is_secret() -> None:
    listed = CONNECTOR_OPTIONS["nats"]
    assert listed["auth.password"].secret and not listed["auth.username"].secret
    for name, spec in listed.items():
        role = "source" if "source" in spec.roles else "sink"
        options = {"type": role, "servers": SERVERS, "format": "json", "json.unstructured": "t",
                   "nats.stream" if role == "source" else "nats.subject": "S"}
        if name.startswith(("avro.", "schema_registry.", "value.subject", "protobuf.")):
            options = {k: v for k, v in options.items() if not k.startswith("json.")}
            options.update({"format": "protobuf"} if name.startswith("protobuf.") else {
                "format": "avro", "avro.confluent_schema_registry": "true",
                "schema_registry.endpoint": "http://registry:8081"})
        if name == "dead_letter.table":
            options["bad_data"] = "dead_letter"
        options[name] = "1"
        try:
            NATS.validate(TableConfig("t", "nats", role, options, ()))
        except ConnectorError as error:
            assert "unknown option" not in str(error) and not error.at_key, (name, str(error))


def test_a_valid_source_and_its_defaults() -> None:
    assert NATS.validate(_source(columns=(), nats__subject="s", format="raw_string")) == (
        ColumnDef("value", T.StringType(), True),)
    assert NATS.batch_limit(_source(TestStream("S", "p"))) == 100_000
    assert NATS.batch_limit(_source(nats__subject="s")) is None


# -- the JetStream source -------------------------------------------------------------


def test_sequence_ranges_event_time_and_replays(js_stream: TestStream) -> None:
    sequences = publish(js_stream.subject(), _records(7))
    reader = _reader(_source(js_stream, max_messages_per_batch=3))
    batches = _read_all(reader, reader.getDefaultReadLimit())
    assert [[row["id"] for row in batch] for batch in batches] == [[0, 1, 2], [3, 4, 5], [6]]
    first = batches[0][0][HIDDEN_TIMESTAMP]
    assert isinstance(first, dt.datetime)
    assert abs(first - dt.datetime.now(dt.UTC)) < dt.timedelta(minutes=1)
    # A batch read again (a replay) reads the same messages, later ones are not seen.
    publish(js_stream.subject(), _records(2, first=7))
    again = list(reader.read(reader.partitions({"sequence": 3}, {"sequence": sequences[5]})[0]))
    assert pa.Table.from_batches(again).column("id").to_pylist() == [3, 4, 5]
    assert [len(b) for b in _read_all(reader, ReadAllAvailable())] == [9]


def test_the_idle_watcher_sees_messages_past_the_committed_sequence(
        js_stream: TestStream) -> None:
    table = _source(js_stream)
    assert NATS.has_input_after(table, 1, {"sequence": 0}) is False, "an empty stream"
    last = publish(js_stream.subject(), _records(2))[-1]
    assert NATS.has_input_after(table, 1, {"sequence": 0}) is True
    assert NATS.has_input_after(table, 1, {"sequence": last}) is False
    publish(js_stream.subject(), _records(1, first=2))
    assert NATS.has_input_after(table, 1, {"sequence": last}) is True
    core = _source(nats__subject="events.core")
    assert NATS.has_input_after(core, 1, {"received": 0}) is None, "core keeps nothing"


def test_the_backlog_is_the_sequences_past_the_read_one(js_stream: TestStream) -> None:
    table = _source(js_stream)
    assert NATS.backlog(table, 1, {"sequence": 0}) == 0, "an empty stream"
    sequences = publish(js_stream.subject(), _records(5))
    assert NATS.backlog(table, 1, {"sequence": 0}) == 5
    assert NATS.backlog(table, 1, {"sequence": sequences[1]}) == 3
    assert NATS.backlog(table, 1, {"sequence": sequences[-1]}) == 0
    assert NATS.backlog(_source(nats__subject="events.core"), 1, {"received": 0}) is None


def test_deliver_policies_and_a_filter_subject(js_stream: TestStream) -> None:
    publish(js_stream.subject("a"), _records(2))
    publish(js_stream.subject("b"), _records(2, first=10))
    publish(js_stream.subject("a"), _records(1, first=2))
    filtered = _reader(_source(js_stream, nats__consumer__filter_subjects=js_stream.subject("a")))
    assert [r["id"] for b in _read_all(filtered, ReadAllAvailable()) for r in b] == [0, 1, 2]
    by_sequence = _reader(_source(js_stream, nats__consumer__deliver_policy="by_start_sequence",
                                  nats__consumer__start_sequence="4"))
    assert [r["id"] for b in _read_all(by_sequence, ReadMaxRows(1)) for r in b] == [11, 2]
    new = _reader(_source(js_stream, nats__consumer__deliver_policy="new"))
    start = new.initialOffset()
    assert start == {"sequence": 5} and new.latestOffset(start, ReadAllAvailable()) == start


def test_bad_records_fail_naming_the_sequence_or_are_dropped_and_counted(
        js_stream: TestStream) -> None:
    payloads = _records(2) + [b"{not json", b'{"name": "no id"}'] + _records(1, first=2)
    publish(js_stream.subject(), payloads)
    with pytest.raises(ConnectorError, match=f"stream '{js_stream.name}' at sequence 3: ") as e:
        _read_all(_reader(_source(js_stream)), ReadAllAvailable())
    assert e.value.option == "bad_data"
    rows = _read_all(_reader(_source(js_stream, bad_data="drop")), ReadAllAvailable())[0]
    assert [r["id"] for r in rows if r[HIDDEN_CONTROL] is None] == [0, 1, 2]
    assert [r[HIDDEN_CONTROL] for r in rows if r[HIDDEN_CONTROL]] == ["dropped:2"]


def test_multi_line_json_and_raw_strings_are_one_record_per_message(
        js_stream: TestStream) -> None:
    publish(js_stream.subject(), [b'{"id": 1,\n "name": "two\\nlines"}', b"plain\ntext"])
    json_rows = _read_all(_reader(_source(js_stream, bad_data="drop")), ReadAllAvailable())[0]
    assert [(r["id"], r["name"]) for r in json_rows if r[HIDDEN_CONTROL] is None] == [
        (1, "two\nlines")]
    raw = _reader(_source(js_stream, columns=(), format="raw_string"))
    assert [r["value"] for r in _read_all(raw, ReadAllAvailable())[0]] == [
        '{"id": 1,\n "name": "two\\nlines"}', "plain\ntext"]


def test_a_missing_stream_is_named() -> None:
    reader = _reader(_source(TestStream("SPATE_NO_SUCH_STREAM", "x")))
    with pytest.raises(ConnectorError, match="stream 'SPATE_NO_SUCH_STREAM' does not exist"):
        reader.latestOffset({"sequence": 0}, ReadAllAvailable())


# -- the JetStream sink ---------------------------------------------------------------


def _sink_table(stream: TestStream, subject: str | None = None) -> TableConfig:
    return make_table("nats", "sink", (), name="out", type="sink", servers=SERVERS,
                      format="json", nats__subject=subject or stream.subject("out"),
                      nats__stream=stream.name)


def test_a_replayed_epoch_is_dropped_by_the_duplicate_window(spark: SparkSession,
                                                              js_stream: TestStream) -> None:
    schema = T.StructType([T.StructField("id", T.LongType()), T.StructField("name",
                                                                            T.StringType())])
    rows = [(1, "a"), (2, "b"), (2, "b")]  # equal records are distinct messages
    table = _sink_table(js_stream)
    first = NATS.create_sink(table, schema)
    first.open(None)
    marker = first.write_epoch(0, spark.createDataFrame(rows, schema))
    first.close()
    assert len(stream_payloads(js_stream)) == 3
    # The job restarts at epoch 0's marker, writes epoch 1, crashes before committing it,
    # restarts at the same marker and replays epoch 1 with its rows in another order.
    replayed = NATS.create_sink(table, schema)
    replayed.open(marker)
    replayed.write_epoch(1, spark.createDataFrame(rows, schema))
    replayed.open(marker)
    replayed.write_epoch(1, spark.createDataFrame(list(reversed(rows)), schema))
    payloads = [json.loads(p) for p in stream_payloads(js_stream)]
    epoch_rows = [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}, {"id": 2, "name": "b"}]
    # each epoch once (its tasks publish side by side: in no set order within it)
    for published in (payloads[:3], payloads[3:]):
        assert sorted(published, key=json.dumps) == epoch_rows
    assert replayed.epoch_bytes == 3 * len(b'{"id":1,"name":"a"}')


def test_equal_records_in_different_tasks_are_all_published(spark: SparkSession,
                                                            js_stream: TestStream) -> None:
    """Four equal records, one in each of four partitions: each is a message of its own
    (their ids count their occurrences, so they must be counted in one task)."""
    schema = T.StructType([T.StructField("id", T.LongType()), T.StructField("name",
                                                                            T.StringType())])
    sink = NATS.create_sink(_sink_table(js_stream), schema)
    sink.open(None)
    sink.write_epoch(0, spark.range(0, 4, numPartitions=4).selectExpr("1 AS id", "'b' AS name"))
    sink.close()
    assert [json.loads(p) for p in stream_payloads(js_stream)] == [{"id": 1, "name": "b"}] * 4


def test_message_ids_follow_the_records_not_their_order() -> None:
    ids = message_ids("p", 4, [b"x", b"y", b"x"])
    assert ids[0].startswith("p-4-") and ids[0].endswith("-0") and ids[2].endswith("-1")
    assert sorted(message_ids("p", 4, [b"x", b"x", b"y"])) == sorted(ids)
    assert len(set(ids)) == 3


def test_a_sink_whose_subject_no_stream_captures_fails_clearly(spark: SparkSession,
                                                                js_stream: TestStream) -> None:
    schema = T.StructType([T.StructField("id", T.LongType())])
    table = _sink_table(js_stream, "spate_test_nowhere.x")
    sink = NATS.create_sink(table, schema)
    sink.open(None)
    with pytest.raises(Exception) as caught:  # raised in a task: Spark wraps it
        sink.write_epoch(0, spark.createDataFrame([(1,)], schema))
    message = root_message(caught.value)
    assert message.startswith("nats sink 'out': ") and "JetStream" in message, message


# -- reach ------------------------------------------------------------------------------


def _policy(allow: str) -> EgressPolicy:
    def resolve(host: str, port: int) -> list[Any]:
        if host == "tenant-nats.invalid":
            return [ipaddress.ip_address("127.0.0.1")]
        address = literal_address(host)
        if address is None:
            raise socket.gaierror("no such name")
        return [address]
    return EgressPolicy(EgressPolicy.from_config([allow], ()).allow, (), resolver=resolve)


def test_reach_names_the_server_and_the_stream(js_stream: TestStream) -> None:
    publish(js_stream.subject(), _records(2))
    reached = NATS.reach({"servers": SERVERS, "nats.stream": js_stream.name}, "source",
                         Boundary())
    assert "reached NATS server 2." in reached and "127.0.0.1:4222" in reached
    assert f"stream '{js_stream.name}' holds 2 messages" in reached
    assert "reached NATS" in NATS.reach({"servers": SERVERS}, None, Boundary())
    with pytest.raises(ConnectorError, match="'SPATE_NOPE' does not exist"):
        NATS.reach({"servers": SERVERS, "nats.stream": "SPATE_NOPE"}, "source", Boundary())


def test_reach_goes_through_the_egress_policy() -> None:
    options = {"servers": "nats://tenant-nats.invalid:4222", "nats.subject": "x"}
    allowed = Boundary(egress=_policy("127.0.0.1:4222"))
    assert "tenant-nats.invalid:4222" in NATS.reach(options, "sink", allowed)
    with pytest.raises(ConnectorError, match="not allowed by this deployment's egress"):
        NATS.reach({"servers": SERVERS}, None, Boundary(egress=_policy("10.0.0.0/8")))
    with pytest.raises(ConnectorError, match="not allowed") as caught:
        NATS.validate(replace(_source(nats__subject="s"),
                              boundary=Boundary(egress=_policy("10.0.0.0/8"))))
    assert caught.value.option == "servers"


def test_unreachable_servers_are_named_without_the_password() -> None:
    port = free_port()
    options = {"servers": f"nats://127.0.0.1:{port}", "auth.type": "credentials",
               "auth.username": "me", "auth.password": "hunter2-secret"}
    with pytest.raises(ConnectorError) as caught:
        NATS.reach(options, None, Boundary())
    assert f"127.0.0.1:{port}" in str(caught.value) and "hunter2" not in str(caught.value)
    with pytest.raises(ConnectorError) as confined:
        NATS.reach(options, None, Boundary(egress=_policy("127.0.0.1")))
    assert f"could not connect to 127.0.0.1:{port}" in str(confined.value)
    assert "hunter2" not in str(confined.value)


def test_the_password_travels_outside_the_settings_json(js_stream: TestStream) -> None:
    publish(js_stream.subject(), _records(1))
    table = _source(js_stream, auth__type="credentials", auth__username="me",
                    auth__password="hunter2-secret")
    _, options = NATS.reader_options(table)
    assert "hunter2" not in options["spate_config"]
    assert options["spate_nats_password"] == "hunter2-secret"
    reader = _reader(table)
    assert reader.connect.password == "hunter2-secret" and reader.connect.username == "me"
    # This server has no users: it takes any credentials, and the read goes through.
    assert [r["id"] for r in _read_all(reader, ReadAllAvailable())[0]] == [0]
