"""The kafka connector against a real broker (tansu, or SPATE_TEST_KAFKA): option
validation, reach(), the source and the sink end to end through the engine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from spate.engine.connectors import CONNECTORS, ColumnDef, ConnectorError
from spate.engine.connectors.boundary import UNCONFINED, Boundary
from spate.engine.connectors.egress import EgressPolicy
from spate.engine.connectors.kafka_sink import KafkaSink
from spate.engine.connectors.kafka_source import advance
from tests.engine.connectors.kafka_broker import Broker, json_records, kafka_broker
from tests.engine.connectors.support import make_table
from tests.engine.harness import read_lines, run_pipeline

__all__ = ["kafka_broker"]  # the fixture, imported to be found by pytest

KAFKA = CONNECTORS["kafka"]
COLUMNS = (ColumnDef("id", T.LongType(), False), ColumnDef("name", T.StringType()))
BASE_MS = 1_700_000_000_000


def _validate(role: str = "source", columns: tuple[ColumnDef, ...] = COLUMNS,
              **options: Any) -> tuple[ColumnDef, ...]:
    base = {"bootstrap_servers": "127.0.0.1:9092", "topic": "t", "format": "json",
            "type": role}
    return KAFKA.validate(make_table("kafka", role, columns, **(base | options)))


@pytest.mark.parametrize(("options", "option", "words"), [
    ({"bootstrap_servers": "nohost"}, "bootstrap_servers", "host:port"),
    ({"source__offset": "middle"}, "source.offset", "must be one of"),
    ({"source__offset": "group"}, "source.offset", "group_id"),
    ({"source__read_mode": "dirty"}, "source.read_mode", "must be one of"),
    ({"value__subject": "x"}, "value.subject", "not supported yet"),
    ({"schema_registry__endpoint": "http://x"}, "schema_registry.endpoint", "not supported yet"),
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
    assert secrets == {"auth.sasl.password"}


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


# -- the source end to end -----------------------------------------------------------


def _source_sql(broker: Broker, topic: str, out: Path, **options: str) -> str:
    settings = {"connector": "kafka", "bootstrap_servers": broker.address, "topic": topic,
                "type": "source", "format": "json", "source.offset": "earliest"} | options
    with_list = ", ".join(f"'{k}' = '{v}'" for k, v in settings.items())
    return f"""
        CREATE TABLE src (id BIGINT NOT NULL, name TEXT) WITH ({with_list});
        CREATE TABLE out (id BIGINT, name TEXT, partition_id INT)
            WITH (connector = 'single_file', path = '{out}', type = 'sink', format = 'json');
        INSERT INTO out SELECT id, name, 0 AS partition_id FROM src;
    """


def _records(ids: range, partitions: int = 3) -> list[tuple[int, bytes | None, int]]:
    values = json_records([{"id": i, "name": f"n{i}"} for i in ids])
    return [(i % partitions, v, BASE_MS + i) for i, v in zip(ids, values, strict=True)]


def _ids(out: Path) -> list[int]:
    return sorted(json.loads(line)["id"] for line in read_lines(out))


def test_source_reads_every_record_once_across_a_stop_and_resume(
        spark: SparkSession, kafka_broker: Broker, tmp_path: Path) -> None:
    topic = kafka_broker.create_topic(3)
    kafka_broker.produce(topic, _records(range(30)))
    out = tmp_path / "out.jsonl"
    sql = _source_sql(kafka_broker, topic, out, max_records_per_batch="12")
    run_pipeline(spark, sql, tmp_path, parallelism=2, stop_when=lambda: len(_ids(out)) >= 30)
    assert _ids(out) == list(range(30))
    kafka_broker.produce(topic, _records(range(30, 45)))
    run_pipeline(spark, sql, tmp_path, parallelism=2, stop_when=lambda: len(_ids(out)) >= 45)
    assert _ids(out) == list(range(45))
    assert [json.loads(line)["name"] for line in read_lines(out)][:1] == ["n0"]


def test_latest_skips_what_was_there(spark: SparkSession, kafka_broker: Broker,
                                     tmp_path: Path) -> None:
    topic = kafka_broker.create_topic(1)
    kafka_broker.produce(topic, _records(range(5), partitions=1))
    out = tmp_path / "out.jsonl"
    sql = _source_sql(kafka_broker, topic, out, **{"source.offset": "latest"})
    reports: list[Any] = []

    def produce_after_first_epoch() -> bool:
        if len(reports) == 1:
            kafka_broker.produce(topic, _records(range(5, 8), partitions=1))
        return len(_ids(out)) >= 3

    run_pipeline(spark, sql, tmp_path, reports=reports, stop_when=produce_after_first_epoch)
    assert _ids(out) == [5, 6, 7]


def test_bad_data_drop_and_fail(spark: SparkSession, kafka_broker: Broker,
                                tmp_path: Path) -> None:
    topic = kafka_broker.create_topic(1)
    records = _records(range(4), partitions=1)
    records[1] = (0, b"{not json", BASE_MS + 1)
    records[2] = (0, None, BASE_MS + 2)
    kafka_broker.produce(topic, records)
    out = tmp_path / "drop" / "out.jsonl"
    counters = run_pipeline(spark, _source_sql(kafka_broker, topic, out, bad_data="drop"),
                            tmp_path / "drop", stop_when=lambda: len(_ids(out)) >= 2)
    assert _ids(out) == [0, 3]
    assert counters.get("dropped") == 2 or counters.get("rows_dropped") == 2, counters
    failing = tmp_path / "fail" / "out.jsonl"
    with pytest.raises(Exception, match=f"partition 0 at offset 1"):
        run_pipeline(spark, _source_sql(kafka_broker, topic, failing), tmp_path / "fail",
                     stop_when=lambda: False, timeout_s=60)


# -- the sink end to end -------------------------------------------------------------


def _sink_sql(broker: Broker, source: Path, topic: str, **options: str) -> str:
    settings = {"connector": "kafka", "bootstrap_servers": broker.address, "topic": topic,
                "type": "sink", "format": "json"} | options
    with_list = ", ".join(f"'{k}' = '{v}'" for k, v in settings.items())
    return f"""
        CREATE TABLE src (id BIGINT, name TEXT) WITH (connector = 'single_file',
            path = '{source}', type = 'source', format = 'json', max_lines_per_batch = '4');
        CREATE TABLE out (id BIGINT, name TEXT) WITH ({with_list});
        INSERT INTO out SELECT id, name FROM src;
    """


def _input_file(path: Path, count: int) -> Path:
    path.write_text("".join(json.dumps({"id": i, "name": f"n{i}"}) + "\n" for i in range(count)))
    return path


def test_exactly_once_sink_survives_a_stop_and_a_replayed_epoch(
        spark: SparkSession, kafka_broker: Broker, tmp_path: Path) -> None:
    topic = kafka_broker.create_topic(1)
    source = _input_file(tmp_path / "in.jsonl", 10)
    sql = _sink_sql(kafka_broker, source, topic, key_field="id")
    run_pipeline(spark, sql, tmp_path, stop_after_epochs=1)
    run_pipeline(spark, sql, tmp_path)
    found = kafka_broker.read_all(topic, 1, expected=10)
    assert sorted(json.loads(v or b"")["id"] for _, v in found) == list(range(10))
    assert sorted(int(k or b"") for k, _ in found) == list(range(10))
    # A crash after Kafka's commit, before the engine's: the epoch is replayed.
    sink = KafkaSink("out", topic, KAFKA_ENDPOINT(kafka_broker), UNCONFINED,
                     _json_spec(), exactly_once=True, key_field=None)
    sink.open({"epoch": 0})
    try:
        frame = spark.createDataFrame([(99, "late")], "id BIGINT, name STRING")
        last = sink._written_epoch
        assert last >= 1
        assert sink.write_epoch(last, frame) == {"epoch": last}
        sink.write_epoch(last + 1, frame)
        sink.write_epoch(last + 1, frame)  # replayed in the same process
    finally:
        sink.close()
    sink.open({"epoch": last + 1})
    try:
        sink.write_epoch(last + 1, frame)  # replayed after a restart
    finally:
        sink.close()
    found = kafka_broker.read_all(topic, 1, expected=11)
    assert sorted(json.loads(v or b"")["id"] for _, v in found) == [*range(10), 99]


def test_at_least_once_sink_writes_every_row(spark: SparkSession, kafka_broker: Broker,
                                             tmp_path: Path) -> None:
    topic = kafka_broker.create_topic(2)
    source = _input_file(tmp_path / "in.jsonl", 9)
    run_pipeline(spark, _sink_sql(kafka_broker, source, topic,
                                  **{"sink.commit_mode": "at_least_once"}), tmp_path)
    found = kafka_broker.read_all(topic, 2, expected=9)
    assert sorted(json.loads(v or b"")["id"] for _, v in found) == list(range(9))


def KAFKA_ENDPOINT(broker: Broker) -> Any:  # noqa: N802
    from spate.engine.connectors.kafka_client import KafkaEndpoint, parse_servers
    return KafkaEndpoint(parse_servers(broker.address))


def _json_spec() -> Any:
    from spate.engine.connectors.formats import FormatSpec
    return FormatSpec(kind="json", timestamp_format="rfc3339", decimal_encoding="number",
                      unstructured=False, bad_data="fail", max_line_bytes=None)
