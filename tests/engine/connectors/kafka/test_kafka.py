"""The kafka connector against a real broker (tansu, or SPATE_TEST_KAFKA): option
validation, reach(), the source and the sink end to end through the engine."""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import socket
import time
from pathlib import Path
from typing import Any, cast

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewPartitions, NewTopic
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from spate.engine.connectors import (
    CONNECTORS,
    HIDDEN_CONTROL,
    HIDDEN_PARTITION,
    HIDDEN_TIMESTAMP,
    ColumnDef,
    ConnectorError,
    TableConfig,
)
from spate.engine.connectors.core.boundary import UNCONFINED, Boundary
from spate.engine.connectors.core.egress import EgressPolicy, literal_address
from spate.engine.connectors.core.streaming import CONFIG_OPTION
from spate.engine.connectors.formats.records import FormatSpec, encode_records
from spate.engine.connectors.kafka import connector as kafka_module
from spate.engine.connectors.kafka.client import KafkaEndpoint, parse_servers
from spate.engine.connectors.kafka.sink import KafkaSink
from spate.engine.connectors.kafka.source import (
    PASSWORD_OPTION,
    KafkaDataSource,
    KafkaStreamReader,
    advance,
    consumer_config,
)
from spate.engine.runtime.failures import root_message
from tests.engine.connectors.kafka.kafka_broker import Broker, json_records, kafka_broker
from tests.engine.connectors.support import make_table
from tests.engine.harness import read_lines, run_pipeline

pytestmark = pytest.mark.e2e

__all__ = ["kafka_broker"]  # the fixture, imported to be found by pytest

KAFKA = CONNECTORS["kafka"]
COLUMNS = (ColumnDef("id", T.LongType(), False), ColumnDef("name", T.StringType()))
BASE_MS = 1_700_000_000_000


def _validate(role: str = "source", **options: Any) -> tuple[ColumnDef, ...]:
    base = {"bootstrap_servers": "127.0.0.1:9092", "topic": "t", "format": "json",
            "type": role}
    return KAFKA.validate(make_table("kafka", role, COLUMNS, **(base | options)))


@pytest.mark.parametrize(("options", "option", "words"), [
    ({"bootstrap_servers": "nohost"}, "bootstrap_servers", "host:port"),
    ({"source__offset": "middle"}, "source.offset", "must be one of"),
    ({"source__offset": "group"}, "source.offset", "group_id"),
    ({"source__read_mode": "dirty"}, "source.read_mode", "must be one of"),
    ({"value__subject": "x"}, "value.subject", "applies to format 'avro' only"),
    ({"schema_registry__endpoint": "http://x"}, "schema_registry.endpoint",
     "applies to format 'avro' only"),
    ({"topic": "^orders.*"}, "topic", "not supported yet"),
    ({"auth__type": "aws_msk_iam"}, "auth.type", "not supported yet"),
    ({"auth__type": "sasl", "auth__sasl__username": "u"}, "auth.sasl.password", "needs"),
    ({"auth__sasl__password": "hunter2"}, "auth.sasl.password", "auth.type = 'sasl'"),
    ({"client_configs": "sasl.password=hunter2"}, "client_configs", "may not set"),
    ({"client_configs": "group.id=x"}, "client_configs", "may not set"),
    ({"client_configs": "novalue"}, "client_configs", "key=value"),
    ({"key_field": "id"}, "key_field", "sinks only"),
    ({"max_records_per_batch": "0"}, "max_records_per_batch", "at least 1"),
    ({"bad_data": "maybe"}, "bad_data", "must be one of"),
    ({"group_id": "a", "source__group_id": "b"}, "source.group_id", "keep one"),
])
def test_source_options_are_validated(options: dict[str, str], option: str, words: str) -> None:
    with pytest.raises(ConnectorError) as caught:
        _validate(**options)
    assert caught.value.option == option
    assert words in str(caught.value)
    assert "hunter2" not in str(caught.value)


@pytest.mark.parametrize(("options", "option", "words"), [
    ({"sink__commit_mode": "twice"}, "sink.commit_mode", "must be one of"),
    ({"source__offset": "earliest"}, "source.offset", "sources only"),
    ({"bad_data": "drop"}, "bad_data", "sources only"),
    ({"key_field": "nope"}, "key_field", "not a column"),
])
def test_sink_options_are_validated(options: dict[str, str], option: str, words: str) -> None:
    with pytest.raises(ConnectorError) as caught:
        _validate("sink", **options)
    assert caught.value.option == option
    assert words in str(caught.value)


def test_valid_options_and_secret_marking() -> None:
    assert _validate(auth__type="sasl", auth__sasl__username="u", auth__sasl__password="p",
                     client_configs="client.id=me; fetch.min.bytes=1",
                     source__offset="group", group_id="g") == COLUMNS
    secrets = {spec.name for spec in KAFKA.options if spec.secret}
    assert secrets == {"auth.sasl.password", "schema_registry.api_key",
                       "schema_registry.api_secret"}


def test_confined_tables_refuse_loopback_and_local_files() -> None:
    confined = Boundary(egress=EgressPolicy())
    table = make_table("kafka", "source", COLUMNS, bootstrap_servers="127.0.0.1:9092",
                       topic="t", format="json", type="source")
    with pytest.raises(ConnectorError) as caught:
        KAFKA.validate(table.__class__(**{**table.__dict__, "boundary": confined}))
    assert caught.value.option == "bootstrap_servers"
    table = make_table("kafka", "source", COLUMNS, bootstrap_servers="kafka.example.com:9092",
                       topic="t", format="json", type="source",
                       client_configs="ssl.ca.location=/etc/passwd")
    with pytest.raises(ConnectorError, match="may not set 'ssl.ca.location'"):
        KAFKA.validate(table.__class__(**{**table.__dict__, "boundary": confined}))


def test_the_sasl_password_travels_apart_from_the_settings(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark redacts option values whose key says "password", not the JSON settings."""
    shipped: dict[str, str] = {}
    monkeypatch.setattr(kafka_module.core, "load_stream",
                        lambda spark, name, options, key: shipped.update(options))
    monkeypatch.setattr(type(KAFKA), "partition_count", lambda self, table, parallelism: 1)
    table = make_table("kafka", "source", COLUMNS, bootstrap_servers="h:9092", topic="t",
                       format="json", type="source", auth__type="sasl",
                       auth__sasl__username="u", auth__sasl__password="hunter2")
    KAFKA.read_stream(cast(SparkSession, None), table, 1)
    assert "hunter2" not in shipped[CONFIG_OPTION]
    assert shipped[PASSWORD_OPTION] == "hunter2"
    reader = KafkaDataSource(shipped).streamReader(T.StructType())
    assert isinstance(reader, KafkaStreamReader)
    assert reader.settings["endpoint"]["auth"]["sasl.password"] == "hunter2"


def test_advance_shares_the_budget_and_never_passes_the_high_watermark() -> None:
    assert advance({0: 0, 1: 5, 2: 0}, {0: 10, 1: 6, 2: 0}, None) == {0: 10, 1: 6, 2: 0}
    ends = advance({0: 0, 1: 0, 2: 0}, {0: 100, 1: 2, 2: 100}, 10)
    assert sum(ends.values()) == 10 and ends[1] == 2
    assert advance({0: 3}, {0: 3}, 5) == {0: 3}


def test_reach_names_the_topic_and_an_unreachable_port(kafka_broker: Broker) -> None:
    topic = kafka_broker.create_topic(3)
    reached = KAFKA.reach({"bootstrap_servers": kafka_broker.address, "topic": topic},
                          "source", UNCONFINED)
    assert reached is not None and f"topic '{topic}' (3 partitions)" in reached
    with pytest.raises(ConnectorError, match="does not exist"):
        KAFKA.reach({"bootstrap_servers": kafka_broker.address, "topic": "missing-x"},
                    "source", UNCONFINED)
    with pytest.raises(ConnectorError) as caught:
        KAFKA.reach({"bootstrap_servers": "127.0.0.1:1", "auth.type": "sasl",
                     "auth.sasl.username": "u", "auth.sasl.password": "hunter2"}, None,
                    UNCONFINED)
    assert "127.0.0.1:1" in str(caught.value) and "hunter2" not in str(caught.value)


def _policy(allow: str = "127.0.0.1") -> EgressPolicy:
    """A policy allowing ``allow`` that resolves the name tenant-kafka.invalid to
    127.0.0.1 itself: reaching that name proves the checked address is connected to."""

    def resolve(host: str, port: int) -> list[Any]:
        if host == "tenant-kafka.invalid":
            return [ipaddress.ip_address("127.0.0.1")]
        address = literal_address(host)
        if address is None:
            raise socket.gaierror("no such name")
        return [address]

    return EgressPolicy(EgressPolicy.from_config([allow], ()).allow, (), resolver=resolve)


def test_reach_goes_through_the_egress_policy(kafka_broker: Broker) -> None:
    topic = kafka_broker.create_topic(1)
    port = kafka_broker.address.rpartition(":")[2]
    if not kafka_broker.address.startswith("127.0.0.1:"):
        pytest.skip("the policy test resolves a name to 127.0.0.1")
    options = {"bootstrap_servers": f"tenant-kafka.invalid:{port}", "topic": topic}
    reached = KAFKA.reach(options, "sink", Boundary(egress=_policy()))
    assert reached is not None and f"tenant-kafka.invalid:{port}" in reached
    with pytest.raises(ConnectorError, match="egress policy") as caught:
        KAFKA.reach(options, "sink", Boundary(egress=_policy("10.0.0.0/8")))
    assert caught.value.option == "bootstrap_servers"


# -- the source's reader, driven directly ------------------------------------------


def _source_table(broker: Broker, topic: str, **options: str) -> TableConfig:
    return make_table("kafka", "source", COLUMNS, bootstrap_servers=broker.address,
                      topic=topic, format="json", type="source", **options)


def _reader(table: TableConfig, parallelism: int = 1) -> KafkaStreamReader:
    settings, schema = KAFKA.source_settings(table, parallelism)  # type: ignore[attr-defined]
    return KafkaStreamReader(settings, schema)


def test_source_clients_are_named_by_table_unless_client_configs_names_them(
        kafka_broker: Broker) -> None:
    topic = kafka_broker.create_topic(1)
    table = _source_table(kafka_broker, topic)
    settings, _ = KAFKA.source_settings(table, 1)  # type: ignore[attr-defined]
    assert consumer_config(settings, "source")["client.id"] == f"spate-source-{table.name}"
    named = _source_table(kafka_broker, topic, client_configs="client.id=me")
    settings, _ = KAFKA.source_settings(named, 1)  # type: ignore[attr-defined]
    assert consumer_config(settings, "source")["client.id"] == "me"


def _read(reader: KafkaStreamReader, start: dict[str, Any],
          end: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for partition in reader.partitions(start, end):
        for batch in reader.read(partition):
            rows += batch.to_pylist()
    return rows


def _records(ids: range, partitions: int = 3) -> list[tuple[int, bytes | None, int]]:
    values = json_records([{"id": i, "name": f"n{i}"} for i in ids])
    return [(i % partitions, v, BASE_MS + i) for i, v in zip(ids, values, strict=True)]


def test_start_offsets_earliest_latest_and_group(kafka_broker: Broker) -> None:
    topic = kafka_broker.create_topic(2)
    kafka_broker.produce(topic, _records(range(5), partitions=2))
    earliest = _reader(_source_table(kafka_broker, topic, source__offset="earliest"))
    latest = _reader(_source_table(kafka_broker, topic))  # Arroyo's default
    try:
        assert earliest.initialOffset() == {"topic": topic, "partitions": {"0": 0, "1": 0}}
        assert latest.initialOffset() == {"topic": topic, "partitions": {"0": 3, "1": 2}}
        # An epoch's end offsets go to the group after it commits (for monitoring) ...
        group = f"g-{topic}"
        grouped = _reader(_source_table(kafka_broker, topic, source__offset="group",
                                        group_id=group))
        grouped.commit({"topic": topic, "partitions": {"0": 2}})
        # ... and source.offset = 'group' starts there (partition 1: from its beginning).
        assert grouped.initialOffset() == {"topic": topic, "partitions": {"0": 2, "1": 0}}
        grouped.stop()
    finally:
        earliest.stop()
        latest.stop()


def test_reader_reads_ranges_with_record_timestamps_in_limited_batches(
        kafka_broker: Broker) -> None:
    topic = kafka_broker.create_topic(3)
    kafka_broker.produce(topic, _records(range(12)))
    reader = _reader(_source_table(kafka_broker, topic, source__offset="earliest"),
                     parallelism=2)
    try:
        start = reader.initialOffset()
        end = reader.latestOffset(start, ReadMaxRows(9))
        assert end["partitions"] == {"0": 3, "1": 3, "2": 3}
        rows = _read(reader, start, end)
        rest_end = reader.latestOffset(end, ReadMaxRows(9))
        rows += _read(reader, end, rest_end)
        assert reader.latestOffset(rest_end, ReadMaxRows(9)) == rest_end
    finally:
        reader.stop()
    assert sorted(r["id"] for r in rows) == list(range(12))
    for row in rows:  # Kafka partition p is read by reader p mod 2
        assert row[HIDDEN_PARTITION] == (row["id"] % 3) % 2
        assert row[HIDDEN_TIMESTAMP] == dt.datetime.fromtimestamp(
            (BASE_MS + row["id"]) / 1000, dt.UTC)


def test_bad_records_fail_with_their_offset_or_are_dropped_and_counted(
        kafka_broker: Broker) -> None:
    topic = kafka_broker.create_topic(1)
    records = _records(range(5), partitions=1)
    records[1] = (0, b"{not json", BASE_MS + 1)
    records[3] = (0, None, BASE_MS + 3)
    kafka_broker.produce(topic, records)
    failing = _reader(_source_table(kafka_broker, topic, source__offset="earliest"))
    try:
        start = failing.initialOffset()
        with pytest.raises(ConnectorError, match="at partition 0 offset 1") as caught:
            _read(failing, start, failing.latestOffset(start, ReadAllAvailable()))
        assert caught.value.option == "bad_data"
    finally:
        failing.stop()
    dropping = _reader(_source_table(kafka_broker, topic, source__offset="earliest",
                                     bad_data="drop"))
    try:
        start = dropping.initialOffset()
        rows = _read(dropping, start, dropping.latestOffset(start, ReadAllAvailable()))
    finally:
        dropping.stop()
    assert [r["id"] for r in rows if r[HIDDEN_CONTROL] is None] == [0, 2, 4]
    assert [r[HIDDEN_CONTROL] for r in rows if r[HIDDEN_CONTROL]] == ["dropped:2"]


def test_a_source_reads_committed_transactions_only(kafka_broker: Broker) -> None:
    """Skipping aborted transactions is the consumer's part once it asks for
    read_committed, which a source does by default: the test checks that it asks, and
    that a committed transaction's records are read. Against Kafka (SPATE_TEST_KAFKA) it
    also checks the aborted records are skipped; tansu 0.6 shows them to read_committed
    consumers (a broker bug), so against tansu that last check would fail for tansu."""
    topic = kafka_broker.create_topic(1)
    producer = Producer({"bootstrap.servers": kafka_broker.address,
                         "transactional.id": f"t-{topic}"})
    producer.init_transactions(30)
    for commit, ids in ((False, range(3)), (True, range(3, 5))):
        producer.begin_transaction()
        for _, value, stamp in _records(ids, partitions=1):
            producer.produce(topic, value, partition=0, timestamp=stamp)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    reader = _reader(_source_table(kafka_broker, topic, source__offset="earliest"))
    assert consumer_config(reader.settings, "source")["isolation.level"] == "read_committed"
    try:
        start = reader.initialOffset()
        rows = _read(reader, start, reader.latestOffset(start, ReadAllAvailable()))
    finally:
        reader.stop()
    ids = [r["id"] for r in rows]
    assert ids[-2:] == [3, 4]
    if not kafka_broker.tansu:
        assert ids == [3, 4]


def test_partitions_added_later_are_read_from_their_beginning(kafka_broker: Broker) -> None:
    """The topic grows from one partition to two while the reader runs. tansu 0.6 has no
    CreatePartitions, so the topic is deleted and made again with two partitions: to the
    reader, whose first partition was empty, that is the same change of metadata."""
    topic = kafka_broker.create_topic(1)
    reader = _reader(_source_table(kafka_broker, topic))
    try:
        start = reader.initialOffset()
        admin = AdminClient({"bootstrap.servers": kafka_broker.address})
        if kafka_broker.tansu:
            for future in admin.delete_topics([topic]).values():
                future.result(30)
            for future in admin.create_topics([NewTopic(topic, 2)]).values():
                future.result(30)
        else:
            for future in admin.create_partitions([NewPartitions(topic, 2)]).values():
                future.result(30)
        kafka_broker.produce(topic, [(1, b'{"id": 7}', BASE_MS)])
        deadline = time.monotonic() + 30
        end = reader.latestOffset(start, ReadAllAvailable())
        while end["partitions"].get("1", 0) < 1 and time.monotonic() < deadline:
            time.sleep(0.2)
            end = reader.latestOffset(end, ReadAllAvailable())
        rows = _read(reader, {"topic": topic, "partitions": {"0": 0, "1": 0}}, end)
    finally:
        reader.stop()
    assert [r["id"] for r in rows] == [7]


# -- end to end through the engine ---------------------------------------------------


def _source_sql(broker: Broker, topic: str, out: Path, **options: str) -> str:
    settings = {"connector": "kafka", "bootstrap_servers": broker.address, "topic": topic,
                "type": "source", "format": "json", "source.offset": "earliest"} | options
    with_list = ", ".join(f"'{k}' = '{v}'" for k, v in settings.items())
    return f"""
        CREATE TABLE src (id BIGINT NOT NULL, name TEXT) WITH ({with_list});
        CREATE TABLE out (id BIGINT, name TEXT)
            WITH (connector = 'single_file', path = '{out}', type = 'sink', format = 'json');
        INSERT INTO out SELECT id, name FROM src;
    """


def _ids(out: Path) -> list[int]:
    return sorted(json.loads(line)["id"] for line in read_lines(out))


def test_source_pipeline_reads_every_record_once_across_a_stop_and_resume(
        spark: SparkSession, kafka_broker: Broker, tmp_path: Path) -> None:
    topic = kafka_broker.create_topic(3)
    records = _records(range(30))
    records[4] = (1, b"[1, 2]", BASE_MS + 4)  # bad: dropped and counted
    kafka_broker.produce(topic, records)
    out = tmp_path / "out.jsonl"
    sql = _source_sql(kafka_broker, topic, out, max_records_per_batch="20", bad_data="drop")
    expected = [i for i in range(30) if i != 4]
    first = run_pipeline(spark, sql, tmp_path, parallelism=2,
                         stop_when=lambda: _ids(out) == expected)
    assert _ids(out) == expected
    kafka_broker.produce(topic, _records(range(30, 40)))
    second = run_pipeline(spark, sql, tmp_path, parallelism=2,
                          stop_when=lambda: len(_ids(out)) >= 39)
    assert _ids(out) == [*expected, *range(30, 40)]
    assert first["rows_dropped"] == 1  # the counters carry over the resume
    assert (second["rows_in"], second["rows_dropped"]) == (39, 1)


# -- the sink --------------------------------------------------------------------------


def _sink_sql(broker: Broker, source: Path, topic: str, **options: str) -> str:
    settings = {"connector": "kafka", "bootstrap_servers": broker.address, "topic": topic,
                "type": "sink", "format": "json"} | options
    with_list = ", ".join(f"'{k}' = '{v}'" for k, v in settings.items())
    return f"""
        CREATE TABLE src (id BIGINT, name TEXT) WITH (connector = 'single_file',
            path = '{source}', type = 'source', format = 'json', max_lines_per_batch = '5');
        CREATE TABLE out (id BIGINT, name TEXT) WITH ({with_list});
        INSERT INTO out SELECT id, name FROM src;
    """


def _sink(broker: Broker, topic: str, *, exactly_once: bool) -> KafkaSink:
    spec = FormatSpec(kind="json", timestamp_format="rfc3339", decimal_encoding="number",
                      unstructured=False, bad_data="fail", max_line_bytes=None)
    return KafkaSink("out", topic, KafkaEndpoint(parse_servers(broker.address)), UNCONFINED,
                     spec, exactly_once=exactly_once, key_field=None)


def _values(found: list[tuple[bytes | None, bytes | None]]) -> list[int]:
    return sorted(json.loads(value or b"")["id"] for _, value in found)


def test_exactly_once_sink_survives_a_stop_and_replayed_epochs(
        spark: SparkSession, kafka_broker: Broker, tmp_path: Path) -> None:
    topic = kafka_broker.create_topic(1)
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"id": i, "name": f"n{i}"}) + "\n"
                              for i in range(10)))
    sql = _sink_sql(kafka_broker, source, topic, key_field="id")
    run_pipeline(spark, sql, tmp_path, stop_after_epochs=1)
    run_pipeline(spark, sql, tmp_path)
    found = kafka_broker.read_all(topic, 1, expected=10)
    assert _values(found) == list(range(10))
    assert sorted(int(key or b"") for key, _ in found) == list(range(10))
    # The engine replays an epoch Kafka committed when it crashed before its own commit.
    frame = spark.createDataFrame([(99, "late")], "id BIGINT, name STRING")
    sink = _sink(kafka_broker, topic, exactly_once=True)
    sink.pipeline = "default/test"  # as the runner of run_pipeline names it
    sink.open({"epoch": 0, "writers": 1})
    try:
        last = sink.epoch_in_kafka
        assert last >= 1
        assert sink.write_epoch(last, frame) == {"epoch": last, "writers": 1}  # skipped
        assert sink.epoch_bytes == 0
        sink.write_epoch(last + 1, frame)
        assert sink.epoch_bytes == len(json.dumps({"id": 99, "name": "late"},
                                                  separators=(",", ":")))
        sink.write_epoch(last + 1, frame)  # replayed in the same process: skipped
        assert sink.epoch_bytes == 0
    finally:
        sink.close()
    sink.open({"epoch": last + 1, "writers": 1})
    try:
        assert sink.epoch_in_kafka == last + 1
        sink.write_epoch(last + 1, frame)  # replayed after a restart: skipped
    finally:
        sink.close()
    assert _values(kafka_broker.read_all(topic, 1, expected=11)) == [*range(10), 99]
    sink.open(None)  # a new pipeline of the same name starts its epochs afresh
    try:
        assert sink.epoch_in_kafka == -1
    finally:
        sink.close()


def test_a_replayed_epoch_skips_only_the_writers_kafka_holds_it_of(
        spark: SparkSession, kafka_broker: Broker) -> None:
    """An epoch's records go to several writers (transactions), each a function of the
    record; a crash after some of them committed leaves the others to the replay."""
    topic = kafka_broker.create_topic(3)
    rows = [(i, f"n{i}") for i in range(200)]
    frame = spark.createDataFrame(rows, "id BIGINT, name STRING")
    sink = _sink(kafka_broker, topic, exactly_once=True)
    sink.open(None)
    try:
        writers = sink.writers
        assert writers == min(3, spark.sparkContext.defaultParallelism) > 1
        assert sink.write_epoch(0, spark.createDataFrame([(1000, "zero")], frame.schema)) \
            == {"epoch": 0, "writers": writers}
        # Epoch 1 reaches Kafka from writer 0 alone, then the pipeline crashes: writer 0's
        # records are those its repartition gives it.
        records = encode_records(frame, sink.spec).repartition(writers, "record")
        first = records.rdd.mapPartitionsWithIndex(
            lambda index, part: [row.record for row in part] if index == 0 else []).collect()
        ids_first = sorted(json.loads(record)["id"] for record in first)
        assert 0 < len(ids_first) < len(rows)
        sink.write_epoch(1, frame.where(F.col("id").isin(ids_first)))
    finally:
        sink.close()
    sink.open({"epoch": 0, "writers": writers})  # the engine committed epoch 0 only
    try:
        assert sink.epoch_in_kafka == 1
        sink.write_epoch(1, frame)  # writer 0 holds it; the others write their part
        assert 0 < sink.epoch_bytes < sum(len(json.dumps({"id": i, "name": n},
                                                         separators=(",", ":")))
                                          for i, n in rows)
        sink.write_epoch(1, frame)  # every writer holds it now
        assert sink.epoch_bytes == 0
    finally:
        sink.close()
    found = _values(kafka_broker.read_all(topic, 3, expected=201))
    assert found == [*range(200), 1000]


def test_a_marker_from_one_transaction_per_epoch_is_honoured(
        spark: SparkSession, kafka_broker: Broker) -> None:
    """A pipeline whose sink committed one driver transaction per epoch (before the
    writers) resumes without writing that epoch again."""
    topic = kafka_broker.create_topic(1)
    sink = _sink(kafka_broker, topic, exactly_once=True)
    sink.pipeline = "default/legacy"
    old_id = sink.transactional_id
    producer = Producer({"bootstrap.servers": kafka_broker.address, "transactional.id": old_id})
    group = Consumer({"bootstrap.servers": kafka_broker.address, "group.id": old_id})
    try:
        producer.init_transactions(10)
        producer.begin_transaction()
        producer.produce(topic, json.dumps({"id": 7, "name": "n7"}).encode())
        producer.send_offsets_to_transaction([TopicPartition(topic, 0, 4)],
                                             group.consumer_group_metadata(), 10)
        producer.commit_transaction(10)  # epoch 3 is in Kafka; the engine committed 2
    finally:
        group.close()
    frame = spark.createDataFrame([(7, "n7")], "id BIGINT, name STRING")
    sink.open({"epoch": 2})
    try:
        assert sink.epoch_in_kafka == 3
        assert sink.write_epoch(3, frame) == {"epoch": 3, "writers": 1}
        assert sink.epoch_bytes == 0
        sink.write_epoch(4, frame)
    finally:
        sink.close()
    assert _values(kafka_broker.read_all(topic, 1, expected=2)) == [7, 7]


def test_a_writers_failure_names_the_sink_and_the_cluster(
        spark: SparkSession, kafka_broker: Broker) -> None:
    topic = kafka_broker.create_topic(1)
    frame = spark.createDataFrame([(1, "x" * 2_000_000)], "id BIGINT, name STRING")
    sink = _sink(kafka_broker, topic, exactly_once=False)
    sink.open(None)
    try:
        with pytest.raises(Exception) as raised:
            sink.write_epoch(0, frame)  # larger than a message may be
    finally:
        sink.close()
    message = root_message(cast(Exception, raised.value))
    assert message.startswith("kafka sink 'out': ")
    assert kafka_broker.address in message


def test_at_least_once_sink_writes_a_replayed_epoch_again(spark: SparkSession,
                                                          kafka_broker: Broker) -> None:
    topic = kafka_broker.create_topic(2)
    frame = spark.createDataFrame([(i, f"n{i}") for i in range(3)], "id BIGINT, name STRING")
    sink = _sink(kafka_broker, topic, exactly_once=False)
    sink.open(None)
    try:
        assert sink.write_epoch(0, frame) is None
        sink.write_epoch(0, frame)
    finally:
        sink.close()
    assert _values(kafka_broker.read_all(topic, 2, expected=6)) == [0, 0, 1, 1, 2, 2]


def test_the_backlog_counts_the_records_past_the_committed_offsets(kafka_broker: Broker
                                                                     ) -> None:
    topic = kafka_broker.create_topic(2)
    kafka_broker.produce(topic, _records(range(6), partitions=2))  # 3 per partition
    table = _source_table(kafka_broker, topic)
    assert KAFKA.backlog(table, 1, {"topic": topic, "partitions": {"0": 3, "1": 3}}) == 0
    assert KAFKA.backlog(table, 1, {"topic": topic, "partitions": {"0": 1, "1": 3}}) == 2
    # A partition not read yet is behind by all it holds.
    assert KAFKA.backlog(table, 1, {"topic": topic, "partitions": {"0": 3}}) == 3
    kafka_broker.produce(topic, [(1, json_records([{"id": 9, "name": "n"}])[0], BASE_MS)])
    assert KAFKA.backlog(table, 1, {"topic": topic, "partitions": {"0": 3, "1": 3}}) == 1


def test_the_idle_watcher_sees_records_past_the_committed_offsets(kafka_broker: Broker) -> None:
    topic = kafka_broker.create_topic(2)
    kafka_broker.produce(topic, _records(range(4), partitions=2))
    table = _source_table(kafka_broker, topic)
    read_all = {"topic": topic, "partitions": {"0": 2, "1": 2}}
    assert KAFKA.has_input_after(table, 1, read_all) is False
    assert KAFKA.has_input_after(table, 1, {"topic": topic, "partitions": {"0": 2, "1": 1}})
    kafka_broker.produce(topic, [(0, json_records([{"id": 9, "name": "n"}])[0], BASE_MS)])
    assert KAFKA.has_input_after(table, 1, read_all) is True
