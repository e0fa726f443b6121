"""The ``webhook`` sink against a real HTTP server (Starlette under uvicorn)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from spate.api.connections import split_options
from spate.engine.connectors import CONNECTORS, ColumnDef, ConnectorError, TableConfig
from spate.engine.connectors.core.boundary import UNCONFINED, Boundary
from spate.engine.connectors.core.checks import check_options
from spate.engine.connectors.core.egress import EgressPolicy
from spate.engine.connectors.http.webhook import WebhookSink, sink_id
from spate.engine.runtime.failures import root_message
from tests.engine.connectors.http.http_support import http_server
from tests.engine.connectors.support import make_table

COLUMNS = (ColumnDef("id", T.LongType()), ColumnDef("name", T.StringType()))
SCHEMA = T.StructType([T.StructField("id", T.LongType()), T.StructField("name", T.StringType())])


@dataclass
class Receiver:
    """Records every request; answers ``statuses`` in turn, then 200."""

    statuses: list[int] = field(default_factory=list)
    received: list[dict[str, Any]] = field(default_factory=list)

    async def hook(self, request: Request) -> Response:
        if request.method == "OPTIONS":
            auth = request.headers.get("authorization")
            return Response(status_code=204 if auth != "Bearer wrong" else 401)
        self.received.append({"method": request.method, "body": await request.body(),
                              "key": request.headers.get("idempotency-key"),
                              "type": request.headers.get("content-type"),
                              "auth": request.headers.get("authorization")})
        return Response(status_code=self.statuses.pop(0) if self.statuses else 200)


@pytest.fixture
def receiver() -> Iterator[tuple[Receiver, str]]:
    state = Receiver()
    app = Starlette(routes=[Route("/hook", state.hook, methods=["POST", "PUT", "OPTIONS"])])
    with http_server(app) as base:
        yield state, f"{base}/hook"


def _table(endpoint: str, **options: Any) -> TableConfig:
    values = {"format": "json", "retry_backoff_ms": "1", **options}
    return make_table("webhook", "sink", COLUMNS, name="hook", endpoint=endpoint, **values)


def _sink(table: TableConfig, pipeline: str = "default/p", writers: int = 1) -> WebhookSink:
    """The sink opened at a marker of ``writers`` writers (one: its requests go out in
    one sequence, which the tests below follow)."""
    sink = CONNECTORS["webhook"].create_sink(table, SCHEMA)
    assert isinstance(sink, WebhookSink)
    sink.pipeline = pipeline
    sink.open({"writers": writers})
    return sink


def _rows(spark: SparkSession, ids: list[int]) -> DataFrame:
    return spark.createDataFrame([(i, f"n{i}") for i in ids], SCHEMA)


@pytest.mark.parametrize(("options", "option", "words"), [
    ({"endpoint": "ws://127.0.0.1/x"}, "endpoint", "http:// or https://"),
    ({"method": "get"}, "method", "must be one of"),
    ({"max_attempts": "0"}, "max_attempts", "at least 1"),
    ({"max_rows_per_request": "0"}, "max_rows_per_request", "at least 1"),
    ({"retry_backoff_ms": "-1"}, "retry_backoff_ms", "at least 0"),
    ({"idempotency_header": "a b"}, "idempotency_header", "a header name"),
    ({"headers": "Idempotency-Key: x"}, "headers", "idempotency key header"),
    ({"bad_data": "drop"}, "bad_data", "applies to sources only"),
    ({"format": "debezium_json"}, "format", "not supported yet"),
    ({"type": "source"}, "type", "can only be a sink"),
    ({"framing": "newline"}, "framing", "not supported"),
])
def test_options_are_checked(options: dict[str, str], option: str, words: str) -> None:
    values = {"endpoint": "http://127.0.0.1:1/x", **options}
    with pytest.raises(ConnectorError, match=words) as caught:
        CONNECTORS["webhook"].validate(_table(values.pop("endpoint"), **values))
    assert caught.value.option == option


def test_headers_are_the_one_secret_option_by_name() -> None:
    # 'headers' carries a receiver's token: the API keeps it encrypted, never shown.
    specs = {spec.name: spec for spec in CONNECTORS["webhook"].options}
    assert {name for name, spec in specs.items() if spec.secret} == {"headers"}


@pytest.mark.spark
def test_each_row_is_sent_with_a_key_a_replayed_epoch_repeats(
        spark: SparkSession, receiver: tuple[Receiver, str]) -> None:
    state, endpoint = receiver
    sink = _sink(_table(endpoint, headers="Authorization: Bearer t0ken"))
    sink.write_epoch(7, _rows(spark, [2, 0, 1]))
    first = [(r["key"], json.loads(r["body"])["id"]) for r in state.received]
    prefix = sink_id("default/p", "hook")
    assert first == [(f"{prefix}-7-{n}", n) for n in range(3)]
    assert {(r["type"], r["auth"], r["method"]) for r in state.received} == {
        ("application/json", "Bearer t0ken", "POST")}
    sink.close()

    state.received.clear()  # the epoch replayed after a crash, rows in another order
    replayed = _sink(_table(endpoint, headers="Authorization: Bearer t0ken"))
    replayed.write_epoch(7, _rows(spark, [1, 2, 0]))
    assert [(r["key"], json.loads(r["body"])["id"]) for r in state.received] == first
    replayed.close()
    other = _sink(_table(endpoint), pipeline="default/other")
    other.write_epoch(7, _rows(spark, [0]))
    assert state.received[-1]["key"] != first[0][0]  # another pipeline, other keys
    other.close()


@pytest.mark.spark
def test_the_tasks_send_each_row_once_a_writer_each_and_a_replay_repeats_their_keys(
        spark: SparkSession, receiver: tuple[Receiver, str]) -> None:
    state, endpoint = receiver
    sink = _sink(_table(endpoint, max_rows_per_request="4"), writers=3)
    assert sink.write_epoch(5, _rows(spark, list(range(60))).repartition(4)) == {"writers": 3}
    sent = {r["key"]: [row["id"] for row in json.loads(r["body"])] for r in state.received}
    assert sorted(i for ids in sent.values() for i in ids) == list(range(60))
    prefix = sink_id("default/p", "hook")
    writers: dict[str, list[int]] = {}
    for key, ids in sent.items():
        assert key.startswith(f"{prefix}-5-")
        writer, first = key.removeprefix(f"{prefix}-5-").split("-")
        assert int(first) == len(writers.setdefault(writer, []))  # rows before it, its writer's
        writers[writer].extend(ids)
    assert set(writers) <= {"0", "1", "2"} and len(writers) > 1
    for ids in writers.values():  # each writer sends its records sorted (as JSON text)
        texts = [json.dumps({"id": i, "name": f"n{i}"}, separators=(",", ":")) for i in ids]
        assert texts == sorted(texts)
    assert sink.epoch_bytes == sum(len(r["body"]) for r in state.received)
    sink.close()

    state.received.clear()  # replayed from other partitions: the same requests
    replayed = _sink(_table(endpoint, max_rows_per_request="4"), writers=3)
    replayed.write_epoch(5, _rows(spark, list(reversed(range(60)))).repartition(2))
    assert {r["key"]: [row["id"] for row in json.loads(r["body"])]
            for r in state.received} == sent
    replayed.close()


def test_a_new_sink_takes_the_default_parallelism_as_its_writers(
        spark: SparkSession, receiver: tuple[Receiver, str]) -> None:
    _, endpoint = receiver
    sink = CONNECTORS["webhook"].create_sink(_table(endpoint), SCHEMA)
    sink.open(None)
    assert sink.write_epoch(0, _rows(spark, [])) == {
        "writers": spark.sparkContext.defaultParallelism}
    sink.close()


@pytest.mark.spark
def test_rows_are_batched_and_5xx_is_retried_with_the_same_key(
        spark: SparkSession, receiver: tuple[Receiver, str]) -> None:
    state, endpoint = receiver
    state.statuses = [503, 429]
    sink = _sink(_table(endpoint, max_rows_per_request="2", method="put"))
    sink.write_epoch(3, _rows(spark, [0, 1, 2]))
    bodies = [(r["key"].rsplit("-", 2)[1:], json.loads(r["body"])) for r in state.received]
    assert bodies == [
        (["3", "0"], [{"id": 0, "name": "n0"}, {"id": 1, "name": "n1"}]),  # 503
        (["3", "0"], [{"id": 0, "name": "n0"}, {"id": 1, "name": "n1"}]),  # 429
        (["3", "0"], [{"id": 0, "name": "n0"}, {"id": 1, "name": "n1"}]),
        (["3", "2"], [{"id": 2, "name": "n2"}])]
    assert state.received[0]["method"] == "PUT"
    sink.close()


@pytest.mark.spark
def test_a_client_error_fails_at_once_and_retries_give_up_naming_the_option(
        spark: SparkSession, receiver: tuple[Receiver, str]) -> None:
    state, endpoint = receiver
    state.statuses = [400]
    sink = _sink(_table(endpoint, max_attempts="3"))
    # The tasks send: their error reaches the driver as the one line a user sees.
    with pytest.raises(Exception) as caught:
        sink.write_epoch(1, _rows(spark, [0]))
    assert "answered HTTP 400 to the request of row 0 of epoch 1; check options " \
           "'endpoint'" in root_message(caught.value)
    assert len(state.received) == 1

    state.statuses = [500, 502, 503, 504]
    with pytest.raises(Exception) as caught:
        sink.write_epoch(2, _rows(spark, [0]))
    assert re.search(r"gave up .* after 3 attempts .*HTTP 503", root_message(caught.value))
    assert len(state.received) == 4
    sink.close()

    unreachable = _sink(_table("http://127.0.0.1:1/hook", max_attempts="2"))
    with pytest.raises(Exception) as caught:
        unreachable.write_epoch(1, _rows(spark, [0]))
    assert re.search("after 2 attempts .*ConnectError", root_message(caught.value))
    unreachable.close()


@pytest.mark.spark
def test_raw_strings_are_sent_as_text(spark: SparkSession,
                                      receiver: tuple[Receiver, str]) -> None:
    state, endpoint = receiver
    table = make_table("webhook", "sink", (ColumnDef("value", T.StringType()),), name="hook",
                       endpoint=endpoint, format="raw_string", max_rows_per_request="5")
    sink = CONNECTORS["webhook"].create_sink(
        table, T.StructType([T.StructField("value", T.StringType())]))
    sink.open({"writers": 1})
    sink.write_epoch(0, spark.createDataFrame([("b",), ("a",)], "value STRING"))
    assert [(r["body"], r["type"]) for r in state.received] == [
        (b"a\nb", "text/plain; charset=utf-8")]
    sink.close()


def test_reach_sends_no_row_and_goes_through_the_egress_policy(
        receiver: tuple[Receiver, str]) -> None:
    state, endpoint = receiver
    webhook = CONNECTORS["webhook"]
    base = endpoint.rsplit("/", 1)[0]
    assert webhook.reach({"endpoint": endpoint}, None, UNCONFINED) == (
        f"reached {base} (HTTP 204 to OPTIONS)")
    assert state.received == []
    with pytest.raises(ConnectorError, match="credentials in option 'headers'"):
        webhook.reach({"endpoint": endpoint, "headers": "Authorization: Bearer wrong"}, None,
                      UNCONFINED)
    with pytest.raises(ConnectorError, match="egress policy"):
        webhook.reach({"endpoint": endpoint}, None, Boundary(egress=EgressPolicy()))
    allowed = Boundary(egress=EgressPolicy.from_config(["127.0.0.1"], ()))
    assert "HTTP 204" in webhook.reach({"endpoint": endpoint}, None, allowed)


def test_a_confined_sink_is_refused_a_loopback_endpoint() -> None:
    table = replace(_table("http://127.0.0.1:8080/x"), boundary=Boundary(egress=EgressPolicy()))
    with pytest.raises(ConnectorError, match="egress policy") as caught:
        CONNECTORS["webhook"].validate(table)
    assert caught.value.option == "endpoint"


def test_a_profile_keeps_its_headers_secret_and_its_check_reaches_the_receiver(
        receiver: tuple[Receiver, str]) -> None:
    """The API's connection profiles: the options come from the registry, ``headers``
    is a secret by its name (even sent in the plain config), and ``/test`` really
    connects, scrubbing the token."""
    _, endpoint = receiver
    options = split_options("webhook", {"endpoint": endpoint, "format": "json",
                                        "headers": "Authorization: Bearer wrong"}, {})
    assert options.secret == {"headers": "Authorization: Bearer wrong"}
    assert "headers" not in options.plain
    result = check_options("webhook", options.merged(), None).scrubbed(options.secret)
    assert not result.ok and "credentials in option 'headers'" in result.message
    assert "wrong" not in result.message
    reached = check_options("webhook", {"endpoint": endpoint}, None)
    assert reached.ok and "HTTP 204" in reached.message
