"""The kinesis connector against moto's Kinesis server: options, reach, credentials,
egress, and the source's offsets, replays, resharding and bad data (driven like Spark
drives a reader, without Spark)."""

from __future__ import annotations

import ipaddress
import json
import re
import socket
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import types as T
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from spate.engine.connectors import CONNECTORS, HIDDEN_CONTROL, ColumnDef, ConnectorError
from spate.engine.connectors.core.base import HIDDEN_PARTITION, HIDDEN_TIMESTAMP, TableConfig
from spate.engine.connectors.core.boundary import Boundary
from spate.engine.connectors.core.egress import EgressPolicy, literal_address
from spate.engine.connectors.core.metadata import is_secret_option
from spate.engine.connectors.kinesis.sink import RequestLimits, request_batches
from spate.engine.connectors.kinesis.source import KinesisDataSource, KinesisStreamReader
from tests.engine.connectors.kinesis.kinesis_support import (
    KEY_ID,
    SECRET,
    KinesisServer,
    serve_kinesis,
)

pytestmark = pytest.mark.e2e

COLUMNS = (ColumnDef("id", T.LongType(), False), ColumnDef("name", T.StringType()))
KINESIS = CONNECTORS["kinesis"]


@pytest.fixture(scope="module")
def kinesis_server() -> Iterator[KinesisServer]:
    yield from serve_kinesis()


def _table(options: dict[str, str], role: str = "source",
           columns: tuple[ColumnDef, ...] = COLUMNS, boundary: Boundary | None = None
           ) -> TableConfig:
    return TableConfig("k", "kinesis", role, {"type": role, "format": "json", **options},
                       columns, boundary=boundary or Boundary())


def _valid(**extra: str) -> dict[str, str]:
    return {"stream_name": "s", "aws_region": "eu-west-1", "aws_access_key_id": "AKIA1",
            "aws_secret_access_key": "shh", **extra}


# -- options ----------------------------------------------------------------------


@pytest.mark.parametrize(("options", "option", "message"), [
    ({"stream_name": None}, "stream_name", "needs option 'stream_name'"),
    ({"aws_region": None}, "aws_region", "needs option 'aws_region'"),
    ({"aws_region": "Mars"}, "aws_region", "must be an AWS region"),
    ({"aws_access_key_id": None}, "aws_access_key_id", "never uses the server's own AWS"),
    ({"aws_secret_access_key": None}, "aws_secret_access_key", "never uses the server's"),
    ({"source.offset": "middle"}, "source.offset", "must be one of 'earliest', 'latest'"),
    ({"endpoint_url": "ftp://h"}, "endpoint_url", "must be 'http"),
    ({"endpoint_url": "http://u:p@h:1"}, "endpoint_url", "no credentials"),
    ({"endpoint_url": "http://h:1/path"}, "endpoint_url", "no credentials, path or query"),
    ({"bad_data": "ignore"}, "bad_data", "must be one of"),
    ({"key_field": "id"}, "key_field", "applies to sinks only"),
    ({"format": "yaml"}, "format", "unknown format"),
    ({"colour": "red"}, "colour", "unknown option 'colour'"),
])
def test_every_bad_option_is_named(options: dict[str, str | None], option: str,
                                   message: str) -> None:
    given = {k: v for k, v in {**_valid(), **options}.items() if v is not None}
    with pytest.raises(ConnectorError, match=re.escape(message)) as caught:
        KINESIS.validate(_table(given))
    assert caught.value.option == option
    assert "shh" not in str(caught.value)


def test_sink_options() -> None:
    assert KINESIS.validate(_table(_valid(key_field="id"), role="sink")) == COLUMNS
    with pytest.raises(ConnectorError, match="applies to sources only") as caught:
        KINESIS.validate(_table(_valid(**{"source.offset": "earliest"}), role="sink"))
    assert caught.value.option == "source.offset"
    with pytest.raises(ConnectorError, match="applies to sources only"):
        KINESIS.validate(_table(_valid(bad_data="drop"), role="sink"))
    for options, message in (({"sink.max_records_per_batch": "501"}, "at most 500"),
                             ({"sink.max_bytes_per_batch": "100"}, "at least 1048576"),
                             ({"sink.flush_interval_millis": "5"}, "not supported yet")):
        with pytest.raises(ConnectorError, match=message) as refused:
            KINESIS.validate(_table(_valid(**options), role="sink"))
        assert refused.value.option == next(iter(options))
    with pytest.raises(ConnectorError, match="applies to sinks only"):
        KINESIS.validate(_table(_valid(**{"sink.max_records_per_batch": "5"})))
    schema = T.StructType([T.StructField("id", T.LongType())])
    with pytest.raises(ConnectorError, match="'nope', which is not a column") as missing:
        KINESIS.create_sink(_table(_valid(key_field="nope"), role="sink"), schema)
    assert missing.value.option == "key_field"


def test_credentials_are_secret_options_and_raw_string_has_a_value_column() -> None:
    names = {spec.name: spec.secret for spec in KINESIS.options}
    assert names["aws_secret_access_key"] and names["aws_session_token"]
    assert not names["aws_access_key_id"] and not names["stream_name"]
    assert is_secret_option("aws_secret_access_key")
    columns = KINESIS.validate(_table(_valid(format="raw_string"), columns=()))
    assert [c.name for c in columns] == ["value"]


def test_a_loopback_endpoint_is_refused_at_planning_under_an_egress_policy() -> None:
    boundary = Boundary(egress=EgressPolicy())
    with pytest.raises(ConnectorError, match="cannot connect to 127.0.0.1:4567") as caught:
        KINESIS.validate(_table(_valid(endpoint_url="http://127.0.0.1:4567"),
                                boundary=boundary))
    assert caught.value.option == "endpoint_url"


# -- reach and credentials ---------------------------------------------------------


def test_reach_reports_status_and_shards(kinesis_server: KinesisServer) -> None:
    stream = kinesis_server.create_stream(shards=3)
    answer = _reach(kinesis_server.options(stream))
    assert answer == (f"kinesis stream '{stream}' in us-east-1 at "
                      f"127.0.0.1:{kinesis_server.port}: ACTIVE, 3 open shards")
    profile = {k: v for k, v in kinesis_server.options(stream).items() if k != "stream_name"}
    assert "stream" in _reach(profile, None)


def test_reach_an_unknown_stream_or_a_dead_server_without_secrets(
        kinesis_server: KinesisServer) -> None:
    with pytest.raises(ConnectorError, match="'nope' does not exist in region us-east-1") \
            as unknown:
        KINESIS.reach(kinesis_server.options("nope"), "source", Boundary())
    assert unknown.value.option == "stream_name"
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    options = kinesis_server.options("s", endpoint_url=f"http://127.0.0.1:{port}")
    with pytest.raises(ConnectorError, match=f"could not connect to 127.0.0.1:{port}") as dead:
        KINESIS.reach(options, "sink", Boundary())
    for error in (unknown.value, dead.value):
        assert SECRET not in str(error) and KEY_ID not in str(error)


def test_the_servers_own_aws_environment_is_never_used(
        kinesis_server: KinesisServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """The stream lives in an account only the profile's key belongs to (moto maps an IAM
    key to its account); the environment's key and endpoint lead elsewhere."""
    account = "111122223333"
    user = f"u{len(account)}"
    kinesis_server.iam(account).create_user(UserName=user)
    key = kinesis_server.iam(account).create_access_key(UserName=user)["AccessKey"]
    stream = kinesis_server.create_stream()
    kinesis_server.client(account).create_stream(StreamName=stream, ShardCount=4)
    config = tmp_path / "config"
    config.write_text("[default]\nregion = eu-west-3\nendpoint_url = http://127.0.0.1:9\n")
    for name, value in {"AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET,
                        "AWS_SESSION_TOKEN": "env-token", "AWS_DEFAULT_REGION": "eu-west-3",
                        "AWS_REGION": "eu-west-3", "AWS_PROFILE": "missing",
                        "AWS_CONFIG_FILE": str(config),
                        "AWS_SHARED_CREDENTIALS_FILE": str(config),
                        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
                        "AWS_ENDPOINT_URL_KINESIS": "http://127.0.0.1:9"}.items():
        monkeypatch.setenv(name, value)
    options = kinesis_server.options(stream, aws_access_key_id=key["AccessKeyId"],
                                     aws_secret_access_key=key["SecretAccessKey"])
    # 4 shards: the stream of the profile's account, not the 2-shard one of the environment's
    assert _reach(options).endswith("ACTIVE, 4 open shards")
    without_keys = {k: v for k, v in options.items() if not k.startswith("aws_") or
                    k == "aws_region"}
    with pytest.raises(ConnectorError, match="never uses the server's own AWS credentials"):
        KINESIS.reach(without_keys, "source", Boundary())


def test_reach_goes_to_the_address_the_egress_policy_checked(
        kinesis_server: KinesisServer) -> None:
    stream = kinesis_server.create_stream(shards=1)
    name = "tenant-kinesis.invalid"  # only the policy's resolver knows it

    def resolve(host: str, port: int) -> list[Any]:
        if host == name:
            return [ipaddress.ip_address("127.0.0.1")]
        address = literal_address(host)
        if address is None:
            raise socket.gaierror("no such name")
        return [address]

    allowed = EgressPolicy(EgressPolicy.from_config(["127.0.0.1"], ()).allow,
                           resolver=resolve)
    options = kinesis_server.options(stream,
                                     endpoint_url=f"http://{name}:{kinesis_server.port}")
    answer = _reach(options, "source", Boundary(egress=allowed))
    assert answer.endswith("ACTIVE, 1 open shard")
    with pytest.raises(ConnectorError, match="not allowed by this deployment's egress"):
        KINESIS.reach(options, "source", Boundary(egress=EgressPolicy(resolver=resolve)))


# -- the source, driven like Spark drives it ------------------------------------------


def _reach(options: dict[str, str], role: str | None = "source",
           boundary: Boundary | None = None) -> str:
    answer = KINESIS.reach(options, role, boundary or Boundary())
    assert answer is not None
    return answer


def _reader(server: KinesisServer, stream: str, start: dict[str, Any] | None = None,
            offset: str = "earliest", **extra: str) -> KinesisStreamReader:
    table = _table(server.options(stream, **{"source.offset": offset, **extra}))
    options = KINESIS.reader_options(table, 2)  # type: ignore[attr-defined]
    if start is not None:
        payload = json.loads(options["spate_config"])
        options = {**options, "spate_config": json.dumps(payload | {"start_offset": start})}
    source = KinesisDataSource(options)
    reader = source.streamReader(source.schema())
    assert isinstance(reader, KinesisStreamReader)
    return reader


def _batch(reader: KinesisStreamReader, start: dict[str, Any],
           end: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for partition in reader.partitions(start, end):
        for batch in reader.read(partition):
            rows.extend(pa.Table.from_batches([batch]).to_pylist())
    return rows


def _rows(count: int, first: int = 0) -> list[dict[str, Any]]:
    return [{"id": i, "name": f"n{i}"} for i in range(first, first + count)]


def test_batches_cover_every_shard_once_and_replay_identically(
        kinesis_server: KinesisServer) -> None:
    stream = kinesis_server.create_stream(shards=3)
    kinesis_server.put_json(stream, _rows(40))
    reader = _reader(kinesis_server, stream)
    start = reader.initialOffset()
    assert start == {"shards": {}, "start_ms": None}
    end = reader.latestOffset(start, ReadMaxRows(12))
    assert set(end["shards"]) == {f"shardId-00000000000{i}" for i in range(3)}
    first = _batch(reader, start, end)
    assert len(first) <= 12 and _batch(reader, start, end) == first  # a replay
    rest_end = reader.latestOffset(end, ReadAllAvailable())
    rest = _batch(reader, end, rest_end)
    assert sorted(r["id"] for r in first + rest) == list(range(40))
    assert reader.latestOffset(rest_end, ReadAllAvailable()) == rest_end
    table = _table(kinesis_server.options(stream))
    assert KINESIS.has_input_after(table, 2, rest_end) is False
    assert {r[HIDDEN_PARTITION] for r in first + rest} <= {0, 1}
    assert all(r[HIDDEN_TIMESTAMP] is not None and r[HIDDEN_CONTROL] is None
               for r in first + rest)
    # A pipeline resuming at the committed offset goes on after it.
    kinesis_server.put_json(stream, _rows(5, 40))
    assert KINESIS.has_input_after(table, 2, rest_end) is True
    resumed = _reader(kinesis_server, stream, start=rest_end)
    assert resumed.initialOffset() == rest_end
    last = resumed.latestOffset(rest_end, ReadAllAvailable())
    assert sorted(r["id"] for r in _batch(resumed, rest_end, last)) == list(range(40, 45))


def test_latest_skips_what_was_there_before_the_start(kinesis_server: KinesisServer) -> None:
    stream = kinesis_server.create_stream(shards=2)
    kinesis_server.put_json(stream, _rows(5))
    reader = _reader(kinesis_server, stream, offset="latest")
    start = reader.initialOffset()
    assert start["start_ms"] is not None
    kinesis_server.put_json(stream, _rows(3, 100))
    end = reader.latestOffset(start, ReadAllAvailable())
    assert sorted(r["id"] for r in _batch(reader, start, end)) == [100, 101, 102]


def test_a_split_parent_is_read_to_its_end_before_its_children(
        kinesis_server: KinesisServer) -> None:
    stream = kinesis_server.create_stream(shards=2)
    client = kinesis_server.client()
    kinesis_server.put_json(stream, _rows(20))
    reader = _reader(kinesis_server, stream)
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadMaxRows(4))
    seen = _batch(reader, start, end)
    parent = client.list_shards(StreamName=stream)["Shards"][0]
    middle = (int(parent["HashKeyRange"]["StartingHashKey"])
              + int(parent["HashKeyRange"]["EndingHashKey"])) // 2
    client.split_shard(StreamName=stream, ShardToSplit=parent["ShardId"],
                       NewStartingHashKey=str(middle))
    kinesis_server.put_json(stream, _rows(20, 20))
    while (following := reader.latestOffset(end, ReadMaxRows(6))) != end:
        seen += _batch(reader, end, following)
        end = following
    assert sorted(r["id"] for r in seen) == list(range(40))
    children = [s["ShardId"] for s in client.list_shards(StreamName=stream)["Shards"]
                if s.get("ParentShardId") == parent["ShardId"]]
    assert len(children) == 2 and all(child in end["shards"] for child in children)


def test_bad_records_fail_or_are_dropped_and_counted(kinesis_server: KinesisServer) -> None:
    stream = kinesis_server.create_stream(shards=1)
    kinesis_server.put_raw(stream, [b'{"id": 1, "name": "a"}', b"not json",
                                    b'{"name": "no id"}', b'{"id": 4,\n "name": "d"}'])
    reader = _reader(kinesis_server, stream)
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    with pytest.raises(ConnectorError, match=r"bad record in stream '.+' at shard "
                                             r"shardId-000000000000 sequence \d+") as caught:
        _batch(reader, start, end)
    assert caught.value.option == "bad_data"
    dropping = _reader(kinesis_server, stream, bad_data="drop")
    rows = _batch(dropping, start, end)
    assert [r["id"] for r in rows if r[HIDDEN_CONTROL] is None] == [1, 4]
    assert [r[HIDDEN_CONTROL] for r in rows if r[HIDDEN_CONTROL]] == ["dropped:2"]


def test_raw_string_keeps_a_records_line_breaks(kinesis_server: KinesisServer) -> None:
    stream = kinesis_server.create_stream(shards=1)
    kinesis_server.put_raw(stream, [b"one\ntwo", b"three"])
    table = TableConfig("k", "kinesis", "source",
                        {"type": "source", "format": "raw_string",
                         **kinesis_server.options(stream, **{"source.offset": "earliest"})},
                        ())
    source = KinesisDataSource(KINESIS.reader_options(table, 1))  # type: ignore[attr-defined]
    reader = source.streamReader(source.schema())
    assert isinstance(reader, KinesisStreamReader)
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    assert [r["value"] for r in _batch(reader, start, end)] == ["one\ntwo", "three"]


def test_put_requests_hold_at_most_500_records_and_5_mib() -> None:
    small = [{"Data": b"x" * 10, "PartitionKey": "k"} for _ in range(1001)]
    assert [len(r) for r in request_batches(small)] == [500, 500, 1]
    big = [{"Data": b"x" * ((1 << 20) - 1), "PartitionKey": "k"} for _ in range(11)]
    sizes = [sum(len(e["Data"]) + 1 for e in r) for r in request_batches(big)]
    assert sizes == [5 << 20, 5 << 20, 1 << 20]
    assert [e for r in request_batches(big) for e in r] == big  # in order, none lost
    assert [len(r) for r in request_batches(small, RequestLimits(records=400))] == [400] * 2 + [201]


def test_the_secret_travels_apart_from_the_settings() -> None:
    """Spark redacts options whose name says secret in its plans and logs; the settings'
    option says no such thing, so it must not carry the secret."""
    options = KINESIS.reader_options(  # type: ignore[attr-defined]
        _table(_valid(aws_session_token="tok")), 1)
    assert "shh" not in options["spate_config"] and "tok" not in options["spate_config"]
    assert json.loads(options["spate_kinesis_secret"]) == {"secret_access_key": "shh",
                                                           "session_token": "tok"}
