"""The ``websocket`` source against a real WebSocket server (websockets' own)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from pyspark.sql import types as T
from pyspark.sql.streaming.datasource import ReadAllAvailable
from websockets.http11 import Request, Response
from websockets.sync.server import ServerConnection, serve

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
from spate.engine.connectors.http.websocket import WebSocketFeed, parse_table
from tests.engine.connectors.http.http_support import wait_until, websocket_server
from tests.engine.connectors.support import make_table

COLUMNS = (ColumnDef("id", T.LongType()), ColumnDef("name", T.StringType()))


@dataclass
class Server:
    """Answers each connection's subscription messages with rows ``first..first+3``."""

    subscriptions: list[list[str]] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)
    connections: int = 0
    #: the first connection is closed by the server after its rows (a drop)
    drop_first: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def handle(self, connection: ServerConnection) -> None:
        with self.lock:
            self.connections += 1
            number = self.connections
        assert connection.request is not None
        self.authorizations.append(connection.request.headers.get("Authorization"))
        received = []
        while True:
            message = connection.recv()
            assert isinstance(message, str)
            received.append(message)
            if message.endswith("go"):
                break
        self.subscriptions.append(received)
        first = (number - 1) * 3
        for i in range(first, first + 3):
            payload = json.dumps({"id": i, "name": f"n{i}"})
            connection.send(payload if i % 2 else payload.encode())  # text and binary
        if number == 1 and self.drop_first:
            return
        try:
            connection.recv()  # until the client closes
        except Exception:  # noqa: BLE001 - the client went away
            return


@pytest.fixture
def server() -> Iterator[tuple[Server, str]]:
    state = Server()
    with websocket_server(state.handle) as url:
        yield state, url


def _source(endpoint: str, **options: Any) -> TableConfig:
    values = {"format": "json", "subscription_message": "go", **options}
    return make_table("websocket", "source", COLUMNS, name="src", endpoint=endpoint,
                      **{k: v for k, v in values.items() if v is not None})


def _reader(table: TableConfig, start: dict[str, Any] | None = None) -> FeedReader:
    source, subscriptions, timeout = parse_table(table)
    settings = source_settings("websocket", table.name, source, [],
                               subscriptions=subscriptions, timeout_s=timeout)
    return FeedReader(settings, source.headers, source_schema(source.spec, source.columns),
                      start, feed_class=WebSocketFeed)


def _read(reader: FeedReader, start: dict[str, Any],
          count: int) -> tuple[dict[str, Any], list[int]]:
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
    ({"endpoint": "http://127.0.0.1/x"}, "endpoint", "ws:// or wss://"),
    ({"subscription_messages": "[1"}, "subscription_messages", "JSON array"),
    ({"subscription_messages": '"a"'}, "subscription_messages", "JSON array"),
    ({"subscription_message": "a", "subscription_messages": "[]"}, "subscription_messages",
     "cannot be combined"),
    ({"headers": "X-A: 1, broken"}, "headers", "header 2 is not"),
    ({"events": "a"}, "events", "unknown option"),
    ({"bad_data": "skip"}, "bad_data", "must be one of"),
])
def test_options_are_checked(options: dict[str, str | None], option: str, words: str) -> None:
    values = {"endpoint": "ws://127.0.0.1:1/", "format": "json", **options}
    table = make_table("websocket", "source", COLUMNS, name="src",
                       **{k: v for k, v in values.items() if v is not None})
    with pytest.raises(ConnectorError, match=words) as caught:
        CONNECTORS["websocket"].validate(table)
    assert caught.value.option == option


def test_subscribes_with_its_headers_and_reads_text_and_binary_messages(
        server: tuple[Server, str]) -> None:
    state, url = server
    table = _source(url, subscription_message=None,
                    subscription_messages='["sub a", {"op": "go"}, "go"]',
                    headers="Authorization: Bearer t0ken")
    reader = _reader(table)
    start = reader.initialOffset()
    end, ids = _read(reader, start, 3)
    assert ids == [0, 1, 2] and end == {"messages": 3, "cursor": None}
    assert state.subscriptions == [["sub a", '{"op": "go"}', "go"]]
    assert state.authorizations == ["Bearer t0ken"]
    reader.stop()


def test_a_dropped_connection_is_reopened_and_subscribed_again(
        server: tuple[Server, str]) -> None:
    state, url = server
    state.drop_first = True
    reader = _reader(_source(url))
    start = reader.initialOffset()
    _, ids = _read(reader, start, 6)
    assert ids == [0, 1, 2, 3, 4, 5]
    assert state.subscriptions == [["go"], ["go"]]
    reader.stop()


def test_a_restart_is_at_most_once(server: tuple[Server, str]) -> None:
    """A batch logged but never committed is not received again: websocket servers keep
    no position, so a replay is empty and the resumed reader reads what comes next."""
    state, url = server
    table = _source(url)
    crashed = _reader(table)
    start = crashed.initialOffset()
    end, ids = _read(crashed, start, 3)
    assert ids == [0, 1, 2]
    crashed.stop()
    resumed = _reader(table, start=start)
    assert resumed.partitions(start, end) == []  # the uncommitted batch is lost
    _, ids = _read(resumed, end, 3)
    assert ids == [3, 4, 5]
    resumed.stop()


def test_reach_makes_the_handshake_through_the_egress_policy(
        server: tuple[Server, str]) -> None:
    _, url = server
    websocket = CONNECTORS["websocket"]
    assert websocket.reach({"endpoint": url}, None, UNCONFINED) == f"opened a WebSocket to {url}"
    with pytest.raises(ConnectorError, match="egress policy"):
        websocket.reach({"endpoint": url}, None, Boundary(egress=EgressPolicy()))
    allowed = Boundary(egress=EgressPolicy.from_config(["127.0.0.1"], ()))
    assert websocket.reach({"endpoint": url}, None, allowed).startswith("opened")
    with pytest.raises(ConnectorError, match="could not reach ws://127.0.0.1:1 "):
        websocket.reach({"endpoint": "ws://127.0.0.1:1/?key=hunter2"}, None, UNCONFINED)


def test_a_refused_handshake_fails_the_query_naming_the_endpoint() -> None:
    def refuse(connection: ServerConnection, request: Request) -> Response:
        return connection.respond(403, "no\n")

    with serve(lambda c: None, "127.0.0.1", 0, process_request=refuse) as ws_server:
        thread = threading.Thread(target=ws_server.serve_forever, daemon=True)
        thread.start()
        port = ws_server.socket.getsockname()[1]
        reader = _reader(_source(f"ws://127.0.0.1:{port}/"))
        start = reader.initialOffset()

        def failed() -> bool:
            try:
                reader.latestOffset(start, ReadAllAvailable())
            except ConnectorError as error:
                assert "HTTP 403" in str(error) and error.option == "endpoint"
                return True
            return False

        assert wait_until(failed)
        reader.stop()
        ws_server.shutdown()
        thread.join(5)


def test_a_confined_source_is_refused_a_loopback_endpoint() -> None:
    table = replace(_source("ws://localhost:9/"), boundary=Boundary(egress=EgressPolicy()))
    with pytest.raises(ConnectorError, match="egress policy") as caught:
        CONNECTORS["websocket"].validate(table)
    assert caught.value.option == "endpoint"
