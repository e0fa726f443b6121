"""The ``polling_http`` source against a real HTTP server (Starlette under uvicorn)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from pyspark.sql import types as T
from pyspark.sql.streaming.datasource import ReadAllAvailable
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
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
from spate.engine.connectors.http.polling import PollingFeed, body_hash, parse_table
from tests.engine.connectors.http.http_support import http_server, wait_until
from tests.engine.connectors.support import make_table

COLUMNS = (ColumnDef("id", T.LongType()), ColumnDef("name", T.StringType()))


@dataclass
class Api:
    """``/state`` answers the current ``body``; ``status`` overrides its status."""

    body: str = '{"id": 0, "name": "a"}'
    status: int = 200
    requests: list[tuple[str, bytes, str | None]] = field(default_factory=list)

    async def state(self, request: Request) -> Response:
        self.requests.append((request.method, await request.body(),
                              request.headers.get("x-api-key")))
        return Response(self.body, status_code=self.status, media_type="application/json")


@pytest.fixture
def api() -> Iterator[tuple[Api, str]]:
    state = Api()
    app = Starlette(routes=[Route("/state", state.state, methods=["GET", "POST", "OPTIONS"])])
    with http_server(app) as base:
        yield state, f"{base}/state"


def _source(endpoint: str, **options: Any) -> TableConfig:
    values = {"format": "json", "poll_interval_ms": "20", **options}
    return make_table("polling_http", "source", COLUMNS, name="src", endpoint=endpoint,
                      **values)


def _reader(table: TableConfig, start: dict[str, Any] | None = None) -> FeedReader:
    parsed = parse_table(table)
    settings = source_settings("polling_http", table.name, parsed.source, [],
                               method=parsed.method, body=parsed.body,
                               poll_interval_s=parsed.poll_interval_s,
                               emit_behavior=parsed.emit_behavior, timeout_s=parsed.timeout_s)
    return FeedReader(settings, parsed.source.headers,
                      source_schema(parsed.source.spec, parsed.source.columns), start,
                      feed_class=PollingFeed)


def _rows(reader: FeedReader, start: dict[str, Any], end: dict[str, Any]) -> list[Any]:
    rows = []
    for partition in reader.partitions(start, end):
        for batch in reader.read(partition):
            rows.extend((i, n) for i, n, control in zip(
                batch.column("id").to_pylist(), batch.column("name").to_pylist(),
                batch.column(HIDDEN_CONTROL).to_pylist(), strict=True) if control is None)
    return rows


def _polls_after(api: Api, count: int) -> bool:
    seen = len(api.requests)
    return wait_until(lambda: len(api.requests) >= seen + count)


@pytest.mark.parametrize(("options", "option", "words"), [
    ({"endpoint": "ftp://127.0.0.1/x"}, "endpoint", "http:// or https://"),
    ({"method": "delete"}, "method", "must be one of"),
    ({"body": "{}"}, "body", "needs method"),
    ({"poll_interval_ms": "0"}, "poll_interval_ms", "at least 1"),
    ({"emit_behavior": "sometimes"}, "emit_behavior", "must be one of"),
    ({"headers": ": x"}, "headers", "not 'Name: value'"),
    ({"events": "a"}, "events", "unknown option"),
])
def test_options_are_checked(options: dict[str, str], option: str, words: str) -> None:
    values = {"endpoint": "http://127.0.0.1:1/x", **options}
    table = _source(values.pop("endpoint"), **values)
    with pytest.raises(ConnectorError, match=words) as caught:
        CONNECTORS["polling_http"].validate(table)
    assert caught.value.option == option


def test_only_changes_are_emitted_and_a_restart_skips_the_unchanged_response(
        api: tuple[Api, str]) -> None:
    state, endpoint = api
    table = _source(endpoint, emit_behavior="changed", method="post",
                    body='{"since": 1}', headers="X-Api-Key: k3y")
    reader = _reader(table)
    start = reader.initialOffset()
    reader.latestOffset(start, ReadAllAvailable())  # opens the feed
    assert _polls_after(state, 3)
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {"messages": 1, "cursor": body_hash(state.body.encode())}
    assert _rows(reader, start, end) == [(0, "a")]
    assert state.requests[0] == ("POST", b'{"since": 1}', "k3y")
    state.body = '{"id": 1, "name": "b"}'
    assert wait_until(lambda: reader.latestOffset(end, ReadAllAvailable())["messages"] == 2)
    later = reader.latestOffset(end, ReadAllAvailable())
    assert _rows(reader, end, later) == [(1, "b")]
    reader.commit(later)
    reader.stop()

    resumed = _reader(table, start=later)  # from the state store: the response is the same
    resumed.latestOffset(later, ReadAllAvailable())
    assert _polls_after(state, 3)
    assert resumed.latestOffset(later, ReadAllAvailable()) == later
    state.body = '{"id": 2, "name": "c"}'
    assert wait_until(lambda: resumed.latestOffset(later, ReadAllAvailable())["messages"] == 3)
    resumed.stop()


def test_emit_all_emits_every_poll(api: tuple[Api, str]) -> None:
    state, endpoint = api
    reader = _reader(_source(endpoint))
    start = reader.initialOffset()
    assert wait_until(lambda: reader.latestOffset(start, ReadAllAvailable())["messages"] >= 3)
    end = reader.latestOffset(start, ReadAllAvailable())
    assert set(_rows(reader, start, end)) == {(0, "a")}
    assert state.requests[0][0] == "GET"
    reader.stop()


def test_server_errors_are_retried_and_client_errors_fail_the_query(
        api: tuple[Api, str]) -> None:
    state, endpoint = api
    state.status = 503
    reader = _reader(_source(endpoint))
    start = reader.initialOffset()
    reader.latestOffset(start, ReadAllAvailable())
    assert _polls_after(state, 3)
    assert reader.latestOffset(start, ReadAllAvailable()) == start  # nothing, no failure
    state.status = 200
    assert wait_until(lambda: reader.latestOffset(start, ReadAllAvailable())["messages"] > 0)
    state.status = 404

    def failed() -> bool:
        try:
            reader.latestOffset(start, ReadAllAvailable())
        except ConnectorError as error:
            assert "HTTP 404" in str(error) and error.option == "endpoint"
            return True
        return False

    assert wait_until(failed)
    reader.stop()


def test_reach_makes_one_request_through_the_egress_policy(api: tuple[Api, str]) -> None:
    state, endpoint = api
    polling = CONNECTORS["polling_http"]
    reached = polling.reach({"endpoint": endpoint}, None, UNCONFINED)
    assert reached == f"GET {endpoint.rsplit('/', 1)[0]} answered HTTP 200 " \
                      f"({len(state.body)} bytes)"
    with pytest.raises(ConnectorError, match="egress policy"):
        polling.reach({"endpoint": endpoint}, None, Boundary(egress=EgressPolicy()))
    allowed = Boundary(egress=EgressPolicy.from_config(["127.0.0.1"], ()))
    assert "HTTP 200" in polling.reach({"endpoint": endpoint}, None, allowed)
    state.status = 500
    with pytest.raises(ConnectorError, match="answered HTTP 500"):
        polling.reach({"endpoint": endpoint}, None, UNCONFINED)


def test_a_confined_source_is_refused_a_loopback_endpoint() -> None:
    table = replace(_source("http://[::1]:8080/x"), boundary=Boundary(egress=EgressPolicy()))
    with pytest.raises(ConnectorError, match="egress policy") as caught:
        CONNECTORS["polling_http"].validate(table)
    assert caught.value.option == "endpoint"
