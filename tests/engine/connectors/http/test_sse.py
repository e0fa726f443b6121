"""The ``sse`` source against a real Server-Sent Events server (Starlette under uvicorn)."""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T
from pyspark.sql.streaming.datasource import ReadAllAvailable
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from spate.engine.connectors import (
    CONNECTORS,
    HIDDEN_CONTROL,
    ColumnDef,
    ConnectorError,
    TableConfig,
)
from spate.engine.connectors.core.boundary import UNCONFINED, Boundary
from spate.engine.connectors.core.egress import EgressPolicy
from spate.engine.connectors.formats.records import source_schema
from spate.engine.connectors.http.common import FeedReader, source_settings
from spate.engine.connectors.http.sse import SseFeed, parse_table
from tests.engine.connectors.http.http_support import http_server, wait_until
from tests.engine.connectors.support import make_table
from tests.engine.harness import read_lines, run_pipeline

COLUMNS = (ColumnDef("id", T.LongType()), ColumnDef("name", T.StringType()))


@dataclass
class EventServer:
    """Events ``(id, type, data)``; each stream sends those after its Last-Event-ID."""

    events: list[tuple[int, str, str]] = field(default_factory=list)
    #: the Last-Event-ID header of each request (None: absent)
    resumed_from: list[str | None] = field(default_factory=list)
    #: end the first stream after this many events (a dropped connection)
    close_after: int | None = None
    #: set when the test ends: open streams end
    closed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, first: int, last: int, kind: str = "row") -> None:
        with self.lock:
            self.events.extend((i, kind, json.dumps({"id": i, "name": f"n{i}"}))
                               for i in range(first, last))

    async def stream(self, request: Request) -> Response:
        if request.headers.get("authorization") == "Bearer wrong":
            return Response(status_code=401)
        last = request.headers.get("last-event-id")
        self.resumed_from.append(last)
        close_after, self.close_after = self.close_after, None

        async def body() -> AsyncIterator[str]:
            sent, position = 0, int(last) if last is not None else -1
            yield ": hello\n\n"
            while True:
                with self.lock:
                    pending = [e for e in self.events if e[0] > position]
                for number, kind, data in pending:
                    lines = "".join(f"data: {part}\n" for part in data.split("\n"))
                    yield f"id: {number}\nevent: {kind}\n{lines}\n"
                    position, sent = number, sent + 1
                    if close_after is not None and sent >= close_after:
                        return
                if self.closed or await request.is_disconnected():
                    return
                await asyncio.sleep(0.02)

        return StreamingResponse(body(), media_type="text/event-stream")


@pytest.fixture
def server() -> Iterator[tuple[EventServer, str]]:
    events = EventServer()
    app = Starlette(routes=[Route("/events", events.stream),
                            Route("/plain", lambda _: Response("x"))])
    with http_server(app) as base:
        yield events, f"{base}/events"
        events.closed = True


def _source(endpoint: str, **options: Any) -> TableConfig:
    return make_table("sse", "source", COLUMNS, name="src", endpoint=endpoint,
                      **{"format": "json", **options})


def _reader(table: TableConfig, start: dict[str, Any] | None = None) -> FeedReader:
    source, events, timeout = parse_table(table)
    settings = source_settings("sse", table.name, source, [], events=list(events),
                               timeout_s=timeout)
    return FeedReader(settings, source.headers, source_schema(source.spec, source.columns),
                      start, feed_class=SseFeed)


def _read(reader: FeedReader, start: dict[str, Any], count: int) -> tuple[dict[str, Any],
                                                                          list[int]]:
    """The offset once ``count`` messages arrived after ``start``, and their ids."""
    end: dict[str, Any] = {}

    def arrived() -> bool:
        nonlocal end
        end = reader.latestOffset(start, ReadAllAvailable())
        return end["messages"] - start["messages"] >= count

    assert wait_until(arrived), end
    ids: list[int] = []
    for partition in reader.partitions(start, end):
        for batch in reader.read(partition):
            ids.extend(i for i, control in zip(batch.column("id").to_pylist(),
                                               batch.column(HIDDEN_CONTROL).to_pylist(),
                                               strict=True) if control is None)
    return end, ids


@pytest.mark.parametrize(("options", "option", "words"), [
    ({"endpoint": None}, "endpoint", "needs option 'endpoint'"),
    ({"endpoint": "ws://127.0.0.1/x"}, "endpoint", "http:// or https://"),
    ({"endpoint": "http://u:hunter2@127.0.0.1/x"}, "endpoint", "must not carry credentials"),
    ({"headers": "Authorization"}, "headers", "not 'Name: value'"),
    ({"headers": "Host: a"}, "headers", "set by Spate"),
    ({"timeout_ms": "0"}, "timeout_ms", "at least 1"),
    ({"max_messages_per_batch": "x"}, "max_messages_per_batch", "integer"),
    ({"framing": "newline"}, "framing", "not supported yet"),
    ({"type": "sink"}, "type", "can only be a source"),
    ({"format": None}, "format", "needs option 'format'"),
    ({"subscription_message": "x"}, "subscription_message", "unknown option"),
])
def test_options_are_checked(options: dict[str, str | None], option: str, words: str) -> None:
    values = {"endpoint": "http://127.0.0.1:1/events", "format": "json", **options}
    table = make_table("sse", "source", COLUMNS, name="src",
                       **{k: v for k, v in values.items() if v is not None})
    with pytest.raises(ConnectorError, match=words) as caught:
        CONNECTORS["sse"].validate(table)
    assert caught.value.option == option
    assert "hunter2" not in str(caught.value)


def test_a_header_value_is_never_echoed() -> None:
    table = _source("http://127.0.0.1:1/e", headers="Authorization: Bearer s3cret\nX: y")
    with pytest.raises(ConnectorError, match="line break") as caught:
        CONNECTORS["sse"].validate(table)
    assert "s3cret" not in str(caught.value)


def test_events_are_filtered_and_a_restart_resumes_after_the_committed_id(
        server: tuple[EventServer, str]) -> None:
    events, endpoint = server
    events.add(0, 3)
    events.add(3, 4, kind="noise")
    events.add(4, 6)
    table = _source(endpoint, events="row, other",
                    headers="Authorization: Bearer t0ken")
    first = _reader(table)
    start = first.initialOffset()
    end, ids = _read(first, start, 5)
    assert ids == [0, 1, 2, 4, 5]  # the 'noise' event is skipped
    assert end == {"messages": 5, "cursor": "5"}
    first.commit(end)
    first.stop()

    events.add(6, 9)  # while stopped
    resumed = _reader(table, start=end)
    assert resumed.initialOffset() == end
    _, ids = _read(resumed, end, 3)
    assert ids == [6, 7, 8]
    assert events.resumed_from == [None, "5"]
    resumed.stop()


def test_a_dropped_stream_reconnects_from_the_last_event_id(
        server: tuple[EventServer, str]) -> None:
    events, endpoint = server
    events.close_after = 2
    events.add(0, 4)
    reader = _reader(_source(endpoint))
    start = reader.initialOffset()
    _, ids = _read(reader, start, 4)
    assert ids == [0, 1, 2, 3]  # nothing lost, nothing twice
    assert events.resumed_from == [None, "1"]
    reader.stop()


def test_an_unlogged_batch_is_received_again_by_a_restarted_reader(
        server: tuple[EventServer, str]) -> None:
    """A batch Spark logged but never committed: the new reader, opened at the batch's
    start, receives its events again from the server."""
    events, endpoint = server
    events.add(0, 3)
    table = _source(endpoint)
    crashed = _reader(table)
    start = crashed.initialOffset()
    end, _ = _read(crashed, start, 3)
    crashed.stop()
    replayed = _reader(table)
    ids = [i for p in replayed.partitions(start, end) for b in replayed.read(p)
           for i in b.column("id").to_pylist()]
    assert ids == [0, 1, 2]
    replayed.stop()


def test_multi_line_data_is_one_record_and_bad_records_fail_naming_bad_data(
        server: tuple[EventServer, str]) -> None:
    events, endpoint = server
    events.events.extend([(0, "message", '{"id": 0,\n "name": "n0"}'),
                          (1, "message", '{"id": "x"}')])
    reader = _reader(_source(endpoint))
    start = reader.initialOffset()
    with pytest.raises(ConnectorError, match="bad record") as caught:
        _read(reader, start, 2)
    assert caught.value.option == "bad_data"
    reader.stop()
    dropping = _reader(_source(endpoint, bad_data="drop"))
    _, ids = _read(dropping, dropping.initialOffset(), 2)
    assert ids == [0]
    dropping.stop()


def test_a_refused_stream_fails_the_query_naming_the_endpoint(
        server: tuple[EventServer, str]) -> None:
    _, endpoint = server
    reader = _reader(_source(endpoint, headers="Authorization: Bearer wrong"))
    start = reader.initialOffset()

    def failed() -> bool:
        try:
            reader.latestOffset(start, ReadAllAvailable())
        except ConnectorError as error:
            assert "HTTP 401" in str(error) and error.option == "endpoint"
            return True
        return False

    assert wait_until(failed)
    reader.stop()


def test_reach_opens_the_stream_through_the_egress_policy(
        server: tuple[EventServer, str]) -> None:
    _, endpoint = server
    sse = CONNECTORS["sse"]
    port = endpoint.split(":")[2].split("/")[0]
    assert sse.reach({"endpoint": endpoint}, None, UNCONFINED) == (
        f"opened the event stream at http://127.0.0.1:{port}")
    with pytest.raises(ConnectorError, match="egress policy"):
        sse.reach({"endpoint": endpoint}, None, Boundary(egress=EgressPolicy()))
    allowed = Boundary(egress=EgressPolicy.from_config(["127.0.0.1"], ()))
    assert sse.reach({"endpoint": endpoint}, None, allowed).startswith("opened")
    with pytest.raises(ConnectorError, match="text/event-stream"):
        sse.reach({"endpoint": endpoint.replace("/events", "/plain")}, None, UNCONFINED)
    with pytest.raises(ConnectorError, match="could not reach http://127.0.0.1:1"):
        sse.reach({"endpoint": "http://127.0.0.1:1/e?token=hunter2"}, None, UNCONFINED)


def test_a_confined_source_is_refused_a_loopback_endpoint() -> None:
    table = replace(_source("http://127.0.0.1:8080/e"), boundary=Boundary(egress=EgressPolicy()))
    with pytest.raises(ConnectorError, match="egress policy") as caught:
        CONNECTORS["sse"].validate(table)
    assert caught.value.option == "endpoint"


@pytest.mark.spark
def test_a_pipeline_resumes_from_its_state_store_without_loss(
        spark: SparkSession, server: tuple[EventServer, str], tmp_path: Path) -> None:
    events, endpoint = server
    out = tmp_path / "out.jsonl"
    sql = (f"CREATE TABLE src (id BIGINT, name TEXT) WITH (connector = 'sse', "
           f"endpoint = '{endpoint}', format = 'json');\n"
           f"CREATE TABLE out WITH (connector = 'single_file', path = '{out}', "
           "format = 'json', type = 'sink');\nINSERT INTO out SELECT id, name FROM src;\n")
    events.add(0, 3)
    run_pipeline(spark, sql, tmp_path, stop_when=lambda: len(read_lines(out)) >= 3,
                 timeout_s=60)
    events.add(3, 6)  # while stopped
    shutil.rmtree(tmp_path / "checkpoint")  # resume from the state store's offsets
    run_pipeline(spark, sql, tmp_path, stop_when=lambda: len(read_lines(out)) >= 6,
                 timeout_s=60)
    ids = sorted(json.loads(line)["id"] for line in read_lines(out))
    assert ids == list(range(6))  # the file sink cuts back to its commit: exactly once here
    assert events.resumed_from[-1] is not None  # the second run sent Last-Event-ID
